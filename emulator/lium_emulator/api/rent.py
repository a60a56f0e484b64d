"""``POST /executors/{id}/rent`` with ``Idempotency-Key`` handling (docs/lium-api.md#rent, #idempotency).

Order of checks: API key (401), scope (403) and body (422), then the key's budgets (402) and the
balance (403) — these answer every request freshly, and record nothing under the key — then the idempotency key, then the node, count, template and volume checks, whose refusals
are stored under the key and replayed.
"""

import asyncio
import uuid
from collections.abc import Callable
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse

from lium_emulator import budgets
from lium_emulator.api.caller import Caller, CallerDep
from lium_emulator.api.deps import RuntimeDep, fault_decision, request_id
from lium_emulator.api.edge import API_PREFIX
from lium_emulator.api.models import RentRequest, pod_path
from lium_emulator.api.owned import owned
from lium_emulator.api.templates import visible_template
from lium_emulator.catalogs.nodes import Node, pod_share
from lium_emulator.errors import ApiError
from lium_emulator.faults import FaultDecision
from lium_emulator.lifecycle import local_volume_path, pod_internal_ports
from lium_emulator.records.entities import Pod, PodFaults, Template
from lium_emulator.records.idempotency import request_fingerprint
from lium_emulator.records.timeutil import utcnow
from lium_emulator.runtime import Runtime
from lium_emulator.services.backups import DEFAULT_FREQUENCY_HOURS, DEFAULT_RETENTION_DAYS, BackupRefused
from lium_emulator.views import available_ports

router = APIRouter()

IdempotencyKey = Annotated[str | None, Header(alias="Idempotency-Key", min_length=1, max_length=255)]


