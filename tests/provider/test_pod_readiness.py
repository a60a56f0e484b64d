"""A pod is ready when SSH answers, not when Lium says RUNNING: the two lag each other on real pods."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from lium_emulator.launcher import RunningEmulator
from tests.support.forked_emulator import launch_forked
from tests.support.lium import PROVIDER_BLOCK, new_account, pod_block, sleeping_template
from tests.support.terraform import Terraform

pytestmark = pytest.mark.terraform

STACK = PROVIDER_BLOCK + sleeping_template("ready") + pod_block("ready")


@pytest.fixture(scope="module")
def slow_ssh_emulator() -> Iterator[RunningEmulator]:
    # RUNNING after 0.2 s, sshd (and so ssh_connect_cmd) only 2 s later.
    with launch_forked(
        ["--pending-seconds", "0.2", "--ssh-delay-seconds", "2", "--deleting-seconds", "0.2"]
    ) as running:
        yield running


@pytest.mark.parametrize("fault", [None, "ssh_late"])
def test_apply_waits_for_ssh_after_running(
    make_terraform: Callable[..., Terraform],
    slow_ssh_emulator: RunningEmulator,
    tmp_path: Path,
    fault: str | None,
) -> None:
    account = new_account(slow_ssh_emulator, tmp_path)
    # With the fault, the address is published on time, but sshd stays silent 2 s longer.
    rules = [{"method": "POST", "path": "/executors/*/rent", "kind": fault, "seconds": 2}] if fault else []
    with account.faults({"seed": 0, "rules": rules}):
        tf = make_terraform(STACK, **account.env)
        tf.init()
        tf.apply()
    (pod,) = [i["attributes"] for r in tf.resources() if r["type"] == "lium_pod" for i in r["instances"]]
    assert pod["status"] == "RUNNING" and pod["ssh_host_key"].startswith("ssh-")
    tf.destroy()
    assert not any(account.live().values())
