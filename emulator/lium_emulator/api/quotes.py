"""What a rent would cost and how long it would take: ``GET /executors/{id}/quote`` and
``GET /executors/deployment-estimate`` (docs/lium-api.md#sdk-routes). Nothing is reserved by either."""

import math
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Query

from lium_emulator.api.caller import CallerDep, OptionalCallerDep
from lium_emulator.api.deps import RuntimeDep
from lium_emulator.api.models import QuoteQuery
from lium_emulator.api.rent import balance_priced_hourly, validated_gpu_count
from lium_emulator.api.templates import visible_template
from lium_emulator.budgets import prepaid_amount
from lium_emulator.catalogs.nodes import Node, pod_share
from lium_emulator.errors import ApiError
from lium_emulator.runtime import Runtime

router = APIRouter()

# The emulator bills GPU time only: volumes, backups and egress cost nothing here.
_UNBILLED_NOTE = "not billed by the emulator"


def _node(runtime: Runtime, executor_id: UUID) -> Node:
    node = runtime.state.catalog.get(str(executor_id))
    if node is None:
        raise ApiError(404, "node_not_found", "Node not found.")
    return node


def _line(item: str, unit: str, rate: float | None, quantity: float, note: str) -> dict[str, Any]:
    amount = None if rate is None else round(rate * quantity, 6)
    return {
        "item": item,
        "unit": unit,
        "rate_usd": rate,
        "quantity": quantity,
        "amount_usd": amount,
        "note": note,
    }


@router.get("/executors/deployment-estimate")
async def deployment_estimate(
    executor_id: UUID, template_id: UUID, runtime: RuntimeDep, caller: CallerDep
) -> dict[str, Any]:
    """Seconds from rent to RUNNING for this template on this node: the emulator's pending time.

    Every image is built in (nothing is pulled), so every template counts as cached.
    """
    _node(runtime, executor_id)
    template = visible_template(runtime, caller, template_id)
    return {
        "estimated_seconds": math.ceil(runtime.config.pending_seconds),
        "is_slow_machine": False,
        "warning_message": None,
        "is_cached_template": True,
        "docker_image_size": template.docker_image_size,
    }


@router.get("/executors/{executor_id}/quote")
async def quote(
    executor_id: UUID,
    query: Annotated[QuoteQuery, Query()],
    runtime: RuntimeDep,
    caller: OptionalCallerDep,
) -> dict[str, Any]:
    """The cost of renting ``gpu_count`` GPUs (default: the free ones, as a rent without a count takes)
    for ``hours``, line by line; the count is checked as a rent checks it. No key needed; a signed-in
    caller also gets ``rent_balance_required_usd``: what the rent's balance check asks for, which prices
    an order without a count as the whole node."""
    node = _node(runtime, executor_id)
    gpu_count = validated_gpu_count(runtime, node, query.gpu_count)
    price_per_hour = round(node.price_per_gpu_hour * gpu_count, 6)
    hours = query.hours
    lines = [
        _line("compute", "hour", price_per_hour, hours, f"{gpu_count} x {node.machine_name}"),
        _line("volume", "GB-hour", 0.0, query.volume_gb * hours, _UNBILLED_NOTE),
        _line("backup", "GB-hour", 0.0, query.backup_gb * hours, _UNBILLED_NOTE),
        _line("egress", "GB", None, 0.0, _UNBILLED_NOTE),
    ]
    share = pod_share(node, gpu_count)
    floor = round(prepaid_amount(price_per_hour), 6)
    body: dict[str, Any] = {
        "executor_id": node.id,
        "gpu_count": gpu_count,
        "hours": hours,
        "price_per_hour": price_per_hour,
        "lines": lines,
        "total_usd": round(sum(line["amount_usd"] or 0.0 for line in lines), 6),
        "pod_balance_floor_usd": floor,
        "allocation": {
            "cpu_count": share.cpu_count,
            "memory_gib": share.memory_gib,
            "local_volume_gb": share.local_volume_gb,
            "storage_quota_gb": share.storage_quota_gb,
        },
    }
    if caller is not None:
        required = prepaid_amount(balance_priced_hourly(node, query.gpu_count))
        body["rent_balance_required_usd"] = round(required, 6)
    return body
