"""Fixtures of the provider's end-to-end tests: one emulator per test module, one account per test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from lium_emulator.launcher import RunningEmulator
from tests.support.forked_emulator import launch_forked
from tests.support.lium import FAST_TIMINGS, PROVIDER_BLOCK, Account, new_account
from tests.support.terraform import Terraform


@pytest.fixture(scope="module")
def emulator() -> Iterator[RunningEmulator]:
    """An emulator with short lifecycle timings, shared by the module's tests (accounts isolate them)."""
    with launch_forked(FAST_TIMINGS) as running:
        yield running


@pytest.fixture
def account(emulator: RunningEmulator, tmp_path: Path) -> Iterator[Account]:
    """A fresh account; the emulator has no faults before the test and none after, whatever it set."""
    account = new_account(emulator, tmp_path)
    with account.faults():
        yield account


@pytest.fixture
def stack(make_terraform: Callable[..., Terraform], account: Account) -> Callable[[str], Terraform]:
    """A Terraform working directory with the provider block, the given body, and ``init`` done."""

    def make(body: str) -> Terraform:
        tf = make_terraform(PROVIDER_BLOCK + body, **account.env)
        tf.init()
        return tf

    return make
