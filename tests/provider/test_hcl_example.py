"""``examples/hcl``, the quickstart stack in plain HCL, applied against the emulator and destroyed.

Only the provider's environment variables configure it (see the example's README), so this is exactly what
a user runs, with the emulator's URLs, from a copy without the committed lock file (the release's hashes,
not the checkout launcher's).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from lium_emulator.launcher import RunningEmulator
from tests.support.examples import copy_example
from tests.support.lium import assert_nothing_left, instances, new_account
from tests.support.terraform import REPO, Terraform

pytestmark = pytest.mark.terraform

EXAMPLE = REPO / "examples" / "hcl"


def test_hcl_example_applies_and_destroys(
    emulator: RunningEmulator, make_terraform: Callable[..., Terraform], tmp_path: Path
) -> None:
    account = new_account(emulator, tmp_path)
    tf = make_terraform("", **account.env)
    (tf.workdir / "main.tf").unlink()
    copy_example(EXAMPLE, tf.workdir)
    tf.init()
    tf.apply()

    outputs = {name: o["value"] for name, o in json.loads(tf.run("output", "-json").stdout).items()}
    (pod,) = instances(tf, "lium_pod")
    (runner,) = instances(tf, "lium_runner")
    assert re.fullmatch(r"ssh root@\S+ -p \d+", outputs["ssh"])
    assert outputs["ssh"] == f"ssh root@{pod['ssh_host']} -p {pod['ssh_port']}"
    assert outputs["runner_port"] == pod["ports"]["10022"] == runner["runner_ssh_port"]
    assert outputs["price_per_hour"] == pod["price_per_hour"] > 0
    assert runner["healthy"] is True and outputs["smoke_test"].splitlines()[-2:] == ["no-gpu", "42"]
    assert tf.plan_exitcode()[0] == 0

    tf.destroy()
    assert_nothing_left(account)
    assert tf.resources() == []
