"""The packaged node catalog and the per-order resource split (docs/lium-api.md#pod-share worked numbers)."""

import pytest

from lium_emulator.catalogs.nodes import Catalog, Fabric, Node, pod_share
from lium_emulator.catalogs.templates import split_image_reference


def _node(**fields: object) -> Node:
    base: dict[str, object] = {
        "id": "00000000-0000-4000-8000-000000000001",
        "gpu_model": "H200",
        "machine_name": "NVIDIA H200",
        "gpu_count": 8,
        "min_rentable_gpu_count": 1,
        "price_per_gpu_hour": 2.0,
        "gpu_memory_gb": 140,
        "cpu_count": 192,
        "cpu_name": "cpu",
        "ram_gb": 2015,
        "disk_gb": 3840,
        "disk_free_gb": 1467,
        "network_download_mbps": 1000,
        "network_upload_mbps": 1000,
        "tier": "secure",
        "country": "Japan",
        "country_code": "JP",
        "region": "13",
        "city": "Tokyo",
    }
    return Node.model_validate({**base, **fields})


def test_worked_numbers_of_the_contract() -> None:
    h200 = _node()
    one, five = pod_share(h200, 1), pod_share(h200, 5)
    assert (one.cpu_count, one.memory_gib, one.storage_quota_gb) == (24, 249, 61)
    assert (five.cpu_count, five.memory_gib) == (120, 1246)
    assert one.local_volume_gb == 122, "2/3 of the 183.4 GB disk share"
    # gpuhunt's lower bounds of a feed saying ram_gb 251 / 16 are 250.5 / 15.5 GiB
    assert pod_share(_node(gpu_model="RTX 5090", ram_gb=250.5), 8).memory_gib == 246
    small = _node(gpu_count=2, ram_gb=15.5)
    assert [pod_share(small, n).memory_gib for n in (1, 2)] == [5, 11]


def test_the_packaged_catalog_is_varied_and_roomy() -> None:
    nodes = list(Catalog.load(None).nodes.values())
    assert len(nodes) >= 12
    assert {n.gpu_model for n in nodes} >= {
        "RTX 3090",
        "RTX 4090",
        "RTX 5090",
        "A100-SXM4-80GB",
        "H100 80GB HBM3",
        "H200",
    }
    assert {n.tier for n in nodes} == {"secure", "spot"}
    assert len({n.country_code for n in nodes}) >= 5
    assert any(n.splittable for n in nodes) and any(not n.splittable for n in nodes)
    assert sum(n.gpu_count for n in nodes if n.min_rentable_gpu_count == 1) >= 50


def test_a_bad_catalog_is_refused() -> None:
    with pytest.raises(ValueError, match="min_rentable_gpu_count"):
        _node(min_rentable_gpu_count=9)
    with pytest.raises(ValueError, match="unique"):
        Catalog([_node(), _node()])
    with pytest.raises(ValueError, match="ib-9"):
        Catalog([_node(fabric_id="ib-9")])
    fabric = Fabric(fabric_id="ib-1", fabric_type="infiniband")
    with pytest.raises(ValueError, match="fabric ids"):
        Catalog([_node()], [fabric, fabric])


def test_the_packaged_catalog_has_two_fabrics_of_whole_nodes() -> None:
    catalog = Catalog.load(None)
    assert {f.fabric_type for f in catalog.fabrics.values()} == {"infiniband", "roce"}
    for fabric_id in catalog.fabrics:
        members = catalog.fabric_nodes(fabric_id)
        assert len(members) >= 2, fabric_id
        assert len({(n.gpu_model, n.gpu_count) for n in members}) == 1, "one fabric, one kind of node"


@pytest.mark.parametrize(
    ("reference", "expected"),
    [
        ("python:3.11-slim", ("python", "3.11-slim", "")),
        ("pytorch/pytorch", ("pytorch/pytorch", "latest", "")),
        ("registry:5000/team/img", ("registry:5000/team/img", "latest", "")),
        ("registry:5000/team/img:v2", ("registry:5000/team/img", "v2", "")),
        ("repo/name@sha256:abc", ("repo/name", "latest", "sha256:abc")),
    ],
)
def test_full_image_references_are_split(reference: str, expected: tuple[str, str, str]) -> None:
    assert split_image_reference(reference) == expected
