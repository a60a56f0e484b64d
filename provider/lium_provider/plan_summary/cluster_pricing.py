"""What a plan's ``lium_cluster`` instances cost per hour: a kept cluster its billed price, a new one what
its create would rent now.

A cluster takes whole nodes of one fabric. When Lium's fabrics can be read (an API key, as the PR job
has), a new cluster is priced exactly as ``lium_cluster`` places it (:func:`~lium_provider.domain.
cluster_placement.choose_cluster`: the cheapest ``node_count`` qualifying free nodes of one fabric, or of
its ``fabric_id``), so the estimate is what create rents if nothing changes before the apply. Without
them it falls back to the public nodes feed: the cheapest ``node_count`` whole-node offers of one GPU
model and size matching its filter, which may be on no fabric, and says so. Either way the worst case is
``node_count x max_price_per_hour`` when that bounds every node, else the dearest such set (of one
fabric, with the fabrics).

A replacement that deletes the old cluster first frees its nodes before the create rents: they are not
listed now (a fully rented node is not listed), yet the create may take them, so the worst case counts
them too, each at the old cluster's price per member (its nodes are alike).
"""

from __future__ import annotations

from typing import Any

from lium_provider.api.clusters import ClusterOffer
from lium_provider.domain.cluster_placement import choose_cluster, node_facts, node_qualifies
from lium_provider.domain.offer_filter import OfferFilter
from lium_provider.domain.offers import Offer, matches
from lium_provider.plan_summary.parsing import ResourceChange
from lium_provider.plan_summary.pricing import (
    OfferBook,
    PodCost,
    WorstBasis,
    kept_cost,
)
from lium_provider.plan_summary.values import code, usd


def whole_node_offers(book: OfferBook) -> list[Offer] | None:
    """Each node's offer of all its free GPUs, cheapest first; None when the feed cannot be read."""
    book.fetch()
    every = book.offers_all()
    if every is None:
        return None
    largest: dict[str, Offer] = {}
    for offer in every:
        kept = largest.get(offer.executor_id)
        if kept is None or offer.gpu_count > kept.gpu_count:
            largest[offer.executor_id] = offer
    whole = [o for o in largest.values() if book.free_gpus(o.executor_id) >= o.gpu_count]
    return sorted(whole, key=lambda o: (o.price_per_hour, o.executor_id))


def _freed_node_prices(change: ResourceChange) -> list[float]:
    """The price of each node a replacement frees before its create (the old cluster is deleted first:
    Terraform's ``["delete", "create"]``), at the old cluster's price per member; none otherwise."""
    if change.actions != ("delete", "create"):
        return []
    nodes, price = change.value("before", "nodes"), change.value("before", "price_per_hour")
    if (
        not isinstance(nodes, list)
        or not nodes
        or isinstance(price, bool)
        or not isinstance(price, int | float)
    ):
        return []
    return [price / len(nodes)] * len(nodes)


def _shape(change: ResourceChange, when: str) -> str:
    per_node = change.value(when, "gpu_count")
    return f"{change.shown(when, 'node_count')} x {per_node if isinstance(per_node, int) else 'any'}"


