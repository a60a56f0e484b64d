"""The emulator's fault plan, from tests: install one for a block, and leave the emulator without one.

A fault plan is emulator-wide (every account on the emulator meets it), so a test that sets one must
clear it however it ends, or the next test inherits its faults. :func:`faults` is the one way tests do
that; :func:`put_fault_plan` alone is for changing the plan inside such a block.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from lium_emulator.launcher import RunningEmulator
from tests.support import http

NO_FAULTS: Mapping[str, Any] = {"seed": 0, "rules": [], "rate_limits": []}


def put_fault_plan(emulator: RunningEmulator, plan: Mapping[str, Any]) -> dict[str, Any]:
    """Replace the emulator's fault plan (``PUT /_emulator/faults``); returns the snapshot it answers."""
    response = http.put(
        f"{emulator.root_url}/_emulator/faults",
        json=dict(plan),
        headers=emulator.admin_headers,
        timeout=30,
    )
    assert response.status_code == 200, response.text
    snapshot: dict[str, Any] = response.json()
    return snapshot


@contextmanager
def faults(emulator: RunningEmulator, plan: Mapping[str, Any] = NO_FAULTS) -> Iterator[None]:
    """Run the block under ``plan`` (by default none); afterwards, however the block ends, no faults."""
    put_fault_plan(emulator, plan)
    try:
        yield
    finally:
        put_fault_plan(emulator, NO_FAULTS)


def fault_counters(emulator: RunningEmulator) -> dict[str, dict[str, int]]:
    """Per rule of the emulator's fault plan, how many requests it matched and how often it fired: a
    test waits on them to act while a request is held (``latency``), not on a clock."""
    response = http.get(f"{emulator.root_url}/_emulator/faults", headers=emulator.admin_headers, timeout=30)
    assert response.status_code == 200, response.text
    counters: dict[str, dict[str, int]] = response.json()["counters"]
    return counters
