"""``lium_api_key``: a Lium API key declared in code, with its scopes, pod visibility and budgets.

Lium takes keys only from a browser session (``/keys``, docs/lium-api.md#api-keys), so this resource
needs the provider's ``session_token``. Lium fixes a key's name, scopes, visibility and workspace when it
mints it: changing one replaces the key; its budgets change in place (``PATCH /keys/{id}``). Lium shows
the secret once, when it mints the key: as Terraform's ``aws_iam_access_key`` does, the state keeps it as
the sensitive ``secret`` (the one documented exception to "secrets never reach state"), or, with
``pgp_key``, only ``encrypted_secret``. A key carries no description, so its name in Lium carries the
stack's tag (``<name>.lium-stacks-<tag>``): a key an interrupted create minted has a secret nobody kept, and
the next apply, or a destroy, revokes it by that name. It is never adopted.
"""

from __future__ import annotations

import itertools
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from lium_provider.api.api_keys import (
    BUDGET_FIELDS,
    DEFAULT_SCOPES,
    MIN_BUDGET_USD,
    POD_VISIBILITIES,
    SCOPES,
    ApiKeyRow,
    ApiKeySpec,
)
from lium_provider.api.client import LiumClient
from lium_provider.api.endpoints import SESSION_TOKEN_ENV
from lium_provider.api.errors import LiumError, is_definitive
from lium_provider.domain.stack import KEY_NAME_MAX_LENGTH, check_key_name, parse_tagged_name, tagged_name
from lium_provider.pgp import PgpError, encrypt_to
from lium_provider.resources.common import api_errors, import_by_lium_id
from lium_provider.resources.ownership import (
    AdoptedFrom,
    StackTag,
    claim_create_name,
    claim_lium_name,
    hold_at_delete,
    left_alone_at_delete,
    plan_ownership,
    refreshed_ownership,
)
from lium_provider.session import LiumSession, session
from tfbridge import Attribute, Context, PlanChange, RequiresReplace, Resource, TFError, UseStateForUnknown

_REPLACE = (RequiresReplace(),)
_KEEP = (UseStateForUnknown(),)
# An optional argument Lium fills in when unset: the state's value while unset, a new key when changed.
_KEEP_OR_REPLACE = (UseStateForUnknown(), RequiresReplace())


def _budget(window: str) -> Any:
    return Attribute(
        optional=True,
        description=f"Most USD the pods this key rents may be billed {window}: at it Lium deletes the key's "
        "pods and refuses its rents. At least 1, whole cents; changed in place. Unset: no such budget.",
    )


