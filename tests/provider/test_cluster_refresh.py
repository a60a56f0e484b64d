"""``lium_cluster``'s refresh reads its members as a pod's refresh reads a pod: from the stack's shared
listing, a member the listing lacks confirmed by its own ``GET /pods/{id}``. So neither a listing that
lags (or drops rows) forgets a billed cluster, nor a listing Lium garbles blocks a plan or a destroy."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.lium import PROVIDER_BLOCK, Account, assert_nothing_left, instances
from tests.support.procs import wait_for
from tests.support.proxy import RecordingProxy
from tests.support.terraform import Terraform

pytestmark = pytest.mark.terraform

CLUSTER = """
resource "lium_cluster" "c" {
  name       = "refreshed"
  node_count = 2
}
"""
WAIT_SECONDS = 60.0


def live_members(account: Account) -> list[dict[str, Any]]:
    return [p for p in account.live()["pods"] if p.get("cluster_id")]


def without_cluster_members(method: str, path: str, content: bytes) -> bytes:
    """A ``GET /pods`` listing that has not caught up with the cluster: its members are missing."""
    if method != "GET" or not path.split("?", 1)[0].endswith("/pods"):
        return content
    rows = json.loads(content)
    return json.dumps([row for row in rows if not row.get("cluster_id")]).encode()


def test_a_destroy_through_a_listing_that_lacks_the_members_still_removes_the_cluster(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    tf = make_terraform(PROVIDER_BLOCK + CLUSTER, **account.env)
    tf.init()
    tf.apply()
    (cluster,) = instances(tf, "lium_cluster")
    with RecordingProxy(account.emulator.root_url, rewrite=without_cluster_members) as proxy:
        tf.env["LIUM_API_URL"] = proxy.url + "/api"
        tf.destroy()
        listed = [e for e in proxy.snapshot() if e.method == "GET" and e.route.endswith("/pods")]
        removed = [e for e in proxy.snapshot() if e.method == "DELETE" and cluster["id"] in e.path]
    assert listed, "the refresh read the (lagging) listing"
    assert removed, "the refresh forgot the cluster the listing lacked: nothing was removed"
    wait_for(lambda: live_members(account) == [], "the members are gone", WAIT_SECONDS)
    assert_nothing_left(account)


def test_a_garbled_listing_neither_fails_the_plan_nor_forgets_the_cluster(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    tf = stack(CLUSTER)
    tf.apply()
    garbage = {"method": "GET", "path": "/pods", "kind": "garbage", "body": "not_json"}
    with account.faults({"rules": [garbage]}):
        code, plan = tf.plan_exitcode()
    assert code == 0, plan
    assert len(instances(tf, "lium_cluster")) == 1
    tf.destroy()
    assert_nothing_left(account)


def test_a_members_removal_changed_outside_terraform_is_planned_back_on_every_member(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    tf = stack(CLUSTER.replace("node_count = 2", "node_count = 2\n  termination_hours = 5"))
    tf.apply()
    (cluster,) = instances(tf, "lium_cluster")
    pod_ids = [n["pod_id"] for n in cluster["nodes"]]
    with account.api() as api:
        # someone cancels one member's removal in Lium's UI: it would outlive the cluster's deadline
        assert api.delete(f"/pods/{pod_ids[1]}/schedule-removal").status_code == 200
    code, plan = tf.plan_exitcode()
    assert code == 2 and "1 to change, 0 to destroy" in plan, plan
    tf.apply()
    with account.api() as api:
        removals = {api.get(f"/pods/{pod_id}").json()["removal_scheduled_at"] for pod_id in pod_ids}
    assert len(removals) == 1 and None not in removals, removals
    assert tf.plan_exitcode()[0] == 0
    tf.destroy()
    assert_nothing_left(account)
