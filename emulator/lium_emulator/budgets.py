"""Money at rent, and the per-key budgets (docs/lium-api.md#budgets).

One rule prices an order against both the balance and a key's budgets: an order of ``hourly`` USD an
hour needs ``MIN_PREPAID_MINUTES`` of it (``prepaid_amount``). The balance refuses with 403
``insufficient_balance``; a key's budget whose remaining amount in any window (UTC day, UTC month,
lifetime) cannot cover it refuses with 402 ``API_KEY_BUDGET_EXCEEDED`` and writes the refusal to the key's
ledger. A key's spend is what the pods it rented were billed (``billed_interval``) within the window.

``BudgetWatch`` is the billing tick: it deletes the billed pods of every key whose spend reached a budget.
"""

import asyncio
import logging
import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lium_emulator.errors import ApiError
from lium_emulator.records.access import ApiKey, BudgetRefusal, BudgetWindow
from lium_emulator.records.entities import Account
from lium_emulator.records.state import EmulatorState, billed_interval
from lium_emulator.records.timeutil import iso, utcnow

if TYPE_CHECKING:
    from lium_emulator.runtime import Runtime

logger = logging.getLogger(__name__)

MIN_PREPAID_MINUTES = 15
WINDOWS: tuple[BudgetWindow, ...] = ("daily", "monthly", "max")
BUDGET_REASON = "api_key_budget_exceeded"
_WINDOW_WORDS = {"daily": "daily", "monthly": "monthly", "max": "lifetime (max)"}


def prepaid_amount(hourly_price: float) -> float:
    """What an order of ``hourly_price`` USD an hour must be covered by: ``MIN_PREPAID_MINUTES`` of it."""
    return hourly_price * MIN_PREPAID_MINUTES / 60


def window_start(window: BudgetWindow, now: datetime) -> datetime | None:
    """When ``window`` began (naive UTC): the UTC day, the UTC month, or None for the key's lifetime."""
    if window == "daily":
        return now.replace(hour=0, minute=0, second=0, microsecond=0)
    if window == "monthly":
        return now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return None


def key_spent(state: EmulatorState, key_id: str, window: BudgetWindow, now: datetime) -> float:
    """USD the pods the key rented were billed within ``window`` up to ``now``."""
    start = window_start(window, now)
    total = 0.0
    for pod in state.pods.values():
        if pod.api_key_id != key_id:
            continue
        interval = billed_interval(pod, now)
        if interval is None:
            continue
        begin = interval[0] if start is None else max(interval[0], start)
        if interval[1] > begin:
            total += pod.price * (interval[1] - begin).total_seconds() / 3600
    return round(total, 6)


def spent_fields(state: EmulatorState, key: ApiKey, now: datetime) -> dict[str, float]:
    """``spent_today_usd``, ``spent_month_usd``, ``spent_total_usd`` of a key row."""
    return {
        "spent_today_usd": round(key_spent(state, key.id, "daily", now), 2),
        "spent_month_usd": round(key_spent(state, key.id, "monthly", now), 2),
        "spent_total_usd": round(key_spent(state, key.id, "max", now), 2),
    }


def check_order(
    runtime: "Runtime",
    *,
    key: ApiKey | None,
    payer: Account,
    hourly: float | None,
    route: str,
    ordered: str = "node",
) -> None:
    """The money checks of a rent, before its ``Idempotency-Key`` is looked at: the key's budgets
    (402), then the payer's balance (403). ``hourly`` None: nothing to price (no such node)."""
    if hourly is None:
        return
    needed = prepaid_amount(hourly)
    if key is not None:
        check_key_budget(runtime.state, key, needed, route)
    balance = runtime.state.balance(payer, utcnow())
    if balance < needed:
        raise ApiError(
            403,
            "insufficient_balance",
            f"Insufficient balance. This {ordered} costs ${hourly:.2f}/hour, so renting it requires at least "
            f"${needed:.2f} ({MIN_PREPAID_MINUTES} minutes of runtime). Your balance is ${balance:.2f}.",
            hint="Top up the balance and try again.",
        )


