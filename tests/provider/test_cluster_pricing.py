"""``lium-tf plan-summary`` bounds a cluster's price by what its apply can rent: a replacement that deletes
the old cluster first may rent the nodes that frees, which the nodes feed does not list while they are
rented, so its worst case counts them too.

The feed is served over real HTTP on loopback by a throw-away server.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from lium_provider.plan_summary import OfferBook, Policies, judge
from tests.provider.test_api_offers import node
from tests.provider.test_plan_summary import plan_document
from tests.support.feeds import serving_feed

H100 = {"gpu_model": "H100 80GB HBM3", "gpu_count": 8, "available_gpu_count": 8, "gpu_memory_gb": 80}
H100 |= {"cpu_count": 128, "ram_gb": 1008, "disk_free_gb": 13806, "country_code": "US", "region": "CA"}
# Free now: two H100 nodes on no fabric and the fabric's third. The fabric's other two (16.72 and 16.88 an
# hour) are the old cluster's, so not in the feed; a replacement that deletes it first rents them again.
FREE = [("h100-a", 13.52), ("h100-b", 15.92), ("fabric-3", 17.04)]
OLD_MEMBERS = [{"pod_id": "p0", "executor_id": "fabric-1"}, {"pod_id": "p1", "executor_id": "fabric-2"}]
OLD_PRICE = 16.72 + 16.88
HOURS = 10


@pytest.fixture
def feed_url() -> Iterator[str]:
    nodes = [node(name, **H100, price_per_gpu_hour=price / 8) for name, price in FREE]
    with serving_feed(nodes) as url:
        yield url


def replaced_cluster(actions: list[str]) -> Any:
    """``lium_cluster.c``, on the old fabric's two nodes, replaced by a new filter (``min_memory_gib``)."""
    config = {"name": "train", "node_count": 2, "gpu": "H100", "termination_hours": HOURS}
    before = {**config, "id": "c1", "nodes": OLD_MEMBERS, "price_per_hour": OLD_PRICE}
    after = {**config, "min_memory_gib": 1}
    unknown = {"id": True, "nodes": True, "price_per_hour": True, "fabric_id": True}
    change = {"actions": actions, "before": before, "after": after, "after_unknown": unknown}
    return {"address": "lium_cluster.c", "mode": "managed", "type": "lium_cluster", "change": change}


def test_a_replacement_that_frees_its_nodes_first_counts_them_in_its_worst_case(feed_url: str) -> None:
    plan = plan_document(replaced_cluster(["delete", "create"]))
    # what the apply may rent: the old fabric's two freed nodes again (the cheapest two of the fabric)
    budget = OLD_PRICE * HOURS - 0.01
    report, results = judge([("stack", plan)], OfferBook(feed_url), Policies(max_spend=budget))
    (cluster,) = report.stacks[0].pods
    assert cluster.price_worst is not None and cluster.price_worst >= OLD_PRICE, cluster.basis
    (verdict,) = results
    assert verdict.violations, f"a spend bound below the cluster's {OLD_PRICE}/h for {HOURS} h passed"


def test_a_replacement_created_before_the_old_is_deleted_prices_only_the_free_nodes(feed_url: str) -> None:
    plan = plan_document(replaced_cluster(["create", "delete"]))  # create_before_destroy
    report, _ = judge([("stack", plan)], OfferBook(feed_url), Policies())
    (cluster,) = report.stacks[0].pods
    assert cluster.price_worst == pytest.approx(15.92 + 17.04), "the old nodes are still rented"
