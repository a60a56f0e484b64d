"""RentAttempt persists losslessly and refuses to load anything else."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lium_provider.api.models import RentRequest
from lium_provider.api.rent import RentAttempt

BODY = RentRequest(
    pod_name="web-1", template_id="t-1", user_public_key="ssh-ed25519 AAAA", gpu_count=1, initial_port_count=2
)
START = datetime(2026, 10, 1, 12, 0, 0, 123456, tzinfo=UTC)


def test_round_trip_keeps_key_body_and_time() -> None:
    attempt = RentAttempt.new("exec-1", BODY, now=START)
    loaded = RentAttempt.from_json(attempt.to_json())
    assert loaded == attempt
    assert loaded.body.to_body() == BODY.to_body()
    assert loaded.started_at == START and loaded.idempotency_key == attempt.idempotency_key


def test_round_trip_keeps_the_key_and_workspace_that_rented() -> None:
    attempt = RentAttempt.new("exec-1", BODY, now=START, api_key_id="k-1", workspace_id="w-1")
    loaded = RentAttempt.from_json(attempt.to_json())
    assert (loaded.api_key_id, loaded.workspace_id) == ("k-1", "w-1")
    older = attempt.to_json().replace(', "workspace_id": "w-1"', "")
    assert RentAttempt.from_json(older).workspace_id is None, "a journal from before reads as unknown"


def test_new_attempts_get_distinct_uuid_keys() -> None:
    keys = {RentAttempt.new("exec-1", BODY).idempotency_key for _ in range(20)}
    assert len(keys) == 20 and all(len(k) == 36 for k in keys)


def test_naive_start_is_taken_as_utc() -> None:
    attempt = RentAttempt("exec-1", "web-1", "k", BODY, datetime(2026, 10, 1, 12, 0))
    assert attempt.started_at.tzinfo is UTC


def test_pod_name_must_match_body() -> None:
    with pytest.raises(ValueError, match=r"pod_name must equal body\.pod_name"):
        RentAttempt("exec-1", "other", "k", BODY, START)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not valid JSON"),
        ("[]", "not in format 1"),
        (json.dumps({"format": 1}), "lacks executor_id, idempotency_key, pod_name, started_at"),
        (
            json.dumps(
                {
                    "format": 1,
                    "executor_id": "e",
                    "pod_name": "web-1",
                    "idempotency_key": "k",
                    "started_at": "yesterday",
                    "body": BODY.to_body(),
                }
            ),
            "invalid body or start time",
        ),
    ],
)
def test_garbage_is_refused_with_a_reason(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RentAttempt.from_json(text)


@settings(derandomize=True, max_examples=200)
@given(st.text(max_size=300))
def test_arbitrary_text_loads_or_raises_value_error(text: str) -> None:
    try:
        loaded = RentAttempt.from_json(text)
    except ValueError as exc:
        assert str(exc).startswith("saved rent attempt")
    else:
        assert isinstance(loaded, RentAttempt)