def price_cluster(change: ResourceChange, book: OfferBook) -> PodCost:
    """What ``change`` leaves running and at what price per hour (all members together)."""
    kept = kept_cost(change, _shape(change, "before"))
    if kept is not None:
        return kept
    gpu, shape = change.text("after", "gpu"), _shape(change, "after")
    count = change.value("after", "node_count")
    if change.unknown("node_count") or not isinstance(count, int) or isinstance(count, bool):
        return PodCost(change, gpu, shape, None, "node count known after apply")
    values: dict[str, Any] = {}
    unknown: list[str] = []
    for attribute in OfferFilter.fields():
        if change.sensitive("after", attribute):
            return PodCost(change, gpu, shape, None, f"filter {code(attribute)} is sensitive")
        if change.unknown(attribute):
            unknown.append(attribute)
        else:
            values[attribute] = change.value("after", attribute)
    try:
        flt = OfferFilter.of(values)
    except ValueError:
        return PodCost(change, gpu, shape, None, "the offer filter is invalid")
    # An unknown fabric_id the configuration does not set is the one create chooses: any.
    fabric_unknown = change.unknown("fabric_id") and "fabric_id" in change.configured
    fabric = None if change.unknown("fabric_id") else change.value("after", "fabric_id")
    fabrics = None if fabric_unknown else book.fabrics()
    if fabrics is not None:
        return _price_on_fabrics(change, book, fabrics, flt, count, fabric, unknown)
    unread = (
        "`fabric_id` known after apply"
        if fabric_unknown
        else f"Lium's fabrics not read: {book.fabrics_error}; these nodes may be on no fabric"
    )
    offers = whole_node_offers(book)
    if offers is None:
        return PodCost(change, gpu, shape, None, "nodes feed unavailable")
    matching = [
        o
        for o in offers
        if matches(o, flt if flt.gpu_count else flt.model_copy(update={"gpu_count": o.gpu_count}))
    ]
    # A fabric's nodes are alike: the members are count nodes of one GPU model and size.
    groups: dict[tuple[str, int], list[Offer]] = {}
    for offer in matching:
        groups.setdefault((offer.gpu_model, offer.gpu_count), []).append(offer)
    fitting = [group for group in groups.values() if len(group) >= count]
    if not fitting:
        return PodCost(change, gpu, shape, None, f"no {count} alike whole nodes match the filter now")
    cheapest = min((g[:count] for g in fitting), key=lambda chosen: sum(o.price_per_hour for o in chosen))
    freed = _freed_node_prices(change)
    sets = [sorted([o.price_per_hour for o in group] + freed)[-count:] for group in [*groups.values(), []]]
    dearest = max(sum(prices) for prices in sets if len(prices) == count)
    for offer in cheapest:
        book.take(offer)
    price = round(sum(o.price_per_hour for o in cheapest), 6)
    worst, worst_basis, worst_text = _worst_case(flt, count, dearest, freed, "alike matching nodes")
    chosen = ", ".join(code(a) for a in [*unknown, "fabric_id"])
    basis = (
        f"estimate: the {count} cheapest alike whole nodes of {len(matching)} matching now ({unread}); {chosen} "
        f"chosen at apply; worst case {worst_text}"
    )
    return PodCost(change, cheapest[0].gpu_model, shape, price, basis, True, worst, worst_basis)


def _worst_case(
    flt: OfferFilter, count: int, dearest: float, freed: list[float], nodes: str
) -> tuple[float, WorstBasis, str]:
    """A new cluster's worst case per hour, its basis and how the summary says it: ``count`` times its
    ``max_price_per_hour``, else the ``dearest`` set of ``count`` ``nodes`` (the nodes a delete-first
    replacement frees, ``freed``, among them)."""
    if flt.max_price_per_hour is not None:
        return (
            flt.max_price_per_hour * count,
            WorstBasis.MAX_PRICE,
            f"{count} x `max_price_per_hour` {usd(flt.max_price_per_hour)}/h",
        )
    worst = round(dearest, 6)
    freeing = f" or freed by the cluster it replaces ({len(freed)})" if freed else ""
    return worst, WorstBasis.DEAREST_OFFER, f"the {count} dearest {nodes} now{freeing} {usd(worst)}/h"


def _price_on_fabrics(
    change: ResourceChange,
    book: OfferBook,
    fabrics: list[ClusterOffer],
    flt: OfferFilter,
    count: int,
    fabric: object,
    unknown: list[str],
) -> PodCost:
    """A new cluster priced as its create places it on Lium's fabrics now; the worst case the dearest
    ``count`` qualifying nodes of one fabric (with the nodes a delete-first replacement frees)."""
    gpu, shape = change.text("after", "gpu"), _shape(change, "after")
    fabric_id = fabric if isinstance(fabric, str) else None
    feed = book.offers_all() or []
    choice = choose_cluster(fabrics, feed, flt, count, fabric_id)
    if choice is None or choice.price_per_hour is None:
        where = f"fabric {code(fabric_id)}" if fabric_id else "any fabric"
        return PodCost(change, gpu, shape, None, f"no {count} free qualifying nodes on {where} now")
    freed = _freed_node_prices(change)
    sets = []
    for offer in fabrics:
        if fabric_id is not None and offer.fabric_id != fabric_id:
            continue
        prices = [
            n.price_per_hour for n in (node_facts(x, feed) for x in offer.nodes) if node_qualifies(flt, n)
        ]
        known = sorted([p for p in prices if p is not None] + freed)
        if len(known) >= count:
            sets.append(sum(known[-count:]))
    dearest = max(sets, default=choice.price_per_hour)
    worst, worst_basis, worst_text = _worst_case(flt, count, dearest, freed, "qualifying nodes of one fabric")
    model = next((str(n.facts.gpu) for n in choice.nodes if n.facts.gpu), gpu)
    chosen = ", ".join(code(a) for a in unknown)
    at_apply = f"; {chosen} chosen at apply" if chosen else ""
    basis = (
        f"estimate: what create rents now, fabric {code(choice.fabric_id)} ({count} cheapest qualifying free "
        f"nodes){at_apply}; worst case {worst_text}"
    )
    return PodCost(change, model, shape, choice.price_per_hour, basis, True, worst, worst_basis)
