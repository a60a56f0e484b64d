"""``lium_cluster`` refuses what Lium would refuse, naming the attribute: a template not of Lium's cluster
image fails the plan when its id is known then, and the apply before any rental when it is not."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from tests.support.lium import Account, assert_nothing_left
from tests.support.terraform import Terraform

pytestmark = pytest.mark.terraform

PYTHON_TEMPLATE = """
resource "lium_template" "t" {
  name  = "not-a-cluster-image"
  image = "python:3.11-slim"
}
"""
CLUSTER = """
resource "lium_cluster" "c" {
  name        = "wrong-image"
  node_count  = 2
  template_id = %s
}
"""


def test_a_template_of_another_image_fails_the_plan_naming_template_id(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    with account.api() as api:
        public = [t for t in api.get("/templates").json() if t["docker_image"] == "python"]
    tf = stack(CLUSTER % f'"{public[0]["id"]}"')
    plan = tf.run("plan", "-input=false", "-no-color", check=False)
    assert plan.returncode == 1, plan.stdout
    assert "is not of Lium's cluster image" in plan.stderr, plan.stderr
    assert "template_id =" in plan.stderr, "the error points at the attribute"
    assert_nothing_left(account)


def test_a_template_made_in_the_same_apply_is_checked_before_the_rental(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    tf = stack(PYTHON_TEMPLATE + CLUSTER % "lium_template.t.id")
    applied = tf.apply(check=False)
    assert applied.returncode == 1, applied.stdout
    assert "is not of Lium's cluster image" in applied.stderr, applied.stderr
    assert "template_id =" in applied.stderr, "the error points at the attribute"
    assert "cluster_template_required" not in applied.stderr, "nothing was sent to Lium to refuse"
    assert account.report()["pods"] == []
    tf.destroy()
    assert_nothing_left(account)


@pytest.mark.parametrize(
    ("argument", "line"),
    [
        ("fabric_id", 'fabric_id   = "no-such-fabric"'),
        ("gpu", 'gpu         = "B200"'),
        ("node_count", None),
    ],
)
def test_a_placement_no_fabric_can_take_names_the_attribute_in_the_plan_and_the_apply(
    stack: Callable[[str], Terraform], account: Account, argument: str, line: str | None
) -> None:
    body = CLUSTER % "null"
    body = body.replace("  template_id = null\n", f"  {line}\n" if line else "")
    if line is None:
        body = body.replace("node_count  = 2", "node_count  = 4")  # no fabric has four nodes
    tf = stack(body)
    plan = tf.run("plan", "-input=false", "-no-color", check=False)
    assert plan.returncode == 1, plan.stdout  # the plan says what the apply would fail on
    assert "No Lium fabric has enough free nodes for the cluster" in plan.stderr, plan.stderr
    # the diagnostic quotes the configuration's line of the attribute (`  12:   gpu = "B200"`)
    quoted = re.compile(rf"^\s*\d+:\s+{argument}\s+=", re.MULTILINE)
    assert quoted.search(plan.stderr.split("Error:", 1)[1]), plan.stderr
    applied = tf.apply(check=False)
    assert applied.returncode == 1
    assert quoted.search(applied.stderr.split("Error:", 1)[1]), applied.stderr
    assert_nothing_left(account)
