"""Cost policies a pipeline fails on: bounds on the hourly increase, the hourly total and the worst case.

Each policy judges a whole :class:`~lium_provider.plan_summary.report.Report` (every stack of a pull
request) and names, in each violation, the resources that cause it. A price that is not known cannot be
shown to be within a bound, so a pod of unknown price violates every bound on money. An estimated price
(a filter field chosen at apply) is judged like a known one: the hourly bounds take the estimate, the
spend bound the estimate's worst case; ``strict_prices`` makes every bound on money refuse estimates too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lium_provider.plan_summary.gitops_contract import Policies
from lium_provider.plan_summary.key_budget import POLICY as KEY_BUDGET_POLICY
from lium_provider.plan_summary.key_budget import within_key_budget
from lium_provider.plan_summary.pricing import PodCost
from lium_provider.plan_summary.report import Bound, Ended, PodSpend, Report, StackReport
from lium_provider.plan_summary.values import code, duration, usd


@dataclass(frozen=True)
class PolicyResult:
    """One policy's verdict: ``policy`` is its command-line name without dashes, e.g. ``max-spend``."""

    policy: str
    limit: float | None
    violations: tuple[str, ...]

    @property
    def passed(self) -> bool:
        return not self.violations


class _Namer:
    """Resource names in violations: the address, and its stack when the report has several."""

    def __init__(self, report: Report) -> None:
        self._several = len(report.stacks) > 1

    def __call__(self, stack: StackReport, address: str) -> str:
        return f"{code(address)} in {code(stack.name)}" if self._several else code(address)


def _pods(report: Report) -> list[tuple[StackReport, PodCost]]:
    return [(s, p) for s in report.stacks for p in s.pods]


def _spends(report: Report) -> list[tuple[StackReport, PodSpend]]:
    return [(s, x) for s in report.stacks for x in s.spends]


def _unpriced(report: Report, name: _Namer, policy: str, strict: bool) -> list[str]:
    """A line for each pod after apply whose price cannot be checked (an estimate too, when ``strict``)."""
    lines = []
    for s, p in _pods(report):
        if not p.exists_after:
            continue
        if p.price_after is None:
            lines.append(
                f"{policy}: {name(s, p.change.address)}: price not known now ({p.basis}), so it cannot be checked"
            )
        elif strict and p.estimate:
            lines.append(f"{policy}: {name(s, p.change.address)}: {ESTIMATE_REFUSED}")
    return lines


MAX_NAMED = 20
"""The most objects one violation line names: a plan that ends thousands still fits a comment."""
ESTIMATE_REFUSED = (
    "the price is an estimate (a filter field is chosen at apply), and --strict-prices refuses estimates"
)


def hourly_delta(pod: PodCost) -> float | None:
    """What ``pod`` adds per hour (negative: saves); None when its new price is not known."""
    if pod.exists_after and pod.price_after is None:
        return None
    after = pod.price_after if pod.exists_after and pod.price_after is not None else 0.0
    before = pod.price_before if pod.existed_before and pod.price_before is not None else 0.0
    return after - before


def _max_hourly_increase(report: Report, limit: float, name: _Namer, strict: bool) -> list[str]:
    policy = "max-hourly-increase"
    violations = _unpriced(report, name, policy, strict)
    change = report.cost.change_per_hour
    if change > limit:
        adders = [
            f"{name(s, p.change.address)} +{usd(delta)}/h"
            for s, p in _pods(report)
            if (delta := hourly_delta(p)) is not None and delta > 0
        ]
        violations.append(
            f"{policy}: the plan adds {usd(change)}/h, more than {usd(limit)}/h: {', '.join(adders)}"
        )
    return violations


def _max_hourly_total(report: Report, limit: float, name: _Namer, strict: bool) -> list[str]:
    policy = "max-hourly-total"
    violations = _unpriced(report, name, policy, strict)
    after = report.cost.after.per_hour
    if after > limit:
        pods = [
            f"{name(s, p.change.address)} {usd(price)}/h"
            for s, p in _pods(report)
            if p.exists_after and (price := p.price_after) is not None
        ]
        violations.append(
            f"{policy}: the pods cost {usd(after)}/h after apply, more than {usd(limit)}/h: {', '.join(pods)}"
        )
    return violations


