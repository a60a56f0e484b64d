"""Retry timing: jittered exponential backoff and ``Retry-After`` parsing (pure functions, no I/O)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long the client retries.

    ``max_retries`` counts resends after the first attempt for failures other than 429. A 429 (never
    executed) is resent for as long as the total waited stays within ``max_rate_limited_seconds``.
    ``max_retry_after`` is the longest single ``Retry-After`` the client is willing to wait for; a longer
    one is reported to the caller instead of silently blocking a Terraform run for that long.
    """

    max_retries: int = 5
    max_rate_limited_seconds: float = 900.0
    base_delay: float = 0.5
    max_delay: float = 8.0
    max_retry_after: float = 120.0

    def backoff(self, retry_number: int, rng: random.Random) -> float:
        """Delay before resend number ``retry_number`` (0-based), with "equal jitter".

        The exponential step doubles per retry up to ``max_delay``; half of it is fixed and half random,
        so concurrent clients spread out while none retries sooner than half the step.
        """
        step = min(self.max_delay, self.base_delay * 2.0 ** max(0, retry_number))
        return step / 2 + rng.uniform(0.0, step / 2)


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds or an HTTP-date; None if unusable.

    A date in the past means "now" (0 s). Negative, non-finite or unparsable values are unusable.
    """
    if value is None:
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        return _seconds_until_http_date(text, now)
    if seconds != seconds or seconds in (float("inf"), float("-inf")) or seconds < 0:
        return None
    return seconds


def _seconds_until_http_date(text: str, now: datetime) -> float | None:
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())
