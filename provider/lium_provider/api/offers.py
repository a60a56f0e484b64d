"""GPU offers from Lium's public nodes feed, and the filter a Terraform data source applies to them.

The feed (docs/lium-api.md#nodes-feed) lists whole nodes; gpuhunt's Lium provider turns each node into one offer per
rentable GPU count with the CPU, RAM and disk share a pod of that size really gets. ``LiumProvider.get``
fetches a hard-coded ``NODES_URL`` with ``requests``, so the feed is fetched here (through the client's
retrying transport, from any URL such as the emulator's) and each node goes through the same per-node
conversion ``LiumProvider.get`` applies (``gpuhunt.providers.lium._make_offers``, gpuhunt pinned at
0.1.34). Offers are therefore exactly those dstack would see.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass

from gpuhunt.providers.lium import _make_offers, get_dstack_gpu_name

from lium_provider.api.client import LiumClient, default_user_agent, fetch_nodes_feed
from lium_provider.api.retry import RetryPolicy
from lium_provider.api.transport import HttpTransport

logger = logging.getLogger(__name__)

# gpuhunt makes one offer per rentable count, so a hostile gpu_count would make it loop for ever.
MAX_GPUS_PER_NODE = 64
_MEMORY_IN_NAME = re.compile(r"(\d+)\s*GB", re.IGNORECASE)
GPU_MEMORY_TOLERANCE = 0.05  # gpuhunt corrects reported VRAM to the datasheet (H200: 140 -> 141 GiB)


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


@dataclass
class OfferFilter:
    """What to search for. Every criterion left None matches everything.

    * ``gpu``: a GPU name, matched case-insensitively after the normalisation gpuhunt applies to the feed
      (vendor words, form factors and spaces are ignored), so ``"RTX 3090"``, ``"rtx3090"`` and
      ``"NVIDIA GeForce RTX 3090"`` are the same GPU, and ``"A100"`` matches ``A100-SXM4-80GB`` and
      ``A100 40GB`` alike. A memory size in the name (``"A100 80GB"``) additionally requires that much
      VRAM per GPU, within 5 %. Names are compared whole: ``"A10"`` does not match ``A100``.
    * ``gpu_count``: exactly this many GPUs per pod.
    * ``max_price_per_hour``: upper bound on the pod's price (all its GPUs), USD.
    * ``regions``: each entry matches a region exactly (``us-ca``) or a whole country (``us``),
      case-insensitively.
    * ``min_memory_gib``, ``min_disk_gb``: lower bounds on the pod's RAM and disk; there is no default
      disk floor, so small-disk bargains stay visible.
    * ``spot``: True for spot only, False for secure (non-spot) only.
    """

    gpu: str | None = None
    gpu_count: int = 1
    max_price_per_hour: float | None = None
    regions: list[str] | None = None
    min_memory_gib: float | None = None
    min_disk_gb: float | None = None
    spot: bool | None = None

    def __post_init__(self) -> None:
        if self.gpu_count < 1:
            raise ValueError(f"gpu_count must be at least 1, got {self.gpu_count}")
        for name in ("max_price_per_hour", "min_memory_gib", "min_disk_gb"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name} must not be negative, got {value}")
        if self.gpu is not None and not normalise_gpu_name(self.gpu):
            raise ValueError(f"gpu {self.gpu!r} is not a GPU name")


def normalise_gpu_name(name: str) -> str:
    """The comparison key of a GPU name: gpuhunt's canonical spelling, upper-cased."""
    return str(get_dstack_gpu_name(name.strip().upper())).upper()


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
    """True when ``offer`` satisfies every criterion of ``flt`` (see :class:`OfferFilter`)."""
    if flt.gpu is not None and not _gpu_matches(offer, flt.gpu):
        return False
    if offer.gpu_count != flt.gpu_count:
        return False
    if flt.max_price_per_hour is not None and offer.price_per_hour > flt.max_price_per_hour:
        return False
    if flt.regions is not None and not _region_matches(offer.region, flt.regions):
        return False
    if flt.min_memory_gib is not None and offer.memory_gib < flt.min_memory_gib:
        return False
    if flt.min_disk_gb is not None and offer.disk_gb < flt.min_disk_gb:
        return False
    return flt.spot is None or offer.spot == flt.spot


def _gpu_matches(offer: Offer, wanted: str) -> bool:
    if normalise_gpu_name(offer.gpu) != normalise_gpu_name(wanted):
        return False
    memory = _MEMORY_IN_NAME.search(wanted)
    if memory is None:
        return True
    gib = float(memory.group(1))
    return abs(offer.gpu_memory_gib - gib) <= gib * GPU_MEMORY_TOLERANCE


def _region_matches(region: str, wanted: list[str]) -> bool:
    country = region.split("-", 1)[0]
    return any(w.strip().lower() in (region, country) for w in wanted)


def select_offers(offers: Iterable[Offer], flt: OfferFilter) -> list[Offer]:
    """The offers matching ``flt``, cheapest first, then by executor id: a deterministic order."""
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


def describe_filter(flt: OfferFilter) -> str:
    """A sentence saying what was searched for, for "no offer matched" errors."""
    gpu = f"{flt.gpu!r} " if flt.gpu else ""
    parts = [f"{flt.gpu_count} {gpu}GPU{'s' if flt.gpu_count != 1 else ''} per pod"]
    if flt.max_price_per_hour is not None:
        parts.append(f"at most ${flt.max_price_per_hour:g}/h")
    if flt.regions is not None:
        parts.append(f"in {', '.join(flt.regions) if flt.regions else 'no region'}")
    if flt.min_memory_gib is not None:
        parts.append(f"with at least {flt.min_memory_gib:g} GiB RAM")
    if flt.min_disk_gb is not None:
        parts.append(f"with at least {flt.min_disk_gb:g} GB disk")
    if flt.spot is not None:
        parts.append("spot only" if flt.spot else "secure (non-spot) only")
    return ", ".join(parts)
