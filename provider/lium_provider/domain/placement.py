"""Where a create rents: the cheapest matching offer that no other create in this process has claimed.

Terraform runs up to ``-parallelism`` creates at once in one provider process. Each used to search the
feed and rent its cheapest match, so fifty creates rented the same cheapest executor, and all but the
first few fell back after ``no_capacity`` refusals (1.6 rent calls per pod for 200 pods). Here the process
keeps one table of the GPUs each executor has free in the latest feed, minus what its own creates have
claimed since:

* the feed is read once and shared by every plan check and create of the process, and read again when it
  is older than :data:`FEED_MAX_AGE_SECONDS` (a long apply still sees others' rents and releases);
* a create claims the GPUs of the offer it is about to rent, under one lock, so the next create's cheapest
  free offer is another executor (or the same one, while it has GPUs left: a node of 8 GPUs takes eight
  one-GPU pods);
* a refusal releases the claim and marks the executor full until the feed is read again (Lium said so);
  a rent that succeeded, or whose outcome is unknown, keeps its claim: its GPUs are taken. Once the feed
  is read again after that rent was settled, the feed itself counts them, and the claim goes;
* when every matching offer is claimed, the claimed ones are still offered, cheapest first, and Lium
  decides: a claim is this process's guess, never a reason to fail a create that Lium could serve.

Offers stay in the feed's order (cheapest first, then executor id), so the pods still take the cheapest
matching GPUs overall.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # gpuhunt costs ~100 ms to import: loaded at the first feed read, not at provider start
    from lium_provider.domain.offers import Offer

FEED_MAX_AGE_SECONDS = 30.0  # how long one read of the feed serves this process's plan checks and creates


@dataclass
class _Claim:
    """GPUs one create is renting (or rented) on an executor; ``settled_at`` once its rent was answered."""

    executor_id: str
    gpus: int
    settled_at: float | None = None


class Placement:
    """The process's view of the feed and of its own creates' claims on it (see the module doc).

    ``fetch_nodes`` reads the nodes feed (the client's transport: retries, cancellation). ``clock`` is
    monotonic seconds (tests pass their own).
    """

    def __init__(
        self,
        fetch_nodes: Callable[[], list[dict[str, object]]],
        *,
        max_age: float = FEED_MAX_AGE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fetch_nodes = fetch_nodes
        self._max_age = max_age
        self._clock = clock
        self._fetching = threading.Lock()  # one feed read at a time; the others wait and share it
        self._lock = threading.Lock()  # guards everything below
        self._offers: list[Offer] = []
        self._read_at = float("-inf")  # when the latest feed read started
        self._free: dict[str, int] = {}  # GPUs free per executor in the latest feed
        self._full: set[str] = set()  # executors that refused for capacity since that read
        self._claims: list[_Claim] = []

    def offers(self) -> list[Offer]:
        """Every offer of the feed, read at most once per :data:`FEED_MAX_AGE_SECONDS` in this process."""
        with self._fetching:
            with self._lock:
                if self._clock() - self._read_at < self._max_age:
                    return self._offers
            from lium_provider.domain.offers import offers_from_nodes

            started = self._clock()
            offers = offers_from_nodes(self._fetch_nodes())
            free: dict[str, int] = {}
            for offer in offers:  # a node lists one offer per rentable count, up to its free GPUs
                free[offer.executor_id] = max(free.get(offer.executor_id, 0), offer.gpu_count)
            with self._lock:
                self._offers, self._read_at, self._free = offers, started, free
                self._full.clear()
                # A rent answered before this read began is in the feed already; others still count.
                self._claims = [c for c in self._claims if c.settled_at is None or c.settled_at >= started]
            return offers

    def free_gpus(self, executor_id: str) -> int:
        """GPUs of ``executor_id`` neither taken in the latest feed nor claimed by this process."""
        with self._lock:
            return self._unclaimed(executor_id)

    def _unclaimed(self, executor_id: str) -> int:
        if executor_id in self._full:
            return 0
        claimed = sum(c.gpus for c in self._claims if c.executor_id == executor_id)
        return self._free.get(executor_id, 0) - claimed

    def spread(self, matching: Sequence[Offer]) -> Iterator[Offer]:
        """``matching`` (cheapest first) to rent in turn, each claimed as it is handed out.

        Asking for the next offer says that the previous one refused: its claim is released and its
        executor counted full. The last offer handed out keeps its claim (rented, or outcome unknown)
        until the iterator is closed and the feed is read again. One iterator per create.
        """
        tried: set[str] = set()
        claim: _Claim | None = None
        try:
            while True:
                with self._lock:
                    if claim is not None:
                        self._claims.remove(claim)
                        self._full.add(claim.executor_id)
                        claim = None
                    untried = [o for o in matching if o.executor_id not in tried]
                    offer = next((o for o in untried if self._unclaimed(o.executor_id) >= o.gpu_count), None)
                    offer = offer or next((o for o in untried if o.executor_id not in self._full), None)
                    if offer is None:
                        return
                    tried.add(offer.executor_id)
                    claim = _Claim(offer.executor_id, offer.gpu_count)
                    self._claims.append(claim)
                yield offer
        finally:
            if claim is not None:
                with self._lock:
                    claim.settled_at = self._clock()
