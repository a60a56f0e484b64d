"""The summary as JSON for other tools: ``lium-tf plan-summary --format json``.

The document is versioned (``schema_version``, :data:`SCHEMA_VERSION`) and described by the JSON Schema
``plan-summary.schema.json`` next to this module (documented in docs/plan-summary.md). A new optional
field keeps the version; removing or changing the meaning of a field raises it. Amounts are USD floats;
``null`` means "not known now". Strings are the plan's values with sensitive and unknown parts masked,
as in the Markdown, except that ``price_basis_markdown`` is Markdown.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lium_provider.plan_summary.policies import PolicyResult
from lium_provider.plan_summary.pricing import PodCost
from lium_provider.plan_summary.report import HOURS_PER_MONTH, Cost, PodSpend, Report, StackReport, Total

SCHEMA_VERSION = 1
SCHEMA_PATH = Path(__file__).with_name("plan-summary.schema.json")


def _total(amount: Total) -> dict[str, Any]:
    return {"usd": amount.per_hour, "unknown_pods": amount.unknown, "estimated_pods": amount.estimated}


def _cost(cost: Cost) -> dict[str, Any]:
    return {
        "hourly_before": _total(cost.before),
        "hourly_after": _total(cost.after),
        "hourly_change_usd": cost.change_per_hour,
        "hourly_change_percent": cost.change_percent,
        "monthly_before_usd": cost.before.per_month,
        "monthly_after_usd": cost.after.per_month,
        "monthly_change_usd": cost.change_per_hour * HOURS_PER_MONTH,
        "exact": cost.exact,
        "worst_case_spend": {
            "usd": cost.spend.usd if cost.spend.bounded else None,
            "bounded": cost.spend.bounded,
            "unbounded_pods": list(cost.spend.unbounded),
            "unknown_pods": list(cost.spend.unknown),
        },
    }


def _pod(pod: PodCost, spend: PodSpend | None) -> dict[str, Any]:
    return {
        "address": pod.change.address,
        "name": pod.name,
        "action": pod.change.action,
        "gpu": pod.gpu,
        "gpu_count": pod.gpu_count,
        "exists_after": pod.exists_after,
        "price_per_hour_before": pod.price_before if pod.existed_before else None,
        "price_per_hour_after": pod.price_after if pod.exists_after else None,
        "price_basis_markdown": pod.basis,
        "price_estimate": pod.estimate,
        "worst_case_price_per_hour": pod.price_worst if pod.exists_after else None,
        "worst_case_price_basis": pod.worst_basis.value if pod.worst_basis else None,
        "termination_hours": spend.termination_hours if spend else None,
        "lifetime": spend.bound.value if spend else None,
        "worst_case_spend_usd": spend.usd if spend else None,
    }


def _stack(stack: StackReport) -> dict[str, Any]:
    spends = {id(s.pod): s for s in stack.spends}
    return {
        "name": stack.name,
        "counts": stack.counts,
        "cost": _cost(stack.cost),
        "pods": [_pod(p, spends.get(id(p))) for p in stack.pods],
        "changes": [
            {
                "address": c.address,
                "type": c.type,
                "action": c.action,
                "actions": list(c.actions),
                "deposed": c.deposed,
                "importing": c.importing,
                "reason": c.reason,
            }
            for c in stack.changes
            if c.action not in ("keep", "read")
        ],
        "feed_error": stack.feed_error,
        "ends": [
            {
                "address": e.pod.change.address,
                "type": e.pod.change.type,
                "action": e.pod.change.action,
                "uptime_seconds": e.uptime_seconds,
                "price_per_hour": e.price_per_hour,
            }
            for e in stack.ended
        ],
    }


def document(report: Report, policies: Sequence[PolicyResult] = ()) -> dict[str, Any]:
    """The JSON document of ``report`` and the verdicts of ``policies`` (schema version 1)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "currency": "USD",
        "hours_per_month": HOURS_PER_MONTH,
        "cost": _cost(report.cost),
        "ends_running": len(report.ended),
        "stacks": [_stack(s) for s in report.stacks],
        "policies": [
            {"policy": r.policy, "limit": r.limit, "passed": r.passed, "violations": list(r.violations)}
            for r in policies
        ],
    }


def render(report: Report, policies: Sequence[PolicyResult] = ()) -> str:
    """:func:`document` as indented JSON text, ending with a newline."""
    return json.dumps(document(report, policies), indent=2, ensure_ascii=False) + "\n"


def schema() -> dict[str, Any]:
    """The JSON Schema the document follows."""
    loaded: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    return loaded
