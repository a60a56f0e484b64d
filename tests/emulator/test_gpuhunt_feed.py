"""gpuhunt's real ``LiumProvider`` reads the emulator's public feed and turns it into the catalog's offers;
a pod rented for an offer gets at least what the offer promises."""

from collections.abc import Iterator

import gpuhunt.providers.lium as gpuhunt_lium
import httpx
import pytest
from gpuhunt.providers.lium import LiumProvider

from lium_emulator.catalogs.nodes import Catalog, pod_share
from lium_emulator.launcher import RunningEmulator
from tests.emulator.testkit import create_template, delete_and_wait, get_pod, rent_body, rent_pod, wait_status


@pytest.fixture
def provider(emulator: RunningEmulator, monkeypatch: pytest.MonkeyPatch) -> Iterator[LiumProvider]:
    """gpuhunt's provider, its feed URL (a module constant) pointed at the emulator."""
    monkeypatch.setattr(gpuhunt_lium, "NODES_URL", f"{emulator.api_url}/public/v1/nodes")
    yield LiumProvider()


def test_gpuhunt_offers_match_the_catalog(provider: LiumProvider) -> None:
    catalog = Catalog.load(None)
    offers = provider.get()
    by_node: dict[str, list[int]] = {}
    for offer in offers:
        node = catalog.nodes[offer.instance_name]
        share = pod_share(node, offer.gpu_count)
        by_node.setdefault(node.id, []).append(offer.gpu_count)
        assert offer.price == pytest.approx(node.price_per_gpu_hour * offer.gpu_count)
        assert offer.cpu == share.cpu_count
        # gpuhunt rounds RAM and disk down from the feed's whole-GB values: never above the real share
        assert share.memory_gib - 1 <= offer.memory <= share.memory_gib
        assert share.storage_quota_gb - 1 <= offer.disk_size <= share.storage_quota_gb
        assert offer.spot == (node.tier == "spot")
        assert offer.location == f"{node.country_code}-{node.region}".lower()
        assert offer.gpu_vendor.value == "nvidia"
    assert set(by_node) == set(catalog.nodes), "every node of the catalog yields offers"
    for node_id, counts in by_node.items():
        node = catalog.nodes[node_id]
        assert sorted(counts) == list(range(node.min_rentable_gpu_count, node.gpu_count + 1))
    names = {offer.gpu_name for offer in offers}
    assert names == {"RTX3090", "RTX4090", "RTX5090", "A100", "H100", "H200", "L40S", "A6000"}


def test_a_pod_rented_for_an_offer_gets_its_resources(provider: LiumProvider, account: httpx.Client) -> None:
    h200 = next(o for o in provider.get() if o.gpu_name == "H200" and o.gpu_count == 1)
    template = create_template(account)
    pod_id = rent_pod(account, h200.instance_name, rent_body(template["id"]))
    pod = wait_status(account, pod_id, "RUNNING")
    assert pod["cpu_count"] >= h200.cpu and pod["ram_total"] >= h200.memory
    assert pod["storage_quota_gb"] >= h200.disk_size
    # the worked numbers (docs/lium-api.md#pod-share) for 1 of 8 H200 (ram_gb 2015, disk_free_gb 1467)
    assert (pod["cpu_count"], pod["ram_total"], pod["storage_quota_gb"]) == (24, 249, 61)
    remaining = [o.gpu_count for o in provider.get() if o.instance_name == h200.instance_name]
    assert remaining == list(range(1, 8)), "the feed reflects the rental"
    delete_and_wait(account, pod_id)
    assert get_pod(account, pod_id) is None
    assert max(o.gpu_count for o in provider.get() if o.instance_name == h200.instance_name) == 8
