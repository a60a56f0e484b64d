"""``DELETE /clusters/{id}`` answered 404 while the members still run (Lium grouping the cluster no more,
a stale answer): the destroy removes each member itself instead of waiting its whole delete timeout for
members nobody removes, and leaves nothing billed."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.support.lium import Account, assert_nothing_left, instances
from tests.support.terraform import Terraform

pytestmark = [pytest.mark.terraform, pytest.mark.sandbox]

CLUSTER = """
resource "lium_cluster" "c" {
  name       = "unfound"
  node_count = 2
  timeouts {
    delete = "90s"
  }
}
"""
NOT_FOUND = {
    "rules": [
        {
            "method": "DELETE",
            "path": "/clusters/*",
            "kind": "status",
            "status": 404,
            "code": "cluster_not_found",
            "first": 1,
        }
    ]
}


def test_a_cluster_removal_answered_not_found_still_removes_the_running_members(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    tf = stack(CLUSTER)
    tf.apply()
    (cluster,) = instances(tf, "lium_cluster")
    assert cluster["status"] == "RUNNING"
    with account.faults(NOT_FOUND):
        destroyed = tf.destroy(check=False)
    assert destroyed.returncode == 0, destroyed.stdout + destroyed.stderr
    assert instances(tf, "lium_cluster") == []
    assert_nothing_left(account)
