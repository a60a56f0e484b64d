"""``GET /billing/statement`` (Lium's SDK ``billing_statement``): what each pod of the caller was
charged, day by day. The emulator bills per second from RUNNING until the delete request (see
``state.billed_interval``), so a pod's days are that interval cut at UTC midnights."""

from datetime import date, datetime, time, timedelta
from typing import Any
from uuid import UUID

from fastapi import APIRouter

from lium_emulator.api.caller import CallerDep
from lium_emulator.api.deps import RuntimeDep
from lium_emulator.errors import ApiError
from lium_emulator.records.entities import Pod
from lium_emulator.records.state import billed_interval
from lium_emulator.records.timeutil import iso, utcnow

router = APIRouter()


def billed_days(start: datetime, end: datetime) -> list[tuple[date, float]]:
    """``[start, end)`` as (UTC day, seconds billed that day), oldest first."""
    days = []
    moment = start
    while moment < end:
        midnight = datetime.combine(moment.date() + timedelta(days=1), time())
        until = min(end, midnight)
        days.append((moment.date(), (until - moment).total_seconds()))
        moment = until
    return days


def _pod_statement(pod: Pod, now: datetime, first: date | None, last: date | None) -> dict[str, Any] | None:
    """The pod's charges within [first, last], or None when it was not billed then."""
    interval = billed_interval(pod, now)
    if interval is None:
        return None
    kept = [
        (day, seconds)
        for day, seconds in billed_days(*interval)
        if (first is None or day >= first) and (last is None or day <= last)
    ]
    if not kept:
        return None
    seconds_total = sum(seconds for _, seconds in kept)
    return {
        "pod_id": pod.id,
        "pod_name": pod.pod_name,
        "gpu_name": pod.gpu_name,
        "gpu_count": pod.gpu_count,
        "price": pod.price,
        "api_key_id": pod.api_key_id,
        "created_at": iso(pod.created_at),
        "removed_at": iso(pod.deleting_at),
        "billed_seconds": round(seconds_total, 3),
        "total": round(pod.price * seconds_total / 3600, 6),
        "days": [
            {
                "day": day.isoformat(),
                "billed_seconds": round(seconds, 3),
                "amount": round(pod.price * seconds / 3600, 6),
            }
            for day, seconds in kept
        ],
        "last_billed_at": iso(interval[1]),
    }


@router.get("/billing/statement")
async def billing_statement(
    runtime: RuntimeDep,
    caller: CallerDep,
    start_day: date | None = None,
    end_day: date | None = None,
    api_key_id: UUID | None = None,
) -> dict[str, Any]:
    """Every pod of the caller billed within ``start_day``..``end_day`` (UTC, inclusive, both optional),
    removed ones included, most recently billed first; ``total`` is their sum."""
    if start_day is not None and end_day is not None and start_day > end_day:
        raise ApiError(400, "invalid_period", "start_day must not be after end_day.")
    now = utcnow()
    statements = []
    for pod in runtime.state.owned_pods(caller.workspace_id):
        if not caller.sees(pod) or (api_key_id is not None and pod.api_key_id != str(api_key_id)):
            continue
        statement = _pod_statement(pod, now, start_day, end_day)
        if statement is not None:
            key = runtime.state.api_keys.get(pod.api_key_id or "")
            statement["api_key_name"] = key.name if key is not None else None
            statements.append(statement)
    statements.sort(key=lambda s: s["last_billed_at"], reverse=True)
    return {
        "start_day": start_day.isoformat() if start_day else None,
        "end_day": end_day.isoformat() if end_day else None,
        "total": round(sum(s["total"] for s in statements), 6),
        "pods": statements,
    }
