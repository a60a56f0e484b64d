"""Pods Terraform never recorded: a provider killed between Lium's rent answer and the state write.

The provider journals every rent before sending it; the next apply adopts the pod, the next destroy
deletes it, and ``lium-tf sweep`` lists and removes it. The provider starts cold here
(``TFBRIDGE_ZYGOTE=0``) and both its processes are killed, the launcher and its server, with no chance
to delete what it rented (as when a machine dies): a killed launcher alone leaves its server to delete
its create's pod itself (``tests/provider/test_ownership.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable

import pytest

from lium_provider.domain.stack import parse_lium_pod_name, stack_identity, stack_tag
from tests.support.lium import NOTHING_LIVE, PROVIDER_BLOCK, Account, pod_block, sleeping_template
from tests.support.procs import kill_provider_and_server, wait_for
from tests.support.terraform import Terraform, reaped

pytestmark = pytest.mark.terraform

STACK = PROVIDER_BLOCK + sleeping_template("orphan-template") + pod_block("orphan-pod")
COLD_START = {"TFBRIDGE_ZYGOTE": "0"}
# After the kill: the commands that find the orphan start their providers warm (the default), as how
# they start does not change what they find, and a cold start repeats the provider's imports (~0.8 s of
# CPU) for each provider process.
WARM_START = {"TFBRIDGE_ZYGOTE": "1"}
STUCK = {
    "seed": 5,
    "rules": [{"method": "POST", "path": "/executors/*/rent", "kind": "stuck_pending", "first": 1}],
}


def live_pods(account: Account) -> list[dict[str, object]]:
    return account.live()["pods"]


def kill_provider_after_rent(tf: Terraform, account: Account) -> None:
    """Apply until the pod is rented (and held PENDING), then SIGKILL the provider's processes."""
    with account.faults(STUCK), reaped(tf.start("apply", "-auto-approve", "-no-color")) as process:
        wait_for(lambda: bool(live_pods(account)), "the rent happened", 60, process=process)
        kill_provider_and_server(process.pid)
        output, _ = process.communicate(timeout=60)
    assert process.returncode != 0, output
    assert "lium_pod" not in {r["type"] for r in tf.resources()}, "the killed create must not be in state"
    assert len(live_pods(account)) == 1


@pytest.fixture
def crashed(make_terraform: Callable[..., Terraform], account: Account) -> Terraform:
    tf = make_terraform(STACK, **account.env, **COLD_START)
    tf.init()
    kill_provider_after_rent(tf, account)
    tf.env.update(WARM_START)
    return tf


def test_next_apply_adopts_the_unrecorded_pod(crashed: Terraform, account: Account) -> None:
    (orphan,) = live_pods(account)
    crashed.apply()
    (pod,) = [r for r in crashed.resources() if r["type"] == "lium_pod"]
    assert pod["instances"][0]["attributes"]["id"] == orphan["id"], "adopted, not rented again"
    assert [p["id"] for p in account.report()["pods"]] == [orphan["id"]], "no second pod was ever rented"
    assert crashed.plan_exitcode()[0] == 0
    crashed.destroy()
    assert live_pods(account) == [] and account.live()["templates"] == []


def test_next_destroy_deletes_the_unrecorded_pod(crashed: Terraform, account: Account) -> None:
    crashed.destroy()
    assert account.live() == NOTHING_LIVE


def test_one_destroy_suffices_when_the_unrecorded_pod_mounts_a_volume(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    # The volume's delete runs beside the template's; it must settle the pod too, not meet volume_in_use.
    with_volume = (
        STACK.replace(
            "template_id = lium_template.t.id",
            "template_id = lium_template.t.id\n  volume_id   = lium_volume.v.id",
        )
        + 'resource "lium_volume" "v" {\n  name = "orphan-volume"\n}\n'
    )
    tf = make_terraform(with_volume, **account.env, **COLD_START)
    tf.init()
    kill_provider_after_rent(tf, account)
    tf.env.update(WARM_START)
    tf.destroy()
    assert account.live() == NOTHING_LIVE


def test_sweep_lists_and_deletes_leftovers(crashed: Terraform, account: Account) -> None:
    env = {**os.environ, **account.env}
    command = [sys.executable, "-m", "lium_provider.cli", "sweep", "--name-prefix", "orphan-"]
    listed = json.loads(subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout)
    tag = stack_tag(stack_identity(environ={}, cwd=crashed.workdir))
    (sent_name,) = [p["name"] for p in listed["pods"]]
    assert (parse_lium_pod_name(sent_name) or ())[:2] == ("orphan-pod", tag), sent_name
    assert [t["name"] for t in listed["templates"]] == ["orphan-template"]
    assert [a["pod_name"] for a in listed["journal"]] == [sent_name]
    subprocess.run([*command, "--delete"], env=env, capture_output=True, text=True, check=True)
    assert account.live() == NOTHING_LIVE
    after = json.loads(subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout)
    assert after == {**NOTHING_LIVE, "journal": [], "api_keys": []}
