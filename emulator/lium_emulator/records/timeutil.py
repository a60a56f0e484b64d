"""Timestamps as the Lium API writes them: naive UTC, ISO 8601."""

from datetime import UTC, datetime


def utcnow() -> datetime:
    """The current time as a naive UTC datetime (Lium's timestamps carry no offset)."""
    return datetime.now(UTC).replace(tzinfo=None)


def iso(moment: datetime | None) -> str | None:
    """``moment`` as ISO 8601 with microseconds, or None."""
    return moment.isoformat(timespec="microseconds") if moment is not None else None


def to_naive_utc(moment: datetime) -> datetime:
    """Normalise a client-sent datetime (with or without offset) to naive UTC."""
    if moment.tzinfo is None:
        return moment
    return moment.astimezone(UTC).replace(tzinfo=None)
