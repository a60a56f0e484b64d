"""``/keys``: a workspace's API keys — scopes, budgets, pod visibility — and a key's refusal ledger
(docs/lium-api.md#api-keys). Everything but ``GET /keys/scopes`` (no credential) and
``GET /keys/{id}/refusals`` (also the key itself) needs a browser session."""

import itertools
import math
import secrets
import uuid
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from lium_emulator.api.caller import Caller, CallerDep, SessionDep
from lium_emulator.api.deps import RuntimeDep
from lium_emulator.api.scopes import scopes_document
from lium_emulator.budgets import refusal_object, spent_fields
from lium_emulator.errors import ApiError
from lium_emulator.records.access import ApiKey, PodVisibility, Scope
from lium_emulator.records.entities import ACTIVE_STATUSES
from lium_emulator.records.state import sha256_hex
from lium_emulator.records.timeutil import iso, utcnow
from lium_emulator.runtime import Runtime

router = APIRouter()

DEFAULT_SCOPES: tuple[Scope, ...] = ("read", "rent", "manage")
DEFAULT_POD_VISIBILITY: PodVisibility = "account"
BUDGET_MIN_USD = 1.0
BUDGET_FIELDS = ("daily_budget_usd", "monthly_budget_usd", "max_budget_usd")
MANAGER_ROLES = ("owner", "admin")

Budget = Annotated[float | None, Field(default=None)]