def _max_spend(report: Report, limit: float, name: _Namer, strict: bool) -> list[str]:
    policy = "max-spend"
    violations: list[str] = []
    for stack, spend in _spends(report):
        where = name(stack, spend.pod.change.address)
        if spend.bound is Bound.UNBOUNDED:
            violations.append(f"{policy}: {where} has no `termination_hours`: its spend is unbounded")
        elif spend.bound is Bound.UNKNOWN:
            violations.append(
                f"{policy}: {where}: `termination_hours` not known now, so it cannot be checked"
            )
        elif spend.usd is None:
            violations.append(f"{policy}: {where}: price not known now, so it cannot be checked")
        elif strict and spend.pod.estimate:
            violations.append(f"{policy}: {where}: {ESTIMATE_REFUSED}")
    spend_total = report.cost.spend
    if spend_total.usd > limit:
        pods = [
            f"{name(s, x.pod.change.address)} {usd(amount)}"
            for s, x in _spends(report)
            if (amount := x.usd) is not None and amount > 0
        ]
        violations.append(
            f"{policy}: the pods can cost {usd(spend_total.usd)} until Lium removes them, more than "
            f"{usd(limit)}: {', '.join(pods)}"
        )
    return violations


def _require_termination_hours(report: Report, name: _Namer) -> list[str]:
    """A line per pod after apply without ``termination_hours``, or whose hours are not known now (they
    cannot be shown to be set)."""
    why = {
        Bound.UNBOUNDED: "has no `termination_hours`",
        Bound.UNKNOWN: "`termination_hours` not known now, so it cannot be checked",
    }
    return [
        f"require-termination-hours: {name(s, x.pod.change.address)} {why[x.bound]}"
        for s, x in _spends(report)
        if x.bound in why
    ]


def ended_text(ending: Ended) -> str:
    """One running pod or cluster the plan deletes, as a violation and the comment say it."""
    uptime = (
        "up for an unknown time" if ending.uptime_seconds is None else f"up {duration(ending.uptime_seconds)}"
    )
    price = "?" if ending.price_per_hour is None else usd(ending.price_per_hour)
    return f"{ending.pod.change.action}, {uptime}, {price}/h"


def _forbid_destroy(report: Report, name: _Namer) -> list[str]:
    return [
        f"forbid-destroy: the plan ends {name(s, e.pod.change.address)} ({ended_text(e)})"
        for s, e in report.ended
    ]


def _max_destroyed(report: Report, limit: int, name: _Namer) -> list[str]:
    ends = report.ended
    if len(ends) <= limit:
        return []
    named = [f"{name(s, e.pod.change.address)} ({ended_text(e)})" for s, e in ends[:MAX_NAMED]]
    more = (
        f" and {len(ends) - MAX_NAMED} more (`summary.json` lists every one)" if len(ends) > MAX_NAMED else ""
    )
    return [
        f"max-destroyed: the plan ends {len(ends)} running pods or clusters, more than {limit}: "
        f"{', '.join(named)}{more}"
    ]


def check(report: Report, policies: Policies) -> list[PolicyResult]:
    """The verdict of every policy asked for in ``policies``, in command-line order."""
    name = _Namer(report)
    limits: list[tuple[str, float | None, Callable[[Report, float, _Namer, bool], list[str]]]] = [
        ("max-hourly-increase", policies.max_hourly_increase, _max_hourly_increase),
        ("max-hourly-total", policies.max_hourly_total, _max_hourly_total),
        ("max-spend", policies.max_spend, _max_spend),
    ]
    results = [
        PolicyResult(policy, limit, tuple(judge(report, limit, name, policies.strict_prices)))
        for policy, limit, judge in limits
        if limit is not None
    ]
    if policies.require_termination_hours:
        violations = _require_termination_hours(report, name)
        results.append(PolicyResult("require-termination-hours", None, tuple(violations)))
    if policies.forbid_destroy:
        results.append(PolicyResult("forbid-destroy", None, tuple(_forbid_destroy(report, name))))
    if policies.max_destroyed is not None:
        violations = _max_destroyed(report, policies.max_destroyed, name)
        results.append(PolicyResult("max-destroyed", policies.max_destroyed, tuple(violations)))
    if policies.within_key_budget is not None:
        violations = within_key_budget(report, policies.within_key_budget)
        results.append(PolicyResult(KEY_BUDGET_POLICY, None, tuple(violations)))
    return results
