"""The ``timeouts`` block: per-operation time budgets in Go duration syntax (``"90s"``, ``"20m"``, ``"1h30m"``).

Add ``timeouts: Annotated[Timeouts | None, Block(...)] = None`` to a resource model and set the
resource's ``default_timeouts``; the server then sets ``ctx.deadline`` for create, read, update and
delete, and :meth:`tfbridge.resource.Context.sleep` stops waiting when it passes.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BaseModel, ConfigDict, field_validator

from tfbridge.schema import Attribute, Block

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def parse_duration(text: str) -> float:
    """Seconds in a Go-style duration such as ``"1h30m"``; raises ValueError with the accepted form."""
    stripped = text.strip()
    if not stripped or _DURATION.sub("", stripped):
        raise ValueError(
            f'"{text}" is not a duration: use a number with a unit, like "30s", "20m" or "1h30m"'
        )
    return sum(float(n) * _UNIT_SECONDS[u] for n, u in _DURATION.findall(stripped))


def format_duration(seconds: float) -> str:
    """``seconds`` in the Go duration syntax :func:`parse_duration` reads: ``1800`` → ``"30m"``."""
    if seconds <= 0:
        return "0s"
    if seconds < 1 and round(seconds * 1000) < 1000:  # 0.9996 s rounds to 1000 ms: that is "1s"
        return f"{round(seconds * 1000)}ms"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{hours}h" if hours else "", f"{minutes}m" if minutes else "", f"{secs}s" if secs else ""]
    return "".join(parts)


def _duration(description: str) -> Attribute:
    return Attribute(optional=True, description=description)


class Timeouts(BaseModel):
    """How long each operation may take before it fails."""

    model_config = ConfigDict(extra="forbid")

    create: Annotated[str | None, _duration("Time budget for create, e.g. `20m`.")] = None
    read: Annotated[str | None, _duration("Time budget for read (the refresh), e.g. `2m`.")] = None
    update: Annotated[str | None, _duration("Time budget for an in-place update, e.g. `20m`.")] = None
    delete: Annotated[str | None, _duration("Time budget for delete, e.g. `10m`.")] = None

    @field_validator("create", "read", "update", "delete")
    @classmethod
    def _valid_duration(cls, value: str | None) -> str | None:
        if value is not None:
            parse_duration(value)
        return value


OPERATIONS = tuple(Timeouts.model_fields)
"""The operations a ``timeouts`` block budgets, each a field of :class:`Timeouts`."""

TIMEOUTS_BLOCK = Block(description="Per-operation time budgets (Go duration syntax).")
"""The ``Block`` metadata to annotate a ``timeouts`` field with."""


def operation_budget(timeouts: object, operation: str, default: float | None) -> float | None:
    """Seconds allowed for ``operation``: the configured value if set, else ``default``."""
    configured = getattr(timeouts, operation, None) if isinstance(timeouts, Timeouts) else None
    return parse_duration(configured) if configured else default
