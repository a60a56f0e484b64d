"""The shared pod watcher lists pods when something can have changed, and never beyond Lium's limit.

Against a real emulator: the number of ``GET /pods`` listings is what is checked (timings are
benchmarked in bench/pods.py, never asserted here).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lium_emulator.launcher import RunningEmulator
from lium_provider.api.errors import LiumError
from lium_provider.api.models import Pod
from lium_provider.api.pod_watch import LISTINGS_PER_MINUTE, ListingBudget, PodWatcher
from lium_provider.api.rent import rent_reconciled
from lium_provider.resources.pod_lifecycle import delete_pod_and_wait
from lium_provider.session import LiumSession
from tests.provider.test_api_emulator import Session, new_attempt, open_session
from tests.support.forked_emulator import launch_forked
from tfbridge import Context, TFError
from tfbridge.cancel import CancelToken
from tfbridge.logs import Logger

PENDING_SECONDS = 6.0
DELETING_SECONDS = 2.0


@pytest.fixture(scope="module")
def slow_emulator() -> Iterator[RunningEmulator]:
    with launch_forked(
        [
            "--pending-seconds",
            str(PENDING_SECONDS),
            "--ssh-delay-seconds",
            "0.2",
            "--deleting-seconds",
            str(DELETING_SECONDS),
        ]
    ) as running:
        yield running


@pytest.fixture
def session(slow_emulator: RunningEmulator, tmp_path: Path) -> Iterator[Session]:
    with open_session(slow_emulator, tmp_path) as current:
        yield current


def context(seconds: float = 60.0) -> Context:
    return Context(cancel=CancelToken(), log=Logger("test"), deadline=time.monotonic() + seconds)


def listings(session: Session) -> int:
    return sum(1 for e in session.wire.log if e.method == "GET" and e.path.endswith("/pods"))


def rent(session: Session) -> str:
    result = rent_reconciled(session.client, new_attempt(session))
    assert result.pod_id
    return result.pod_id


def running(pod: Pod | None) -> bool:
    return pod is not None and pod.status == "RUNNING"


def gone(pod: Pod | None) -> bool:
    return pod is None or pod.status == "DELETED"


def counted(session: Session, wait: Callable[[], object]) -> int:
    before = listings(session)
    wait()
    return listings(session) - before


def test_a_pending_pod_is_listed_again_when_its_estimate_is_up(session: Session) -> None:
    watcher = PodWatcher(session.client)
    pod_id = rent(session)
    used = counted(session, lambda: watcher.wait(context(), pod_id, running))
    # Listing once a second (or faster) would take 6 or more listings for 6 s of PENDING.
    assert used <= 4, f"{used} listings while the estimate said when to look"


def test_later_deletions_wait_as_long_as_the_first_one_took(session: Session) -> None:
    watcher = PodWatcher(session.client)
    first, second = rent(session), rent(session)
    watcher.wait(context(), first, running)
    watcher.wait(context(), second, running)
    session.client.delete_pod(first)
    unknown = counted(session, lambda: watcher.wait(context(), first, gone))
    session.client.delete_pod(second)
    learned = counted(session, lambda: watcher.wait(context(), second, gone))
    assert learned < unknown, f"{learned} listings for a deletion of known length, {unknown} before"
    assert learned <= 4


def test_a_wait_that_never_ends_stays_within_the_budget(session: Session) -> None:
    watcher = PodWatcher(session.client)
    pod_id = rent(session)
    watcher.wait(context(), pod_id, running)
    seconds = 6.0
    budget = ListingBudget()
    before = listings(session)
    with pytest.raises(TimeoutError):
        watcher.wait(context(seconds), pod_id, lambda pod: False)
    used = listings(session) - before
    # Listing every quarter second would take 24; the bucket allows its capacity and 45 a minute.
    ceiling = budget.capacity + budget.per_minute / 60 * seconds
    assert used <= ceiling, f"{used} listings in {seconds} s, more than the budget's {ceiling:.1f}"


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(st.floats(min_value=0.0, max_value=3.0), min_size=1, max_size=400))
def test_no_minute_ever_holds_more_than_sixty_listings(gaps: list[float]) -> None:
    """A caller that lists whenever the budget allows (after gaps of its own) never exceeds Lium's cap."""
    budget = ListingBudget(started_at=0.0)  # a clock of our own
    now = 0.0
    sent: list[float] = []
    for gap in gaps:
        now = max(now + gap, budget.ready_at(now + gap))
        budget.spend(now)
        sent.append(now)
    window_start = 0
    for end, at in enumerate(sent):
        while at - sent[window_start] >= 60.0:
            window_start += 1
        assert end - window_start + 1 <= LISTINGS_PER_MINUTE


