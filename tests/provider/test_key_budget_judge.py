"""The ``--within-key-budget`` judge on given facts: a budget counts every pod of the key, so the key's pods
outside the plans count too, each until its removal or the window's end, and those the plans hold
already are not counted twice."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from lium_provider.plan_summary.key_budget import within_key_budget
from lium_provider.plan_summary.parsing import ResourceChange
from lium_provider.plan_summary.report import Report, StackReport

NOON = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


def kept_pod(pod_id: str) -> ResourceChange:
    """A ``lium_pod`` the plan leaves as it is."""
    row = {"id": pod_id, "name": "kept"}
    return ResourceChange(
        address="lium_pod.kept",
        type="lium_pod",
        actions=("no-op",),
        before=row,
        after=row,
        after_unknown={},
        before_sensitive={},
        after_sensitive={},
        replace_paths=(),
    )


def facts(*pods: dict[str, Any], daily: float = 100.0, spent: float = 0.0) -> dict[str, Any]:
    return {"key": "'ci' (k1)", "windows": {"daily": [daily, spent]}, "pods": list(pods)}


def pod(pod_id: str, per_hour: float, hours_left: float | None) -> dict[str, Any]:
    return {"id": pod_id, "name": f"pod-{pod_id}", "per_hour": per_hour, "hours_left": hours_left}


def test_the_keys_other_pods_count_until_the_day_ends() -> None:
    empty = Report(stacks=())
    # Twelve hours left in the UTC day: 10 USD an hour costs 120 of the 100 left.
    over = within_key_budget(empty, facts(pod("a", 10.0, None)), now=NOON)
    assert len(over) == 1 and "the key's other pods $120.00" in over[0], over
    # Removed in two hours: 20 USD fits.
    assert within_key_budget(empty, facts(pod("a", 10.0, 2.0)), now=NOON) == []


def test_a_pod_the_plan_holds_is_not_counted_twice() -> None:
    stack = StackReport("s", (kept_pod("a"),), (), (), None)
    assert within_key_budget(Report(stacks=(stack,)), facts(pod("a", 10.0, None)), now=NOON) == []


def test_an_other_pod_without_removal_makes_the_lifetime_budget_unbounded() -> None:
    lifetime = {"key": "'ci' (k1)", "windows": {"max": [1000.0, 0.0]}, "pods": [pod("b", 1.0, None)]}
    said = within_key_budget(Report(stacks=()), lifetime, now=NOON)
    assert len(said) == 1 and "pod-b has no removal deadline" in said[0], said
    lifetime["pods"] = [pod("b", 1.0, 24.0)]
    assert within_key_budget(Report(stacks=()), lifetime, now=NOON) == []
