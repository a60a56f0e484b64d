"""The removal deadline at plan time, for every object Lium removes by itself after ``termination_hours``
(a pod; a cluster, on all its members): the provider's default, the in-place move of the removal, and how
long a create may still take (what its provisional deadline must cover)."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any, Protocol

from lium_provider.domain.removal import (
    HOUR,
    SCHEDULE_TOLERANCE,
    parse_time,
    removal_at,
    rfc3339,
    same_schedule,
)
from lium_provider.session import LiumSession
from tfbridge import Context, PlanChange, TFError


class Scheduled(Protocol):
    """An object Lium removes by itself: its recorded start and removal, and the hours between."""

    @property
    def id(self) -> str | None: ...
    @property
    def termination_hours(self) -> int | None: ...
    @property
    def started_at(self) -> str | None: ...
    @property
    def removal_scheduled_at(self) -> str | None: ...


def plan_default_hours(ctx: Context, change: PlanChange[Any]) -> None:
    """An object that sets no ``termination_hours`` plans the provider's default (or none), so the plan
    shows the deadline it gets, and ``lium-tf plan-summary`` counts it."""
    if change.config_is_null("termination_hours") and isinstance(ctx.provider, LiumSession):
        change.set_planned("termination_hours", ctx.provider.default_termination_hours)


def plan_removal(change: PlanChange[Any], prior: Scheduled, noun: str) -> None:
    """In place: the removal time the planned ``termination_hours`` gives, counted from the start of the
    ``noun`` (a pod, or every member of a cluster).

    It differs from the recorded one when the hours changed, or when the schedule was changed outside
    Terraform (a refresh records Lium's), and the update then sets it back to the configuration.
    """
    if change.is_unknown("termination_hours"):
        change.set_unknown("removal_scheduled_at")
        return
    hours = change.planned.termination_hours
    started = parse_time(prior.started_at)
    if started is None and hours is not None:
        raise TFError(
            f"The {noun}'s start time is not known yet",
            f"{noun.capitalize()} {prior.id}'s state predates `started_at`; plan with refresh (without "
            "-refresh=false) once.",
            path=("termination_hours",),
        )
    wanted = removal_at(started, hours)
    if same_schedule(wanted, parse_time(prior.removal_scheduled_at)):
        change.set_planned("removal_scheduled_at", prior.removal_scheduled_at)
        return
    now = datetime.now(UTC)
    if started is not None and wanted is not None and wanted <= now + SCHEDULE_TOLERANCE:
        raise TFError(
            f"termination_hours would remove the {noun} in the past",
            f"{noun.capitalize()} {prior.id} started at {prior.started_at}, so {hours} h end at "
            f"{rfc3339(wanted)}, which has passed. Set at least {math.floor((now - started) / HOUR) + 1}, "
            f"or delete the {noun}.",
            path=("termination_hours",),
        )
    change.set_planned("removal_scheduled_at", rfc3339(wanted))


def create_seconds_left(ctx: Context, default: float) -> float:
    """How long a create may still take: what its timeout leaves, else ``default`` (its default timeout)."""
    remaining = ctx.remaining()
    return default if remaining is None else max(remaining, 0.0)
