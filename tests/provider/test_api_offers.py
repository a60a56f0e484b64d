"""Offers from feed nodes (through gpuhunt's Lium conversion) and the offer filter applied to them."""

from __future__ import annotations

from typing import Any

import pytest

from lium_provider.domain.offer_filter import OfferFilter
from lium_provider.domain.offers import (
    Offer,
    known_gpu_names,
    matches,
    offers_from_nodes,
    select_offers,
)


def node(node_id: str, **fields: Any) -> dict[str, object]:
    base: dict[str, object] = {
        "id": node_id,
        "gpu_model": "RTX 3090",
        "gpu_count": 1,
        "available_gpu_count": 1,
        "min_rentable_gpu_count": 1,
        "price_per_gpu_hour": 0.24,
        "gpu_memory_gb": 24,
        "cpu_count": 10,
        "ram_gb": 25,
        "disk_gb": 120,
        "disk_free_gb": 91,
        "tier": "secure",
        "country": "Germany",
        "country_code": "DE",
        "region": "BY",
        "rent_url": f"https://lium.io/browse-pods/{node_id}",
    }
    base.update(fields)
    return base


FEED = [
    node("n-3090-small"),
    node("n-3090-big", price_per_gpu_hour=0.3, disk_free_gb=601, tier="spot", country_code="US", region="CA"),
    node(
        "n-h200",
        gpu_model="H200",
        gpu_count=8,
        available_gpu_count=5,
        min_rentable_gpu_count=1,
        price_per_gpu_hour=3.99,
        gpu_memory_gb=140,
        cpu_count=192,
        ram_gb=2015,
        disk_free_gb=1467,
        country="United States",
        country_code="US",
        region="MS",
    ),
    node(
        "n-a100",
        gpu_model="A100-SXM4-80GB",
        gpu_count=8,
        available_gpu_count=8,
        min_rentable_gpu_count=8,
        price_per_gpu_hour=1.23,
        gpu_memory_gb=80,
        cpu_count=240,
        ram_gb=1772,
        disk_free_gb=15000,
        country_code="US",
        region="VA",
    ),
    node("n-a100-40", gpu_model="A100 40GB PCIe", gpu_memory_gb=40, price_per_gpu_hour=0.9),
    node("n-unknown-gpu", gpu_model="Imaginary 9000"),
    node("n-no-disk", disk_free_gb=None),
    node("n-hostile-count", gpu_count=10**12, available_gpu_count=10**12),
    node("n-bad-min", min_rentable_gpu_count="many"),
]
OFFERS = offers_from_nodes(FEED)


def by_id(executor_id: str, gpu_count: int = 1) -> Offer:
    return next(o for o in OFFERS if o.executor_id == executor_id and o.gpu_count == gpu_count)


def test_nodes_become_one_offer_per_rentable_count_and_bad_nodes_are_skipped() -> None:
    counts = sorted((o.executor_id, o.gpu_count) for o in OFFERS)
    assert counts == sorted(
        [("n-3090-small", 1), ("n-3090-big", 1), ("n-a100", 8), ("n-a100-40", 1)]
        + [("n-h200", n) for n in range(1, 6)]
    )


def test_offer_resources_are_the_pods_share() -> None:
    # Worked numbers (docs/lium-api.md#pod-share): 1 of 8 H200 on a 2015 GB host gets 249 GiB RAM and a 61 GB quota.
    h200 = by_id("n-h200")
    assert (h200.gpu, h200.gpu_model, h200.cpu, h200.memory_gib, h200.disk_gb) == (
        "H200",
        "H200",
        24,
        249.0,
        61.0,
    )
    assert h200.price_per_hour == pytest.approx(3.99) and by_id("n-h200", 5).price_per_hour == pytest.approx(
        19.95
    )
    assert (h200.region, h200.country, h200.spot) == ("us-ms", "United States", False)
    small = by_id("n-3090-small")
    assert (small.gpu, small.memory_gib, small.disk_gb, small.region) == ("RTX3090", 20.0, 30.0, "de-by")
    assert by_id("n-3090-big").spot is True