def check_key_budget(state: EmulatorState, key: ApiKey, needed: float, route: str) -> None:
    """402 ``API_KEY_BUDGET_EXCEEDED`` (and a ledger row) when a window's remaining budget is below
    ``needed``; the first such window of daily, monthly, max is named."""
    now = utcnow()
    for window in WINDOWS:
        budget = key.budget(window)
        if budget is None:
            continue
        spent = key_spent(state, key.id, window, now)
        if budget - spent >= needed:
            continue
        refusal = BudgetRefusal(
            id=str(uuid.uuid4()),
            api_key_id=key.id,
            created_at=now,
            window=window,
            route=route,
            amount_usd=round(needed, 2),
            budget_usd=budget,
            spent_usd=round(spent, 2),
        )
        state.refusals.append(refusal)
        state.save(refusal)
        sentence = (
            f"API key '{key.name}''s {_WINDOW_WORDS[window]} budget cannot cover this order: ${budget:.2f} budget, "
            f"${spent:.2f} spent, this order needs ${needed:.2f} ({MIN_PREPAID_MINUTES} minutes of its price)."
        )
        raise ApiError(
            402,
            "API_KEY_BUDGET_EXCEEDED",
            sentence,
            hint="Raise the key's budget (lium keys budget) or wait for the window to reset.",
            extra={
                "message": {
                    "message": sentence,
                    "window": window,
                    "budget_usd": budget,
                    "spent_usd": round(spent, 2),
                    "amount_usd": round(needed, 2),
                    "route": route,
                    "api_key_id": key.id,
                }
            },
        )


def refusal_object(refusal: BudgetRefusal) -> dict[str, Any]:
    """A row of ``GET /keys/{id}/refusals``."""
    return {
        "created_at": iso(refusal.created_at),
        "window": refusal.window,
        "route": refusal.route,
        "amount_usd": refusal.amount_usd,
        "budget_usd": refusal.budget_usd,
        "spent_usd": refusal.spent_usd,
        "api_key_id": refusal.api_key_id,
    }


def exhausted_window(
    state: EmulatorState, key: ApiKey, now: datetime
) -> tuple[BudgetWindow, float, float] | None:
    """The first window whose spend reached the key's budget: (window, budget, spent), or None."""
    for window in WINDOWS:
        budget = key.budget(window)
        if budget is None:
            continue
        spent = key_spent(state, key.id, window, now)
        if spent >= budget:
            return window, budget, spent
    return None


class BudgetWatch:
    """The billing tick: every ``interval`` seconds, deletes the billed pods of keys past a budget."""

    def __init__(self, runtime: "Runtime", interval: float) -> None:
        self._runtime = runtime
        self._interval = interval

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                self.tick()
            except Exception:
                logger.exception("the budget tick failed")

    def tick(self) -> None:
        """One pass: stop what exhausted keys still have billed."""
        state = self._runtime.state
        now = utcnow()
        billed = [
            p for p in state.pods.values() if p.api_key_id and p.running_at and not p.billing_stopped_at
        ]
        by_key: dict[str, list[Any]] = {}
        for pod in billed:
            by_key.setdefault(pod.api_key_id or "", []).append(pod)
        for key_id, pods in by_key.items():
            key = state.api_keys.get(key_id)
            if key is None:
                continue
            hit = exhausted_window(state, key, now)
            if hit is None:
                continue
            window, budget, spent = hit
            detail = (
                f"API key '{key.name}' ({key.id}) reached its {_WINDOW_WORDS[window]} budget "
                f"(window {window}): ${spent:.2f} spent of ${budget:.2f}"
            )
            for pod in pods:
                self._runtime.lifecycle.begin_delete(pod, actor=None, reason=BUDGET_REASON, detail=detail)
