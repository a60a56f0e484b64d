"""``--within-key-budget``: whether the API key that will apply the plans can afford them, window by window.

Lium stops a key's pods, and refuses its rents, when a budget of the key is spent
(docs/lium-api.md#api-keys). The key is the job's ``LIUM_API_KEY`` (``GET /users/me`` names it); its budgets
and spend are read with a browser session (``LIUM_SESSION_TOKEN``, ``GET /keys/{id}``), since Lium shows
them to nothing else. Each budget's window is judged on its own: what the plans can still cost in it (for
the lifetime window the worst case until removal; for a day or a month, at most what the pods after apply
cost by the window's end) against what is left. A budget counts every pod of the key, so the key's pods
that the plans leave alone (another stack's, rented by hand) count too: what each costs until its
removal, or until the window ends. When the key cannot be read, the check says so and fails: never a
silent pass.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from lium_provider.api.endpoints import DEFAULT_ENDPOINT, SESSION_TOKEN_ENV
from lium_provider.plan_summary.report import Report
from lium_provider.plan_summary.values import usd

POLICY = "within-key-budget"
SPENT_FIELDS = {"daily": "spent_today_usd", "monthly": "spent_month_usd", "max": "spent_total_usd"}
"""Where a key row says what was spent in each budget window."""


def read_key_budgets(environ: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """What the policy judges by, as JSON-ready facts: ``{"key": label, "windows": {window: [budget, spent]}}``,
    or ``{"unknown": reason}`` when the key or its budgets cannot be read."""
    from lium_provider.api.client import LiumClient  # only where the command runs: the judge needs no client
    from lium_provider.api.errors import InvalidArgument, LiumError
    from lium_provider.api.models import DELETED

    endpoint = environ.get("LIUM_API_URL") or DEFAULT_ENDPOINT
    api_key, token = environ.get("LIUM_API_KEY"), environ.get(SESSION_TOKEN_ENV)
    if not api_key:
        return {"unknown": "LIUM_API_KEY is not set, so the key that will apply the plans is not known"}
    if not token:
        return {
            "unknown": f"{SESSION_TOKEN_ENV} is not set: Lium shows a key's budgets only to a browser session"
        }
    try:
        with (
            LiumClient(endpoint, api_key) as as_key,
            LiumClient(endpoint, None, session_token=token) as as_session,
        ):
            me = as_key.me()
            if not me.api_key_id:
                return {"unknown": "Lium names no id for LIUM_API_KEY (a server without per-key budgets?)"}
            row = as_session.find_api_key(me.api_key_id)
            pods = [p for p in as_key.list_pods() if p.api_key_id == me.api_key_id and p.status != DELETED]
    except (LiumError, InvalidArgument) as exc:
        return {"unknown": f"reading the key failed: {exc}"}
    if row is None:
        return {"unknown": f"the session cannot read the key {me.key_label()} (another workspace?)"}
    windows = {
        window: [budget, getattr(row, SPENT_FIELDS[window]) or 0.0]
        for window, budget in zip(SPENT_FIELDS, row.budgets().values(), strict=True)
        if budget is not None
    }
    now = datetime.now(UTC)
    running = [
        {
            "id": p.id,
            "name": p.pod_name,
            "per_hour": p.price or 0.0,
            "hours_left": None
            if p.removal_scheduled_at is None
            else max(0.0, (p.removal_scheduled_at - now).total_seconds() / 3600),
        }
        for p in pods
    ]
    return {"key": me.key_label(), "windows": windows, "pods": running}


def _planned_pod_ids(report: Report) -> set[str]:
    """The ids of the pods the plans hold already (``lium_pod`` and cluster members): their cost is the
    plans' own, not counted twice."""
    ids: set[str] = set()
    for stack in report.stacks:
        for change in stack.changes:
            before = change.before or {}
            if change.type == "lium_pod" and isinstance(before.get("id"), str):
                ids.add(before["id"])
            for node in before.get("nodes") or [] if change.type == "lium_cluster" else []:
                if isinstance(node, dict) and isinstance(node.get("pod_id"), str):
                    ids.add(node["pod_id"])
    return ids


def _others(facts: Mapping[str, Any], planned: set[str], hours: float | None) -> tuple[float, list[str]]:
    """What the key's pods outside the plans (``planned``: the pods they hold) cost in a window of
    ``hours`` (None: the key's lifetime), and the names of those whose cost there has no bound (no
    removal scheduled)."""
    cost, unbounded = 0.0, []
    for pod in facts.get("pods", []):
        if pod["id"] in planned:
            continue
        removal = pod["hours_left"]  # None: no removal scheduled
        until = removal if hours is None else hours if removal is None else min(hours, removal)
        if until is None:
            unbounded.append(pod["name"])
        else:
            cost += pod["per_hour"] * until
    return cost, unbounded


def hours_left(window: str, now: datetime) -> float | None:
    """Hours until the UTC day or month ``window`` starts again; None for the lifetime window."""
    if window == "daily":
        end = (now + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
    elif window == "monthly":
        end = (now.replace(day=28) + timedelta(days=4)).replace(
            day=1, hour=0, minute=0, second=0, microsecond=0
        )
    else:
        return None
    return (end - now).total_seconds() / 3600


def within_key_budget(report: Report, facts: Mapping[str, Any], now: datetime | None = None) -> list[str]:
    """A line per budget window of the key the plans do not fit in, or why that cannot be known."""
    if "unknown" in facts:
        return [f"{POLICY}: cannot know whether the key can afford the plans: {facts['unknown']}"]
    now = now or datetime.now(UTC)
    spend, hourly = report.cost.spend, report.cost.after.per_hour
    violations = []
    if spend.unknown:
        violations.append(
            f"{POLICY}: price not known now for {', '.join(spend.unknown)}, so it cannot be checked"
        )
    planned = _planned_pod_ids(report)
    for window, (budget, spent) in facts.get("windows", {}).items():
        left = max(0.0, budget - spent)
        hours = hours_left(window, now)
        others, others_unbounded = _others(facts, planned, hours)
        if hours is None and (spend.unbounded or others_unbounded):
            violations.append(
                f"{POLICY}: key {facts['key']}'s {window} budget is {usd(budget)}, and "
                f"{', '.join((*spend.unbounded, *others_unbounded))} has no removal deadline: its spend is "
                "unbounded (set `termination_hours`, or the provider's `default_termination_hours`)"
            )
            continue
        worst = (
            spend.usd
            if hours is None
            else hourly * hours
            if spend.unbounded
            else min(spend.usd, hourly * hours)
        )
        if worst + others > left:
            elsewhere = f" and the key's other pods {usd(others)}" if others else ""
            violations.append(
                f"{POLICY}: key {facts['key']}'s {window} budget is {usd(budget)} with {usd(spent)} spent, "
                f"{usd(left)} left; the pods can cost {usd(worst)} in it{elsewhere}"
            )
    return violations
