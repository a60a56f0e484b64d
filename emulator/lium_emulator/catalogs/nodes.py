"""The emulated fleet: GPU nodes loaded from a JSON catalog, and what a pod gets on them.

The default catalog ships as ``lium_emulator/catalogs/data/nodes.json``; ``--nodes FILE`` replaces it. A node's
static description lives here; how many of its GPUs are free is derived from the live pods (see
``state.EmulatorState.gpus_in_use``), so it is always consistent, also after a restart.
"""

import json
import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

KIB_PER_GIB = 1024 * 1024
FLEET_PRICE_STEP = 0.01  # each generated node costs this share more than the one before: a strict order
EARTH_RADIUS_MILES = 3958.8


class Node(BaseModel):
    """One rentable host ("executor"), as described in the catalog file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
    gpu_model: str = Field(min_length=1)
    machine_name: str = Field(min_length=1)
    gpu_count: int = Field(ge=1)
    min_rentable_gpu_count: int = Field(ge=1)
    price_per_gpu_hour: float = Field(gt=0)
    gpu_memory_gb: float = Field(gt=0)
    cpu_count: int = Field(ge=1)
    cpu_name: str
    ram_gb: float = Field(gt=0, description="true host RAM in GiB; the feed rounds it")
    disk_gb: float = Field(gt=0)
    disk_free_gb: float = Field(gt=0, description="true free disk in GB; the feed rounds it")
    network_download_mbps: float = Field(ge=0)
    network_upload_mbps: float = Field(ge=0)
    tier: Literal["secure", "spot"]
    country: str
    country_code: str
    region: str
    city: str
    latitude: float | None = Field(default=None, ge=-90, le=90, description="the city's; None = unknown")
    longitude: float | None = Field(default=None, ge=-180, le=180)
    # What Lium's node checks report (docs/lium-api.md#executors); defaults keep older catalog files valid.
    max_cuda_version: float = Field(default=12.8, gt=0, description="highest CUDA the driver supports")
    driver_version: str = Field(default="570.133.20", min_length=1)
    nvlink: bool | None = Field(default=None, description="every GPU pair on NVLink; None = not reported")
    reliability_score: float = Field(default=95.0, ge=0, le=100)
    uptime_in_minutes: int = Field(default=43200, ge=0)
    port_count: int = Field(default=100, ge=3, description="external ports the node can publish")
    fabric_id: str | None = Field(
        default=None, min_length=1, max_length=100, description="its RDMA fabric; None = no cluster rentals"
    )

    @model_validator(mode="after")
    def _min_within_count(self) -> "Node":
        if self.min_rentable_gpu_count > self.gpu_count:
            raise ValueError("min_rentable_gpu_count exceeds gpu_count")
        return self

    @property
    def splittable(self) -> bool:
        """Whether orders smaller than the whole node are accepted."""
        return self.min_rentable_gpu_count < self.gpu_count

    def miles_from(self, latitude: float, longitude: float) -> float | None:
        """Great-circle distance in miles from the node's city to a point; None without coordinates."""
        if self.latitude is None or self.longitude is None:
            return None
        lat1, lat2 = math.radians(self.latitude), math.radians(latitude)
        half_dlat = (lat2 - lat1) / 2
        half_dlon = math.radians(longitude - self.longitude) / 2
        h = math.sin(half_dlat) ** 2 + math.cos(lat1) * math.cos(lat2) * math.sin(half_dlon) ** 2
        return 2 * EARTH_RADIUS_MILES * math.asin(min(1.0, math.sqrt(h)))

    @property
    def host_ram_reserve_gib(self) -> float:
        """RAM the host keeps for itself: ``max(4 GiB, 1 % of host RAM)`` (docs/lium-api.md#pod-share)."""
        return max(4.0, self.ram_gb * 0.01)