def test_a_deleted_pod_missing_from_a_later_listing_needs_no_get(session: Session) -> None:
    watcher = PodWatcher(session.client)
    pod_id = rent(session)
    watcher.wait(context(), pod_id, running)
    session.client.delete_pod(pod_id)
    before = len(session.wire.log)
    assert watcher.wait(context(), pod_id, gone, unlisted_is_gone=True) is None
    sent = [(e.method, e.path) for e in session.wire.log[before:]]
    assert sent and all(method == "GET" and path.endswith("/pods") for method, path in sent), sent


def test_an_older_listing_that_lacks_a_new_pod_is_not_its_answer(session: Session) -> None:
    watcher = PodWatcher(session.client)
    listed = rent(session)
    watcher.wait(context(), listed, running)  # a listing taken before the next pod exists
    pod_id = rent(session)
    before = len(session.wire.log)
    pod = watcher.wait(context(), pod_id, lambda p: p is not None)
    assert pod is not None and pod.id == pod_id
    sent = [(e.method, e.path) for e in session.wire.log[before:]]
    # The next listing shows the pod: no GET of it, and no listing taken as "gone".
    assert len(sent) == 1 and sent[0][0] == "GET" and sent[0][1].endswith("/pods"), sent
    for done in (listed, pod_id):
        session.client.delete_pod(done)


def test_concurrent_reads_share_a_listing(session: Session) -> None:
    """A refresh of many pods costs a listing or two, not a GET per pod."""
    rented = PodWatcher(session.client)  # waits for the rents, so the reads' watcher starts with no listing
    pod_ids = [rent(session) for _ in range(3)]
    for pod_id in pod_ids:
        rented.wait(context(), pod_id, running)
    watcher = PodWatcher(session.client)  # a refresh's process: no listing yet
    before = len(session.wire.log)
    with ThreadPoolExecutor(len(pod_ids) * 4) as pool:
        read = list(pool.map(lambda pod_id: watcher.current(context(), pod_id), pod_ids * 4))
    assert [pod.id if pod else None for pod in read] == pod_ids * 4
    assert all(running(pod) for pod in read)
    sent = [(e.method, e.path) for e in session.wire.log[before:]]
    assert 1 <= len(sent) <= 2 and all(m == "GET" and p.endswith("/pods") for m, p in sent), sent
    for pod_id in pod_ids:
        session.client.delete_pod(pod_id)


def test_a_read_of_a_pod_missing_from_the_listing_confirms_it_is_gone(session: Session) -> None:
    watcher = PodWatcher(session.client)
    pod_id = rent(session)
    watcher.wait(context(), pod_id, running)
    session.client.delete_pod(pod_id)
    watcher.wait(context(), pod_id, gone, unlisted_is_gone=True)
    before = len(session.wire.log)
    assert watcher.current(context(), pod_id) is None
    sent = [(e.method, e.path.rsplit("/", 1)[-1] == pod_id) for e in session.wire.log[before:]]
    assert ("GET", True) in sent, sent  # the listing's silence is confirmed, never taken for "gone"


def test_reads_go_to_their_own_gets_at_once_when_the_listing_fails(session: Session) -> None:
    """Garbage from ``GET /pods``: every read answers with its pod's GET, and only the first read(s)
    tried a listing (the others did not each wait for the budget to try one more)."""
    rented = PodWatcher(session.client)  # waits for the rents, so the reads' watcher starts with no listing
    pod_ids = [rent(session) for _ in range(3)]
    for pod_id in pod_ids:
        rented.wait(context(), pod_id, running)
    session.set_faults({"method": "GET", "path": "/pods", "kind": "garbage", "body": "not_json"})
    watcher = PodWatcher(session.client)
    before = len(session.wire.log)
    with ThreadPoolExecutor(len(pod_ids) * 4) as pool:
        read = list(pool.map(lambda pod_id: watcher.current(context(), pod_id), pod_ids * 4))
    session.set_faults()
    assert [pod.id if pod else None for pod in read] == pod_ids * 4
    sent = [(e.method, e.path.endswith("/pods")) for e in session.wire.log[before:]]
    assert sent.count(("GET", False)) == len(pod_ids) * 4, sent  # one GET per read
    assert 1 <= sent.count(("GET", True)) <= 2, sent  # not a listing per read
    for pod_id in pod_ids:
        session.client.delete_pod(pod_id)


