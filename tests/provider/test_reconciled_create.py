"""After a lost create answer, an object is adopted only when it alone can be this request's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from lium_provider.resources.common import newest
from tfbridge import TFError

SINCE = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def created(item: tuple[str, datetime | None]) -> datetime | None:
    return item[1]


def test_the_one_object_created_since_the_request_is_adopted() -> None:
    older = ("older", SINCE - timedelta(seconds=5))
    mine = ("mine", SINCE + timedelta(seconds=1))
    assert newest([older, mine, ("no-time", None)], created, SINCE) == mine
    assert newest([older], created, SINCE) is None


def test_two_objects_created_since_the_request_are_never_adopted() -> None:
    # Another stack created one of the same name in the same seconds: neither may be taken over.
    both = [("a", SINCE + timedelta(seconds=1)), ("b", SINCE + timedelta(seconds=2))]
    with pytest.raises(TFError) as raised:
        newest(both, created, SINCE)
    assert "ambiguous" in str(raised.value.diagnostics()[0].summary)
