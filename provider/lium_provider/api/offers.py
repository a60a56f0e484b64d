"""GPU offers from Lium's public nodes feed, and the filter a Terraform data source applies to them.

The feed (contract §7) lists whole nodes; gpuhunt's Lium provider turns each node into one offer per
rentable GPU count with the CPU, RAM and disk share a pod of that size really gets. ``LiumProvider.get``
fetches a hard-coded ``NODES_URL`` with ``requests``, so the feed is fetched here (through the client's
retrying transport, from any URL such as the emulator's) and each node goes through the same per-node
conversion ``LiumProvider.get`` applies (``gpuhunt.providers.lium._make_offers``, gpuhunt pinned at
0.1.34). Offers are therefore exactly those dstack would see.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from gpuhunt.providers.lium import _make_offers

from lium_provider.api.client import LiumClient, default_user_agent, fetch_nodes_feed
from lium_provider.api.retry import RetryPolicy
from lium_provider.api.transport import HttpTransport
from lium_provider.offer_filter import MAX_GPUS_PER_NODE, OfferFilter

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Offer:
    """One rentable order: ``gpu_count`` GPUs on executor ``executor_id`` at ``price_per_hour`` USD.

    ``gpu`` is gpuhunt's canonical name (``RTX3090``, ``A100``, ``H100``), ``gpu_model`` the feed's
    (``A100-SXM4-80GB``). ``cpu``, ``memory_gib`` and ``disk_gb`` are what a pod of this size gets (disk =
    container storage quota). ``region`` is ``<country>-<subdivision>`` in lower case (``us-ca``).
    """

    executor_id: str
    gpu: str
    gpu_model: str
    gpu_count: int
    gpu_memory_gib: float
    cpu: int
    memory_gib: float
    disk_gb: float
    region: str
    country: str | None
    spot: bool
    price_per_hour: float


def offers_from_nodes(nodes: Iterable[dict[str, object]]) -> list[Offer]:
    """Offers of the given feed nodes, via gpuhunt's Lium conversion (unusable nodes are skipped)."""
    offers: list[Offer] = []
    for node in nodes:
        country = node.get("country")
        gpu_model = node.get("gpu_model")
        if not _gpu_count_plausible(node.get("gpu_count")):
            logger.warning("Skipping Lium node %r: implausible gpu_count", str(node.get("id"))[:64])
            continue
        try:
            items = _make_offers(node)
        except (TypeError, ValueError, OverflowError):
            logger.warning("Skipping malformed Lium node %r", str(node.get("id"))[:64])
            continue
        for item in items:
            offers.append(
                Offer(
                    executor_id=item.instance_name,
                    gpu=item.gpu_name or "",
                    gpu_model=str(gpu_model),
                    gpu_count=item.gpu_count,
                    gpu_memory_gib=float(item.gpu_memory or 0.0),
                    cpu=item.cpu,
                    memory_gib=float(item.memory),
                    disk_gb=float(item.disk_size or 0.0),
                    region=item.location,
                    country=country if isinstance(country, str) and country else None,
                    spot=bool(item.spot),
                    price_per_hour=float(item.price),
                )
            )
    return offers


def _gpu_count_plausible(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return False
    try:
        return 0 < int(value) <= MAX_GPUS_PER_NODE
    except (ValueError, OverflowError):
        return False


def matches(offer: Offer, flt: OfferFilter) -> bool:
    """True when ``offer`` satisfies every field of ``flt`` (the rules of :meth:`OfferFilter.unmet_by`)."""
    return not flt.unmet_by(offer)


def select_offers(offers: Iterable[Offer], flt: OfferFilter) -> list[Offer]:
    """The offers matching ``flt``, cheapest first, then by executor id: a deterministic order."""
    flt = flt.with_defaults()
    return sorted((o for o in offers if matches(o, flt)), key=lambda o: (o.price_per_hour, o.executor_id))


def find_offers(feed_url: str, flt: OfferFilter, *, client: LiumClient | None = None) -> list[Offer]:
    """Fetch the feed at ``feed_url`` and return the offers matching ``flt`` (see :func:`select_offers`).

    With a ``client``, its transport (retries, cancellation, request counter) is used; the feed is always
    fetched without the API key.
    """
    if client is not None:
        nodes = client.nodes_feed(feed_url)
    else:
        http = HttpTransport(
            timeout=30.0,
            user_agent=default_user_agent(),
            sleep=None,
            cancel=None,
            policy=RetryPolicy(),
            rng=None,
        )
        try:
            nodes = fetch_nodes_feed(http, feed_url)
        finally:
            http.close()
    return select_offers(offers_from_nodes(nodes), flt)


def known_gpu_names(offers: Iterable[Offer]) -> set[str]:
    """The canonical GPU names present in ``offers`` (to suggest when a name matched nothing)."""
    return {o.gpu for o in offers if o.gpu}