class ApiKeyModel(BaseModel):
    """A Lium API key: its scopes, its pod visibility, its budgets, minted with the provider's `session_token`.
    The secret is in the state (`secret`, sensitive), or only encrypted to `pgp_key`."""

    model_config = ConfigDict(extra="forbid")

    id: Annotated[str | None, Attribute(computed=True, plan=_KEEP, description="Key id (UUID).")] = None
    name: Annotated[
        str,
        Attribute(
            required=True,
            plan=_REPLACE,
            description="Key name: letters, digits and `._@-`. Lium shows it with the stack's tag added "
            "(`lium_name`).",
        ),
    ] = Field(min_length=1, max_length=KEY_NAME_MAX_LENGTH)
    scopes: Annotated[
        list[str] | None,
        Attribute(
            optional=True,
            computed=True,
            plan=_KEEP_OR_REPLACE,
            description=f"What the key may do: any of {', '.join(f'`{s}`' for s in SCOPES)} (`billing` only "
            f"alone). Default: {', '.join(f'`{s}`' for s in DEFAULT_SCOPES)}.",
        ),
    ] = None
    pod_visibility: Annotated[
        str | None,
        Attribute(
            optional=True,
            computed=True,
            plan=_KEEP_OR_REPLACE,
            description="`own`: the key sees only the pods it rents; `account`: every pod of its workspace. "
            "Default: Lium's.",
        ),
    ] = None
    workspace: Annotated[
        str | None,
        Attribute(
            optional=True,
            plan=_REPLACE,
            description="The workspace (name, any case, or id) the key acts in. Default: the session's personal "
            "one.",
        ),
    ] = None
    daily_budget_usd: Annotated[float | None, _budget("in one UTC day")] = None
    monthly_budget_usd: Annotated[float | None, _budget("in one UTC month")] = None
    max_budget_usd: Annotated[float | None, _budget("over the key's lifetime")] = None
    pgp_key: Annotated[
        str | None,
        Attribute(
            optional=True,
            plan=_REPLACE,
            description="An OpenPGP public key, base64 of its binary form (`gpg --export KEY | base64 -w0`): the "
            "secret is then kept only encrypted to it, in `encrypted_secret` (needs `gpg` where the provider "
            "runs).",
        ),
    ] = None
    lium_name: Annotated[
        str | None,
        Attribute(
            computed=True, plan=_KEEP, description="The key's name on Lium: `<name>.lium-stacks-<stack tag>`."
        ),
    ] = None
    workspace_id: Annotated[
        str | None, Attribute(computed=True, plan=_KEEP, description="Id of the workspace the key acts in.")
    ] = None
    secret: Annotated[
        str | None,
        Attribute(
            computed=True,
            sensitive=True,
            plan=_KEEP,
            description="The key, for `LIUM_API_KEY` (null with `pgp_key`, and for an imported key: Lium shows "
            "it only once). Kept in the state: protect the state as you protect the key.",
        ),
    ] = None
    encrypted_secret: Annotated[
        str | None,
        Attribute(
            computed=True,
            plan=_KEEP,
            description="With `pgp_key`: the key encrypted to it, base64 (`base64 -d | gpg --decrypt`).",
        ),
    ] = None
    stack_tag: StackTag = None
    adopted_from: AdoptedFrom = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_key_name(value)

    @field_validator("scopes")
    @classmethod
    def _scopes(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        unknown = [s for s in value if s not in SCOPES]
        if unknown or not value:
            raise ValueError(f"scopes must be some of {', '.join(SCOPES)}, not {unknown or 'none'}")
        twice = sorted({s for s in value if value.count(s) > 1})
        if twice:
            raise ValueError(f"scopes names {', '.join(twice)} more than once")
        if "billing" in value and len(value) > 1:
            raise ValueError("the `billing` scope stands alone: a key that moves money holds no other scope")
        return value

    @field_validator("pod_visibility")
    @classmethod
    def _visibility(cls, value: str | None) -> str | None:
        if value is not None and value not in POD_VISIBILITIES:
            raise ValueError(f"pod_visibility must be one of {', '.join(POD_VISIBILITIES)}")
        return value

    @field_validator(*BUDGET_FIELDS)
    @classmethod
    def _amount(cls, value: float | None) -> float | None:
        if value is not None and (value < MIN_BUDGET_USD or round(value, 2) != value):
            raise ValueError(f"a budget is at least ${MIN_BUDGET_USD:.0f} in whole cents, not {value}")
        return value


def _mark(lium_name: str) -> str | None:
    parsed = parse_tagged_name(lium_name)
    return parsed[1] if parsed else None


def keys_session(s: LiumSession, doing: str) -> LiumClient:
    """The session client ``/keys`` needs; without one the operation fails naming the setting (a destroy
    never forgets a live key for want of it)."""
    if s.session_client is None:
        raise TFError(
            "A Lium browser session is needed",
            f"{doing} needs a browser-session token: Lium takes no API key on /keys. Set {SESSION_TOKEN_ENV} "
            "(or the provider's `session_token`); `lium workspaces login` prints one.",
        )
    return s.session_client


def _check_budget_order(values: dict[str, float | None]) -> None:
    given = [(name, values[name]) for name in BUDGET_FIELDS if values.get(name) is not None]
    for (narrow, low), (wide, high) in itertools.pairwise(given):
        if high is not None and low is not None and high < low:
            raise TFError(
                f"{wide} is below {narrow}",
                f"A wider window cannot hold less than a narrower one: {wide} ${high:,.2f} < {narrow} ${low:,.2f}.",
                path=(wide,),
            )


class ApiKeyResource(Resource[ApiKeyModel]):
    type_name = "lium_api_key"
    model = ApiKeyModel
    description = ApiKeyModel.__doc__ or ""

    def modify_plan(self, ctx: Context, change: PlanChange[ApiKeyModel]) -> None:
        plan_ownership(ctx, change, self.type_name, rewrites_mark=False)
        claim_create_name(ctx, change, self.type_name)
        planned, prior = change.planned, change.prior
        if all(not change.is_unknown(name) for name in BUDGET_FIELDS):
            _check_budget_order({name: getattr(planned, name) for name in BUDGET_FIELDS})
        if prior is not None:
            # The key keeps its Lium name: a create of this plan with that name would take it for an
            # interrupted create's key and revoke it.
            if prior.lium_name:
                claim_lium_name(
                    ctx, change, (self.type_name, prior.lium_name), f"the API key name {prior.lium_name!r}"
                )
            self._plan_workspace(ctx, change, prior)
            return
        if change.config.scopes is None and not change.config_is_unknown("scopes"):
            change.set_planned("scopes", list(DEFAULT_SCOPES))
        if not change.is_unknown("workspace"):  # a workspace that is not there fails the plan, not the apply
            self._workspace_id(keys_session(session(ctx), "Planning a lium_api_key"), planned.workspace)
        tag = planned.stack_tag
        if change.is_unknown("name") or tag is None:
            change.set_unknown("lium_name")
            return
        lium_name = tagged_name(planned.name, tag)
        change.set_planned("lium_name", lium_name)
        claim_lium_name(ctx, change, (self.type_name, lium_name), f"the API key name {lium_name!r}")

    def _plan_workspace(self, ctx: Context, change: PlanChange[ApiKeyModel], prior: ApiKeyModel) -> None:
        """A key stays when its workspace is only spelled another way (a name in another case, its id):
        the replacement is planned only when the workspace named is another one."""
        wanted = change.planned.workspace
        if change.is_unknown("workspace") or wanted == prior.workspace or prior.workspace_id is None:
            return
        keys = session(ctx).session_client
        if keys is None:  # the apply fails naming the session token; the plan shows the replacement
            return
        named = self._workspace_id(keys, wanted, personal_as_id=True)
        if named is not None and named.casefold() == prior.workspace_id.casefold():
            change.keep_in_place("workspace")

    def plan_delete(self, ctx: Context, prior: ApiKeyModel) -> None:
        if prior.lium_name:
            hold_at_delete(ctx, (self.type_name, prior.lium_name), prior.lium_name)

    def create(self, ctx: Context, plan: ApiKeyModel, config: ApiKeyModel) -> ApiKeyModel:
        s = session(ctx)
        keys = keys_session(s, "Creating a lium_api_key")
        workspace_id = self._workspace_id(keys, plan.workspace)
        lium_name = plan.lium_name or tagged_name(plan.name, plan.stack_tag or s.stack_tag)
        self._revoke_unrecorded(ctx, keys, lium_name, workspace_id)
        spec = ApiKeySpec(
            name=lium_name,
            scopes=tuple(plan.scopes or DEFAULT_SCOPES),
            pod_visibility=plan.pod_visibility,
            **{name: getattr(plan, name) for name in BUDGET_FIELDS},
        )
        try:
            minted = keys.create_api_key(spec, workspace_id)
        except LiumError as exc:
            if not is_definitive(exc):  # it may have been minted: its secret is lost, so revoke it
                self._revoke_unrecorded(ctx, keys, lium_name, workspace_id)
            raise TFError("Creating the API key failed", str(exc)) from None
        unrecorded = [
            name
            for name in (*BUDGET_FIELDS, "pod_visibility")
            if _asked(spec, name) != _asked(minted, name) and _asked(spec, name) is not None
        ]
        secret: str | None = minted.key
        if unrecorded:
            with api_errors("revoking the API key Lium minted without what was asked"):
                keys.revoke_api_key(minted.id, workspace_id)
            raise TFError(
                "Lium did not record the key as asked",
                f"It minted the key without {', '.join(unrecorded)}, so it was revoked at once.",
            )
        encrypted = None
        if plan.pgp_key:
            try:
                encrypted, secret = encrypt_to(plan.pgp_key, minted.key), None
            except PgpError as exc:
                with api_errors("revoking the API key whose secret could not be encrypted"):
                    keys.revoke_api_key(minted.id, workspace_id)
                raise TFError(
                    "Encrypting the API key failed", f"{exc}. The key was revoked.", path=("pgp_key",)
                ) from None
        return plan.model_copy(
            update={
                **_row_fields(minted, plan.scopes),
                "lium_name": lium_name,
                "secret": secret,
                "encrypted_secret": encrypted,
            }
        )

    def read(self, ctx: Context, state: ApiKeyModel) -> ApiKeyModel | None:
        s = session(ctx)
        keys = keys_session(s, "Reading a lium_api_key")
        with api_errors("reading the API key"):
            row = _key_row(keys, state)
        if row is None:
            return None  # revoked outside Terraform
        parsed = parse_tagged_name(row.name)
        refreshed = state.model_copy(
            update={
                **_row_fields(row, state.scopes),
                "name": parsed[0] if parsed else row.name,
                "lium_name": row.name,
            }
        )
        return refreshed.model_copy(update=refreshed_ownership(ctx, self.type_name, state, _mark(row.name)))

    def update(self, ctx: Context, prior: ApiKeyModel, plan: ApiKeyModel, config: ApiKeyModel) -> ApiKeyModel:
        keys = keys_session(session(ctx), "Changing a lium_api_key's budgets")
        changed = {
            name: getattr(plan, name) for name in BUDGET_FIELDS if getattr(plan, name) != getattr(prior, name)
        }
        if not changed:
            return plan.model_copy(update={"id": prior.id})
        with api_errors("changing the API key's budgets"):
            row = keys.update_api_key(prior.id or "", changed, prior.workspace_id)
        return plan.model_copy(update=_row_fields(row, plan.scopes))

    def delete(self, ctx: Context, state: ApiKeyModel) -> None:
        s = session(ctx)
        keys = keys_session(s, "Revoking a lium_api_key")

        def mark() -> str | None:
            with api_errors("reading the API key"):
                row = _key_row(keys, state)
            return _mark(row.name) if row else None

        if left_alone_at_delete(ctx, self.type_name, state, mark):
            return
        with api_errors("reading the API key"):
            row = _key_row(keys, state)
        if row is not None and row.pods_count:
            ctx.warn(
                f"API key {row.name} still has {row.pods_count} live pod(s)",
                "Revoking it does not end them, and no budget of it caps them any more: destroy the stacks "
                "that run with a key before the stack that declares it. End them now with a key of the "
                "workspace whose pod_visibility is `account`.",
            )
        with api_errors("revoking the API key"):
            keys.revoke_api_key(state.id or "", state.workspace_id)

    def end_unrecorded(self, ctx: Context, config: ApiKeyModel) -> None:
        """During a destroy, a key an interrupted create of this instance minted and no state records is
        revoked: its secret was never kept."""
        s = session(ctx)
        if not config.name:
            return
        keys = keys_session(s, "Revoking a key an interrupted create minted")
        self._revoke_unrecorded(
            ctx, keys, tagged_name(config.name, s.stack_tag), self._workspace_id(keys, config.workspace)
        )

    def import_state(self, ctx: Context, import_id: str) -> dict[str, Any]:
        return import_by_lium_id(self.type_name, import_id)

    def _workspace_id(
        self, keys: LiumClient, workspace: str | None, *, personal_as_id: bool = False
    ) -> str | None:
        """The id of the workspace named ``workspace`` (its name, any case, or its id); for
        none, the personal one: its id with ``personal_as_id``, else None (a key minted with no workspace
        acts in it)."""
        if workspace is None and not personal_as_id:
            return None
        with api_errors("reading the workspaces"):
            rows = keys.list_workspaces()
        if workspace is None:
            personal = [w.id for w in rows if w.is_personal]
            return personal[0] if len(personal) == 1 else None
        wanted = workspace.casefold()
        found = [w for w in rows if wanted in (w.id.casefold(), w.name.casefold())]
        if len(found) != 1:
            names = ", ".join(f"{w.name!r}" for w in rows) or "none"
            raise TFError(
                f"No single workspace {workspace!r}",
                f"The session's workspaces are {names}: name one by its id, or create it "
                "(`lium workspaces create`).",
                path=("workspace",),
            )
        return found[0].id

    def _revoke_unrecorded(
        self, ctx: Context, keys: LiumClient, lium_name: str, workspace_id: str | None
    ) -> None:
        """Revoke the keys named ``lium_name`` (this stack's tag, this instance's name) that an interrupted
        create minted: their secrets were never kept, so they are never adopted. A key of that name that
        has been used is not one: somebody holds its secret (a state this run does not plan, under
        ``-target``), so it is left alone, with a warning."""
        with api_errors("looking for an API key an interrupted create minted"):
            found = [k for k in keys.list_api_keys(workspace_id) if k.name == lium_name]
            for key in found:
                if key.last_used is not None:
                    ctx.warn(
                        f"Left API key {key.id} ({lium_name}) alone",
                        "It has this instance's name but has been used, so an interrupted create did not "
                        "mint it: another state holds it. Give each lium_api_key its own `name`.",
                    )
                    continue
                ctx.warn(
                    f"Revoked API key {key.id} ({lium_name}), which no state records",
                    "An interrupted create of this lium_api_key minted it, and its secret was never kept.",
                )
                keys.revoke_api_key(key.id, key.workspace_id or workspace_id)


def _key_row(keys: LiumClient, state: ApiKeyModel) -> ApiKeyRow | None:
    """The key's row, read in its workspace (a session's ``/keys`` act in one workspace: elsewhere the key
    reads as not found); looked for in every workspace of the session when the state has none (an import)."""
    if state.workspace_id is None:
        return keys.find_api_key(state.id or "")
    return keys.get_api_key(state.id or "", state.workspace_id)


def _asked(row: ApiKeySpec | ApiKeyRow, name: str) -> Any:
    value = getattr(row, name)
    return float(value) if isinstance(value, int | float) else value


def _row_fields(row: ApiKeyRow, scopes: list[str] | None) -> dict[str, Any]:
    """What the state takes from a key's Lium row; its scopes in the order ``scopes`` (the configuration's
    or the state's) lists them when they are the same ones."""
    same = scopes is not None and sorted(scopes) == sorted(row.scopes)
    return {
        "id": row.id,
        "scopes": list(scopes) if same and scopes is not None else list(row.scopes),
        "pod_visibility": row.pod_visibility,
        "workspace_id": row.workspace_id,
        **row.budgets(),
    }
