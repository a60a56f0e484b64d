"""Pod routes (docs/lium-api.md#pods): list, read, delete, and a pod's events."""

from typing import Any
from uuid import UUID

from fastapi import APIRouter, Request

from lium_emulator.api.deps import AccountDep, RuntimeDep, fault_decision
from lium_emulator.api.models import DeletePodRequest
from lium_emulator.api.owned import owned
from lium_emulator.entities import VISIBLE_STATUSES, Account, Pod
from lium_emulator.errors import ApiError
from lium_emulator.runtime import Runtime
from lium_emulator.timeutil import utcnow
from lium_emulator.views import event_object, pod_row

router = APIRouter()


def _visible_pod(runtime: Runtime, account: Account, pod_id: UUID) -> Pod:
    """The caller's listed pod, or 404 (unknown, another account's, or already DELETED)."""
    pod = runtime.state.pods.get(str(pod_id))
    if pod is None or pod.user_id != account.user_id or pod.status not in VISIBLE_STATUSES:
        raise ApiError(404, "pod_not_found", "Pod not found.")
    return pod


@router.get("/pods")
async def list_pods(
    runtime: RuntimeDep, account: AccountDep, api_key_id: UUID | None = None
) -> list[dict[str, Any]]:
    """The caller's pods that are not DELETED, oldest first."""
    now = utcnow()
    pods = [
        p
        for p in runtime.state.owned_pods(account.user_id)
        if p.status in VISIBLE_STATUSES and (api_key_id is None or p.api_key_id == str(api_key_id))
    ]
    return [pod_row(runtime.state, p, now, runtime.config.pending_seconds) for p in pods]


@router.get("/pods/{pod_id}")
async def get_pod(pod_id: UUID, runtime: RuntimeDep, account: AccountDep) -> dict[str, Any]:
    """One pod with its ``last_event``; 404 once the pod is DELETED."""
    pod = _visible_pod(runtime, account, pod_id)
    return pod_row(runtime.state, pod, utcnow(), runtime.config.pending_seconds, detailed=True)


@router.delete("/pods/{pod_id}")
async def delete_pod(
    pod_id: UUID,
    request: Request,
    runtime: RuntimeDep,
    account: AccountDep,
    body: DeletePodRequest | None = None,
) -> dict[str, Any]:
    """Start deleting a pod (also a PENDING one: its creation is cancelled); repeating it is harmless."""
    pod = _visible_pod(runtime, account, pod_id)
    if pod.status != "DELETING":
        decision = fault_decision(request)
        extra = decision.pod_faults.slow_deleting_seconds if decision is not None else 0.0
        runtime.lifecycle.begin_delete(pod, actor=account, reason="user_initiated", extra_seconds=extra)
    return {"success": True, "pod_id": pod.id, "status": pod.status}


@router.get("/pods/{pod_id}/events")
async def get_pod_events(pod_id: UUID, runtime: RuntimeDep, account: AccountDep) -> list[dict[str, Any]]:
    """A pod's events, oldest first; also after the pod was deleted."""
    pod = owned(runtime.state.pods, account, pod_id, "Pod")
    return [event_object(e) for e in runtime.state.pod_events(pod.id)]
