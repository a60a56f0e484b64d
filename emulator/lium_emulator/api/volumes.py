"""Volume routes (docs/lium-api.md#volumes). A volume is a host directory, mounted at /mnt of the one pod it is
attached to; its data outlives pods."""

import asyncio
import shutil
from typing import Any
from uuid import UUID

from fastapi import APIRouter

from lium_emulator.api.caller import CallerDep
from lium_emulator.api.deps import RuntimeDep
from lium_emulator.api.models import VolumeCreateRequest, VolumeUpdateRequest
from lium_emulator.api.owned import new_owned, owned, owned_by
from lium_emulator.errors import ApiError
from lium_emulator.records.entities import Volume
from lium_emulator.records.timeutil import utcnow
from lium_emulator.runtime import Runtime
from lium_emulator.views import volume_object

router = APIRouter()


def _view(runtime: Runtime, volume: Volume) -> dict[str, Any]:
    holder = runtime.state.volume_holder(volume.id)
    return volume_object(volume, runtime.lifecycle.volume_dir(volume.id), holder)


@router.post("/volumes")
async def create_volume(body: VolumeCreateRequest, runtime: RuntimeDep, caller: CallerDep) -> dict[str, Any]:
    """Create an empty volume."""
    volume = Volume(**new_owned(caller), name=body.name, description=body.description)
    runtime.lifecycle.volume_dir(volume.id).mkdir(parents=True, exist_ok=True)
    runtime.state.volumes[volume.id] = volume
    runtime.state.save(volume)
    return _view(runtime, volume)


@router.get("/volumes")
async def list_volumes(runtime: RuntimeDep, caller: CallerDep) -> list[dict[str, Any]]:
    """The caller's volumes, with their current size."""
    return [_view(runtime, v) for v in owned_by(runtime.state.volumes.values(), caller)]


@router.get("/volumes/{volume_id}")
async def get_volume(volume_id: UUID, runtime: RuntimeDep, caller: CallerDep) -> dict[str, Any]:
    """One volume."""
    return _view(runtime, owned(runtime.state.volumes, caller, volume_id, "Volume"))


@router.put("/volumes/{volume_id}")
async def update_volume(
    volume_id: UUID, body: VolumeUpdateRequest, runtime: RuntimeDep, caller: CallerDep
) -> dict[str, Any]:
    """Rename a volume or change its description (only the fields sent)."""
    volume = owned(runtime.state.volumes, caller, volume_id, "Volume")
    if body.name is not None:
        volume.name = body.name
    if "description" in body.model_fields_set:
        volume.description = body.description
    volume.updated_at = utcnow()
    runtime.state.save(volume)
    return _view(runtime, volume)


@router.delete("/volumes/{volume_id}")
async def delete_volume(volume_id: UUID, runtime: RuntimeDep, caller: CallerDep) -> dict[str, Any]:
    """Delete a volume and its data; 409 ``volume_in_use`` while a pod has it attached."""
    volume = owned(runtime.state.volumes, caller, volume_id, "Volume")
    holder = runtime.state.volume_holder(volume.id)
    if holder is not None:
        raise ApiError(409, "volume_in_use", "The volume is attached to a pod.", extra={"pod_id": holder.id})
    del runtime.state.volumes[volume.id]
    runtime.state.forget(volume)
    await asyncio.to_thread(shutil.rmtree, runtime.lifecycle.volume_dir(volume.id), True)
    return {"success": True}
