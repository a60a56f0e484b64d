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
