"""``lium_cluster`` interrupted where CI interrupts it: a Ctrl-C while the rental is on its way, a create
abandoned when the cluster's removal meets a fault. Whatever happens, the rented cluster is either in the
state (and ``terraform destroy`` removes it) or already removed: never billed unknown to Terraform."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.faults import fault_counters, put_fault_plan
from tests.support.lium import Account, assert_nothing_left, instances
from tests.support.procs import providers_in, wait_for
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


def test_ctrl_c_while_the_rental_is_on_its_way_leaves_the_cluster_in_the_state(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    tf = stack(CLUSTER % "interrupted")
    held = {"name": "held", "method": "POST", "path": "/executors/cluster/rent", "kind": "latency"}
    plan = {"rules": [{**held, "seconds": RENT_HELD_SECONDS, "first": 1}]}
    with account.faults(plan), reaped(tf.start("apply", "-auto-approve", "-no-color")) as process:
        wait_for(
            lambda: fault_counters(account.emulator)["held"]["matched"] == 1,
            "the rental reaches Lium",
            WAIT_SECONDS,
            process=process,
        )
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
    held = {"name": "held", "method": "POST", "path": "/executors/cluster/rent", "kind": "latency"}
    plan = {"rules": [{**held, "seconds": RENT_HELD_SECONDS, "first": 1}]}
    with account.faults(plan), reaped(tf.start("apply", "-auto-approve", "-no-color")) as process:
        wait_for(
            lambda: fault_counters(account.emulator)["held"]["matched"] == 1,
            "the rental reaches Lium",
            WAIT_SECONDS,
            process=process,
        )
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
