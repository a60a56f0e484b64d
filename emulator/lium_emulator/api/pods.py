"""Pod routes (docs/lium-api.md#pods, #other-pod-routes): list, read, delete, reboot and switch template,
feedback, a pod's events and its scheduled removal."""

from typing import Any
from uuid import UUID

from fastapi import APIRouter, Request

from lium_emulator.api.caller import Caller, CallerDep
from lium_emulator.api.deps import RuntimeDep, fault_decision
from lium_emulator.api.models import (
    DeletePodRequest,
    RebootRequest,
    ScheduleRemovalRequest,
    SwitchTemplateRequest,
)
from lium_emulator.api.rent import attachable_volume_id, check_ports, rentable_template
from lium_emulator.errors import ApiError
from lium_emulator.lifecycle import REBOOTABLE_STATUSES, REMOVABLE_STATUSES, pod_internal_ports
from lium_emulator.records.entities import VISIBLE_STATUSES, Pod
from lium_emulator.records.timeutil import iso, to_naive_utc, utcnow
from lium_emulator.runtime import Runtime
from lium_emulator.views import ListingExecutors, event_object, pod_row

router = APIRouter()


def seen_pod(runtime: Runtime, caller: Caller, pod_id: UUID | str) -> Pod:
    """A pod the caller sees (``Caller.sees``: its workspace's, and under ``own`` visibility its key's),
    deleted ones too; 404 otherwise, as for a missing pod."""
    pod = runtime.state.pods.get(str(pod_id))
    if pod is None or not caller.sees(pod):
        raise ApiError(404, "pod_not_found", "Pod not found.")
    return pod


def visible_pod(runtime: Runtime, caller: Caller, pod_id: UUID) -> Pod:
    """The caller's listed pod, or 404 (unknown, another workspace's or key's, or already DELETED)."""
    pod = seen_pod(runtime, caller, pod_id)
    if pod.status not in VISIBLE_STATUSES:
        raise ApiError(404, "pod_not_found", "Pod not found.")
    return pod


@router.get("/pods")
async def list_pods(
    runtime: RuntimeDep, caller: CallerDep, api_key_id: UUID | None = None
) -> list[dict[str, Any]]:
    """The caller's pods that are not DELETED, oldest first."""
    now = utcnow()
    pods = [
        p
        for p in runtime.state.owned_pods(caller.workspace_id)
        if p.status in VISIBLE_STATUSES
        and caller.sees(p)
        and (api_key_id is None or p.api_key_id == str(api_key_id))
    ]
    listing: ListingExecutors = {}
    return [pod_row(runtime.state, p, now, runtime.config.pending_seconds, listing=listing) for p in pods]


@router.get("/pods/{pod_id}")
async def get_pod(pod_id: UUID, runtime: RuntimeDep, caller: CallerDep) -> dict[str, Any]:
    """One pod with its ``last_event``; 404 once the pod is DELETED."""
    return _detailed_row(runtime, visible_pod(runtime, caller, pod_id))


@router.delete("/pods/{pod_id}")
async def delete_pod(
    pod_id: UUID,
    request: Request,
    runtime: RuntimeDep,
    caller: CallerDep,
    body: DeletePodRequest | None = None,
) -> dict[str, Any]:
    """Start deleting a pod (also a PENDING one: its creation is cancelled); repeating it is harmless."""
    pod = visible_pod(runtime, caller, pod_id)
    caller.may_remove(pod)
    if pod.status != "DELETING":
        decision = fault_decision(request)
        extra = decision.pod_faults.slow_deleting_seconds if decision is not None else 0.0
        runtime.lifecycle.begin_delete(pod, actor=caller.actor, reason="user_initiated", extra_seconds=extra)
    return {"success": True, "pod_id": pod.id, "status": pod.status}


def _rebootable_pod(runtime: Runtime, caller: Caller, pod_id: UUID) -> Pod:
    """The caller's pod whose container can be replaced now (RUNNING or REBOOT_FAILED), else 409."""
    pod = visible_pod(runtime, caller, pod_id)
    if pod.status not in REBOOTABLE_STATUSES:
        raise ApiError(409, "pod_state_conflict", f"A {pod.status} pod cannot be rebooted now.")
    return pod


def _detailed_row(runtime: Runtime, pod: Pod) -> dict[str, Any]:
    return pod_row(runtime.state, pod, utcnow(), runtime.config.pending_seconds, detailed=True)


