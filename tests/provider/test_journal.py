"""The rent journal keeps each attempt until it is forgotten, and passes over files it cannot read."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from lium_provider.api.models import RentRequest
from lium_provider.api.rent import RentAttempt
from lium_provider.domain.journal import RentJournal

STARTED = datetime(2026, 9, 6, 10, 0, tzinfo=UTC)


def attempt(pod_name: str) -> RentAttempt:
    body = RentRequest(pod_name=pod_name, template_id="tpl-1", user_public_key="ssh-ed25519 AAAA test")
    return RentAttempt.new("exec-1", body, now=STARTED)


def test_written_attempts_are_found_until_forgotten(tmp_path: Path) -> None:
    journal = RentJournal(tmp_path / "journal")
    first, second = attempt("pod-a"), attempt("pod-b")
    journal.write(first)
    journal.write(second)
    assert journal.find("pod-a") == first
    assert sorted(a.pod_name for a in journal.pending()) == ["pod-a", "pod-b"]
    journal.forget("pod-a")
    assert journal.find("pod-a") is None
    assert journal.pending() == [second]


def test_a_torn_file_is_passed_over(tmp_path: Path) -> None:
    journal = RentJournal(tmp_path)
    journal.write(attempt("pod-a"))
    (tmp_path / "0123456789abcdef.json").write_text('{"format": 1, "executor_id"')
    assert [a.pod_name for a in journal.pending()] == ["pod-a"]
    assert journal.find("never-written") is None
