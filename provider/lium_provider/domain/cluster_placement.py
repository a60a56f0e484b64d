"""Where a cluster goes: the fabric and the whole nodes on it that satisfy the offer filter, cheapest first.

A cluster's members are whole nodes of one RDMA fabric (docs/lium-api.md#clusters). Each free node is
checked against the one offer filter (:class:`~lium_provider.domain.offer_filter.OfferFilter`) with the
facts of its offer in the nodes feed where the feed lists it (region, tier, memory, disk), else with
what the cluster listing says (GPU, count, price): a fact not known breaks no rule. ``gpu_count`` is the
GPUs per node; unset, any node size matches. The cheapest set of ``count`` matching nodes of one fabric
wins, ties going to the fabric id, then the node ids, so a plan and its apply choose alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lium_provider.api.clusters import ClusterNode, ClusterOffer
from lium_provider.domain.offer_filter import OfferFilter, PodFacts, RentalFacts

if TYPE_CHECKING:  # gpuhunt costs ~100 ms to import: only what searches the feed loads it
    from lium_provider.domain.offers import Offer


@dataclass(frozen=True)
class ClusterNodeFacts:
    """One free node of a fabric, with the facts the offer filter is checked against."""

    executor_id: str
    gpu_count: int
    price_per_hour: float | None
    facts: RentalFacts


@dataclass(frozen=True)
class ClusterChoice:
    """The fabric and the nodes (rank order: cheapest first) a cluster rents."""

    fabric_id: str
    nodes: tuple[ClusterNodeFacts, ...]

    @property
    def price_per_hour(self) -> float | None:
        """What the whole cluster costs an hour; None when a node's price is not known."""
        prices = [n.price_per_hour for n in self.nodes]
        return None if any(p is None for p in prices) else round(sum(p or 0.0 for p in prices), 6)


def node_facts(node: ClusterNode, feed: Iterable[Offer]) -> ClusterNodeFacts:
    """``node`` with its feed offer's facts for its whole size, else the listing's own."""
    price = node.price_per_gpu * node.gpu_count if node.price_per_gpu is not None else None
    listed: RentalFacts = PodFacts(gpu=node.machine_name, gpu_count=node.gpu_count, price_per_hour=price)
    offered = next(
        (o for o in feed if o.executor_id == node.id and o.gpu_count == node.gpu_count),
        None,
    )
    facts = offered if offered is not None else listed
    return ClusterNodeFacts(node.id, node.gpu_count, facts.price_per_hour, facts)


def node_qualifies(flt: OfferFilter, node: ClusterNodeFacts) -> bool:
    """Whether a whole node satisfies the filter; an unset ``gpu_count`` takes the node's own."""
    sized = flt if flt.gpu_count is not None else flt.model_copy(update={"gpu_count": node.gpu_count})
    return not sized.unmet_by(node.facts)


def choose_cluster(
    offers: Sequence[ClusterOffer],
    feed: Sequence[Offer],
    flt: OfferFilter,
    count: int,
    fabric_id: str | None = None,
) -> ClusterChoice | None:
    """The cheapest ``count`` qualifying free nodes of one fabric (``fabric_id`` only, when given)."""
    choices: list[ClusterChoice] = []
    for offer in offers:
        if fabric_id is not None and offer.fabric_id != fabric_id:
            continue
        qualified = [n for n in (node_facts(node, feed) for node in offer.nodes) if node_qualifies(flt, n)]
        if len(qualified) < count:
            continue
        cheapest = sorted(qualified, key=lambda n: (n.price_per_hour or 0.0, n.executor_id))[:count]
        choices.append(ClusterChoice(offer.fabric_id, tuple(cheapest)))
    return min(choices, key=lambda c: (c.price_per_hour or 0.0, c.fabric_id), default=None)


def fits_once_freed(
    offers: Sequence[ClusterOffer],
    feed: Sequence[Offer],
    flt: OfferFilter,
    count: int,
    fabric_id: str | None,
    freed: tuple[str | None, int],
) -> bool:
    """Whether a cluster of ``count`` could be placed once the nodes of the cluster it replaces are free
    again (``freed``: that cluster's fabric, None when not known, and how many nodes it holds). Those
    nodes are not listed while it runs; they are counted as qualifying, as they did for the cluster
    that holds them, so a replacement is refused only when even they would not make it fit."""
    freed_fabric, freed_count = freed
    listed = {offer.fabric_id for offer in offers}
    for offer in offers:
        if fabric_id is not None and offer.fabric_id != fabric_id:
            continue
        qualified = sum(1 for node in offer.nodes if node_qualifies(flt, node_facts(node, feed)))
        if freed_fabric in (None, offer.fabric_id):
            qualified += freed_count
        if qualified >= count:
            return True
    # A fabric whose every node is rented is not listed at all: its freed nodes alone may do.
    unlisted = freed_fabric is None or freed_fabric not in listed
    return unlisted and freed_count >= count and fabric_id in (None, freed_fabric)
