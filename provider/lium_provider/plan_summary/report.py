"""What a plan means in money: per stack, the hourly cost before and after, its change, and the worst case.

The worst case is what the stack's pods can cost until Lium removes them: each pod's price per hour times
its ``termination_hours`` (Lium's rent field: Lium removes a pod that long after it started), read from
the plan's ``after`` values. A pod without it runs until someone deletes it: its spend is *unbounded*.
This module computes; :mod:`~lium_provider.plan_summary.markdown`, :mod:`~lium_provider.plan_summary.
json_format` and :mod:`~lium_provider.plan_summary.policies` present and judge the same numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum

from lium_provider.api.models import DEAD_POD_STATES, DELETED, DELETING, REBOOT_FAILED
from lium_provider.plan_summary.cluster_pricing import price_cluster
from lium_provider.plan_summary.parsing import ResourceChange, parse_plan_document, parse_timestamp
from lium_provider.plan_summary.pricing import OfferBook, PodCost, price_pod

HOURS_PER_MONTH = 730
POD_TYPE = "lium_pod"
CLUSTER_TYPE = "lium_cluster"
TERMINATION_ATTRIBUTE = "termination_hours"
# The verbs a summary counts, in the order it names them.
COUNTED_ACTIONS = ("create", "update", "replace", "destroy", "forget")
# What ends a pod's or cluster's work: Terraform deletes it (a `removed` block that keeps it forgets it).
ENDING_ACTIONS = ("destroy", "replace")


@dataclass(frozen=True)
class Total:
    """A sum of pod prices per hour; ``unknown`` pods were left out because their price is not known yet,
    ``estimated`` pods are counted at an estimate (:class:`~lium_provider.plan_summary.pricing.PodCost`)."""

    per_hour: float
    unknown: int
    estimated: int = 0

    @property
    def per_month(self) -> float:
        return self.per_hour * HOURS_PER_MONTH


def total(prices: Sequence[float | None], estimated: int = 0) -> Total:
    """The :class:`Total` of ``prices`` (None: not known), ``estimated`` of them estimates."""
    return Total(sum(p for p in prices if p is not None), sum(1 for p in prices if p is None), estimated)


class Bound(Enum):
    """Whether a pod's time until Lium removes it is known from the plan."""

    BOUNDED = "bounded"  # termination_hours is set
    UNBOUNDED = "unbounded"  # no termination_hours: the pod runs until deleted
    UNKNOWN = "unknown"  # termination_hours is set but only known after apply, or sensitive


@dataclass(frozen=True)
class PodSpend:
    """The worst case of one pod that exists after the plan: its price for all of ``termination_hours``."""

    pod: PodCost
    bound: Bound
    termination_hours: float | None

    @property
    def usd(self) -> float | None:
        """The worst price times termination hours; None when unbounded or when either is not known."""
        price = self.pod.price_worst
        if self.termination_hours is None or price is None:
            return None
        return price * self.termination_hours


def termination_hours(change: ResourceChange) -> tuple[Bound, float | None]:
    """The pod's ``termination_hours`` after the plan (a forgotten pod's: the last it had), and whether
    it bounds the pod's life."""
    side = "after" if change.after is not None else "before"
    if change.unknown(TERMINATION_ATTRIBUTE) or change.sensitive(side, TERMINATION_ATTRIBUTE):
        return Bound.UNKNOWN, None
    value = change.value(side, TERMINATION_ATTRIBUTE)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return Bound.BOUNDED, float(value)
    return Bound.UNBOUNDED, None


@dataclass(frozen=True)
class Spend:
    """The worst-case spend of some pods: a sum in USD, with the pods it could not bound or price."""

    usd: float
    unbounded: tuple[str, ...]
    unknown: tuple[str, ...]

    @property
    def bounded(self) -> bool:
        return not self.unbounded


def spend_of(spends: Sequence[PodSpend]) -> Spend:
    """The :class:`Spend` of ``spends``: unbounded pods and pods of unknown price or hours are listed."""
    unbounded = tuple(s.pod.change.address for s in spends if s.bound is Bound.UNBOUNDED)
    unknown = tuple(s.pod.change.address for s in spends if s.bound is not Bound.UNBOUNDED and s.usd is None)
    return Spend(sum(s.usd for s in spends if s.usd is not None), unbounded, unknown)