class Fabric(BaseModel):
    """An RDMA fabric: the nodes on it can be rented together as one cluster (docs/lium-api.md#clusters)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    fabric_id: str = Field(min_length=1, max_length=100)
    fabric_type: Literal["infiniband", "roce"]
    link_rate: str | None = Field(default=None, max_length=50, description="as Lium shows it, e.g. 400 Gb/s")
    fabric_measured: bool = Field(default=False, description="whether the wire between members was measured")


@dataclass(frozen=True)
class PodShare:
    """The resources a pod of ``gpu_count`` GPUs gets on a node (docs/lium-api.md#pod-share)."""

    gpu_count: int
    cpu_count: int
    memory_gib: int
    local_volume_gb: int
    storage_quota_gb: int


def pod_share(node: Node, gpu_count: int) -> PodShare:
    """CPU, memory and disk of an order of ``gpu_count`` GPUs: each a proportional share, rounded down.

    CPU is ``floor(cpu * n / G)``; memory ``floor((ram - reserve) * n / G)`` GiB, at least 1; the free
    disk share is split into a local volume (2/3) and the container storage quota (1/3).
    """
    share = gpu_count / node.gpu_count
    disk_share = node.disk_free_gb * share
    return PodShare(
        gpu_count=gpu_count,
        cpu_count=max(1, math.floor(node.cpu_count * share)),
        memory_gib=max(1, math.floor((node.ram_gb - node.host_ram_reserve_gib) * share)),
        local_volume_gb=math.floor(disk_share * 2 / 3),
        storage_quota_gb=math.floor(disk_share / 3),
    )


class Catalog:
    """The nodes of the fleet, by id, in catalog order, and the fabrics some of them sit on."""

    def __init__(self, nodes: list[Node], fabrics: Sequence[Fabric] = ()) -> None:
        ids = [node.id for node in nodes]
        if len(set(ids)) != len(ids):
            raise ValueError("node ids in the catalog must be unique")
        self.nodes: dict[str, Node] = {node.id: node for node in nodes}
        self.fabrics: dict[str, Fabric] = {fabric.fabric_id: fabric for fabric in fabrics}
        if len(self.fabrics) != len(fabrics):
            raise ValueError("fabric ids in the catalog must be unique")
        undeclared = {n.fabric_id for n in nodes if n.fabric_id is not None} - set(self.fabrics)
        if undeclared:
            raise ValueError(f"nodes name fabrics the catalog does not declare: {sorted(undeclared)}")

    @classmethod
    def load(cls, path: Path | None) -> "Catalog":
        """Read ``path`` (a JSON list of nodes, or ``{"nodes": [...], "fabrics": [...]}``), or the
        packaged default."""
        if path is None:
            text = resources.files(__package__).joinpath("data/nodes.json").read_text()
        else:
            text = path.read_text()
        data = json.loads(text)
        items = data["nodes"] if isinstance(data, dict) else data
        fabrics = data.get("fabrics", []) if isinstance(data, dict) else []
        return cls(
            [Node.model_validate(item) for item in items], [Fabric.model_validate(item) for item in fabrics]
        )

    def fabric_nodes(self, fabric_id: str) -> list[Node]:
        """The nodes on fabric ``fabric_id``, in catalog order."""
        return [node for node in self.nodes.values() if node.fabric_id == fabric_id]

    def get(self, node_id: str) -> Node | None:
        """The node with ``node_id``, or None."""
        return self.nodes.get(node_id)


def generate_fleet(count: int, gpus_per_node: int, gpu_model: str) -> list[Node]:
    """``count`` nodes of ``gpus_per_node`` ``gpu_model`` GPUs each, for benchmarks of large fleets.

    Each is a copy of the packaged catalog's largest ``gpu_model`` node, its CPU, RAM and disk scaled to
    ``gpus_per_node`` and rentable one GPU at a time, with a stable id (the same command makes the same
    catalog) and a price :data:`FLEET_PRICE_STEP` above the previous node's, so the cheapest order is
    the catalog's order.
    """
    if count < 1 or gpus_per_node < 1:
        raise ValueError("a fleet needs at least one node of at least one GPU")
    like = [n for n in Catalog.load(None).nodes.values() if n.gpu_model == gpu_model]
    if not like:
        raise ValueError(f"the packaged catalog has no {gpu_model!r} node to copy")
    template = max(like, key=lambda n: n.gpu_count)
    scale = gpus_per_node / template.gpu_count
    return [
        template.model_copy(
            update={
                "id": str(
                    uuid.uuid5(uuid.NAMESPACE_URL, f"lium-emulator-fleet/{gpu_model}/{gpus_per_node}/{i}")
                ),
                "gpu_count": gpus_per_node,
                "min_rentable_gpu_count": 1,
                "price_per_gpu_hour": round(template.price_per_gpu_hour * (1 + FLEET_PRICE_STEP * i), 6),
                "cpu_count": max(1, round(template.cpu_count * scale)),
                "ram_gb": round(template.ram_gb * scale, 1),
                "disk_gb": round(template.disk_gb * scale, 1),
                "disk_free_gb": round(template.disk_free_gb * scale, 1),
            }
        )
        for i in range(count)
    ]
