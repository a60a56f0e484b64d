"""``lium_ssh_key``: a public key registered on the Lium account (``/ssh-keys``), for a team's keys.

Lium authorises no account key on a pod by itself: a rent lists the keys it authorises. The account's
keys are where a team keeps them, and ``data.lium_ssh_keys`` reads them back for a pod's or cluster's
``authorized_keys``. A key has no description, so its name in Lium carries the stack's tag
(``<name>.lium-stacks-<tag>``, :func:`~lium_provider.domain.stack.tagged_name`): a fresh runner finds what a killed
run registered by it, and a refresh reads whose the key is.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from lium_provider.api.models import AccountSshKey, is_lium_id
from lium_provider.domain.stack import KEY_NAME_MAX_LENGTH, check_key_name, parse_tagged_name, tagged_name
from lium_provider.resources.common import (
    api_errors,
    check_access_on_create,
    create_reconciled,
    delete_reconciled,
    import_by_lium_id,
    newest,
)
from lium_provider.resources.inputs import OPENSSH_PUBLIC_KEY
from lium_provider.resources.ownership import (
    AdoptedFrom,
    StackTag,
    check_before_change,
    claim_create_name,
    claim_lium_name,
    hold_at_delete,
    left_alone_at_delete,
    plan_ownership,
    refreshed_ownership,
)
from lium_provider.resources.visibility import WorkspaceId, records_workspace
from lium_provider.session import LiumSession, session
from lium_provider.sshkeys import fingerprint, same_public_key
from tfbridge import Attribute, Context, PlanChange, Resource, UseStateForUnknown

# The key-name alphabet Lium's SDK writes (`cli-<user>@<host>`), and its 64 characters with the tag.


class SshKeyModel(BaseModel):
    """A public SSH key on the Lium account, for a team's `authorized_keys` (Lium adds none to pods by itself)."""

    model_config = ConfigDict(extra="forbid")

    id: Annotated[
        str | None, Attribute(computed=True, plan=(UseStateForUnknown(),), description="Key id (UUID).")
    ] = None
    name: Annotated[
        str,
        Attribute(
            required=True,
            description="Key name: letters, digits and `._@-`. Lium shows it with the stack's tag added "
            "(`lium_name`).",
        ),
    ] = Field(min_length=1, max_length=KEY_NAME_MAX_LENGTH)
    public_key: Annotated[
        str, Attribute(required=True, description="The public key, one OpenSSH line."), OPENSSH_PUBLIC_KEY
    ]
    lium_name: Annotated[
        str | None,
        Attribute(computed=True, description="The key's name on Lium: `<name>.lium-stacks-<stack tag>`."),
    ] = None
    fingerprint: Annotated[
        str | None,
        Attribute(computed=True, description="`<type> SHA256:…`, as `ssh-keygen -l` prints it."),
    ] = None
    stack_tag: StackTag = None
    adopted_from: AdoptedFrom = None
    workspace_id: WorkspaceId = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_key_name(value)


def _mark(lium_name: str) -> str | None:
    """The stack tag a key's Lium name carries (None: a name no stack made)."""
    parsed = parse_tagged_name(lium_name)
    return parsed[1] if parsed else None


def _tag_in_lium(s: LiumSession, key_id: str) -> str | None:
    with api_errors("reading the SSH key"):
        key = s.client.get_ssh_key(key_id)
    return _mark(key.name) if key else None


