"""Removal deadlines: when Lium removes a pod by itself, so that a pod nobody deletes stops billing.

Lium's rent field ``termination_hours`` removes a pod that many hours after it started (turned
``RUNNING``); ``POST /pods/{id}/schedule-removal`` moves that removal and ``DELETE`` cancels it
(docs/lium-api.md#rent, docs/lium-api.md#other-pod-routes). ``lium_pod`` uses them in two ways:

* its ``termination_hours`` (or the provider's ``default_termination_hours``) is the deadline the user
  wants, kept in place as the attribute changes;
* every rent carries a **provisional** deadline, so a create that never finished (provider killed, CI
  runner lost, journal gone with the disk) is ended by Lium itself: the wanted hours when shorter, else
  :func:`provisional_hours`, which outlasts the create's timeout. Once the create has finished, the
  real schedule replaces it (:func:`set_removal`).

Lium publishes no start time, so the pod's ``started_at`` is measured once: right after ``RUNNING`` the
rent's schedule is the start plus the rent's hours (:func:`started_at`). Times go into Terraform's state
as RFC 3339 UTC strings (:func:`rfc3339`).
"""

from __future__ import annotations

import math
import os
from datetime import UTC, datetime, timedelta

from pydantic import TypeAdapter, ValidationError

from lium_provider.api.client import LiumClient
from lium_provider.api.errors import LiumError, is_definitive
from lium_provider.api.models import MAX_TERMINATION_HOURS, MIN_TERMINATION_HOURS, Pod, TerminationHours
from tfbridge.schema import bounds_of

HOUR = timedelta(hours=1)
# Beyond the create's own timeout: clock skew, the rent's latency and the final schedule call.
PROVISIONAL_MARGIN = timedelta(minutes=10)
# Lium may keep a schedule to the second (or coarser): a schedule this close to ours is ours.
SCHEDULE_TOLERANCE = timedelta(minutes=1)
DEFAULT_TERMINATION_HOURS_ENV = "LIUM_DEFAULT_TERMINATION_HOURS"

_TERMINATION_HOURS: TypeAdapter[int] = TypeAdapter(TerminationHours)
TERMINATION_HOURS_RANGE = bounds_of(TerminationHours).range_text()  # "1 to 720", for messages


def provisional_hours(create_seconds: float) -> int:
    """Hours of the provisional deadline for a create that may take ``create_seconds``: at least 1,
    ``ceil(create timeout + margin)``, at most Lium's 720."""
    hours = math.ceil((create_seconds + PROVISIONAL_MARGIN.total_seconds()) / HOUR.total_seconds())
    return min(max(hours, MIN_TERMINATION_HOURS), MAX_TERMINATION_HOURS)


def rent_hours(wanted: int | None, create_seconds: float) -> int:
    """The rent's ``termination_hours``: the wanted deadline if it is the shorter one, else the provisional."""
    provisional = provisional_hours(create_seconds)
    return provisional if wanted is None else min(wanted, provisional)


def removal_at(started: datetime | None, hours: int | None) -> datetime | None:
    """When Lium should remove a pod that started at ``started`` and lives ``hours``; None: never."""
    if hours is None or started is None:
        return None
    return started + hours * HOUR


def same_schedule(a: datetime | None, b: datetime | None) -> bool:
    """Whether two removal times are the same schedule (both none, or within :data:`SCHEDULE_TOLERANCE`)."""
    if a is None or b is None:
        return a is b
    return abs(a - b) <= SCHEDULE_TOLERANCE


def rfc3339(moment: datetime | None) -> str | None:
    """``moment`` in UTC as RFC 3339 (``2026-12-01T15:04:05Z``, microseconds when there are any)."""
    if moment is None:
        return None
    aware = moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    return aware.astimezone(UTC).isoformat().replace("+00:00", "Z")


def parse_time(text: str | None) -> datetime | None:
    """An RFC 3339 string of the state back as an aware UTC datetime; None for None."""
    if text is None:
        return None
    moment = datetime.fromisoformat(text)
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def started_at(row: Pod) -> datetime | None:
    """When the pod started, from its row just after it turned ``RUNNING`` (before any schedule change):
    the rent's removal time minus the rent's hours. Without a rent schedule: when the pod was created."""
    if row.removal_scheduled_at is not None and row.termination_hours is not None:
        return row.removal_scheduled_at - row.termination_hours * HOUR
    return row.created_at


def imported_schedule(row: Pod) -> tuple[datetime | None, int | None]:
    """``(started, termination_hours)`` for a pod Terraform did not create (import, or a state older than
    removal deadlines). Its start is taken as its creation (Lium publishes no start; a pod starts within
    minutes of it), and its hours as the whole hours from there to its removal, so that a config with
    that ``termination_hours`` plans no change."""
    if row.removal_scheduled_at is None or row.created_at is None:
        return row.created_at, None
    hours = round((row.removal_scheduled_at - row.created_at) / HOUR)
    hours = min(max(hours, MIN_TERMINATION_HOURS), MAX_TERMINATION_HOURS)
    return row.removal_scheduled_at - hours * HOUR, hours


def set_removal(client: LiumClient, pod_id: str, at: datetime | None) -> None:
    """Make Lium remove the pod at ``at``, or never (cancel the schedule) when ``at`` is None.

    An outcome the error does not settle (:func:`is_definitive`: a dropped connection, a 5xx, a
    garbled answer) is reconciled, never guessed: the pod is read back, and only a schedule still not
    ``at`` is sent once more (setting a schedule is idempotent). When the read-back fails too, the
    first error is raised: it is the one that says what happened to the schedule.
    """
    try:
        _send_removal(client, pod_id, at)
    except LiumError as first:
        if is_definitive(first):
            raise
        try:
            pod = client.get_pod(pod_id)
        except LiumError:
            raise first from None
        if pod is not None and same_schedule(pod.removal_scheduled_at, at):
            return
        _send_removal(client, pod_id, at)


def _send_removal(client: LiumClient, pod_id: str, at: datetime | None) -> None:
    if at is None:
        client.cancel_removal(pod_id)
    else:
        client.schedule_removal(pod_id, at)


def configured_default_hours(value: int | None) -> int | None:
    """The provider's ``default_termination_hours``, else env :data:`DEFAULT_TERMINATION_HOURS_ENV`;
    ValueError saying what is wrong with an environment value out of :data:`TERMINATION_HOURS_RANGE`."""
    if value is not None:
        return value
    text = os.environ.get(DEFAULT_TERMINATION_HOURS_ENV, "").strip()
    if not text:
        return None
    try:
        return _TERMINATION_HOURS.validate_python(text)
    except ValidationError as exc:
        message = exc.errors(include_url=False, include_input=False, include_context=False)[0]["msg"]
        raise ValueError(f"{text!r}: {message}") from None
