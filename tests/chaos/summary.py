"""The chaos run's settings and its summary table, as a plugin of the root conftest.

Under xdist the scenarios run in workers and only the controller prints: it loads no conftest below
``tests/``, so this plugin is registered at the root (``tests/conftest.py``). Each scenario's outcome
reaches it on the test's report (``user_properties``); the summary adds them up once for the run.
"""

from __future__ import annotations

import os
from collections import Counter

import pytest

from tests.chaos.outcome import Outcome
from tests.chaos.scenarios import COVERED_WITHIN, DEFAULT_SEED

OUTCOME_PROPERTY = "chaos_outcome"
# The outcomes of this run's scenarios, as their reports arrive.
reported_outcomes: list[Outcome] = []


def chaos_seed() -> int:
    """``LIUM_CHAOS_SEED`` (default: a fixed seed, so ``make test`` always runs the same scenarios)."""
    return int(os.environ.get("LIUM_CHAOS_SEED") or DEFAULT_SEED)


def chaos_count() -> int:
    """``LIUM_CHAOS_SCENARIOS`` (default: as many as every seed's coverage list needs)."""
    return int(os.environ.get("LIUM_CHAOS_SCENARIOS") or COVERED_WITHIN)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when != "call":
        return
    for name, value in report.user_properties:
        if name == OUTCOME_PROPERTY:
            reported_outcomes.append(Outcome(**value))


def summary_table(outcomes: list[Outcome]) -> list[str]:
    """The Markdown table docs/reliability.md records for a run."""
    columns = {
        "scenarios run": len(outcomes),
        "scenarios failed": sum(1 for o in outcomes if o.failures),
        "faults injected": sum(o.faults_injected for o in outcomes),
        "leaks": sum(len(o.leaks) for o in outcomes),
        "duplicate rentals": sum(len(o.duplicates) for o in outcomes),
        "secrets found": sum(len(o.secrets) for o in outcomes),
        "tracebacks": sum(len(o.crashes) for o in outcomes),
        "cross-stack effects": sum(len(o.cross_stack) for o in outcomes),
        "other failures": sum(len(o.problems) for o in outcomes),
        "second/third destroys": sum(o.extra_destroys for o in outcomes),
        "orphaned providers": sum(o.orphaned_providers for o in outcomes),
        "orphaned sandboxes": sum(o.orphaned_sandboxes for o in outcomes),
    }
    return [
        "| " + " | ".join(columns) + " |",
        "|" + " --- |" * len(columns),
        "| " + " | ".join(str(value) for value in columns.values()) + " |",
    ]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    """Seed, counts per category, time, the table, and one line per failed scenario."""
    outcomes = reported_outcomes
    if not outcomes:
        return
    write = terminalreporter.write_line
    terminalreporter.section("chaos summary")
    categories = ", ".join(f"{k} {v}" for k, v in sorted(Counter(o.category for o in outcomes).items()))
    write(f"seed {chaos_seed()}, {len(outcomes)} scenarios ({categories})")
    seconds = [o.seconds for o in outcomes]
    write(
        f"time in scenarios: {sum(seconds):.0f} s, mean {sum(seconds) / len(seconds):.1f} s, max {max(seconds):.0f} s"
    )
    for line in summary_table(outcomes):
        write(line)
    for outcome in outcomes:
        if outcome.failures:
            write(f"FAILED {outcome.name}: " + "; ".join(f.splitlines()[0] for f in outcome.failures))