@records_workspace(lambda s, object_id: s.client.get_ssh_key(object_id) is not None)
class SshKeyResource(Resource[SshKeyModel]):
    type_name = "lium_ssh_key"
    model = SshKeyModel
    description = SshKeyModel.__doc__ or ""

    def modify_plan(self, ctx: Context, change: PlanChange[SshKeyModel]) -> None:
        # An update writes the key's stack tag (this stack's, after a take-over) into its Lium name.
        plan_ownership(ctx, change, self.type_name, rewrites_mark=True)
        claim_create_name(ctx, change, self.type_name)
        check_access_on_create(ctx, change)
        if not change.is_unknown("public_key"):
            change.set_planned("fingerprint", fingerprint(change.planned.public_key))
        tag = change.planned.stack_tag
        if change.is_unknown("name") or tag is None:
            change.set_unknown("lium_name")
            return
        lium_name = tagged_name(change.planned.name, tag)
        change.set_planned("lium_name", lium_name)
        claim_lium_name(ctx, change, (self.type_name, lium_name), f"the SSH key name {lium_name!r}")

    def plan_delete(self, ctx: Context, prior: SshKeyModel) -> None:
        if prior.lium_name:
            hold_at_delete(ctx, (self.type_name, prior.lium_name), f"the SSH key name {prior.lium_name!r}")

    def create(self, ctx: Context, plan: SshKeyModel, config: SshKeyModel) -> SshKeyModel:
        s = session(ctx)
        client = s.client
        lium_name = tagged_name(plan.name, plan.stack_tag or s.stack_tag)
        with api_errors("looking for this stack's SSH key of that name"):
            earlier = [k for k in client.list_ssh_keys() if k.name == lium_name]
        if earlier:  # an interrupted run of this stack registered it (names are unique within a stack)
            key = earlier[-1]
            ctx.log.info("adopting an SSH key an interrupted run of this stack registered", key=key.id)
            if key.public_key.strip() != plan.public_key.strip():
                with api_errors("updating the adopted SSH key"):
                    client.update_ssh_key(key.id, lium_name, plan.public_key)
        else:
            key = create_reconciled(
                ctx,
                "registering the SSH key",
                lambda: client.create_ssh_key(lium_name, plan.public_key),
                lambda since: newest(
                    [k for k in client.list_ssh_keys() if k.name == lium_name], lambda k: k.created_at, since
                ),
            )
        return plan.model_copy(
            update={"id": key.id, "lium_name": lium_name, "fingerprint": fingerprint(plan.public_key)}
        )

    def read(self, ctx: Context, state: SshKeyModel) -> SshKeyModel | None:
        if not is_lium_id(state.id):
            return state  # names no key: the plan refuses it, a destroy forgets it
        with api_errors("reading the SSH key"):
            key = session(ctx).client.get_ssh_key(state.id or "")
        if key is None:
            return None
        return state.model_copy(
            update=_read_fields(state, key) | refreshed_ownership(ctx, self.type_name, state, _mark(key.name))
        )

    def update(self, ctx: Context, prior: SshKeyModel, plan: SshKeyModel, config: SshKeyModel) -> SshKeyModel:
        s = session(ctx)
        check_before_change(ctx, self.type_name, prior, lambda: _tag_in_lium(s, prior.id or ""), "changed")
        lium_name = tagged_name(plan.name, plan.stack_tag or s.stack_tag)  # a take-over writes this tag
        with api_errors("updating the SSH key"):
            s.client.update_ssh_key(prior.id or "", lium_name, plan.public_key)
        return plan.model_copy(
            update={"id": prior.id, "lium_name": lium_name, "fingerprint": fingerprint(plan.public_key)}
        )

    def delete(self, ctx: Context, state: SshKeyModel) -> None:
        s = session(ctx)
        if left_alone_at_delete(ctx, self.type_name, state, lambda: _tag_in_lium(s, state.id or "")):
            return
        client = s.client
        key_id = state.id or ""
        delete_reconciled(
            ctx,
            "deleting the SSH key",
            lambda: client.delete_ssh_key(key_id),
            lambda: client.get_ssh_key(key_id) is not None,
        )

    def end_unrecorded(self, ctx: Context, config: SshKeyModel) -> None:
        """During a destroy, a key this instance's interrupted create registered and no state records
        (found by its Lium name, with this stack's tag) is deleted: the next apply would adopt it, and
        nothing else removes it."""
        s = session(ctx)
        if not config.name:
            return  # its name is not known before the apply: nothing can be found by it
        lium_name = tagged_name(config.name, s.stack_tag)
        with api_errors("looking for an SSH key an interrupted create of this stack registered"):
            found = [k for k in s.client.list_ssh_keys() if k.name == lium_name]
        for key in found:
            ctx.log.warn(
                "deleting an SSH key an interrupted create registered and no state records", key=key.id
            )
            ctx.warn(
                f"Deleted SSH key {key.id} ({lium_name}), which no state records",
                "An interrupted create of this lium_ssh_key registered it (its Lium name carries this "
                "stack's tag), and this destroy removes it.",
            )
            with api_errors("deleting the SSH key"):
                s.client.delete_ssh_key(key.id)

    def import_state(self, ctx: Context, import_id: str) -> dict[str, Any]:
        return import_by_lium_id(self.type_name, import_id)


def _read_fields(state: SshKeyModel, key: AccountSshKey) -> dict[str, Any]:
    """What a refresh takes from the key's Lium row: its name (without a stack's tag: an imported key
    whose name carries none is renamed, so marked, by the next apply) and its key, kept as configured
    when only its comment differs."""
    parsed = parse_tagged_name(key.name)
    line = key.public_key.strip()
    kept = state.public_key if state.public_key and same_public_key(state.public_key, line) else line
    return {
        "name": parsed[0] if parsed else key.name,
        "lium_name": key.name,
        "public_key": kept,
        "fingerprint": fingerprint(kept) if kept else None,
    }
