"""GPU offers from Lium's public nodes feed, and the offer filter applied to them.

The feed (docs/lium-api.md#nodes-feed) lists whole nodes; gpuhunt's Lium provider turns each node into
one offer per rentable GPU count with the CPU, RAM and disk share a pod of that size really gets.
``LiumProvider.get`` itself cannot serve here: it fetches a hard-coded ``NODES_URL`` with ``requests`` (no emulator, no
configured ``nodes_feed_url``, none of the client's retries and cancellation), and it converts every node
without a chance to drop one whose hostile ``gpu_count`` would make its per-count loop run for ever. So
the feed is fetched here, through the client's transport, and each plausible node is converted with
gpuhunt's public pieces of that provider, in the order ``LiumProvider.get`` applies them (gpuhunt pinned
at 0.1.34): ``get_dstack_gpu_name``, ``find_accelerators``, ``correct_gpu_memory_gib``, ``get_location``,
``get_host_ram_reserve_gb`` and ``get_storage_quota_gb``. A test compares the result with
``LiumProvider.get`` on the same feed, so offers stay exactly those dstack sees.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass

from gpuhunt import AcceleratorVendor, correct_gpu_memory_gib, find_accelerators
from gpuhunt.providers.lium import (
    get_dstack_gpu_name,
    get_host_ram_reserve_gb,
    get_location,
    get_storage_quota_gb,
)

from lium_provider.api.client import LiumClient, default_user_agent, fetch_nodes_feed
from lium_provider.api.retry import RetryPolicy
from lium_provider.api.transport import HttpTransport
from lium_provider.domain.offer_filter import MAX_GPUS_PER_NODE, OfferFilter

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
    """Offers of the given feed nodes, as gpuhunt's Lium provider makes them (unusable nodes are skipped)."""
    offers: list[Offer] = []
    for node in nodes:
        if not _gpu_count_plausible(node.get("gpu_count")):
            logger.warning("Skipping Lium node %r: implausible gpu_count", str(node.get("id"))[:64])
            continue
        try:
            offers.extend(node_offers(node))
        except (TypeError, ValueError, OverflowError):
            logger.warning("Skipping malformed Lium node %r", str(node.get("id"))[:64])
    return offers


def node_offers(node: dict[str, object]) -> list[Offer]:
    """One node's offers, one per rentable GPU count: gpuhunt 0.1.34's Lium conversion, step by step.

    Only ``id`` and ``rent_url`` are guaranteed by the feed; a node missing anything else, or with no free
    disk, no location, an unknown GPU or non-positive counts and prices, has no offers.
    """
    node_id = str(node.get("id") or "")
    if not node_id:
        return []
    try:
        gpu_model = str(_required(node, "gpu_model"))
        gpu_count = int(_required(node, "gpu_count"))
        available = int(_required(node, "available_gpu_count"))
        price_per_gpu = float(_required(node, "price_per_gpu_hour"))
        gpu_memory_gb = float(_required(node, "gpu_memory_gb"))
        cpu_count = int(_required(node, "cpu_count"))
        ram_gb = float(_required(node, "ram_gb"))
    except (TypeError, ValueError):
        return []
    disk_free_gb = node.get("disk_free_gb")
    if isinstance(disk_free_gb, bool) or not isinstance(disk_free_gb, int | float) or disk_free_gb <= 0:
        return []
    if gpu_count <= 0 or available <= 0 or not 0 < price_per_gpu < math.inf:  # NaN is neither
        return []
    available = min(available, gpu_count)
    min_count = max(1, int(node.get("min_rentable_gpu_count") or gpu_count))  # type: ignore[call-overload]
    if min_count > available:
        return []
    location = get_location(node.get("country_code"), node.get("region"))
    gpu_name = get_dstack_gpu_name(gpu_model)
    if not location or not find_accelerators(names=[gpu_name], vendors=[AcceleratorVendor.NVIDIA]):
        return []
    gpu_memory = float(correct_gpu_memory_gib(gpu_name, gpu_memory_gb * 1024))
    host_ram_gb = ram_gb - 0.5  # the feed rounds RAM and disk to whole GB: start from the lowest true value
    pod_ram_gb = host_ram_gb - get_host_ram_reserve_gb(host_ram_gb)
    disk_free = max(disk_free_gb - 0.5, 0)
    country = node.get("country")
    offers = []
    for count in range(min_count, available + 1):
        share = count / gpu_count
        cpu = int(cpu_count * share)
        disk = get_storage_quota_gb(disk_free * share)
        if cpu < 1 or disk < 1:
            continue
        offers.append(
            Offer(
                executor_id=node_id,
                gpu=gpu_name,
                gpu_model=gpu_model,
                gpu_count=count,
                gpu_memory_gib=gpu_memory,
                cpu=cpu,
                memory_gib=float(max(1, math.floor(pod_ram_gb * share))),
                disk_gb=float(disk),
                region=location,
                country=country if isinstance(country, str) and country else None,
                spot=node.get("tier") == "spot",
                price_per_hour=round(price_per_gpu * count, 5),
            )
        )
    return offers


def _required(node: dict[str, object], name: str) -> str | int | float:
    value = node.get(name)
    if value is None or isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"missing {name}")
    return value


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
    nodes = client.nodes_feed(feed_url) if client is not None else fetch_feed(feed_url)
    return select_offers(offers_from_nodes(nodes), flt)


def fetch_feed(feed_url: str) -> list[dict[str, object]]:
    """The nodes of the feed at ``feed_url``, fetched once, without an API key and with the usual retries."""
    http = HttpTransport(
        timeout=30.0,
        user_agent=default_user_agent(),
        sleep=None,
        cancel=None,
        policy=RetryPolicy(),
        rng=None,
    )
    try:
        return fetch_nodes_feed(http, feed_url)
    finally:
        http.close()


def known_gpu_names(offers: Iterable[Offer]) -> set[str]:
    """The canonical GPU names present in ``offers`` (to suggest when a name matched nothing)."""
    return {o.gpu for o in offers if o.gpu}
