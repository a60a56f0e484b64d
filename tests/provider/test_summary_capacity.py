"""The summary prices what the creates will rent: several pods of one filter take the feed's free GPUs in
turn (not all the cheapest node's), and a node whose price is not a finite number offers nothing.

The feed is served over real HTTP on loopback by a throw-away server.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from lium_provider.domain.offers import offers_from_nodes
from lium_provider.plan_summary import OfferBook, Policies, judge
from tests.provider.test_api_offers import node
from tests.provider.test_plan_summary import plan_document, pod_entry
from tests.support.feeds import serving_feed

NODES = [
    node("cheap-one", gpu_model="RTX 4090", price_per_gpu_hour=0.10),
    node("dear-eight", gpu_model="RTX 4090", gpu_count=8, available_gpu_count=8, price_per_gpu_hour=5.0),
    node("not-a-price", gpu_model="RTX 4090", price_per_gpu_hour="NaN"),
]


@pytest.fixture
def feed_url() -> Iterator[str]:
    with serving_feed(NODES) as url:
        yield url


def new_pod(address: str) -> Any:
    after = {"name": address, "gpu": "RTX 4090", "gpu_count": 1, "termination_hours": 2}
    return pod_entry(address, ["create"], None, after)


def test_pods_of_one_filter_take_the_free_gpus_in_turn_and_a_nan_price_offers_nothing(feed_url: str) -> None:
    plan = plan_document(new_pod("lium_pod.p[0]"), new_pod("lium_pod.p[1]"))
    report, results = judge([("stack", plan)], OfferBook(feed_url), Policies(max_hourly_total=1.0))
    prices = sorted(pod.price_after for pod in report.stacks[0].pods if pod.price_after is not None)
    assert prices == [0.10, 5.0], "the second pod cannot have the one GPU the first takes"
    (verdict,) = results
    assert verdict.violations, "$5.10/h passed a $1/h bound"
    assert (
        offers_from_nodes([NODES[2]]) == []
        and offers_from_nodes([{**NODES[2], "price_per_gpu_hour": "inf"}]) == []
    )