@router.post("/pods/{pod_id}/reboot")
async def reboot_pod(
    pod_id: UUID, runtime: RuntimeDep, caller: CallerDep, body: RebootRequest | None = None
) -> dict[str, Any]:
    """Replace the pod's container (REBOOT_PENDING, then RUNNING with new ports and host key); the
    answer is the pod row. ``volume_id`` attaches a free network volume of the caller's to it."""
    pod = _rebootable_pod(runtime, caller, pod_id)
    if body is not None and body.volume_id is not None and str(body.volume_id) != pod.volume_id:
        pod.volume_id = attachable_volume_id(runtime, caller, body.volume_id)
    runtime.lifecycle.begin_reboot(pod, actor=caller.actor)
    return _detailed_row(runtime, pod)


@router.put("/pods/{pod_id}/switch-template")
async def switch_template(
    pod_id: UUID, body: SwitchTemplateRequest, runtime: RuntimeDep, caller: CallerDep
) -> dict[str, Any]:
    """Reboot the pod into a new container of another template (checked as a rent checks it)."""
    pod = _rebootable_pod(runtime, caller, pod_id)
    template = rentable_template(runtime, caller, body.template_id)
    node = runtime.state.catalog.get(pod.executor_id)
    if node is not None:  # a node gone from a changed --nodes catalog has no ports to count
        check_ports(runtime, node, template, held=len(pod_internal_ports(pod.template.internal_ports)))
    runtime.lifecycle.begin_reboot(pod, actor=caller.actor, template=template)
    return _detailed_row(runtime, pod)


@router.post("/pods/{pod_id}/feedback")
async def pod_feedback(
    pod_id: UUID, body: DeletePodRequest, runtime: RuntimeDep, caller: CallerDep
) -> dict[str, Any]:
    """Feedback on the pod's node (the fields ``DELETE`` takes): validated, acknowledged, not kept."""
    pod = visible_pod(runtime, caller, pod_id)
    caller.may_remove(pod)
    return {"success": True, "pod_id": pod.id}


@router.get("/pods/{pod_id}/events")
async def get_pod_events(pod_id: UUID, runtime: RuntimeDep, caller: CallerDep) -> list[dict[str, Any]]:
    """A pod's events, oldest first; also after the pod was deleted."""
    pod = seen_pod(runtime, caller, pod_id)
    return [event_object(e) for e in runtime.state.pod_events(pod.id)]


def _removable_pod(runtime: Runtime, caller: Caller, pod_id: UUID) -> Pod:
    """The caller's pod that a removal can still be scheduled for; 409 once it is deleting or failed."""
    pod = visible_pod(runtime, caller, pod_id)
    caller.may_remove(pod)
    if pod.status not in REMOVABLE_STATUSES:
        raise ApiError(409, "pod_state_conflict", f"A {pod.status} pod cannot be scheduled for removal.")
    return pod


def _schedule_answer(pod: Pod) -> dict[str, Any]:
    return {"success": True, "pod_id": pod.id, "removal_scheduled_at": iso(pod.removal_scheduled_at)}


@router.post("/pods/{pod_id}/schedule-removal")
async def schedule_removal(
    pod_id: UUID, body: ScheduleRemovalRequest, runtime: RuntimeDep, caller: CallerDep
) -> dict[str, Any]:
    """Remove the pod at ``removal_scheduled_at`` (any offset; naive = UTC), replacing any schedule.

    The time must be in the future (400 ``removal_time_in_past``). Also for a pending pod: one that
    never becomes ready is removed all the same. The removal's events carry ``scheduled_termination``.
    """
    pod = _removable_pod(runtime, caller, pod_id)
    at = to_naive_utc(body.removal_scheduled_at)
    if at <= utcnow():
        raise ApiError(400, "removal_time_in_past", "removal_scheduled_at must be in the future.")
    runtime.lifecycle.schedule_removal(pod, at)
    runtime.state.record_event(
        caller.workspace_id, "pod-schedule-removal.scheduled", pod=pod, actor=caller.actor, detail=iso(at)
    )
    return _schedule_answer(pod)


@router.delete("/pods/{pod_id}/schedule-removal")
async def cancel_schedule_removal(pod_id: UUID, runtime: RuntimeDep, caller: CallerDep) -> dict[str, Any]:
    """Cancel the pod's scheduled removal (also one from ``termination_hours``); harmless without one."""
    pod = _removable_pod(runtime, caller, pod_id)
    if pod.removal_scheduled_at is not None or pod.termination_hours is not None:
        runtime.lifecycle.schedule_removal(pod, None)
        runtime.state.record_event(
            caller.workspace_id, "pod-schedule-removal.cancelled", pod=pod, actor=caller.actor
        )
    return _schedule_answer(pod)
