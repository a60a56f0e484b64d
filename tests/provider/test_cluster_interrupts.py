"""``lium_cluster`` interrupted where CI interrupts it: a Ctrl-C while the rental is on its way, a create
abandoned when the cluster's removal meets a fault. Whatever happens, the rented cluster is either in the
state (and ``terraform destroy`` removes it) or already removed: never billed unknown to Terraform."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.faults import fault_counters, put_fault_plan
from tests.support.lium import PROVIDER_BLOCK, Account, assert_nothing_left, instances
from tests.support.procs import kill_machine, providers_in, wait_for
from tests.support.terraform import Terraform, interrupt, reaped

pytestmark = pytest.mark.terraform

CLUSTER = """
resource "lium_cluster" "c" {
  name       = "%s"
  node_count = 2
}
"""
WAIT_SECONDS = 60.0
# The emulator holds the rental this long before it commits (and answers), so a signal sent once the
# request has arrived lands while it is on its way.
RENT_HELD_SECONDS = 5
# The last member's sshd answers long after the rental: the create is still waiting when terraform dies.
LATE_SSH = {
    "method": "POST",
    "path": "/executors/cluster/rent",
    "kind": "ssh_late",
    "seconds": 30,
    "first": 1,
}


def live_members(account: Account) -> list[dict[str, Any]]:
    return [p for p in account.live()["pods"] if p.get("cluster_id")]


def holding(seconds: float, path: str = "/executors/cluster/rent") -> dict[str, Any]:
    """A fault plan whose rule ``held`` holds the first ``POST`` to ``path`` ``seconds`` before Lium
    takes it (and answers)."""
    rule = {"name": "held", "method": "POST", "path": path, "kind": "latency", "seconds": seconds, "first": 1}
    return {"rules": [rule]}


def until_held(account: Account, process: subprocess.Popen[str]) -> None:
    """Wait until the request the plan of :func:`holding` holds has reached Lium."""
    wait_for(
        lambda: fault_counters(account.emulator)["held"]["matched"] == 1,
        "the held request reaches Lium",
        WAIT_SECONDS,
        process=process,
    )


def test_ctrl_c_while_the_rental_is_on_its_way_leaves_the_cluster_in_the_state(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    tf = stack(CLUSTER % "interrupted")
    with (
        account.faults(holding(RENT_HELD_SECONDS)),
        reaped(tf.start("apply", "-auto-approve", "-no-color")) as process,
    ):
        until_held(account, process)
        interrupt(process)  # Ctrl-C: the rental is answered after Terraform asked the provider to stop
        output, _ = process.communicate(timeout=WAIT_SECONDS * 2)
    assert process.returncode != 0 and "cancelled" in output, output
    rented = {p["id"] for p in live_members(account)}
    assert len(rented) == 2, "the held rental was answered"
    # Lium's answer named the cluster: the state tracks it (tainted), so destroy knows what to remove
    (cluster,) = instances(tf, "lium_cluster")
    assert {n["pod_id"] for n in cluster["nodes"]} == rented
    tf.destroy()
    assert_nothing_left(account)


@pytest.mark.parametrize(
    "fault",
    [
        {"kind": "status", "status": 503},
        {"kind": "status", "status": 409, "code": "pod_state_conflict"},  # a member still being created
        {"kind": "drop_after_commit"},
        {"kind": "rate_limit", "seconds": 1},
    ],
    ids=["503", "409", "dropped", "429"],
)
def test_an_abandoned_create_removes_its_cluster_through_a_failed_removal_request(
    stack: Callable[[str], Terraform], account: Account, fault: dict[str, Any]
) -> None:
    tf = stack(CLUSTER % "abandoned")
    removal = {"name": "removal", "method": "DELETE", "path": "/clusters/*", "first": 1, **fault}
    with account.faults({"rules": [LATE_SSH, removal]}):
        with reaped(tf.start("apply", "-auto-approve", "-no-color")) as process:
            wait_for(
                lambda: len(live_members(account)) == 2,
                "both members are rented",
                WAIT_SECONDS,
                process=process,
            )
            os.kill(process.pid, signal.SIGKILL)  # a CI timeout: no state will ever hold the cluster
            process.wait(timeout=WAIT_SECONDS)
        wait_for(lambda: providers_in(tf.workdir) == [], "the orphaned provider exits", WAIT_SECONDS)
        assert fault_counters(account.emulator)["removal"]["fired"] == 1
    # the orphaned provider sent the removal again: nothing is billed, though no command runs again
    assert [p["status"] for p in live_members(account) if p["status"] != "DELETING"] == []
    wait_for(lambda: live_members(account) == [], "the members are gone", WAIT_SECONDS)
    assert_nothing_left(account)


def test_the_members_carry_their_provisional_deadline_before_the_listing_that_finds_them(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    """The rental's answer names the members: their removal is scheduled at once, so a machine that dies
    while the listing catches up (or a listing that fails, as here) leaves nothing without a deadline."""
    tf = stack(CLUSTER % "listing-fails")
    with (
        account.faults(holding(RENT_HELD_SECONDS)),
        reaped(tf.start("apply", "-auto-approve", "-no-color")) as process,
    ):
        until_held(account, process)
        # from now on every listing is garbage: the members are never listed by this create
        garbage = {"method": "GET", "path": "/pods", "kind": "garbage", "body": "not_json"}
        put_fault_plan(account.emulator, {"rules": [garbage]})
        output, _ = process.communicate(timeout=WAIT_SECONDS * 2)
    assert process.returncode != 0 and "listing the cluster's members" in output, output
    members = live_members(account)
    assert len(members) == 2
    with account.api() as api:
        removals = [api.get(f"/pods/{p['id']}").json()["removal_scheduled_at"] for p in members]
    assert None not in removals, "a member was left without a removal deadline"
    tf.destroy()
    assert_nothing_left(account)


# Longer than the grace an abandoned create gets to undo what it made (tfbridge.serving.handshake).
SLOW_RENT_SECONDS = 10


def test_a_create_killed_while_the_rental_answer_is_slow_still_removes_the_cluster(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    """Terraform is killed while Lium takes longer to answer the rental than an abandoned create has to
    undo it: the orphaned provider still learns what was rented and removes it; the destroy after that
    finds nothing billed."""
    tf = stack(CLUSTER % "slow-answer")
    with (
        account.faults(holding(SLOW_RENT_SECONDS)),
        reaped(tf.start("apply", "-auto-approve", "-no-color")) as process,
    ):
        until_held(account, process)
        os.kill(process.pid, signal.SIGKILL)  # a CI timeout: no state will ever hold the cluster
        process.wait(timeout=WAIT_SECONDS)
        wait_for(lambda: providers_in(tf.workdir) == [], "the orphaned provider exits", WAIT_SECONDS)
    assert [p for p in live_members(account) if p["status"] != "DELETING"] == [], "the cluster bills on"
    destroyed = tf.destroy()
    assert "0 destroyed" in destroyed.stdout
    wait_for(lambda: live_members(account) == [], "the members are gone", WAIT_SECONDS)
    assert_nothing_left(account)


CLUSTER_TEMPLATE = """
resource "lium_template" "t" {
  name  = "cluster-image"
  image = "daturaai/lium-cluster:1.2.0"
}
"""


def test_a_destroy_removes_the_cluster_a_dead_runner_rented_and_no_state_records(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    """The runner's machine dies after the rental, while the members' removal deadlines are being set: no
    process is left to undo it, and Terraform never recorded it. The stack's next destroy finds it by
    the Lium name its create gives it (this stack's tag) and removes it, before its template. (Terraform
    refreshes a destroy, and so meets the cluster's create, only when its state holds something: here
    its template. It shows no warning of that refresh, so the removal is in the provider's log alone.)"""
    tf = stack(CLUSTER_TEMPLATE)
    tf.apply()
    cluster = CLUSTER.replace("node_count = 2", "node_count = 2\n  template_id = lium_template.t.id")
    tf.write(PROVIDER_BLOCK + CLUSTER_TEMPLATE + cluster % "dead-runner")
    slow_deadline = holding(WAIT_SECONDS, "/pods/*/schedule-removal")
    with account.faults(slow_deadline), reaped(tf.start("apply", "-auto-approve", "-no-color")) as process:
        until_held(account, process)
        kill_machine(process, tf.workdir)
    assert len(live_members(account)) == 2 and instances(tf, "lium_cluster") == []
    tf.destroy()
    assert live_members(account) == [], "the destroy left the unrecorded cluster billing"
    assert_nothing_left(account)
