"""Fixtures of the emulator tests: a real ``lium-emulator serve`` process per test module, and fresh
accounts on it so tests never see each other's resources."""

from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from lium_emulator.launcher import RunningEmulator
from tests.emulator.sdk_user import SdkUser
from tests.emulator.test_sandbox_support import HeldPidNamespaces
from tests.emulator.testkit import FAST_TIMINGS, SshKey, new_account
from tests.support.faults import faults, put_fault_plan
from tests.support.forked_emulator import launch_forked


@pytest.fixture(scope="module")
def emulator() -> Iterator[RunningEmulator]:
    """An emulator with short lifecycle timings; it must exit 0 on SIGTERM after the module."""
    running = launch_forked(FAST_TIMINGS)
    try:
        yield running
    finally:
        assert running.stop() == 0


@pytest.fixture
def make_account(emulator: RunningEmulator) -> Iterator[Callable[..., httpx.Client]]:
    """Factory of clients, each of a new account on ``emulator``."""
    clients: list[httpx.Client] = []

    def make(balance: float | None = None) -> httpx.Client:
        _, client = new_account(emulator, balance)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


@pytest.fixture
def account(make_account: Callable[..., httpx.Client]) -> httpx.Client:
    """A client of a new account on ``emulator``."""
    return make_account()


@pytest.fixture
def set_faults(emulator: RunningEmulator) -> Iterator[Callable[[dict[str, Any]], dict[str, Any]]]:
    """``set_faults(plan)`` installs a fault plan and returns the emulator's snapshot of it; the test
    starts and ends without faults, whatever it installed."""
    with faults(emulator):
        yield partial(put_fault_plan, emulator)


@pytest.fixture(scope="session")
def ssh_key() -> SshKey:
    """An SSH key pair to authorise in pods."""
    return SshKey()


@pytest.fixture
def user(emulator: RunningEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SdkUser]:
    """A fresh account with the SDK pointed at it; its pods are removed afterwards."""
    monkeypatch.setenv("HOME", str(tmp_path))  # the SDK keeps known hosts and caches under ~/.lium
    for name in ("LIUM_API_KEY", "LIUM_API_API_KEY", "LIUM_BASE_URL", "LIUM_WORKSPACE"):
        monkeypatch.delenv(name, raising=False)
    created = SdkUser(emulator, tmp_path)
    try:
        yield created
    finally:
        created.close()


@pytest.fixture
def pid_namespaces() -> Iterator[HeldPidNamespaces]:
    """PID namespaces' names, each namespace held until the test ends (so no other pod takes its name)."""
    held = HeldPidNamespaces()
    try:
        yield held
    finally:
        held.close()
