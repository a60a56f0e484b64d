"""Chaos fixtures: the shared emulator, and the outcome each scenario puts on its report (the summary
that adds them up is :mod:`tests.chaos.summary`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

import pytest

from lium_emulator.launcher import RunningEmulator
from tests.chaos.outcome import Outcome
from tests.chaos.summary import OUTCOME_PROPERTY
from tests.support.forked_emulator import launch_forked
from tests.support.lium import FAST_TIMINGS
from tests.support.postgres import PostgresServer, running_postgres


@pytest.fixture(scope="session")
def shared_emulator() -> Iterator[RunningEmulator]:
    """One emulator for every scenario that does not restart it; each scenario has its own account."""
    with launch_forked(FAST_TIMINGS) as running:
        yield running


@pytest.fixture(scope="session")
def chaos_postgres() -> Iterator[PostgresServer]:
    """The PostgreSQL server of the ``pg`` scenarios (each has a schema of its own), started by the first."""
    with running_postgres() as server:
        yield server


@pytest.fixture
def record_outcome(request: pytest.FixtureRequest) -> Callable[[Outcome], None]:
    """``record_outcome(outcome)`` puts a scenario's outcome on its test report, which reaches the
    process that prints the summary (the xdist controller when tests run in workers)."""

    def record(outcome: Outcome) -> None:
        request.node.user_properties.append((OUTCOME_PROPERTY, dataclasses.asdict(outcome)))

    return record