class KeyCreateRequest(BaseModel):
    """``POST /keys``."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=100)
    scopes: list[Scope] = Field(default_factory=lambda: list(DEFAULT_SCOPES), min_length=1)
    pod_visibility: PodVisibility = DEFAULT_POD_VISIBILITY
    daily_budget_usd: Budget = None
    monthly_budget_usd: Budget = None
    max_budget_usd: Budget = None


class KeyUpdateRequest(BaseModel):
    """``PATCH /keys/{id}``: budgets only (null clears one; a field left out is kept)."""

    model_config = ConfigDict(extra="forbid")

    daily_budget_usd: Budget = None
    monthly_budget_usd: Budget = None
    max_budget_usd: Budget = None


def _invalid(field: str, message: str) -> ApiError:
    problem = {"field": f"body -> {field}", "message": message, "type": "value_error"}
    return ApiError(422, "validation_error", message, extra={"validation_errors": [problem]})


def _check_budgets(budgets: dict[str, float | None]) -> None:
    """Each budget at least $1 in whole cents; daily ≤ monthly ≤ max over those set (else 422)."""
    for field, value in budgets.items():
        if value is None:
            continue
        if math.isnan(value) or value < BUDGET_MIN_USD:
            raise _invalid(field, f"{field} must be at least ${BUDGET_MIN_USD:.0f}")
        if round(value, 2) != value:
            raise _invalid(field, f"{field} is billed in cents: at most two decimals")
    given = [(f, v) for f in BUDGET_FIELDS if (v := budgets.get(f)) is not None]
    for (narrow, low), (wide, high) in itertools.pairwise(given):
        if high < low:
            raise _invalid(wide, f"{wide} (${high:.2f}) is below {narrow} (${low:.2f})")


def key_row(runtime: Runtime, key: ApiKey) -> dict[str, Any]:
    """A key as ``/keys`` shows it (never the secret)."""
    state = runtime.state
    pods = sum(1 for p in state.pods.values() if p.api_key_id == key.id and p.status in ACTIVE_STATUSES)
    return {
        "id": key.id,
        "name": key.name,
        "scopes": list(key.scopes),
        "created_at": iso(key.created_at),
        "last_used": iso(key.last_used),
        "workspace_id": key.workspace_id,
        "user_id": key.user_id,
        "daily_budget_usd": key.daily_budget_usd,
        "monthly_budget_usd": key.monthly_budget_usd,
        "max_budget_usd": key.max_budget_usd,
        **spent_fields(state, key, utcnow()),
        "pod_visibility": key.pod_visibility,
        "pods_count": pods,
    }


def _reachable(runtime: Runtime, caller: Caller, key_id: UUID | str) -> ApiKey:
    """A live key of the caller's workspace that the caller may see (owners and admins: every one;
    members: their own); 404 otherwise."""
    key = runtime.state.api_keys.get(str(key_id))
    if (
        key is None
        or key.revoked
        or key.workspace_id != caller.workspace_id
        or (caller.role not in MANAGER_ROLES and key.user_id != caller.account.user_id)
    ):
        raise ApiError(404, "api_key_not_found", "API key not found.")
    return key


@router.get("/keys/scopes")
async def get_scopes() -> dict[str, Any]:
    """Every scope, what it opens, the pod visibilities and the money routes (no credential needed)."""
    return scopes_document()


@router.get("/keys")
async def list_keys(runtime: RuntimeDep, caller: SessionDep) -> list[dict[str, Any]]:
    """The live keys of the workspace (a member sees only its own), oldest first."""
    keys = [
        k
        for k in runtime.state.api_keys.values()
        if not k.revoked
        and k.workspace_id == caller.workspace_id
        and (caller.role in MANAGER_ROLES or k.user_id == caller.account.user_id)
    ]
    return [key_row(runtime, k) for k in sorted(keys, key=lambda k: k.created_at)]


@router.post("/keys")
async def create_key(body: KeyCreateRequest, runtime: RuntimeDep, caller: SessionDep) -> dict[str, Any]:
    """Mint a key bound to the workspace; the answer carries the secret (``key``) this once."""
    scopes = list(dict.fromkeys(body.scopes))
    if "billing" in scopes and len(scopes) > 1:
        raise _invalid(
            "scopes",
            "The 'billing' scope stands alone: a key that moves money holds no other scope",
        )
    budgets = {f: getattr(body, f) for f in BUDGET_FIELDS}
    _check_budgets(budgets)
    secret = "lium-" + secrets.token_urlsafe(32)
    key = ApiKey(
        id=str(uuid.uuid4()),
        user_id=caller.account.user_id,
        workspace_id=caller.workspace_id,
        name=body.name,
        key_sha256=sha256_hex(secret),
        scopes=scopes,
        pod_visibility=body.pod_visibility,
        created_at=utcnow(),
        **budgets,
    )
    runtime.state.add_api_key(key)
    runtime.state.record_event(
        caller.workspace_id, "api-key-create.success", actor=caller.actor, detail=f"{key.name} ({key.id})"
    )
    return {**key_row(runtime, key), "key": secret}


@router.get("/keys/{key_id}")
async def get_key(key_id: UUID, runtime: RuntimeDep, caller: SessionDep) -> dict[str, Any]:
    """One key of the workspace."""
    return key_row(runtime, _reachable(runtime, caller, key_id))


@router.patch("/keys/{key_id}")
async def update_key(
    key_id: UUID, body: KeyUpdateRequest, runtime: RuntimeDep, caller: SessionDep
) -> dict[str, Any]:
    """Set (a number) or clear (null) budgets; a budget below what the key already spent stops its
    pods at the next billing tick."""
    key = _reachable(runtime, caller, key_id)
    given = body.model_fields_set
    if not given:
        raise ApiError(400, "no_budget_given", "Name a budget to set or clear.")
    budgets = {f: (getattr(body, f) if f in given else getattr(key, f)) for f in BUDGET_FIELDS}
    _check_budgets(budgets)
    for field, value in budgets.items():
        setattr(key, field, value)
    runtime.state.save(key)
    runtime.state.record_event(
        caller.workspace_id, "api-key-update.success", actor=caller.actor, detail=f"{key.name} ({key.id})"
    )
    return key_row(runtime, key)


@router.delete("/keys/{key_id}")
async def revoke_key(key_id: UUID, runtime: RuntimeDep, caller: SessionDep) -> dict[str, Any]:
    """Revoke a key: it is refused (401) from the next request on; its pods keep running."""
    key = _reachable(runtime, caller, key_id)
    key.revoked, key.revoked_at = True, utcnow()
    runtime.state.save(key)
    runtime.state.record_event(
        caller.workspace_id, "api-key-delete.success", actor=caller.actor, detail=f"{key.name} ({key.id})"
    )
    return {"success": True, "id": key.id, "message": f"API key '{key.name}' revoked."}


@router.get("/keys/{key_id}/refusals")
async def key_refusals(key_id: UUID, runtime: RuntimeDep, caller: CallerDep) -> dict[str, Any]:
    """The requests the key's budgets refused, newest first; an API key reads only its own ledger."""
    if caller.key is not None:
        if str(key_id) != caller.key.id:
            raise ApiError(404, "api_key_not_found", "API key not found.")
        key = caller.key
    else:
        key = _reachable(runtime, caller, key_id)
    rows = [refusal_object(r) for r in reversed(runtime.state.refusals) if r.api_key_id == key.id]
    return {"refusals": rows}
