"""gpuhunt is used only through its public names, and the offers stay exactly what its ``LiumProvider`` makes."""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gpuhunt.providers.lium as gpuhunt_lium
import pytest

from lium_provider.domain.offers import offers_from_nodes
from tests.support import http
from tests.support.feeds import serving_feed
from tests.support.terraform import REPO

SOURCE_DIRS = ("provider", "emulator", "constructs", "tests", "examples")
CATALOG = REPO / "emulator" / "lium_emulator" / "catalogs" / "data" / "nodes.json"


def _private_gpuhunt_names(path: Path) -> list[str]:
    """``gpuhunt`` imports in a module that name something ``_``-prefixed (a module or a member)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "gpuhunt":
            parts = (node.module or "").split(".") + [alias.name for alias in node.names]
            found += [f"{node.module}: {p}" for p in parts if p.startswith("_")]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "gpuhunt":
                    found += [alias.name for p in alias.name.split(".") if p.startswith("_")]
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and "gpuhunt" in ast.unparse(node):
            found.append(ast.unparse(node))
    return found


def test_no_module_uses_a_private_gpuhunt_name() -> None:
    modules = [p for d in SOURCE_DIRS for p in (REPO / d).rglob("*.py") if ".venv" not in p.parts]
    assert len(modules) > 50
    offenders = {str(p.relative_to(REPO)): names for p in modules if (names := _private_gpuhunt_names(p))}
    assert offenders == {}


def test_the_private_name_check_catches_each_form(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "from gpuhunt.providers.lium import _make_offers, get_location\n"
        "import gpuhunt._internal.models\n"
        "import gpuhunt.providers.lium as g\n"
        "x = gpuhunt.providers.lium._make_offers\n"
    )
    assert _private_gpuhunt_names(module) == [
        "gpuhunt.providers.lium: _make_offers",
        "gpuhunt._internal.models",
        "gpuhunt.providers.lium._make_offers",
    ]


def _node(node_id: str, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": node_id,
        "gpu_model": "RTX 4090",
        "gpu_count": 4,
        "available_gpu_count": 3,
        "min_rentable_gpu_count": 1,
        "price_per_gpu_hour": 0.31,
        "gpu_memory_gb": 24,
        "cpu_count": 32,
        "ram_gb": 125.4,
        "disk_free_gb": 3301.6,
        "tier": "secure",
        "country": "Poland",
        "country_code": "PL",
        "region": "14",
        "rent_url": f"https://lium.io/browse-pods/{node_id}",
    }
    base.update(fields)
    return base


# The emulator's catalog plus the corner cases of gpuhunt's conversion (each skips or trims offers).
EDGE_NODES = [
    _node("splittable"),
    _node("strings", gpu_count="4", available_gpu_count="2", price_per_gpu_hour="0.5", ram_gb="64"),
    _node("spot", tier="spot", country_code="us", region="ca"),
    _node("no-subdivision", region=None),
    _node("no-country", country_code=None),
    _node("no-disk", disk_free_gb=0),
    _node("bool-disk", disk_free_gb=True),
    _node("tiny-disk", disk_free_gb=4),
    _node("few-cpus", cpu_count=2),
    _node("unknown-gpu", gpu_model="Voodoo 5"),
    _node("h200-memory", gpu_model="H200", gpu_memory_gb=140),
    _node("whole-node", min_rentable_gpu_count=4, available_gpu_count=4),
    _node("min-above-free", min_rentable_gpu_count=4),
    _node("missing-ram", ram_gb=None),
    _node("zero-price", price_per_gpu_hour=0),
    _node("more-free-than-gpus", available_gpu_count=9),
    _node(""),
]


@pytest.fixture
def feed_url() -> Iterator[str]:
    """A loopback HTTP server serving the emulator's catalog and the edge cases as one nodes feed."""
    nodes = json.loads(CATALOG.read_text())
    with serving_feed([*(nodes if isinstance(nodes, list) else nodes["nodes"]), *EDGE_NODES]) as url:
        yield url


def test_offers_are_exactly_gpuhunts(feed_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpuhunt_lium, "NODES_URL", feed_url)  # the feed URL is a module constant
    theirs = gpuhunt_lium.LiumProvider().get()
    nodes = http.get(feed_url, timeout=30).json()["nodes"]
    ours = offers_from_nodes(nodes)
    expected = sorted(
        (
            i.instance_name,
            i.gpu_name,
            i.gpu_count,
            i.gpu_memory,
            i.cpu,
            i.memory,
            i.disk_size,
            i.location,
            i.spot,
            i.price,
        )
        for i in theirs
    )
    actual = sorted(
        (
            o.executor_id,
            o.gpu,
            o.gpu_count,
            o.gpu_memory_gib,
            o.cpu,
            o.memory_gib,
            o.disk_gb,
            o.region,
            o.spot,
            o.price_per_hour,
        )
        for o in ours
    )
    assert actual == expected
    edge_ids = {o.executor_id for o in ours} & {n["id"] for n in EDGE_NODES}
    assert edge_ids == {"splittable", "strings", "spot", "no-subdivision", "h200-memory", "whole-node"} | {
        "few-cpus",
        "more-free-than-gpus",
    }
