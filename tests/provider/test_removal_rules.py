"""The removal-deadline rules of :mod:`lium_provider.domain.removal`, on their own (no emulator)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from lium_provider.api.models import Pod
from lium_provider.domain.removal import (
    PROVISIONAL_MARGIN,
    SCHEDULE_TOLERANCE,
    configured_default_hours,
    imported_schedule,
    parse_time,
    provisional_hours,
    removal_at,
    rent_hours,
    rfc3339,
    same_schedule,
    started_at,
)

START = datetime(2026, 12, 1, 12, 0, 0, 123456, tzinfo=UTC)


@pytest.mark.parametrize(
    ("create_seconds", "hours"),
    [
        (0.0, 1),
        (1800.0, 1),  # the default create timeout
        (3600.0 - PROVISIONAL_MARGIN.total_seconds(), 1),
        (3601.0 - PROVISIONAL_MARGIN.total_seconds(), 2),
        (10 * 3600.0, 11),
        (10_000 * 3600.0, 720),  # Lium's bound
    ],
)
def test_the_provisional_deadline_outlasts_the_create(create_seconds: float, hours: int) -> None:
    assert provisional_hours(create_seconds) == hours


def test_the_rent_carries_the_shorter_of_the_wanted_and_the_provisional_hours() -> None:
    assert rent_hours(None, 1800.0) == 1
    assert rent_hours(8, 1800.0) == 1
    assert rent_hours(3, 4 * 3600.0) == 3


def test_times_round_trip_and_compare_within_the_tolerance() -> None:
    text = rfc3339(START)
    assert text == "2026-12-01T12:00:00.123456Z"
    assert parse_time(text) == START
    assert parse_time("2026-12-01T12:00:00") == START.replace(microsecond=0), "naive is UTC"
    assert removal_at(START, 8) == START + timedelta(hours=8)
    assert removal_at(START, None) is None and removal_at(None, 8) is None
    assert same_schedule(START, START + SCHEDULE_TOLERANCE)
    assert not same_schedule(START, START + SCHEDULE_TOLERANCE + timedelta(seconds=1))
    assert same_schedule(None, None) and not same_schedule(START, None)


def row(**fields: object) -> Pod:
    return Pod.model_validate({"id": "p", "pod_name": "n", "status": "RUNNING", "gpu_count": "1", **fields})


def test_the_start_is_the_rent_schedule_minus_its_hours_else_the_creation() -> None:
    removal = (START + timedelta(hours=1)).replace(tzinfo=None).isoformat()
    assert started_at(row(removal_scheduled_at=removal, termination_hours=1)) == START
    created = START - timedelta(seconds=30)
    assert started_at(row(created_at=created.isoformat())) == created


def test_an_imported_pod_gets_whole_hours_from_its_creation() -> None:
    created = START - timedelta(seconds=40)  # a start 40 s after the creation
    removal = START + timedelta(hours=6)
    started, hours = imported_schedule(
        row(created_at=created.isoformat(), removal_scheduled_at=removal.isoformat())
    )
    assert (started, hours) == (START, 6)
    assert imported_schedule(row(created_at=created.isoformat())) == (created, None)


def test_the_default_comes_from_the_argument_else_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIUM_DEFAULT_TERMINATION_HOURS", "48")
    assert configured_default_hours(None) == 48
    assert configured_default_hours(6) == 6
    monkeypatch.setenv("LIUM_DEFAULT_TERMINATION_HOURS", "721")
    with pytest.raises(ValueError, match="721"):
        configured_default_hours(None)
    monkeypatch.delenv("LIUM_DEFAULT_TERMINATION_HOURS")
    assert configured_default_hours(None) is None
