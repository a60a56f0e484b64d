"""The fault plan: seeded, per-route fault injection and rate limits (format in docs/emulator.md).

A plan is a list of rules. Each rule matches requests by HTTP method and a path pattern relative to
``/api`` (``*`` = one path segment, ``**`` = anything), counts every match, and fires on the first N
matches, on every Nth, with a probability (from the plan's seeded RNG), or always; ``times`` caps
the total firings. ``decide`` turns the fired rules of one request into a ``FaultDecision`` that the
edge middleware (``edge.py``) and the handlers act on.
"""

import math
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from lium_emulator.errors import ApiError
from lium_emulator.records.entities import PodFaults

FaultKind = Literal[
    "status",
    "latency",
    "rate_limit",
    "drop_after_commit",
    "garbage",
    "rent_refusal",
    "node_rent_in_progress",
    "node_unavailable",
    "pod_state_conflict",
    "stuck_pending",
    "creation_failed",
    "ssh_late",
    "slow_deleting",
]

# Shorthand kinds: a fixed status and code on top of a base kind.
_ALIASES: dict[str, tuple[str, int, str, str]] = {
    "node_rent_in_progress": (
        "rent_refusal",
        409,
        "node_rent_in_progress",
        "Another rental of this node is in progress.",
    ),
    "node_unavailable": ("rent_refusal", 400, "node_unavailable", "Node is not available."),
    "pod_state_conflict": (
        "status",
        409,
        "pod_state_conflict",
        "The pod cannot be deleted in its current state.",
    ),
}
_SECONDS_REQUIRED = {"latency", "ssh_late", "slow_deleting"}
_CODE_PATTERN = r"^[A-Za-z][A-Za-z0-9_]{0,63}$"


class FaultRule(BaseModel):
    """One rule of the plan."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, min_length=1, max_length=100)
    method: str = Field(default="*", pattern=r"^(\*|[A-Za-z]+)$")
    path: str = Field(pattern=r"^/", max_length=300)
    kind: FaultKind
    probability: float | None = Field(default=None, ge=0, le=1)
    every: int | None = Field(default=None, ge=1)
    first: int | None = Field(default=None, ge=1)
    times: int | None = Field(default=None, ge=1)
    status: int | None = Field(default=None, ge=400, le=599)
    code: str | None = Field(default=None, pattern=_CODE_PATTERN)
    message: str | None = Field(default=None, max_length=500)
    seconds: float | None = Field(default=None, ge=0, le=3600)
    after_commit: bool = False
    body: Literal["truncated", "wrong_type", "not_json"] = "truncated"

    @model_validator(mode="after")
    def _check_kind_fields(self) -> "FaultRule":
        if sum(x is not None for x in (self.probability, self.every, self.first)) > 1:
            raise ValueError("give at most one of probability, every, first")
        if self.kind in _SECONDS_REQUIRED and self.seconds is None:
            raise ValueError(f"kind {self.kind} needs seconds")
        if self.kind == "rent_refusal" and (self.status is None or self.status >= 500 or self.code is None):
            raise ValueError("kind rent_refusal needs a 4xx status and a code")
        if self.after_commit and self.kind != "status":
            raise ValueError("after_commit applies to kind status only")
        return self


class RateLimit(BaseModel):
    """A token bucket per account (or per client IP without a valid key) for matching requests."""

    model_config = ConfigDict(extra="forbid")

    method: str = Field(default="*", pattern=r"^(\*|[A-Za-z]+)$")
    path: str = Field(pattern=r"^/", max_length=300)
    per_minute: int = Field(ge=1, le=100_000)


class FaultPlan(BaseModel):
    """A complete plan: the RNG seed, the rules (evaluated in order) and the rate limits."""

    model_config = ConfigDict(extra="forbid")

    seed: int = 0
    rules: list[FaultRule] = Field(default_factory=list)
    rate_limits: list[RateLimit] = Field(default_factory=list)

    @model_validator(mode="after")
    def _name_rules(self) -> "FaultPlan":
        for index, rule in enumerate(self.rules, start=1):
            if rule.name is None:
                rule.name = f"rule-{index}"
        names = [rule.name for rule in self.rules]
        if len(set(names)) != len(names):
            raise ValueError("rule names must be unique")
        return self


@dataclass
class FaultDecision:
    """What the fault plan does to one request."""

    reject: ApiError | None = None  # answer this now; the request is not executed
    latency_seconds: float = 0.0
    latency_consumed: bool = False  # set by a handler that held the latency itself (rent)
    drop_after_commit: bool = False
    error_after_commit: ApiError | None = None
    garbage: str | None = None
    rent_refusal: ApiError | None = None
    pod_faults: PodFaults = field(default_factory=PodFaults)
    fired: list[str] = field(default_factory=list)

    @property
    def outcome_lost(self) -> bool:
        """Whether the client will not receive the handler's answer (rent keys then stay pending)."""
        return self.drop_after_commit or self.error_after_commit is not None

    @property
    def rewrites_response(self) -> bool:
        """Whether the edge must hold the handler's response instead of streaming it."""
        return self.latency_seconds > 0 or self.outcome_lost or self.garbage is not None


def compile_path(pattern: str) -> re.Pattern[str]:
    """A path pattern (``*`` one segment, ``**`` anything) as an anchored regex."""
    parts = re.split(r"(\*\*|\*)", pattern)
    regex = "".join({"**": ".*", "*": "[^/]*"}.get(part, re.escape(part)) for part in parts)
    return re.compile(f"^{regex}$")


