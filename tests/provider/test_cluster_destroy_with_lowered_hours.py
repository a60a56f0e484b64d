"""A destroy is never blocked by the configuration's ``termination_hours``: a cluster that has run longer
than the hours the configuration now asks for (lowered after it started) would be removed in the past,
which fails a plan, but ``terraform destroy`` (whose refresh is such a plan) removes it all the same."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from tests.support.lium import PROVIDER_BLOCK, Account, assert_nothing_left, instances
from tests.support.terraform import Terraform, flat

pytestmark = [pytest.mark.terraform, pytest.mark.sandbox]

CLUSTER = """
resource "lium_cluster" "c" {
  name              = "hours"
  node_count        = 2
  termination_hours = %d
}
"""


def test_a_destroy_removes_a_cluster_whose_lowered_hours_have_already_passed(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    tf = stack(CLUSTER % 6)
    tf.apply()
    # The cluster has run three hours (its recorded start, which a refresh keeps), and the configuration
    # now asks for one: the removal it plans would be two hours ago.
    path = tf.workdir / "terraform.tfstate"
    state = json.loads(path.read_text())
    (resource,) = [r for r in state["resources"] if r["type"] == "lium_cluster"]
    started = datetime.now(UTC) - timedelta(hours=3)
    resource["instances"][0]["attributes"]["started_at"] = started.strftime("%Y-%m-%dT%H:%M:%SZ")
    path.write_text(json.dumps(state))
    tf.write(PROVIDER_BLOCK + CLUSTER % 1)
    planned = tf.run("plan", "-input=false", "-no-color", check=False)
    assert planned.returncode == 1, "a plan that would remove the cluster in the past is refused"
    assert "termination_hours would remove the cluster in the past" in flat(planned.stderr), planned.stderr
    destroyed = tf.destroy(check=False)
    assert destroyed.returncode == 0, destroyed.stdout + destroyed.stderr
    assert instances(tf, "lium_cluster") == []
    assert_nothing_left(account)