@dataclass(frozen=True)
class Cost:
    """Hourly cost before and after a plan, and the worst-case spend of what runs after it."""

    before: Total
    after: Total
    spend: Spend

    @property
    def change_per_hour(self) -> float:
        return self.after.per_hour - self.before.per_hour

    @property
    def change_percent(self) -> float | None:
        """The change relative to before, in percent; None when nothing was billed before."""
        return self.change_per_hour / self.before.per_hour * 100 if self.before.per_hour else None

    @property
    def exact(self) -> bool:
        """False when a price is not known (the hourly numbers are lower bounds) or is an estimate."""
        return not (self.before.unknown or self.after.unknown or self.after.estimated)


@dataclass(frozen=True)
class Ended:
    """A running pod or cluster the plan deletes (destroys or replaces): the work on it ends."""

    pod: PodCost
    uptime_seconds: float | None
    """How long it has run when the plan was made (from its ``started_at``); None when not known."""

    @property
    def price_per_hour(self) -> float | None:
        return self.pod.price_before


def ended(pods: Sequence[PodCost], planned_at: datetime | None) -> tuple[Ended, ...]:
    """The pods and clusters among ``pods`` whose work the plan ends: deleted while they run."""
    found = []
    for pod in pods:
        change = pod.change
        status = change.value("before", "status")
        if change.action not in ENDING_ACTIONS or change.before is None:
            continue
        if isinstance(status, str) and status in {*DEAD_POD_STATES, DELETING, DELETED} - {REBOOT_FAILED}:
            continue  # nothing runs on it any more (a failed switch or reboot still holds its node)
        started = parse_timestamp(change.value("before", "started_at"))
        uptime = (planned_at - started).total_seconds() if started and planned_at else None
        found.append(Ended(pod, max(uptime, 0.0) if uptime is not None else None))
    return tuple(found)


@dataclass(frozen=True)
class StackReport:
    """One plan file: its changes, its priced pods and what they cost, and the running work it ends."""

    name: str
    changes: tuple[ResourceChange, ...]
    pods: tuple[PodCost, ...]
    spends: tuple[PodSpend, ...]
    feed_error: str | None
    ended: tuple[Ended, ...] = ()

    @property
    def counts(self) -> dict[str, int]:
        """How many resources each counted verb touches (:data:`COUNTED_ACTIONS`)."""
        return {verb: sum(1 for c in self.changes if c.action == verb) for verb in COUNTED_ACTIONS}

    @property
    def cost(self) -> Cost:
        return cost_of(self.pods, self.spends)


def cost_of(pods: Sequence[PodCost], spends: Sequence[PodSpend]) -> Cost:
    """The :class:`Cost` of ``pods`` (any stacks) whose worst cases are ``spends``."""
    return Cost(
        before=total([p.price_before for p in pods if p.existed_before]),
        after=total(
            [p.price_after for p in pods if p.exists_after],
            sum(1 for p in pods if p.exists_after and p.estimate),
        ),
        spend=spend_of(spends),
    )


def report_stack(name: str, text: str, book: OfferBook) -> StackReport:
    """The report of plan JSON ``text``, priced with ``book``; PlanError if ``text`` is not a plan."""
    plan = parse_plan_document(text)
    changes = plan.changes
    priced = {POD_TYPE: price_pod, CLUSTER_TYPE: price_cluster}
    pods = [
        # A deposed object too: a create_before_destroy replacement whose delete failed, still billed.
        priced[c.type](c, book)
        for c in changes
        if c.type in priced and c.action != "read"
    ]
    spends = [PodSpend(p, *termination_hours(p.change)) for p in pods if p.exists_after]
    return StackReport(
        name, tuple(changes), tuple(pods), tuple(spends), book.error, ended(pods, plan.timestamp)
    )


@dataclass(frozen=True)
class Report:
    """Every stack of one summary (one pull request), and their combined cost."""

    stacks: tuple[StackReport, ...]

    @property
    def ended(self) -> list[tuple[StackReport, Ended]]:
        """Every stack's running work the plans end, with its stack."""
        return [(s, e) for s in self.stacks for e in s.ended]

    @property
    def cost(self) -> Cost:
        return cost_of([p for s in self.stacks for p in s.pods], [x for s in self.stacks for x in s.spends])
