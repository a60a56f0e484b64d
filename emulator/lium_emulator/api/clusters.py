"""Multi-node clusters (docs/lium-api.md#clusters): the fabrics with free nodes, the all-or-nothing
rental of whole nodes of one fabric, and the removal of every member at once.

A cluster is its member pods: they share ``cluster_id`` and the pod name, each has a rank
(``cluster_node_index``) and an overlay address ``10.42.0.<rank + 1>``. The members are ordinary pods
afterwards (listed, deleted, scheduled one by one); what holds them together is here and in the pod
lifecycle, which releases the whole cluster when one member fails to start.
"""

import uuid
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from lium_emulator.api.caller import Caller, CallerDep, OptionalCallerDep
from lium_emulator.api.deps import RuntimeDep, fault_decision
from lium_emulator.api.models import ClusterRentRequest
from lium_emulator.api.rent import (
    IdempotencyKey,
    answer_once,
    check_money,
    check_ports,
    commit_pod,
    new_pod,
    rentable_template,
)
from lium_emulator.catalogs.images import CLUSTER_IMAGE_REPOSITORY
from lium_emulator.catalogs.nodes import Fabric, Node
from lium_emulator.errors import ApiError
from lium_emulator.faults import FaultDecision
from lium_emulator.records.entities import VISIBLE_STATUSES, PodFaults, Template
from lium_emulator.records.state import EmulatorState
from lium_emulator.runtime import Runtime
from lium_emulator.views import available_ports, executor_object

router = APIRouter()

MIN_CLUSTER_NODES = 2
OVERLAY_PREFIX = "10.42.0."


def overlay_address(rank: int) -> str:
    """The overlay address of the member of rank ``rank``: ``10.42.0.<rank + 1>``, as on Lium."""
    return f"{OVERLAY_PREFIX}{rank + 1}"


def whole_free_nodes(state: EmulatorState, fabric: Fabric) -> list[Node]:
    """The nodes of ``fabric`` with every GPU free: a cluster takes its members whole."""
    return [n for n in state.catalog.fabric_nodes(fabric.fabric_id) if state.available_gpus(n) == n.gpu_count]


@router.get("/executors/infiniband-clusters")
async def list_cluster_offers(runtime: RuntimeDep, caller: OptionalCallerDep) -> list[dict[str, Any]]:
    """One offer per fabric with at least two whole free nodes; none while clusters are switched off."""
    if not runtime.config.multinode_clusters_enabled:
        return []
    state = runtime.state
    offers = []
    for fabric in state.catalog.fabrics.values():
        free = whole_free_nodes(state, fabric)
        if len(free) < MIN_CLUSTER_NODES:
            continue
        offers.append(
            {
                **fabric.model_dump(),
                "node_count": len(state.catalog.fabric_nodes(fabric.fabric_id)),
                "nodes": [
                    executor_object(
                        node,
                        node.gpu_count,
                        available_ports(state, node),
                        price_per_gpu=node.price_per_gpu_hour,
                        with_ip=caller is not None,
                    )
                    for node in free
                ],
            }
        )
    return offers


@router.post("/executors/cluster/rent")
async def rent_cluster(
    body: ClusterRentRequest,
    request: Request,
    runtime: RuntimeDep,
    caller: CallerDep,
    idempotency_key: IdempotencyKey = None,
) -> JSONResponse:
    """Rent whole nodes of one fabric as one cluster: every member appears at once as PENDING;
    answers ``{"success": true, "cluster_id", "pod_ids"}`` (member ids in rank order)."""
    if not runtime.config.multinode_clusters_enabled:
        raise ApiError(
            403, "multinode_clusters_disabled", "Multi-node cluster rentals are not enabled on this platform."
        )
    nodes = [runtime.state.catalog.get(str(node_id)) for node_id in body.executor_uuids]
    known = [node for node in nodes if node is not None]
    check_money(
        request,
        runtime,
        caller,
        sum(n.price_per_gpu_hour * n.gpu_count for n in known) if known else None,
        "cluster",
    )

    def commit(decision: FaultDecision | None) -> dict[str, Any]:
        cluster_id, pod_ids = _rent_cluster(runtime, caller, body, idempotency_key, decision)
        return {"success": True, "cluster_id": cluster_id, "pod_ids": pod_ids}

    return await answer_once(request, runtime, caller, idempotency_key, "cluster/rent", commit)


