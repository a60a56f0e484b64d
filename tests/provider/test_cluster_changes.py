"""``lium_cluster`` changed after it runs: what is planned in place stays the same cluster."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.support.lium import PROVIDER_BLOCK, Account, assert_nothing_left, instances
from tests.support.terraform import Terraform

pytestmark = pytest.mark.terraform

CLUSTER = """
resource "lium_cluster" "c" {
  name       = "unfiltered"
  node_count = 2
%s}
"""


def test_new_termination_hours_move_the_removal_in_place_without_a_gpu_filter(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    tf = stack(CLUSTER % "")  # no `gpu`: the shared filter's computed field stays unset
    tf.apply()
    (cluster,) = instances(tf, "lium_cluster")
    tf.write(PROVIDER_BLOCK + CLUSTER % "  termination_hours = 5\n")
    code, plan = tf.plan_exitcode()
    assert code == 2 and "1 to change, 0 to destroy" in plan, plan
    tf.apply()
    (moved,) = instances(tf, "lium_cluster")
    assert moved["id"] == cluster["id"] and moved["termination_hours"] == 5
    assert tf.plan_exitcode()[0] == 0
    tf.destroy()
    assert_nothing_left(account)


def test_a_new_filter_under_create_before_destroy_rents_a_new_cluster_and_removes_the_old(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    keep_up = "  lifecycle {\n    create_before_destroy = true\n  }\n"
    tf = stack(CLUSTER % keep_up)
    tf.apply()
    (old,) = instances(tf, "lium_cluster")
    assert old["fabric_id"] == "roce-iad-a100-01", "the cheapest fabric"
    tf.write(PROVIDER_BLOCK + CLUSTER % (keep_up + '  gpu = "H100"\n'))
    tf.apply()
    (new,) = instances(tf, "lium_cluster")
    # the replacement did not adopt the cluster it replaces (then removed by the deposed object's destroy)
    assert new["id"] != old["id"] and new["fabric_id"] == "ib-sjc-h100-01"
    with account.api() as api:
        members = [api.get(f"/pods/{n['pod_id']}").json() for n in new["nodes"]]
    assert [m["status"] for m in members] == ["RUNNING", "RUNNING"]
    assert tf.plan_exitcode()[0] == 0
    tf.destroy()
    assert_nothing_left(account)


@pytest.mark.parametrize(
    "placement",
    ["", 'fabric_id = "ib-sjc-h100-01"', "gpu_count = 8", 'regions = ["us"]'],
    ids=["gpu", "fabric", "gpu-count", "regions"],
)
def test_an_imported_cluster_takes_the_configured_placement_in_place(
    make_terraform: Callable[..., Terraform], account: Account, placement: str
) -> None:
    """Lium keeps no placement on the members: the configuration's is recorded, not a reason to replace
    the running cluster."""
    body = PROVIDER_BLOCK + CLUSTER % f'  gpu = "H100"\n  {placement}\n'

    def checkout() -> Terraform:  # two checkouts of one stack: its identity is set, not derived
        tf = make_terraform(body, **account.env, LIUM_STACK="clusters")
        tf.init()
        return tf

    first = checkout()
    first.apply()
    (cluster,) = instances(first, "lium_cluster")
    second = checkout()
    second.run("import", "-no-color", "lium_cluster.c", cluster["id"])
    code, plan = second.plan_exitcode()
    assert code == 2 and "0 to add, 1 to change, 0 to destroy" in plan, plan
    second.apply()
    (kept,) = instances(second, "lium_cluster")
    assert kept["id"] == cluster["id"] and kept["gpu"] == "H100"
    assert second.plan_exitcode()[0] == 0
    second.run("state", "rm", "lium_cluster.c")
    first.destroy()
    assert_nothing_left(account)
