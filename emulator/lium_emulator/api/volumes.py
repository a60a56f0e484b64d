"""Volume routes (docs/lium-api.md#volumes). A volume is a host directory, mounted at /mnt of the one pod it is
attached to; its data outlives pods."""

import asyncio
import shutil
import uuid
from typing import Any
from uuid import UUID

from fastapi import APIRouter

from lium_emulator.api.deps import AccountDep, RuntimeDep
from lium_emulator.api.models import VolumeCreateRequest, VolumeUpdateRequest
from lium_emulator.entities import Account, Volume
from lium_emulator.errors import ApiError
from lium_emulator.runtime import Runtime
from lium_emulator.timeutil import utcnow
from lium_emulator.views import volume_object

router = APIRouter()


def _owned(runtime: Runtime, account: Account, volume_id: UUID) -> Volume:
    volume = runtime.state.volumes.get(str(volume_id))
    if volume is None or volume.user_id != account.user_id:
        raise ApiError(404, "volume_not_found", "Volume not found.")
    return volume


def _view(runtime: Runtime, volume: Volume) -> dict[str, Any]:
    holder = runtime.state.volume_holder(volume.id)
    return volume_object(volume, runtime.lifecycle.volume_dir(volume.id), holder)


@router.post("/volumes")
async def create_volume(
    body: VolumeCreateRequest, runtime: RuntimeDep, account: AccountDep
) -> dict[str, Any]:
    """Create an empty volume."""
    now = utcnow()
    volume = Volume(
        id=str(uuid.uuid4()),
        user_id=account.user_id,
        name=body.name,
        description=body.description,
        created_at=now,
        updated_at=now,
    )
    runtime.lifecycle.volume_dir(volume.id).mkdir(parents=True, exist_ok=True)
    runtime.state.volumes[volume.id] = volume
    runtime.state.save(volume)
    return _view(runtime, volume)


@router.get("/volumes")
async def list_volumes(runtime: RuntimeDep, account: AccountDep) -> list[dict[str, Any]]:
    """The caller's volumes, with their current size."""
    return [_view(runtime, v) for v in runtime.state.volumes.values() if v.user_id == account.user_id]


@router.get("/volumes/{volume_id}")
async def get_volume(volume_id: UUID, runtime: RuntimeDep, account: AccountDep) -> dict[str, Any]:
    """One volume."""
    return _view(runtime, _owned(runtime, account, volume_id))


@router.put("/volumes/{volume_id}")
async def update_volume(
    volume_id: UUID, body: VolumeUpdateRequest, runtime: RuntimeDep, account: AccountDep
) -> dict[str, Any]:
    """Rename a volume or change its description (only the fields sent)."""
    volume = _owned(runtime, account, volume_id)
    if body.name is not None:
        volume.name = body.name
    if "description" in body.model_fields_set:
        volume.description = body.description
    volume.updated_at = utcnow()
    runtime.state.save(volume)
    return _view(runtime, volume)


@router.delete("/volumes/{volume_id}")
async def delete_volume(volume_id: UUID, runtime: RuntimeDep, account: AccountDep) -> dict[str, Any]:
    """Delete a volume and its data; 409 ``volume_in_use`` while a pod has it attached."""
    volume = _owned(runtime, account, volume_id)
    holder = runtime.state.volume_holder(volume.id)
    if holder is not None:
        raise ApiError(409, "volume_in_use", "The volume is attached to a pod.", extra={"pod_id": holder.id})
    del runtime.state.volumes[volume.id]
    runtime.state.forget(volume)
    await asyncio.to_thread(shutil.rmtree, runtime.lifecycle.volume_dir(volume.id), True)
    return {"success": True}
