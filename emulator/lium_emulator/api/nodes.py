"""Node routes: the public nodes feed, the executor listing with its filters, the machine names and the
default image Lium's SDK resolves before renting (docs/lium-api.md#nodes-feed, #executors, #sdk-routes)."""

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse

from lium_emulator.api.caller import CallerDep, OptionalCallerDep
from lium_emulator.api.deps import RuntimeDep
from lium_emulator.api.models import ExecutorFilters
from lium_emulator.catalogs.nodes import Node
from lium_emulator.catalogs.templates import DEFAULT_POD_IMAGE, split_image_reference
from lium_emulator.records.state import EmulatorState
from lium_emulator.records.timeutil import utcnow
from lium_emulator.views import available_ports, executor_object, feed_node

router = APIRouter()


def rentable_nodes(state: EmulatorState) -> list[tuple[Node, int]]:
    """Every node rentable now (free GPUs ≥ its smallest order), with its free GPU count."""
    listed = []
    for node in state.catalog.nodes.values():
        available = state.available_gpus(node)
        if available >= node.min_rentable_gpu_count:
            listed.append((node, available))
    return listed


@router.get("/public/v1/nodes")
async def get_public_nodes(request: Request, runtime: RuntimeDep) -> JSONResponse:
    """Every node rentable now; no API key needed.

    Unlike Lium's snapshot (rebuilt at most once a minute), this feed is always current.
    """
    base = str(request.base_url).rstrip("/")
    nodes = [feed_node(node, available, base) for node, available in rentable_nodes(runtime.state)]
    body = {"generated_at": utcnow().isoformat(timespec="seconds") + "Z", "count": len(nodes), "nodes": nodes}
    return JSONResponse(body, headers={"Access-Control-Allow-Origin": "*"})


def _within_radius(node: Node, filters: ExecutorFilters) -> bool:
    """True unless a full radius (lat, lon, max_distance_mile) is asked for and the node is outside it."""
    if filters.lat is None or filters.lon is None or filters.max_distance_mile is None:
        return True
    miles = node.miles_from(filters.lat, filters.lon)
    return miles is not None and miles <= filters.max_distance_mile


def _matches(node: Node, filters: ExecutorFilters) -> bool:
    machines = filters.wanted_machines()
    return (
        _within_radius(node, filters)
        and (machines is None or node.machine_name in machines)
        and (filters.gpu_count_gte is None or node.gpu_count >= filters.gpu_count_gte)
        and (filters.gpu_count_lte is None or node.gpu_count <= filters.gpu_count_lte)
        and (not filters.nvlink or node.nvlink is True)
        and (filters.min_download_mbps is None or node.network_download_mbps >= filters.min_download_mbps)
    )


@router.get("/executors")
async def list_executors(
    runtime: RuntimeDep, caller: OptionalCallerDep, filters: Annotated[ExecutorFilters, Query()]
) -> list[dict[str, Any]]:
    """The rentable nodes that pass the filters, as executor rows; no key needed (then without IPs).

    ``gpu_count_gte``/``gpu_count_lte`` bound the host's GPU count (the row's ``gpu_count``), as
    ``ls(gpu_count=8)`` asks for 8-GPU hosts.
    """
    state = runtime.state
    return [
        executor_object(
            node,
            available,
            available_ports(state, node),
            price_per_gpu=node.price_per_gpu_hour,
            with_ip=caller is not None,
        )
        for node, available in rentable_nodes(state)
        if _matches(node, filters)
    ]


@router.get("/machines")
async def list_machines(runtime: RuntimeDep, caller: OptionalCallerDep) -> list[dict[str, str]]:
    """Every machine name of the fleet, rented out or not, in catalog order; no key needed (``caller``
    is there so that a key that is sent is still checked)."""
    names = dict.fromkeys(node.machine_name for node in runtime.state.catalog.nodes.values())
    return [{"name": name} for name in names]


@router.get("/executors/default-docker-image")
async def default_docker_image(
    caller: CallerDep, gpu_model: str | None = None, driver_version: str | None = None
) -> list[dict[str, str]]:
    """The image a pod gets when it is rented without a template: the same for every GPU and driver, so
    ``gpu_model`` and ``driver_version`` are accepted and not used."""
    image, tag, _digest = split_image_reference(DEFAULT_POD_IMAGE)
    return [{"docker_image": image, "docker_image_tag": tag}]
