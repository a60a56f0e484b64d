"""Backoff timing and Retry-After parsing (pure functions; the loop itself is tested on the emulator)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lium_provider.api.retry import RetryPolicy, parse_retry_after

NOW = datetime(2026, 10, 1, 12, 0, 0, tzinfo=UTC)


@settings(derandomize=True, max_examples=200)
@given(retry_number=st.integers(min_value=0, max_value=40), seed=st.integers(min_value=0, max_value=2**32))
def test_backoff_stays_within_half_and_full_step(retry_number: int, seed: int) -> None:
    policy = RetryPolicy(base_delay=0.5, max_delay=8.0)
    step = min(8.0, 0.5 * 2**retry_number)
    delay = policy.backoff(retry_number, random.Random(seed))
    assert step / 2 <= delay <= step


def test_backoff_is_deterministic_for_a_seed_and_grows() -> None:
    policy = RetryPolicy()
    first = [policy.backoff(n, random.Random(7)) for n in range(6)]
    second = [policy.backoff(n, random.Random(7)) for n in range(6)]
    assert first == second
    assert first[4] > first[0]
    assert max(first) <= policy.max_delay


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("3", 3.0),
        (" 0 ", 0.0),
        ("1.5", 1.5),
        ("-1", None),
        ("nan", None),
        ("inf", None),
        ("soon", None),
        (None, None),
    ],
)
def test_retry_after_seconds(header: str | None, expected: float | None) -> None:
    assert parse_retry_after(header, NOW) == expected


def test_retry_after_http_date() -> None:
    assert parse_retry_after(format_datetime(NOW + timedelta(seconds=42), usegmt=True), NOW) == 42.0
    assert parse_retry_after(format_datetime(NOW - timedelta(seconds=42), usegmt=True), NOW) == 0.0
