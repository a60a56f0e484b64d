"""The bodies and answers of Lium's multi-node cluster routes (docs/lium-api.md#clusters)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from lium_provider.api.cluster_rules import MAX_CLUSTER_NODES, MIN_CLUSTER_NODES
from lium_provider.api.models import NonEmptyStr, RequestModel, ResponseModel


class ClusterNode(ResponseModel):
    """A free node of a fabric, as ``GET /executors/infiniband-clusters`` lists it (an executor row)."""

    id: NonEmptyStr
    gpu_count: Annotated[int, Field(ge=1)]
    machine_name: str | None = None
    price_per_gpu: float | None = None


class ClusterOffer(ResponseModel):
    """One RDMA fabric with the nodes on it that are free now."""

    fabric_id: NonEmptyStr
    fabric_type: str = "infiniband"
    link_rate: str | None = None
    fabric_measured: bool = False
    node_count: Annotated[int, Field(ge=0)] = 0
    nodes: list[ClusterNode] = Field(default_factory=list)


class ClusterRentRequest(RequestModel):
    """Body of ``POST /executors/cluster/rent``: whole nodes of one fabric, all or nothing."""

    pod_name: Annotated[str, Field(min_length=1, max_length=63)]
    template_id: NonEmptyStr
    executor_uuids: Annotated[
        list[NonEmptyStr], Field(min_length=MIN_CLUSTER_NODES, max_length=MAX_CLUSTER_NODES)
    ]
    user_public_key: list[NonEmptyStr]
    initial_port_count: Annotated[int, Field(ge=0, le=200)] | None = None
    enable_volume_encryption: bool = False
    enable_backups: bool = False

    def to_body(self) -> dict[str, Any]:
        """The JSON body; unset optional fields are omitted."""
        return self.model_dump(mode="json", exclude_none=True)


class ClusterRental(ResponseModel):
    """The answer of a cluster rental: the members' pod ids in rank order, when Lium names them."""

    success: bool = True
    cluster_id: str | None = None
    pod_ids: list[str] = Field(default_factory=list)
    message: str | None = None


class MemberRemoval(ResponseModel):
    """One member's row of ``DELETE /clusters/{id}``."""

    pod_id: str | None = None
    pod_name: str | None = None
    cluster_node_index: int | None = None
    success: bool = False
    message: str | None = None


class ClusterRemoval(ResponseModel):
    """The answer of ``DELETE /clusters/{id}``: one row per member."""

    pods: list[MemberRemoval]
