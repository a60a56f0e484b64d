"""A destroy is never blocked by a resource the configuration adds but that was never created.

``terraform destroy`` first refreshes with a normal plan, which plans creates too, and any error there
aborts the destroy. A create's plan asks Lium (for the offers a pod's filter matches, for the cluster
template) and refuses what cannot be made; in that plan it must not, or a configuration Lium cannot
serve right now would keep the stack's paid resources running.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.support.lium import PROVIDER_BLOCK, Account, assert_nothing_left, instances
from tests.support.terraform import Terraform, flat

pytestmark = [pytest.mark.terraform, pytest.mark.sandbox]

TEMPLATE = """
resource "lium_template" "made" {
  name             = "made-before"
  image            = "python:3.11-slim"
  entrypoint       = "/bin/sh"
  startup_commands = "-c 'exec sleep infinity'"
}
"""
POD_NO_OFFER_MATCHES = """
resource "lium_pod" "unservable" {
  name        = "unservable"
  template_id = lium_template.made.id
  gpu         = "B200"
}
"""
CLUSTER_WITHOUT_TEMPLATE = """
resource "lium_cluster" "unplanned" {
  name       = "unplanned"
  node_count = 2
}
"""
TEMPLATES_LISTING_REFUSED = {
    "rules": [{"method": "GET", "path": "/templates", "kind": "status", "status": 403}]
}


def test_a_pod_no_offer_matches_does_not_block_the_destroy(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    tf = stack(TEMPLATE)
    tf.apply()
    tf.write(PROVIDER_BLOCK + TEMPLATE + POD_NO_OFFER_MATCHES)
    planned = tf.run("plan", "-input=false", "-no-color", check=False)
    assert planned.returncode == 1 and "Unknown or unavailable GPU" in flat(planned.stderr), planned.stderr
    destroyed = tf.destroy(check=False)
    assert destroyed.returncode == 0, destroyed.stdout + destroyed.stderr
    assert instances(tf, "lium_template") == []
    assert_nothing_left(account)


def test_a_cluster_whose_template_lium_will_not_list_does_not_block_the_destroy(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    tf = stack(TEMPLATE)
    tf.apply()
    tf.write(PROVIDER_BLOCK + TEMPLATE + CLUSTER_WITHOUT_TEMPLATE)
    with account.faults(TEMPLATES_LISTING_REFUSED):
        planned = tf.run("plan", "-input=false", "-no-color", check=False)
        assert planned.returncode == 1 and "finding Lium's cluster template" in flat(planned.stderr), (
            planned.stderr
        )
        destroyed = tf.destroy(check=False)
    assert destroyed.returncode == 0, destroyed.stdout + destroyed.stderr
    assert instances(tf, "lium_template") == []
    assert_nothing_left(account)
