"""How busy the machine's cores were while a command ran.

The emulator's pods are real sandboxes on the same machine as Terraform and the provider, so at fleet
scale their CPU competes with both. A run that kept every core busy cannot get faster by waiting better,
only by doing less work (docs/benchmarks.md, "Fifth pass").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ParamSpec, TypeVar

_IDLE_COLUMNS = (3, 4)  # idle and iowait among /proc/stat's first seven "cpu" columns
P = ParamSpec("P")
T = TypeVar("T")


def _busy_and_total_ticks() -> tuple[int, int]:
    with open("/proc/stat") as stat:
        ticks = [int(column) for column in stat.readline().split()[1:8]]
    return sum(ticks) - sum(ticks[i] for i in _IDLE_COLUMNS), sum(ticks)


def busy_share(run: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> tuple[T, float]:
    """``run(*args, **kwargs)``'s result, and the share of all cores' time that was busy meanwhile (0 to 1)."""
    busy_before, total_before = _busy_and_total_ticks()
    result = run(*args, **kwargs)
    busy_after, total_after = _busy_and_total_ticks()
    return result, (busy_after - busy_before) / max(1, total_after - total_before)