def test_a_deletion_of_known_length_is_read_on_its_own_and_never_offered_as_live_after(
    session: Session,
) -> None:
    budget = ListingBudget()
    watcher = PodWatcher(session.client, budget=budget)
    first, second = rent(session), rent(session)
    watcher.wait(context(), first, running)
    watcher.wait(context(), second, running)

    def own_reads(pod_id: str, wait: Callable[[], object]) -> int:
        before = len(session.wire.log)
        wait()
        return sum(
            1 for e in session.wire.log[before:] if e.method == "GET" and e.path.endswith(f"/pods/{pod_id}")
        )

    # The first deletion has no length to go by: only listings tell when it is over.
    session.client.delete_pod(first)
    assert own_reads(first, lambda: watcher.wait_gone(context(), first, gone, time.monotonic())) == 0
    listed = watcher.recent_pods(60.0)
    assert listed is not None and second in {pod.id for pod in listed}
    # With no listing to be had for a while (the budget spent), the second is read on its own once a
    # deletion has lasted as long, and is gone by the last of those reads.
    session.client.delete_pod(second)
    deleted_at = time.monotonic()
    for _ in range(20):
        budget.spend(deleted_at)
    reads = own_reads(second, lambda: watcher.wait_gone(context(30.0), second, gone, deleted_at))
    assert 1 <= reads <= 6
    # The latest listing is older and still shows it: it is not passed on as a live pod.
    listed = watcher.recent_pods(60.0)
    assert listed is not None and second not in {pod.id for pod in listed}


def test_a_404_that_is_not_lium_s_own_leaves_a_deleted_pod_to_the_listings(session: Session) -> None:
    budget = ListingBudget()
    watcher = PodWatcher(session.client, budget=budget)
    first, second = rent(session), rent(session)
    watcher.wait(context(), first, running)
    watcher.wait(context(), second, running)
    session.client.delete_pod(first)
    watcher.wait_gone(context(), first, gone, time.monotonic())
    # Something on the way answers the second pod's own reads with a bare 404 (no Lium code), and its
    # deletion lasts three times as long as the first's.
    session.set_faults(
        {"method": "GET", "path": f"/pods/{second}", "kind": "status", "status": 404},
        {
            "method": "DELETE",
            "path": f"/pods/{second}",
            "kind": "slow_deleting",
            "seconds": 2 * DELETING_SECONDS,
        },
    )
    session.client.delete_pod(second)
    deleted_at = time.monotonic()
    for _ in range(5):
        budget.spend(deleted_at)
    before = len(session.wire.log)
    watcher.wait_gone(context(30.0), second, gone, deleted_at)
    own_reads = [
        e for e in session.wire.log[before:] if e.method == "GET" and e.path.endswith(f"/pods/{second}")
    ]
    assert own_reads and all(e.status == 404 for e in own_reads)
    # The wait ended when the pod was gone, not at that 404.
    session.set_faults()
    assert second not in {pod.id for pod in session.client.list_pods()}
    assert session.client.get_pod(second) is None


def test_a_bare_404_on_delete_and_read_never_makes_a_destroy_of_a_running_pod_succeed(
    session: Session,
) -> None:
    watcher = PodWatcher(session.client)
    pod_id = rent(session)
    watcher.wait(context(), pod_id, running)
    # Something on the way answers the pod's DELETE and GET with a bare 404; the listings still work.
    session.set_faults(
        {"method": "DELETE", "path": f"/pods/{pod_id}", "kind": "status", "status": 404},
        {"method": "GET", "path": f"/pods/{pod_id}", "kind": "status", "status": 404},
    )
    with pytest.raises(TFError, match="Deleting the pod failed"):
        pods_only = cast(LiumSession, SimpleNamespace(client=session.client, watcher=watcher))
        delete_pod_and_wait(context(6.0), pods_only, pod_id)
    assert session.client.get_pod(pod_id) is not None, "the listing shows the pod the 404s hid"
    session.set_faults()
    assert [pod.status for pod in session.client.list_pods() if pod.id == pod_id] == ["RUNNING"]


def test_a_read_whose_listing_fails_and_whose_get_meets_a_bare_404_is_an_error_not_a_gone_pod(
    session: Session,
) -> None:
    pod_id = rent(session)
    PodWatcher(session.client).wait(context(), pod_id, running)
    session.set_faults(
        {"method": "GET", "path": "/pods", "kind": "status", "status": 503},
        {"method": "GET", "path": f"/pods/{pod_id}", "kind": "status", "status": 404},
    )
    with pytest.raises(LiumError):
        PodWatcher(session.client).current(context(10.0), pod_id)
    session.set_faults()
    assert PodWatcher(session.client).current(context(), pod_id) is not None