@router.post("/executors/{executor_id}/rent")
async def rent_executor(
    executor_id: UUID,
    body: RentRequest,
    request: Request,
    runtime: RuntimeDep,
    caller: CallerDep,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    """Rent GPUs of a node: the pod appears at once as PENDING; answers ``{"success": true, "pod_id"}``."""
    node = runtime.state.catalog.get(str(executor_id))
    check_money(request, runtime, caller, balance_priced_hourly(node, body.gpu_count) if node else None)

    def commit(decision: FaultDecision | None) -> dict[str, Any]:
        pod_id = _rent(runtime, caller, node, str(executor_id), body, idempotency_key, decision)
        return rent_response_body(pod_id)

    return await answer_once(request, runtime, caller, idempotency_key, str(executor_id), commit)


async def answer_once(
    request: Request,
    runtime: Runtime,
    caller: Caller,
    idempotency_key: str | None,
    target: str,
    commit: Callable[[FaultDecision | None], dict[str, Any]],
) -> JSONResponse:
    """Run an order's ``commit`` once per ``Idempotency-Key`` (docs/lium-api.md#idempotency).

    ``commit`` validates and commits without awaiting, raising the order's refusal; a 4xx refusal is
    stored under the key and replayed like a success. ``target`` (the node, or the cluster route) is
    part of the request's fingerprint.
    """
    decision = fault_decision(request)
    if idempotency_key is None or not runtime.config.idempotency_enabled:
        # The header is still noted on the pod, so inspection shows double rents of one key.
        await _hold_latency(decision)
        return JSONResponse(commit(decision))

    ledger = runtime.ledger
    now = utcnow()
    fingerprint = request_fingerprint(target, await request.json())
    replay = ledger.lookup(caller.idempotency_scope, idempotency_key, fingerprint, now)
    if replay is not None:
        return JSONResponse(
            replay.body, status_code=replay.status_code or 200, headers={"Idempotent-Replayed": "true"}
        )
    record = ledger.reserve(caller.idempotency_scope, idempotency_key, fingerprint, now)
    try:
        await _hold_latency(decision)
        try:
            status, answer = 200, commit(decision)
        except ApiError as refusal:
            if refusal.status >= 500:
                raise
            status, answer = refusal.status, refusal.body(request_id(request))
    except BaseException:
        ledger.abandon(record)
        raise
    if decision is not None and decision.outcome_lost:
        ledger.abandon(record)
    else:
        ledger.complete(record, status, answer)
    return JSONResponse(answer, status_code=status)


async def _hold_latency(decision: FaultDecision | None) -> None:
    """Injected latency is spent here, while the key is in flight (see faults ``latency``)."""
    if decision is not None and decision.latency_seconds > 0:
        decision.latency_consumed = True
        await asyncio.sleep(decision.latency_seconds)


def check_money(
    request: Request, runtime: Runtime, caller: Caller, hourly: float | None, ordered: str = "node"
) -> None:
    """The money checks of an order of ``hourly`` USD an hour (None: no node to price): the caller's key
    budgets (402), then the balance of the workspace's billing owner (403) — ``budgets.check_order``.
    ``ordered`` names what is rented."""
    route = getattr(request.scope.get("route"), "path", request.url.path).removeprefix(API_PREFIX)
    budgets.check_order(
        runtime,
        key=caller.key,
        payer=caller.billing_account(runtime.state),
        hourly=hourly,
        route=f"{request.method} {route}",
        ordered=ordered,
    )


def balance_priced_hourly(node: Node, requested: int | None) -> float:
    """The hourly price the balance check charges an order of ``requested`` GPUs (None = no count).

    The balance check runs before the count is validated, so a missing or impossible count is priced
    as the whole node; an impossible count is refused later (``gpu_count_invalid``).
    """
    gpus = node.gpu_count
    if requested is not None and 0 < requested < node.gpu_count:
        gpus = requested
    return node.price_per_gpu_hour * gpus


def validated_gpu_count(runtime: Runtime, node: Node, requested: int | None) -> int:
    """The validated number of GPUs to rent (None = every free GPU); raises the rent's refusal."""
    available = runtime.state.available_gpus(node)
    if available == 0:
        raise ApiError(400, "node_unavailable", "Node is not available.")
    if requested is None:
        if available < node.min_rentable_gpu_count:
            raise ApiError(400, "node_unavailable", "Node is not available.")
        return available
    if not node.splittable and requested != node.gpu_count:
        raise ApiError(400, "gpu_split_not_allowed", "Provider doesn't allow GPU splitting")
    if not node.min_rentable_gpu_count <= requested <= available:
        raise ApiError(
            400,
            "gpu_count_invalid",
            f"gpu_count must be between {node.min_rentable_gpu_count} and {available} on this node.",
        )
    return requested


def rentable_template(runtime: Runtime, caller: Caller, template_id: UUID) -> Template:
    """The template a pod may run: visible to the caller, verified, with its docker credential."""
    template = visible_template(runtime, caller, template_id)
    if template.status == "VERIFY_FAILED":
        raise ApiError(400, "template_invalid", "The template failed verification.")
    credential_id = template.docker_credential_id
    if credential_id is not None and credential_id not in runtime.state.credentials:
        raise ApiError(400, "template_invalid", "The template's docker credential no longer exists.")
    return template


def check_ports(runtime: Runtime, node: Node, template: Template, *, held: int = 0) -> None:
    """400 ``node_ports_unavailable`` unless ``node`` has a free external port for each port a pod of
    ``template`` publishes (22 and its internal ports); ``held`` are the ports the pod holds on the node
    already (a template switch gives them back). Each is a host listener of the emulator's: a template
    of thousands of ports must not get them for the asking."""
    needed = len(pod_internal_ports(template.internal_ports))
    free = available_ports(runtime.state, node) + held
    if needed > free:
        raise ApiError(
            400,
            "node_ports_unavailable",
            f"The node has {free} free external ports; this template publishes {needed} (22 and its "
            f"internal ports).",
        )


def attachable_volume_id(runtime: Runtime, caller: Caller, volume_id: UUID | None) -> str | None:
    """The caller's volume that no active pod holds, or None when none is asked for."""
    if volume_id is None:
        return None
    volume = owned(runtime.state.volumes, caller, volume_id, "Volume")
    holder = runtime.state.volume_holder(volume.id)
    if holder is not None:
        raise ApiError(
            409, "volume_in_use", "The volume is attached to another pod.", extra={"pod_id": holder.id}
        )
    return volume.id


def _rent(
    runtime: Runtime,
    caller: Caller,
    node: Node | None,
    executor_id: str,
    body: RentRequest,
    idempotency_key: str | None,
    decision: FaultDecision | None,
) -> str:
    """Validate the order and create the PENDING pod; raises the refusal otherwise. No awaits inside:
    the checks and the commit are atomic with respect to other requests."""
    if node is None:
        raise ApiError(404, "node_not_found", "Node not found.")
    if body.termination_hours is not None and not 1 <= body.termination_hours <= 720:
        raise ApiError(400, "ttl_invalid", "termination_hours must be between 1 and 720.")
    if decision is not None and decision.rent_refusal is not None:
        raise decision.rent_refusal
    gpu_count = validated_gpu_count(runtime, node, body.gpu_count)
    template = rentable_template(runtime, caller, body.template_id)
    check_ports(runtime, node, template)
    volume_id = attachable_volume_id(runtime, caller, body.volume_id)
    restore = restore_order(runtime, caller, body.backup_log_id, body.restore_path)
    pod = new_pod(
        caller,
        node,
        gpu_count,
        template,
        pod_name=body.pod_name,
        volume_id=volume_id,
        authorized_keys=body.authorized_keys(),
        initial_port_count=body.initial_port_count,
        enable_volume_encryption=body.enable_volume_encryption,
        enable_jupyter=body.enable_jupyter,
        enable_backups=body.enable_backups,
        termination_hours=body.termination_hours,
        idempotency_key=idempotency_key,
        faults=decision.pod_faults.model_copy() if decision is not None else PodFaults(),
        restore_backup_id=restore[0] if restore else None,
        restore_path=restore[1] if restore else None,
    )
    commit_pod(runtime, caller, pod, f"executor {executor_id}")
    return pod.id


def restore_order(
    runtime: Runtime, caller: Caller, backup_id: UUID | None, restore_path: str | None
) -> tuple[str, str] | None:
    """A rent's backup to restore and where (both or neither): the workspace's completed backup, into an
    absolute path without ``..``."""
    if backup_id is None and restore_path is None:
        return None
    if backup_id is None or not restore_path:
        raise ApiError(400, "restore_invalid", "backup_log_id and restore_path must be given together.")
    pod_path(restore_path, "restore_path")
    try:
        backup = runtime.backups.restorable(caller.workspace_id, str(backup_id), caller.sees)
    except BackupRefused as refusal:
        raise ApiError(404, "backup_not_found", str(refusal)) from None
    return backup.id, restore_path


def new_pod(caller: Caller, node: Node, gpu_count: int, template: Template, **order: Any) -> Pod:
    """A PENDING pod of ``caller`` on ``gpu_count`` GPUs of ``node``, running a copy of ``template``;
    ``order`` holds the rest of the order (name, keys, volume, options, faults, cluster place)."""
    share = pod_share(node, gpu_count)
    now = utcnow()
    return Pod(
        id=str(uuid.uuid4()),
        user_id=caller.workspace_id,
        api_key_id=caller.api_key_id,
        billed_user_id=caller.workspace.billing_owner_user_id,
        executor_id=node.id,
        status="PENDING",
        gpu_name=node.machine_name,
        cpu_name=node.cpu_name,
        gpu_count=gpu_count,
        price=round(node.price_per_gpu_hour * gpu_count, 6),
        cpu_count=share.cpu_count,
        memory_gib=share.memory_gib,
        local_volume_gb=share.local_volume_gb,
        storage_quota_gb=share.storage_quota_gb,
        template=template.model_copy(deep=True),
        created_at=now,
        updated_at=now,
        **order,
    )


def commit_pod(runtime: Runtime, caller: Caller, pod: Pod, detail: str) -> None:
    """Store a new PENDING pod, log its rent and start creating it."""
    state = runtime.state
    state.pods[pod.id] = pod
    state.save(pod)
    if pod.enable_backups:  # as on Lium, a new pod's local volume is backed up unless the rent said not
        runtime.backups.configure(
            pod, local_volume_path(pod.template.volumes), DEFAULT_FREQUENCY_HOURS, DEFAULT_RETENTION_DAYS
        )
    state.record_event(caller.workspace_id, "pod-rent.requested", pod=pod, actor=caller.actor, detail=detail)
    state.record_event(
        caller.workspace_id, "pod-lifecycle.status", pod=pod, to_status="PENDING", reason="user_initiated"
    )
    runtime.lifecycle.begin_create(pod)


def rent_response_body(pod_id: str) -> dict[str, Any]:
    """The 200 answer of a rent."""
    return {"success": True, "pod_id": pod_id}
