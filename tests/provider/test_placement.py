"""Concurrent creates in one process spread over executors that can take them, cheapest first.

A small Lium stand-in counts GPUs per node and refuses a rent beyond them, as Lium does; the feed is the
emulator's own view of a generated catalog (``lium_emulator.catalogs.nodes.generate_fleet``).
"""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from lium_emulator.catalogs.nodes import Node, generate_fleet
from lium_emulator.views import feed_node
from lium_provider.domain.offer_filter import OfferFilter
from lium_provider.domain.offers import Offer, select_offers
from lium_provider.domain.placement import Placement


class Fleet:
    """Nodes with free GPUs; ``rent`` takes GPUs or refuses, ``feed`` is what Lium's feed says now."""

    def __init__(self, nodes: list[Node]) -> None:
        self.nodes = nodes
        self.free = {n.id: n.gpu_count for n in nodes}
        self.rents: Counter[str] = Counter()
        self.feed_reads = 0
        self._lock = threading.Lock()

    def feed(self) -> list[dict[str, object]]:
        with self._lock:
            self.feed_reads += 1
            return [feed_node(n, self.free[n.id], "http://lium.test") for n in self.nodes]

    def rent(self, offer: Offer) -> bool:
        with self._lock:
            self.rents[offer.executor_id] += 1
            if self.free[offer.executor_id] < offer.gpu_count:
                return False
            self.free[offer.executor_id] -= offer.gpu_count
            return True


def create(placement: Placement, fleet: Fleet, gpu_count: int = 1) -> str | None:
    """What ``lium_pod``'s create does: rent the offers handed out in turn until one is taken."""
    matching = select_offers(placement.offers(), OfferFilter(gpu_count=gpu_count))
    offers = placement.spread(matching)
    try:
        for offer in offers:
            if fleet.rent(offer):
                return offer.executor_id
        return None
    finally:
        offers.close()


class ManualClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_fifty_concurrent_creates_rent_once_each_on_the_cheapest_gpus() -> None:
    fleet = Fleet(generate_fleet(30, 8, "RTX 3090"))
    placement = Placement(fleet.feed)
    start = threading.Barrier(50)

    def one() -> str | None:
        start.wait()
        return create(placement, fleet)

    with ThreadPoolExecutor(max_workers=50) as pool:
        placed = list(pool.map(lambda _: one(), range(50)))
    assert sum(fleet.rents.values()) == 50, f"{fleet.rents}: refusals among concurrent creates"
    # The catalog is in price order: 50 one-GPU pods fill the six cheapest nodes and two GPUs of the seventh.
    cheapest = [n.id for n in fleet.nodes[:7]]
    assert Counter(placed) == Counter({**{i: 8 for i in cheapest[:6]}, cheapest[6]: 2})
    assert fleet.feed_reads == 1, "the feed is read once and shared by the process's creates"


def test_a_refusal_for_lium_reasons_falls_back_and_the_node_counts_full() -> None:
    fleet = Fleet(generate_fleet(3, 8, "RTX 3090"))
    placement = Placement(fleet.feed)
    placement.offers()
    cheapest = fleet.nodes[0].id
    fleet.free[cheapest] = 0  # someone else rented the whole node after the feed was read
    assert create(placement, fleet) == fleet.nodes[1].id
    assert placement.free_gpus(cheapest) == 0
    assert create(placement, fleet) == fleet.nodes[1].id
    assert fleet.rents[cheapest] == 1, "a node that refused for capacity is not tried again"


def test_creates_beyond_the_claims_still_ask_lium() -> None:
    fleet = Fleet(generate_fleet(1, 2, "RTX 3090"))
    placement = Placement(fleet.feed)
    matching = select_offers(placement.offers(), OfferFilter(gpu_count=1))
    holding = [placement.spread(matching) for _ in range(2)]
    assert [next(claims).executor_id for claims in holding] == [fleet.nodes[0].id] * 2
    # Both GPUs are claimed by creates still in flight; a third create still gets the offer to try,
    # because a claim may yet be released, and Lium, not this process, has the last word.
    assert next(placement.spread(matching)).executor_id == fleet.nodes[0].id
    assert placement.free_gpus(fleet.nodes[0].id) == -1


def test_a_refusal_releases_the_claim() -> None:
    fleet = Fleet(generate_fleet(2, 1, "RTX 3090"))
    placement = Placement(fleet.feed)
    matching = select_offers(placement.offers(), OfferFilter(gpu_count=1))
    first, second = fleet.nodes[0].id, fleet.nodes[1].id
    claims = placement.spread(matching)
    assert next(claims).executor_id == first
    assert placement.free_gpus(first) == 0
    assert next(claims).executor_id == second  # the first refused: released, and counted full
    assert placement.free_gpus(first) == 0 and placement.free_gpus(second) == 0
    claims.close()
    assert placement.free_gpus(second) == 0, "a rented (or unknown) outcome keeps its claim"


def test_a_later_feed_read_counts_settled_rents_once() -> None:
    clock = ManualClock()
    fleet = Fleet(generate_fleet(1, 8, "RTX 3090"))
    placement = Placement(fleet.feed, max_age=30.0, clock=clock)
    node = fleet.nodes[0].id
    assert create(placement, fleet) == node
    assert placement.free_gpus(node) == 7
    clock.now = 10.0
    placement.offers()
    assert fleet.feed_reads == 1, "a young feed is not read again"
    clock.now = 31.0
    placement.offers()
    assert fleet.feed_reads == 2
    # The new feed shows 7 free: the settled claim went, so the rented GPU is not subtracted twice.
    assert placement.free_gpus(node) == 7
