"""``lium_cluster_offers``: the RDMA fabrics on which a ``lium_cluster`` can be rented now."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from lium_provider.api.cluster_rules import MIN_CLUSTER_NODES
from lium_provider.resources.common import api_errors
from lium_provider.session import session
from tfbridge import Attribute, Context, DataSource


class ClusterOfferNodeModel(BaseModel):
    """A free node of the fabric, rented whole."""

    executor_id: Annotated[str | None, Attribute(computed=True, description="Executor (node) id.")] = None
    gpu: Annotated[str | None, Attribute(computed=True, description="GPU model as Lium names it.")] = None
    gpu_count: Annotated[int | None, Attribute(computed=True, description="GPUs of the node.")] = None
    price_per_hour: Annotated[
        float | None, Attribute(computed=True, description="USD per hour for the whole node.")
    ] = None


class ClusterOfferModel(BaseModel):
    """One fabric and its free nodes, cheapest first."""

    fabric_id: Annotated[
        str | None, Attribute(computed=True, description="Fabric id (`lium_cluster.fabric_id`).")
    ] = None
    fabric_type: Annotated[str | None, Attribute(computed=True, description="`infiniband` or `roce`.")] = None
    link_rate: Annotated[str | None, Attribute(computed=True, description="Link rate as Lium shows it.")] = (
        None
    )
    fabric_measured: Annotated[
        bool | None, Attribute(computed=True, description="Whether the wire between members was measured.")
    ] = None
    node_count: Annotated[int | None, Attribute(computed=True, description="Nodes on the fabric.")] = None
    free_nodes: Annotated[
        list[ClusterOfferNodeModel] | None,
        Attribute(computed=True, description="Free nodes, cheapest first."),
    ] = None


class ClusterOffersModel(BaseModel):
    """Fabrics with enough free nodes for a cluster now, cheapest node first within each."""

    model_config = ConfigDict(extra="forbid")

    min_free_nodes: Annotated[
        int | None, Attribute(optional=True, description="Only fabrics with at least this many free nodes.")
    ] = Field(default=None, ge=MIN_CLUSTER_NODES)
    offers: Annotated[
        list[ClusterOfferModel] | None, Attribute(computed=True, description="The fabrics.")
    ] = None


def _node(executor_id: str, gpu: str | None, gpus: int, price_per_gpu: float | None) -> ClusterOfferNodeModel:
    price = round(price_per_gpu * gpus, 6) if price_per_gpu is not None else None
    return ClusterOfferNodeModel(executor_id=executor_id, gpu=gpu, gpu_count=gpus, price_per_hour=price)


class ClusterOffersDataSource(DataSource[ClusterOffersModel]):
    type_name = "lium_cluster_offers"
    model = ClusterOffersModel
    description = ClusterOffersModel.__doc__ or ""

    def read(self, ctx: Context, config: ClusterOffersModel) -> ClusterOffersModel:
        with api_errors("reading Lium's cluster offers"):
            offers = session(ctx).client.cluster_offers()
        least = config.min_free_nodes or MIN_CLUSTER_NODES
        rows = []
        for offer in offers:
            if len(offer.nodes) < least:
                continue
            nodes = [_node(n.id, n.machine_name, n.gpu_count, n.price_per_gpu) for n in offer.nodes]
            nodes.sort(key=lambda n: (n.price_per_hour is None, n.price_per_hour or 0.0, n.executor_id or ""))
            rows.append(
                ClusterOfferModel(
                    fabric_id=offer.fabric_id,
                    fabric_type=offer.fabric_type,
                    link_rate=offer.link_rate,
                    fabric_measured=offer.fabric_measured,
                    node_count=offer.node_count,
                    free_nodes=nodes,
                )
            )
        return config.model_copy(update={"offers": rows})