def _cluster_nodes(runtime: Runtime, body: ClusterRentRequest) -> list[Node]:
    """The ordered nodes, each whole and free, all on one fabric; raises the rental's refusal."""
    ids = [str(node_id) for node_id in body.executor_uuids]
    if len(set(ids)) != len(ids):
        raise ApiError(400, "cluster_nodes_invalid", "executor_uuids names a node more than once.")
    state = runtime.state
    nodes = []
    for node_id in ids:
        node = state.catalog.get(node_id)
        if node is None:
            raise ApiError(404, "node_not_found", f"Node {node_id} not found.")
        if node.fabric_id is None:
            raise ApiError(
                400,
                "node_not_in_fabric",
                f"Node {node_id} is not on an RDMA fabric and cannot join a cluster.",
            )
        if state.available_gpus(node) != node.gpu_count:
            raise ApiError(400, "node_unavailable", f"Node {node_id} is not available as a whole node.")
        nodes.append(node)
    if len({node.fabric_id for node in nodes}) > 1:
        raise ApiError(400, "cluster_fabric_mismatch", "Every node of a cluster must be on the same fabric.")
    return nodes


def _cluster_template(runtime: Runtime, caller: Caller, body: ClusterRentRequest) -> Template:
    """The template every member runs; it must be of Lium's cluster image."""
    template = rentable_template(runtime, caller, body.template_id)
    if template.docker_image != CLUSTER_IMAGE_REPOSITORY:
        raise ApiError(
            400,
            "cluster_template_required",
            f"A cluster must run a {CLUSTER_IMAGE_REPOSITORY} template; this one runs {template.docker_image}.",
        )
    return template


def _rent_cluster(
    runtime: Runtime,
    caller: Caller,
    body: ClusterRentRequest,
    idempotency_key: str | None,
    decision: FaultDecision | None,
) -> tuple[str, list[str]]:
    """Validate the order and create every PENDING member; raises the refusal otherwise. No awaits
    inside: the checks and the commit are atomic with respect to other requests."""
    if decision is not None and decision.rent_refusal is not None:
        raise decision.rent_refusal
    nodes = _cluster_nodes(runtime, body)
    template = _cluster_template(runtime, caller, body)
    for node in nodes:
        check_ports(runtime, node, template)
    cluster_id = str(uuid.uuid4())
    last_rank = len(nodes) - 1
    pods = [
        new_pod(
            caller,
            node,
            node.gpu_count,
            template,
            pod_name=body.pod_name,
            volume_id=None,
            authorized_keys=body.authorized_keys(),
            initial_port_count=body.initial_port_count,
            enable_volume_encryption=bool(body.enable_volume_encryption),
            enable_jupyter=False,
            enable_backups=body.enable_backups,
            termination_hours=None,
            idempotency_key=idempotency_key,
            # A pod fault of the rental befalls its last member, so the others start and are released
            # when it fails (docs/emulator.md, "Fault plans").
            faults=(
                decision.pod_faults.model_copy()
                if decision is not None and rank == last_rank
                else PodFaults()
            ),
            cluster_id=cluster_id,
            cluster_node_index=rank,
            cluster_overlay_ip=overlay_address(rank),
        )
        for rank, node in enumerate(nodes)
    ]
    for pod in pods:
        commit_pod(runtime, caller, pod, f"executor {pod.executor_id}, cluster {cluster_id}")
    return cluster_id, [pod.id for pod in pods]


@router.delete("/clusters/{cluster_id}")
async def delete_cluster(
    cluster_id: str, request: Request, runtime: RuntimeDep, caller: CallerDep
) -> dict[str, Any]:
    """Start deleting every member (a pending one's creation is cancelled); one row per member.

    Members the caller cannot see do not exist for it (none: 404); the scope is checked on every member
    before the first delete (``rent`` for the key's own, else ``manage``).
    """
    members = [
        p
        for p in runtime.state.cluster_members(cluster_id)
        if p.status in VISIBLE_STATUSES and caller.sees(p)
    ]
    if not members:
        raise ApiError(404, "cluster_not_found", "Cluster not found.")
    for pod in members:
        caller.may_remove(pod)
    decision = fault_decision(request)
    extra = decision.pod_faults.slow_deleting_seconds if decision is not None else 0.0
    rows = []
    for pod in members:
        already = pod.status == "DELETING"
        if not already:
            runtime.lifecycle.begin_delete(
                pod, actor=caller.actor, reason="user_initiated", extra_seconds=extra
            )
        rows.append(
            {
                "pod_id": pod.id,
                "pod_name": pod.pod_name,
                "cluster_node_index": pod.cluster_node_index,
                "success": True,
                "message": "Pod is already being deleted." if already else "Pod deletion started.",
            }
        )
    return {"success": True, "cluster_id": cluster_id, "pods": rows}
