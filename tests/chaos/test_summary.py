"""The chaos summary adds up every scenario's outcome from its test report, in whichever process prints."""

from __future__ import annotations

import dataclasses

import pytest

import tests.conftest
from tests.chaos import summary
from tests.chaos.outcome import Outcome

pytestmark = pytest.mark.unit  # the summary alone: no terraform or emulator


def report(outcome: Outcome, when: str = "call") -> pytest.TestReport:
    return pytest.TestReport(
        nodeid=f"tests/chaos/test_chaos.py::test_scenario[{outcome.name}]",
        location=("tests/chaos/test_chaos.py", 0, outcome.name),
        keywords={},
        outcome="passed",
        longrepr=None,
        when=when,
        user_properties=[(summary.OUTCOME_PROPERTY, dataclasses.asdict(outcome))],
    )


def test_outcomes_on_reports_make_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(summary, "reported_outcomes", [])
    leaky = Outcome("001-x", "fault", faults_injected=2, leaks=["pod p0 still RUNNING"])
    clean = Outcome("002-y", "restart", faults_injected=1)
    for outcome in (leaky, clean):
        summary.pytest_runtest_logreport(report(outcome, "setup"))  # only the call phase counts
        summary.pytest_runtest_logreport(report(outcome))
    assert summary.reported_outcomes == [leaky, clean]
    header, _, row = summary.summary_table(summary.reported_outcomes)
    values = dict(zip(header.strip("| ").split(" | "), row.strip("| ").split(" | "), strict=True))
    assert values["scenarios run"] == "2" and values["scenarios failed"] == "1"
    assert values["faults injected"] == "3" and values["leaks"] == "1"


def test_the_summary_is_a_plugin_of_the_root_conftest() -> None:
    # The xdist controller prints the summary and loads no conftest below tests/.
    assert "tests.chaos.summary" in tests.conftest.pytest_plugins
