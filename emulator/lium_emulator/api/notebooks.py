"""``POST /pods/{pod_id}/install-jupyter`` (docs/lium-api.md#notebooks): a notebook server on one of the
pod's internal ports; the pod row then follows the installation."""

from typing import Any
from uuid import UUID

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from lium_emulator.api.caller import CallerDep
from lium_emulator.api.deps import RuntimeDep
from lium_emulator.api.pods import visible_pod
from lium_emulator.errors import ApiError
from lium_emulator.lifecycle import pod_internal_ports

router = APIRouter()


class InstallJupyterRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    jupyter_internal_port: int = Field(ge=1, le=65535)


@router.post("/pods/{pod_id}/install-jupyter")
async def install_jupyter(
    pod_id: UUID, body: InstallJupyterRequest, runtime: RuntimeDep, caller: CallerDep
) -> dict[str, Any]:
    """Start a notebook server on an internal port the pod publishes (never its sshd's 22)."""
    pod = visible_pod(runtime, caller, pod_id)
    if pod.status != "RUNNING":
        raise ApiError(409, "pod_state_conflict", f"A {pod.status} pod cannot install Jupyter now.")
    port = body.jupyter_internal_port
    published = pod_internal_ports(pod.template.internal_ports)
    if port == 22 or port not in published:
        raise ApiError(
            400,
            "invalid_jupyter_port",
            f"Port {port} is not one of the pod's internal ports other than 22: {[p for p in published if p != 22]}.",
        )
    runtime.notebooks.install(pod, port)
    return {"success": True, "pod_id": pod.id, "jupyter_installation_status": pod.jupyter_installation_status}
