"""Node routes: the public nodes feed and the executor listing (docs/lium-api.md#nodes-feed, #executors)."""

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from lium_emulator.api.deps import AccountDep, RuntimeDep
from lium_emulator.timeutil import utcnow
from lium_emulator.views import executor_object, feed_node

router = APIRouter()


@router.get("/public/v1/nodes")
async def get_public_nodes(request: Request, runtime: RuntimeDep) -> JSONResponse:
    """Every node rentable now (free GPUs ≥ its smallest order); no API key needed.

    Unlike Lium's snapshot (rebuilt at most once a minute), this feed is always current.
    """
    state = runtime.state
    base = str(request.base_url).rstrip("/")
    nodes = []
    for node in state.catalog.nodes.values():
        available = state.available_gpus(node)
        if available >= node.min_rentable_gpu_count:
            nodes.append(feed_node(node, available, base))
    body = {"generated_at": utcnow().isoformat(timespec="seconds") + "Z", "count": len(nodes), "nodes": nodes}
    return JSONResponse(body, headers={"Access-Control-Allow-Origin": "*"})


@router.get("/executors")
async def list_executors(runtime: RuntimeDep, account: AccountDep) -> list[dict[str, Any]]:
    """Every node with a free GPU, as executor rows (query filters are not applied)."""
    state = runtime.state
    rows = []
    for node in state.catalog.nodes.values():
        available = state.available_gpus(node)
        if available >= node.min_rentable_gpu_count:
            rows.append(executor_object(node, available, price_per_gpu=node.price_per_gpu_hour))
    return rows
