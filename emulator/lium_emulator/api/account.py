"""Account routes: ``/users/me``, the account event log, ``/version`` and account SSH keys."""

from datetime import UTC, datetime
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Query

from lium_emulator.api.caller import CallerDep
from lium_emulator.api.deps import RuntimeDep
from lium_emulator.api.models import SshKeyRequest
from lium_emulator.api.owned import new_owned, owned, owned_by
from lium_emulator.records.entities import SshKey
from lium_emulator.records.timeutil import to_naive_utc, utcnow
from lium_emulator.views import event_object, me_object, ssh_key_object

router = APIRouter()


@router.get("/users/me")
async def get_me(runtime: RuntimeDep, caller: CallerDep) -> dict[str, Any]:
    """The caller's user id, email and balance, the workspace it acts in and, with a key, the key's
    id, name, scopes and pod visibility."""
    state = runtime.state
    return me_object(caller, state.balance(caller.account, utcnow()))


@router.get("/users/me/events")
async def get_account_events(
    runtime: RuntimeDep,
    caller: CallerDep,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    since: datetime | None = None,
    pod_id: UUID | None = None,
    api_key_id: UUID | None = None,
) -> list[dict[str, Any]]:
    """The workspace's events, newest first; ``since`` is inclusive. Deleted pods' events stay."""
    state = runtime.state
    since_naive = to_naive_utc(since) if since is not None else None
    selected = []
    for event in reversed(state.events):
        if event.user_id != caller.workspace_id:
            continue
        pod = state.pods.get(event.pod_id) if event.pod_id else None
        if pod is not None and not caller.sees(pod):
            continue  # events of pods the key cannot see are left out
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
async def list_ssh_keys(runtime: RuntimeDep, caller: CallerDep) -> list[dict[str, Any]]:
    """The caller's SSH keys."""
    return [ssh_key_object(k) for k in owned_by(runtime.state.ssh_keys.values(), caller)]


@router.post("/ssh-keys")
async def create_ssh_key(body: SshKeyRequest, runtime: RuntimeDep, caller: CallerDep) -> dict[str, Any]:
    """Register an SSH key (it is not added to pods by itself; rent takes ``user_public_key``)."""
    key = SshKey(**new_owned(caller), name=body.name, public_key=body.public_key)
    runtime.state.ssh_keys[key.id] = key
    runtime.state.save(key)
    runtime.state.record_event(
        caller.workspace_id, "ssh-key-create.success", actor=caller.actor, detail=key.name
    )
    return ssh_key_object(key)


@router.put("/ssh-keys/{key_id}")
async def update_ssh_key(
    key_id: UUID, body: SshKeyRequest, runtime: RuntimeDep, caller: CallerDep
) -> dict[str, Any]:
    """Rename or replace an SSH key."""
    key = owned(runtime.state.ssh_keys, caller, key_id, "SSH key")
    key.name, key.public_key, key.updated_at = body.name, body.public_key, utcnow()
    runtime.state.save(key)
    return ssh_key_object(key)


@router.delete("/ssh-keys/{key_id}")
async def delete_ssh_key(key_id: UUID, runtime: RuntimeDep, caller: CallerDep) -> dict[str, Any]:
    """Remove an SSH key."""
    key = owned(runtime.state.ssh_keys, caller, key_id, "SSH key")
    del runtime.state.ssh_keys[key.id]
    runtime.state.forget(key)
    runtime.state.record_event(
        caller.workspace_id, "ssh-key-delete.success", actor=caller.actor, detail=key.name
    )
    return {"success": True}
