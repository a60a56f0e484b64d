"""Account routes: ``/users/me``, the account event log, ``/version`` and account SSH keys."""

from datetime import UTC, datetime
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Query

from lium_emulator.api.deps import AccountDep, RuntimeDep
from lium_emulator.api.models import SshKeyRequest
from lium_emulator.api.owned import new_owned, owned, owned_by
from lium_emulator.records.entities import SshKey
from lium_emulator.records.timeutil import to_naive_utc, utcnow
from lium_emulator.views import event_object, me_object, ssh_key_object

router = APIRouter()


@router.get("/users/me")
async def get_me(runtime: RuntimeDep, account: AccountDep) -> dict[str, Any]:
    """The caller's user id, email and balance."""
    return me_object(account, runtime.state.balance(account, utcnow()))


@router.get("/users/me/events")
async def get_account_events(
    runtime: RuntimeDep,
    account: AccountDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    since: datetime | None = None,
    pod_id: UUID | None = None,
    api_key_id: UUID | None = None,
) -> list[dict[str, Any]]:
    """The caller's events, newest first; ``since`` is inclusive. Deleted pods' events stay."""
    since_naive = to_naive_utc(since) if since is not None else None
    selected = []
    for event in reversed(runtime.state.events):
        if event.user_id != account.user_id:
            continue
        if since_naive is not None and event.created_at < since_naive:
            break  # events are in time order
        if pod_id is not None and event.pod_id != str(pod_id):
            continue
        if api_key_id is not None and (event.actor or {}).get("api_key_id") != str(api_key_id):
            continue
        selected.append(event_object(event))
        if len(selected) >= limit:
            break
    return selected


@router.get("/version")
async def get_version(runtime: RuntimeDep) -> dict[str, Any]:
    """Start time, uptime and the advertised optional features (no API key needed)."""
    uptime = datetime.now(UTC) - runtime.started_at
    return {
        "started_at": runtime.started_at.isoformat(),
        "uptime_seconds": int(uptime.total_seconds()),
        "features": list(runtime.config.features),
        "server": "lium-emulator",
    }


@router.get("/ssh-keys")
async def list_ssh_keys(runtime: RuntimeDep, account: AccountDep) -> list[dict[str, Any]]:
    """The caller's SSH keys."""
    return [ssh_key_object(k) for k in owned_by(runtime.state.ssh_keys.values(), account)]


@router.post("/ssh-keys")
async def create_ssh_key(body: SshKeyRequest, runtime: RuntimeDep, account: AccountDep) -> dict[str, Any]:
    """Register an SSH key (it is not added to pods by itself; rent takes ``user_public_key``)."""
    key = SshKey(**new_owned(account), name=body.name, public_key=body.public_key)
    runtime.state.ssh_keys[key.id] = key
    runtime.state.save(key)
    runtime.state.record_event(account.user_id, "ssh-key-create.success", actor=account, detail=key.name)
    return ssh_key_object(key)


@router.put("/ssh-keys/{key_id}")
async def update_ssh_key(
    key_id: UUID, body: SshKeyRequest, runtime: RuntimeDep, account: AccountDep
) -> dict[str, Any]:
    """Rename or replace an SSH key."""
    key = owned(runtime.state.ssh_keys, account, key_id, "SSH key")
    key.name, key.public_key, key.updated_at = body.name, body.public_key, utcnow()
    runtime.state.save(key)
    return ssh_key_object(key)


@router.delete("/ssh-keys/{key_id}")
async def delete_ssh_key(key_id: UUID, runtime: RuntimeDep, account: AccountDep) -> dict[str, Any]:
    """Remove an SSH key."""
    key = owned(runtime.state.ssh_keys, account, key_id, "SSH key")
    del runtime.state.ssh_keys[key.id]
    runtime.state.forget(key)
    runtime.state.record_event(account.user_id, "ssh-key-delete.success", actor=account, detail=key.name)
    return {"success": True}