def _method_matches(rule_method: str, method: str) -> bool:
    return rule_method == "*" or rule_method.upper() == method.upper()


@dataclass
class _RuleState:
    rule: FaultRule
    path: re.Pattern[str]
    matched: int = 0
    fired: int = 0


@dataclass
class _Bucket:
    tokens: float
    updated: float


class FaultEngine:
    """Applies a ``FaultPlan``: counts matches, fires rules, enforces rate limits."""

    def __init__(self, plan: FaultPlan, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.replace(plan)

    def replace(self, plan: FaultPlan) -> None:
        """Install ``plan``, resetting counters, buckets and the RNG (re-seeded from the plan)."""
        self.plan = plan
        self._rng = random.Random(plan.seed)
        self._rules = [_RuleState(rule, compile_path(rule.path)) for rule in plan.rules]
        self._limits = [(limit, compile_path(limit.path)) for limit in plan.rate_limits]
        self._buckets: dict[tuple[int, str], _Bucket] = {}

    def snapshot(self) -> dict[str, Any]:
        """The plan and, per rule, how many requests it matched and how often it fired."""
        return {
            **self.plan.model_dump(mode="json", exclude_none=True),
            "counters": {s.rule.name: {"matched": s.matched, "fired": s.fired} for s in self._rules},
        }

    def has_rule(self, name: str, kind: str) -> bool:
        """Whether the current plan still has a rule ``name`` of ``kind``."""
        return any(s.rule.name == name and s.rule.kind == kind for s in self._rules)

    def decide(self, method: str, path: str, client: str) -> FaultDecision:
        """Evaluate the plan for one request to ``path`` (relative to /api) from ``client``."""
        decision = FaultDecision()
        limited = self._rate_limited(method, path, client)
        if limited is not None:
            decision.reject = limited
            return decision
        for state in self._rules:
            if not (_method_matches(state.rule.method, method) and state.path.match(path)):
                continue
            state.matched += 1
            if self._fires(state):
                state.fired += 1
                decision.fired.append(str(state.rule.name))
                _apply(state.rule, decision)
        return decision

    def _fires(self, state: _RuleState) -> bool:
        rule = state.rule
        if rule.times is not None and state.fired >= rule.times:
            return False
        if rule.first is not None:
            return state.matched <= rule.first
        if rule.every is not None:
            return state.matched % rule.every == 0
        if rule.probability is not None:
            return self._rng.random() < rule.probability
        return True

    def _rate_limited(self, method: str, path: str, client: str) -> ApiError | None:
        now = self._clock()
        for index, (limit, pattern) in enumerate(self._limits):
            if not (_method_matches(limit.method, method) and pattern.match(path)):
                continue
            rate = limit.per_minute / 60.0
            bucket = self._buckets.setdefault((index, client), _Bucket(float(limit.per_minute), now))
            bucket.tokens = min(float(limit.per_minute), bucket.tokens + (now - bucket.updated) * rate)
            bucket.updated = now
            if bucket.tokens < 1.0:
                return rate_limited_error(math.ceil((1.0 - bucket.tokens) / rate))
            bucket.tokens -= 1.0
        return None


def rate_limited_error(retry_after: float) -> ApiError:
    """The 429 answer, with ``Retry-After`` in whole seconds (at least 1)."""
    seconds = max(1, math.ceil(retry_after))
    return ApiError(
        429,
        "rate_limited",
        f"Rate limit exceeded. Retry after {seconds} seconds.",
        headers={"Retry-After": str(seconds)},
    )


def _injected(rule: FaultRule, status: int, code: str | None, message: str) -> ApiError:
    return ApiError(status, code, rule.message or message, hint=f"Injected by fault rule {rule.name}.")


def _apply(rule: FaultRule, decision: FaultDecision) -> None:
    kind: str = rule.kind
    status, code, message = rule.status, rule.code, rule.message or ""
    if kind in _ALIASES:
        kind, default_status, default_code, default_message = _ALIASES[kind]
        status, code, message = status or default_status, code or default_code, message or default_message
    if kind == "status":
        error = _injected(rule, status or 503, code, message or "Injected server fault.")
        if rule.after_commit:
            decision.error_after_commit = decision.error_after_commit or error
        else:
            decision.reject = decision.reject or error
    elif kind == "rate_limit":
        decision.reject = decision.reject or rate_limited_error(rule.seconds or 1)
    elif kind == "latency":
        decision.latency_seconds += rule.seconds or 0.0
    elif kind == "drop_after_commit":
        decision.drop_after_commit = True
    elif kind == "garbage":
        decision.garbage = decision.garbage or rule.body
    elif kind == "rent_refusal":
        decision.rent_refusal = decision.rent_refusal or _injected(rule, status or 400, code, message)
    elif kind == "stuck_pending":
        decision.pod_faults.stuck_pending_rule = rule.name
    elif kind == "creation_failed":
        decision.pod_faults.creation_failed = rule.message or "Injected creation failure."
    elif kind == "ssh_late":
        decision.pod_faults.ssh_late_seconds += rule.seconds or 0.0
    elif kind == "slow_deleting":
        decision.pod_faults.slow_deleting_seconds += rule.seconds or 0.0