@pytest.mark.parametrize(
    ("gpu", "expected"),
    [
        ("RTX 3090", {"n-3090-small", "n-3090-big"}),
        ("rtx3090", {"n-3090-small", "n-3090-big"}),
        ("NVIDIA GeForce RTX 3090", {"n-3090-small", "n-3090-big"}),
        ("A100", {"n-a100-40"}),
        ("a100 40gb", {"n-a100-40"}),
        ("A100-SXM4-80GB", set()),  # one GPU asked for, the 80 GB node only rents whole (8)
        ("A10", set()),
        ("h200", {"n-h200"}),
    ],
)
def test_gpu_name_matching(gpu: str, expected: set[str]) -> None:
    assert {o.executor_id for o in select_offers(OFFERS, OfferFilter(gpu=gpu))} == expected


def test_gpu_memory_in_name_selects_the_variant() -> None:
    eight = OfferFilter(gpu="A100 80GB", gpu_count=8)
    assert [o.executor_id for o in select_offers(OFFERS, eight)] == ["n-a100"]
    assert select_offers(OFFERS, OfferFilter(gpu="A100 40GB", gpu_count=8)) == []
    # gpuhunt corrects the H200's reported 140 GB to 141 GiB; 5 % tolerance keeps "H200 140GB" working.
    assert select_offers(OFFERS, OfferFilter(gpu="H200 140GB"))[0].executor_id == "n-h200"


def test_bounds_regions_and_spot() -> None:
    assert [o.executor_id for o in select_offers(OFFERS, OfferFilter(max_price_per_hour=0.25))] == [
        "n-3090-small"
    ]
    assert [o.executor_id for o in select_offers(OFFERS, OfferFilter(min_disk_gb=100))] == ["n-3090-big"]
    # 2 of the H200 node's 8 GPUs get a quarter of its free disk: a 122 GB quota.
    assert [o.disk_gb for o in select_offers(OFFERS, OfferFilter(min_disk_gb=100, gpu_count=2))] == [122.0]
    assert (
        select_offers(OFFERS, OfferFilter(min_memory_gib=20.0, max_price_per_hour=0.25))[0].memory_gib == 20.0
    )
    us = {o.executor_id for o in select_offers(OFFERS, OfferFilter(regions=["US"]))}
    assert us == {"n-3090-big", "n-h200"}
    assert {o.executor_id for o in select_offers(OFFERS, OfferFilter(regions=[" us-ca "]))} == {"n-3090-big"}
    assert {o.executor_id for o in select_offers(OFFERS, OfferFilter(spot=True))} == {"n-3090-big"}
    assert "n-3090-big" not in {o.executor_id for o in select_offers(OFFERS, OfferFilter(spot=False))}


def test_no_default_disk_floor_keeps_small_disk_bargains() -> None:
    cheapest = select_offers(OFFERS, OfferFilter(gpu="RTX 3090"))[0]
    assert (cheapest.executor_id, cheapest.disk_gb) == ("n-3090-small", 30.0)


def test_order_is_price_then_executor_id() -> None:
    twins = offers_from_nodes([node("b-node"), node("a-node"), node("c-node", price_per_gpu_hour=0.1)])
    assert [o.executor_id for o in select_offers(twins, OfferFilter())] == ["c-node", "a-node", "b-node"]


def test_filter_validation_and_description() -> None:
    with pytest.raises(ValueError, match="gpu_count"):
        OfferFilter(gpu_count=0)
    with pytest.raises(ValueError, match="max_price_per_hour"):
        OfferFilter(max_price_per_hour=-1)
    flt = OfferFilter(
        gpu="RTX 3090", gpu_count=2, max_price_per_hour=0.5, regions=["us", "de"], min_disk_gb=50, spot=False
    )
    assert flt.describe() == (
        "2 'RTX 3090' GPUs per pod, at most $0.5/h, in us, de, with at least 50 GB disk, secure (non-spot) only"
    )
    assert OfferFilter().describe() == "1 GPU per pod"
    assert not matches(by_id("n-3090-small"), flt)


def test_known_gpu_names() -> None:
    assert known_gpu_names(OFFERS) == {"RTX3090", "H200", "A100"}
