"""Node catalogs for tests that need a node the packaged catalog lacks."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

PRICEY_NODE = "00000000-0000-4000-8000-000000003600"
"""A one-GPU node billed $3600 an hour, $1 a second: a key's budget runs out within seconds on it."""
PRICEY_HOURLY = 3600.0


def packaged_catalog() -> dict[str, Any]:
    """The emulator's default node catalog, as ``serve --nodes`` reads it."""
    text = resources.files("lium_emulator.catalogs").joinpath("data/nodes.json").read_text()
    catalog: dict[str, Any] = json.loads(text)
    return catalog


def with_pricey_node(catalog: dict[str, Any]) -> dict[str, Any]:
    """``catalog`` plus :data:`PRICEY_NODE`, a copy of its first node."""
    pricey = {**catalog["nodes"][0], "id": PRICEY_NODE, "gpu_count": 1, "price_per_gpu_hour": PRICEY_HOURLY}
    return {**catalog, "nodes": [*catalog["nodes"], pricey]}


def write_catalog(directory: Path, catalog: dict[str, Any]) -> Path:
    """``catalog`` as ``directory/nodes.json``, for ``serve --nodes``."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "nodes.json"
    path.write_text(json.dumps(catalog))
    return path
