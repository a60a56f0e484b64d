"""A cluster rental whose answer is lost, and whose reconciliation cannot read the pod listing: whatever
the create ends with, every member it rented is in the state or carries a removal deadline, and the
next ``destroy`` leaves nothing billed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.support.lium import Account, assert_nothing_left, instances
from tests.support.terraform import Terraform

pytestmark = [pytest.mark.terraform, pytest.mark.sandbox]

# The default template: Lium's newest cluster template, which this stack neither creates nor deletes (so
# no template delete settles an unrecorded member at destroy), as the clusters guide declares it.
CLUSTER = """
resource "lium_cluster" "c" {
  name       = "lost"
  node_count = 2
}
"""


def members(account: Account) -> list[dict[str, Any]]:
    return [p for p in account.live()["pods"] if p.get("cluster_id")]


@pytest.mark.parametrize(
    "rent_fault",
    [
        {"kind": "drop_after_commit", "first": 1},  # rented, the answer never arrives
        {"kind": "status", "status": 503, "first": 1},  # not executed: the resend rents, and names them
    ],
    ids=["answer-lost", "refused-503"],
)
def test_an_uncertain_rental_with_a_garbled_listing_leaves_no_untracked_unscheduled_member(
    stack: Callable[[str], Terraform], account: Account, rent_fault: dict[str, Any]
) -> None:
    tf = stack(CLUSTER)
    plan = {
        "rules": [
            {"method": "POST", "path": "/executors/cluster/rent", **rent_fault},
            # every listing after the create's first (which looks for an earlier run's cluster) is garbled
            {"method": "GET", "path": "/pods", "kind": "garbage", "body": "not_json", "every": 2},
        ]
    }
    with account.faults(plan):
        applied = tf.apply(check=False)
    rented = members(account)
    assert len(rented) == 2, (rented, applied.stdout)
    tracked = {n["pod_id"] for c in instances(tf, "lium_cluster") for n in c["nodes"] or []}
    with account.api() as api:
        scheduled = {p["id"]: api.get(f"/pods/{p['id']}").json()["removal_scheduled_at"] for p in rented}
    for pod in rented:
        assert pod["id"] in tracked or scheduled[pod["id"]], (
            f"member {pod['id']} is neither in the state nor scheduled for removal:\n"
            f"{applied.stdout}{applied.stderr}"
        )
    tf.destroy()
    assert_nothing_left(account)
