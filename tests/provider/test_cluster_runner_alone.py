"""``examples/cluster``: a runner replaced on its own runs the collective alone, and its smoke test says
so, naming the fix, after the rendezvous time (here short) instead of a bare traceback."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from lium_emulator.launcher import RunningEmulator
from tests.support.examples import initialised_example
from tests.support.lium import assert_nothing_left, instances, new_account
from tests.support.terraform import REPO, Terraform

pytestmark = pytest.mark.terraform

EXAMPLE = REPO / "examples" / "cluster"
SHORT_RENDEZVOUS = ("-var", "rendezvous_seconds=5")


def test_a_runner_replaced_alone_fails_its_collective_saying_to_replace_every_runner(
    emulator: RunningEmulator, make_terraform: Callable[..., Terraform], tmp_path: Path
) -> None:
    account = new_account(emulator, tmp_path)
    tf = initialised_example(EXAMPLE, make_terraform, account.env)
    tf.apply(*SHORT_RENDEZVOUS)
    alone = tf.apply(*SHORT_RENDEZVOUS, "-replace=lium_runner.node[1]", check=False)
    assert alone.returncode == 1, alone.stdout
    said = " ".join(alone.stderr.split())  # Terraform wraps diagnostics
    assert "the other nodes did not join within 5 s" in said, alone.stderr
    assert "replace every node's runner together" in said, alone.stderr
    # together, the runners meet again
    together = ("-replace=lium_runner.node[0]", "-replace=lium_runner.node[1]")
    tf.apply(*SHORT_RENDEZVOUS, *together)
    assert all(r["healthy"] is True for r in instances(tf, "lium_runner"))
    tf.destroy(*SHORT_RENDEZVOUS)
    assert_nothing_left(account)
