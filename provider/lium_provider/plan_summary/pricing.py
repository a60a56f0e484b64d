"""What the pods of a plan cost per hour: a kept pod its billed price, a new rental what Lium asks now.

A pod that will be rented is priced at the chosen executor's offer, or the cheapest offer matching the
pod's filter, found in the public nodes feed exactly as ``lium_pod`` chooses at apply time; the GPUs an
earlier pod of the plan takes are not free for the next (:meth:`OfferBook.take`).

A filter field the plan does not know yet (``gpu`` is computed: a pod that names none shows it as known
after apply) makes the price an *estimate*: the cheapest offer matching the fields that are known, which
is what create rents when the field is simply unset. Its worst case is the pod's ``max_price_per_hour``
when set, else the dearest offer matching those fields now.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from lium_provider.api.client import LiumClient
from lium_provider.api.clusters import ClusterOffer
from lium_provider.api.endpoints import DEFAULT_ENDPOINT, feed_url_for
from lium_provider.api.errors import LiumError
from lium_provider.domain.offer_filter import OfferFilter
from lium_provider.domain.offers import Offer, fetch_feed, matches, offers_from_nodes, select_offers
from lium_provider.plan_summary.parsing import ResourceChange
from lium_provider.plan_summary.values import SENSITIVE_TEXT, code, usd


def resolve_feed_url(flag: str | None, environ: Mapping[str, str]) -> str:
    """``--nodes-feed-url``, else ``LIUM_NODES_FEED_URL``, else the feed of ``LIUM_API_URL`` (the provider's rule)."""
    return feed_url_for(
        environ.get("LIUM_API_URL") or DEFAULT_ENDPOINT, flag or environ.get("LIUM_NODES_FEED_URL")
    )


@dataclass
class OfferBook:
    """Offers from the nodes feed, and Lium's fabrics when an API key can read them, each fetched at most
    once; a failed fetch is remembered."""

    feed_url: str
    error: str | None = None
    api_url: str | None = None
    """Lium's API, whose ``GET /executors/infiniband-clusters`` lists the fabrics a cluster is rented on."""
    api_key: str | None = field(default=None, repr=False)
    fabrics_error: str | None = None
    """Why the fabrics could not be read (no API key, or the request failed); None once they were."""
    _fabrics: list[ClusterOffer] | None = None
    _all: list[Offer] | None = None
    _by_count: dict[int, list[Offer]] = field(default_factory=dict)
    _listed_gpus: dict[str, int] = field(default_factory=dict)
    _taken: dict[str, int] = field(default_factory=dict)

    @classmethod
    def for_environment(cls, feed_flag: str | None, environ: Mapping[str, str]) -> OfferBook:
        """The book a command uses: the feed of :func:`resolve_feed_url`, and Lium's fabrics read with
        ``LIUM_API_URL`` and ``LIUM_API_KEY`` (the provider's), when the key is set."""
        return cls(
            resolve_feed_url(feed_flag, environ),
            api_url=environ.get("LIUM_API_URL") or DEFAULT_ENDPOINT,
            api_key=environ.get("LIUM_API_KEY") or None,
        )

    def fabrics(self) -> list[ClusterOffer] | None:
        """Lium's fabrics with their free nodes, as ``lium_cluster`` reads them to place a cluster; None
        when they cannot be read (:attr:`fabrics_error` says why)."""
        if self._fabrics is not None or self.fabrics_error is not None:
            return self._fabrics
        if not self.api_key or not self.api_url:
            self.fabrics_error = "no LIUM_API_KEY to read Lium's fabrics with"
            return None
        try:
            with LiumClient(self.api_url, self.api_key) as client:
                self._fabrics = client.cluster_offers()
        except (LiumError, ValueError) as exc:
            self.fabrics_error = str(exc)
        return self._fabrics

    def free_gpus(self, executor: str) -> int:
        """The GPUs the feed lists as free on ``executor``, less those this summary's rentals took."""
        return self._listed_gpus.get(executor, 0) - self._taken.get(executor, 0)

    def take(self, offer: Offer) -> None:
        """Count ``offer`` as rented by this plan: the next pod of the plan cannot have its GPUs."""
        self._taken[offer.executor_id] = self._taken.get(offer.executor_id, 0) + offer.gpu_count

    def fetch(self) -> None:
        """Read the feed now, unless it was read (or failed) already: ``lium-tf gitops plan`` does this
        while Terraform plans."""
        if self._all is not None or self.error is not None:
            return
        try:
            self._all = offers_from_nodes(fetch_feed(self.feed_url))
        except (LiumError, ValueError) as exc:
            self.error = str(exc)
            return
        for offer in self._all:  # a node's largest offer is all its free GPUs
            listed = self._listed_gpus.get(offer.executor_id, 0)
            self._listed_gpus[offer.executor_id] = max(listed, offer.gpu_count)

    def offers_all(self) -> list[Offer] | None:
        """Every offer of the feed; None when it cannot be read."""
        self.fetch()
        return self._all

    def offers(self, gpu_count: int) -> list[Offer] | None:
        """Every offer of ``gpu_count`` GPUs, cheapest first; None when the feed cannot be read."""
        self.fetch()
        if self._all is None:
            return None
        if gpu_count not in self._by_count:
            try:
                wanted = OfferFilter(gpu_count=gpu_count)
            except ValueError:  # a count no offer can have
                return []
            self._by_count[gpu_count] = select_offers(self._all, wanted)
        return self._by_count[gpu_count]


_KEPT_BASIS = {
    "keep": "current rental",
    "update": "current rental",
    "destroy": "destroyed",
    "forget": "forgotten: still billed, no longer managed",
}


@dataclass(frozen=True)
class PodCost:
    """One ``lium_pod`` instance in the summary: what runs after the plan and what it costs per hour.

    ``gpu``, ``gpu_count`` and ``name`` are display text; ``basis`` is Markdown saying where the price
    comes from. ``price_after`` is None when the price is not known now. An ``estimate`` also has a
    ``worst_price`` (what the pod can cost per hour at most) and ``worst_basis`` saying where it comes from.
    """

    change: ResourceChange
    gpu: str
    gpu_count: str
    price_after: float | None
    basis: str
    estimate: bool = False
    worst_price: float | None = None
    worst_basis: WorstBasis | None = None

    @property
    def price_worst(self) -> float | None:
        """The most this pod can cost per hour after the plan: an estimate's worst case, else its price."""
        return self.worst_price if self.estimate else self.price_after

    @property
    def name(self) -> str:
        return self.change.text("after" if self.change.after is not None else "before", "name")

    @property
    def price_before(self) -> float | None:
        return known_price(self.change)

    @property
    def exists_after(self) -> bool:
        """Whether the pod runs, and is billed, after the apply: a forgotten pod still is."""
        return self.change.action in ("create", "update", "replace", "keep", "forget")

    @property
    def existed_before(self) -> bool:
        return self.change.before is not None


class WorstBasis(StrEnum):
    """Where an estimate's worst-case price comes from (the JSON document's ``worst_case_price_basis``)."""

    MAX_PRICE = "max_price_per_hour"
    DEAREST_OFFER = "dearest_offer"


def known_price(change: ResourceChange) -> float | None:
    """The ``price_per_hour`` the pod the plan starts from is billed (None for a new pod or if not shown)."""
    value = change.value("before", "price_per_hour")
    if change.sensitive("before", "price_per_hour") or isinstance(value, bool):
        return None
    return float(value) if isinstance(value, int | float) else None


def kept_cost(change: ResourceChange, shape: str) -> PodCost | None:
    """What a change that rents nothing leaves: its billed price while it still runs (kept, updated in
    place, forgotten), none once destroyed; None for a create or replace, which rents anew. ``shape`` is
    the GPUs it holds, as the summary shows them."""
    if change.action in ("create", "replace"):
        return None
    price = known_price(change) if change.action in ("keep", "update", "forget") else None
    basis = _KEPT_BASIS.get(change.action, change.action)
    return PodCost(change, change.text("before", "gpu"), shape, price, basis)


def price_pod(change: ResourceChange, book: OfferBook) -> PodCost:
    """What ``change`` leaves running and at what price: a kept pod its own, a new rental today's offer."""
    kept = kept_cost(change, change.text("before", "gpu_count"))
    if kept is not None:
        return kept
    gpu = change.text("after", "gpu")
    count = change.value("after", "gpu_count")
    if change.unknown("gpu_count") or not isinstance(count, int) or isinstance(count, bool):
        return PodCost(change, gpu, change.shown("after", "gpu_count"), None, "GPU count known after apply")
    if change.sensitive("after", "gpu_count"):
        return PodCost(change, gpu, SENSITIVE_TEXT, None, "GPU count is sensitive")
    executor = change.value("after", "executor_id")
    if change.sensitive("after", "executor_id"):
        return PodCost(change, gpu, str(count), None, "`executor_id` is sensitive")
    if isinstance(executor, str) and not change.unknown("executor_id"):
        return _price_on_executor(change, book, count, executor)
    if change.unknown("executor_id") and "executor_id" in change.configured:
        return PodCost(change, gpu, str(count), None, "`executor_id` known after apply")
    return _price_by_filter(change, book, count)


def _price_on_executor(change: ResourceChange, book: OfferBook, count: int, executor: str) -> PodCost:
    gpu = change.text("after", "gpu")
    offers = book.offers(count)
    if offers is None:
        return PodCost(change, gpu, str(count), None, "nodes feed unavailable")
    offer = next((o for o in offers if o.executor_id == executor and book.free_gpus(executor) >= count), None)
    if offer is None:
        return PodCost(
            change, gpu, str(count), None, f"executor {code(executor)} offers no {count}-GPU pod now"
        )
    book.take(offer)
    basis = f"executor {code(executor)} now ({code(offer.region)})"
    return PodCost(change, offer.gpu_model, str(count), offer.price_per_hour, basis)


def _price_by_filter(change: ResourceChange, book: OfferBook, count: int) -> PodCost:
    gpu = change.text("after", "gpu")
    values: dict[str, Any] = {"gpu_count": count}
    unknown: list[str] = []
    for attribute in OfferFilter.search_fields():
        if change.sensitive("after", attribute):
            return PodCost(change, gpu, str(count), None, f"filter {code(attribute)} is sensitive")
        if change.unknown(attribute):
            unknown.append(attribute)  # matches every offer now: the price becomes an estimate
        else:
            values[attribute] = change.value("after", attribute)
    try:
        flt = OfferFilter.of(values)
    except ValueError:
        return PodCost(change, gpu, str(count), None, "the offer filter is invalid")
    offers = book.offers(count)
    if offers is None:
        return PodCost(change, gpu, str(count), None, "nodes feed unavailable")
    # What the plan's earlier rentals took is not free for this one: several pods of one filter spread
    # over the offers as their creates do, not all onto the cheapest node.
    matching = [o for o in offers if matches(o, flt) and book.free_gpus(o.executor_id) >= count]
    if not matching:
        return PodCost(change, gpu, str(count), None, "no offer matches the filter now")
    cheapest = matching[0]
    book.take(cheapest)
    plural = "s" if len(matching) != 1 else ""
    basis = (
        f"cheapest of {len(matching)} matching offer{plural} now "
        f"(executor {code(cheapest.executor_id)}, {code(cheapest.region)})"
    )
    if not unknown:
        return PodCost(change, cheapest.gpu_model, str(count), cheapest.price_per_hour, basis)
    if flt.max_price_per_hour is not None:
        worst, worst_basis = flt.max_price_per_hour, WorstBasis.MAX_PRICE
        worst_text = f"`max_price_per_hour` {usd(worst)}/h"
    else:
        worst, worst_basis = matching[-1].price_per_hour, WorstBasis.DEAREST_OFFER
        worst_text = f"dearest matching offer now {usd(worst)}/h"
    chosen = ", ".join(code(a) for a in unknown)
    basis = f"estimate: {basis}; {chosen} chosen at apply; worst case {worst_text}"
    return PodCost(
        change, cheapest.gpu_model, str(count), cheapest.price_per_hour, basis, True, worst, worst_basis
    )
