"""One shared poll of ``GET /pods`` for every pod the provider is waiting on.

Terraform applies up to 10 resources at once in one provider process; if each pod polled its own
status, 50 pods would send hundreds of listings a minute against Lium's limit of about 60 per account.
Instead, waiting threads share one snapshot: whichever waiter finds it due refreshes it, the others
block until it is new, so API requests per pod fall as more pods wait together.

When the next listing is due depends on what the waited pods are doing, so that a change is seen
soon after it happens without listing all the time:

* a PENDING pod with Lium's ``estimated_ready_seconds`` is listed again when that estimate is up;
* a pod in a phase whose length this process has already seen (the first wave of a 50-pod apply
  teaches how long DELETING or RUNNING-before-SSH lasts) is listed again when that shortest seen
  length is up;
* otherwise a pod about to change is listed every quarter second.

A deleted pod is also read on its own (``GET /pods/{id}``, which Lium does not count as a listing):
first when as much time has passed since its DELETE as the longest a finished deletion is known to
have lasted, then every quarter second until the shortest a finished one is known to have taken, six
reads at most; the first deletions, with none finished yet, wait for listings only. Only Lium's own
404 (``pod_not_found``) is read as gone: any other answer leaves the pod to the listings. In a fleet the
listings come at the budget's rate, and a deletion seen only by the next one would end on average
half an interval late, for every wave Terraform's parallelism makes of the fleet.

A token bucket keeps the process within Lium's limit whatever the pods do: capacity 5 and 55 a
minute give at most 60 listings in any minute. A short phase is polled every quarter second at first,
then at the sustained rate of one listing every 1.09 s: a lone pod's 3-second deletion takes ~8
listings instead of 12 (with a burst of 15 and 45 a minute), seen up to a second late instead of a
quarter (bench/pods.py: a lone destroy 1.05-1.10x the ideal either way), while a fleet, whose waits
always have some pod about to change, lists at that sustained rate.
"""

from __future__ import annotations

import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from lium_provider.api.client import LiumClient
from lium_provider.api.errors import POD_NOT_FOUND, LiumError, LiumNotFound
from lium_provider.api.models import PENDING, Pod
from tfbridge import Context

LISTINGS_PER_MINUTE = 60  # Lium's cap on pod listings per account (docs/lium-api.md#rate-limits)
_BURST_LISTINGS = 5.0  # listings at once; the rest of the minute's cap is the sustained rate
_WAKE_SECONDS = 0.25  # how often a blocked waiter re-checks cancellation and deadlines
_LEARNED_SAMPLES = 10  # phase lengths remembered per phase; the shortest of them is used
# A deleted pod is read on its own a hot interval apart from when finished deletions lasted at least,
# until they had all ended, and at most this many times (then only the listings look).
_GONE_PROBES = 6
# How old a listing a refresh's read may take: a stack's reads, which Terraform sends a few dozen at a
# time, then share a listing or two instead of each waiting for one sent after it began.
READ_STALENESS_SECONDS = 1.0


@dataclass
class ListingBudget:
    """Token bucket for listings: ``capacity`` at once, ``per_minute`` sustained.

    With capacity 5 and 55 a minute no 60-second window holds more than 60 listings, Lium's poll cap.
    """

    capacity: float = _BURST_LISTINGS
    per_minute: float = LISTINGS_PER_MINUTE - _BURST_LISTINGS
    started_at: float | None = None  # on the caller's clock (time.monotonic() unless given)
    _tokens: float = field(init=False)
    _updated: float = field(init=False)

    def __post_init__(self) -> None:
        self._tokens = self.capacity
        self._updated = time.monotonic() if self.started_at is None else self.started_at

    def _refill(self, now: float) -> None:
        self._tokens = min(self.capacity, self._tokens + (now - self._updated) * self.per_minute / 60.0)
        self._updated = now

    def ready_at(self, now: float) -> float:
        """The earliest time a listing may be sent."""
        self._refill(now)
        return now if self._tokens >= 1.0 else now + (1.0 - self._tokens) * 60.0 / self.per_minute

    def spend(self, now: float) -> None:
        self._refill(now)
        self._tokens -= 1.0


def _phase(pod: Pod | None) -> str:
    """What a waiter can be waiting to see change: the status, and whether SSH is published."""
    if pod is None:
        return "missing"
    return f"{pod.status}+ssh" if pod.ssh_connect_cmd else pod.status


@dataclass
class _Seen:
    """A waited pod's phase in the latest listing, and the listing that first showed it."""

    phase: str
    since: float


class PodWatcher:
    """Shares one ``GET /pods`` snapshot among every thread waiting on a pod (see the module doc)."""

    def __init__(
        self,
        client: LiumClient,
        *,
        hot_interval: float = 0.25,
        idle_interval: float = 1.0,
        max_interval: float = 5.0,
        budget: ListingBudget | None = None,
    ) -> None:
        self._client = client
        self._hot = hot_interval
        self._idle = idle_interval
        self._max = max_interval
        self._budget = budget or ListingBudget()
        self._cond = threading.Condition()
        self._pods: dict[str, Pod] = {}
        self._taken_at = float("-inf")
        self._sent_at = float("-inf")  # when the latest listing was sent (it shows nothing older)
        self._generation = 0
        self._refreshing = False
        self._waiting: Counter[str] = Counter()
        self._fresh_waits: Counter[float] = Counter()  # when each wait that needs a newer listing began
        self._failed_at = float("-inf")  # when the latest listing that failed was sent
        self._seen: dict[str, _Seen] = {}
        self._phase_lengths: dict[str, deque[float]] = {}
        # The longest a finished deletion was seen to last at least (from its DELETE's answer to the last
        # view that still showed the pod), or None before any finished.
        self._deletion_floor: float | None = None
        # The shortest a finished deletion took at most (to the first view that showed it gone).
        self._deletion_ceiling = float("inf")
        # Pods read gone on their own, and when that read was sent: a listing sent before it still shows
        # them, which recent_pods must not pass on as live.
        self._read_gone: dict[str, float] = {}

    def _refresh(self) -> None:
        sent_at = time.monotonic()
        pods: dict[str, Pod] | None = None
        try:
            pods = {pod.id: pod for pod in self._client.list_pods()}
        finally:
            # One critical section: a waiter woken in between would see the refresh done but the old
            # snapshot, and could install its own, newer listing before this older one.
            with self._cond:
                self._refreshing = False
                if pods is not None:
                    self._sent_at = sent_at
                    self._read_gone = {k: at for k, at in self._read_gone.items() if at > sent_at}
                    self._learn(pods, time.monotonic())
                    self._generation += 1
                else:
                    self._failed_at = sent_at
                self._cond.notify_all()

    def _learn(self, pods: dict[str, Pod], taken_at: float) -> None:
        """Take a new snapshot, noting how long each waited pod stayed in the phase it just left.

        The pod was still in the phase at the previous listing and was first seen in it no earlier
        than it entered, so their difference is a lower bound of the phase's length: waiting for the
        shortest such bound never polls late.
        """
        for pod_id in self._waiting:
            phase, before = _phase(pods.get(pod_id)), self._seen.get(pod_id)
            if before is not None and before.phase == phase:
                continue
            if before is not None:
                lengths = self._phase_lengths.setdefault(before.phase, deque(maxlen=_LEARNED_SAMPLES))
                lengths.append(self._taken_at - before.since)
            self._seen[pod_id] = _Seen(phase, taken_at)
        self._pods, self._taken_at = pods, taken_at

    def _due_at(self, pod_id: str) -> float:
        """When the next listing can tell something new about a waited pod."""
        pod, seen = self._pods.get(pod_id), self._seen.get(pod_id)
        if pod is not None and pod.status == PENDING and pod.estimated_ready_seconds is not None:
            # Lium's estimate (the emulator rounds it up, so it is also a bound); 0 means overdue.
            return self._bounded(self._taken_at + pod.estimated_ready_seconds)
        lengths = self._phase_lengths.get(seen.phase) if seen is not None else None
        if seen is not None and lengths:
            return self._bounded(seen.since + min(lengths))
        if pod is not None and pod.status == PENDING:
            return self._taken_at + self._idle
        return self._taken_at + self._hot  # about to change (SSH, DELETING, missing)

    def _bounded(self, at: float) -> float:
        """``at``, but no sooner than a hot interval and no later than the longest one after the last listing."""
        return min(max(at, self._taken_at + self._hot), self._taken_at + self._max)

    def _next_listing_at(self, now: float) -> float:
        if self._taken_at == float("-inf"):
            return self._budget.ready_at(now)
        due = min((self._due_at(pod_id) for pod_id in self._waiting), default=self._taken_at + self._idle)
        if self._fresh_waits and max(self._fresh_waits) > self._sent_at:
            due = min(due, self._taken_at + self._hot)  # a read waits for a listing newer than itself
        return max(due, self._budget.ready_at(now))

    def recent_pods(self, max_age: float) -> list[Pod] | None:
        """The pods of the latest listing if it was sent at most ``max_age`` seconds ago, else None;
        without those a later read of their own found gone."""
        with self._cond:
            if time.monotonic() - self._sent_at > max_age:
                return None
            return [pod for pod in self._pods.values() if pod.id not in self._read_gone]

    def current(self, ctx: Context, pod_id: str) -> Pod | None:
        """The pod as a listing sent at most :data:`READ_STALENESS_SECONDS` before this call shows it
        (None: gone), for a refresh.

        Concurrent reads share that listing, so refreshing a stack of N pods costs one listing or a
        few instead of N ``GET /pods/{id}`` (Lium caps an account's polling at about 60 requests a
        minute). A pod the listing lacks is confirmed with ``GET /pods/{id}``, as in :meth:`wait`;
        so is every pod when the listing cannot be had: it holds every pod of the account, and one
        unreadable row or a rate limit there must not fail a read that the pod's own GET answers.
        Once a listing recent enough for a read has failed, the reads waiting with it go to their
        GETs at once instead of each trying a listing in turn.
        """
        oldest = time.monotonic() - READ_STALENESS_SECONDS
        with self._cond:
            self._fresh_waits[oldest] += 1
        try:
            return self.wait(ctx, pod_id, _any_view, newer_than=oldest)
        except (LiumError, _ListingFailed):
            return self._client.get_pod(pod_id)
        finally:
            with self._cond:
                self._fresh_waits[oldest] -= 1
                if not self._fresh_waits[oldest]:
                    del self._fresh_waits[oldest]

    def wait(
        self,
        ctx: Context,
        pod_id: str,
        done: Callable[[Pod | None], bool],
        *,
        unlisted_is_gone: bool = False,
        newer_than: float | None = None,
    ) -> Pod | None:
        """Block until ``done(pod)`` holds for a fresh view of the pod (None: not in the listing, 404).

        A listing sent before the wait began says nothing of a pod it lacks (the pod may be younger):
        the wait takes the next one. A pod missing from a later listing is confirmed with
        ``GET /pods/{id}`` before ``done(None)`` is asked, because a listing may lag behind a rent that
        just happened. A wait for a pod already deleted passes ``unlisted_is_gone``: the later listing
        is then answer enough (Lium lists every pod until it is DELETED). Either way a fleet's creates
        and deletes cost no ``GET`` per pod here (:meth:`wait_gone` may add a deleted pod's own reads).
        With ``newer_than`` only a listing sent at or after that (monotonic) time is looked at.
        """
        began = time.monotonic() if newer_than is None else newer_than
        with self._waiting_on(pod_id):
            return self._wait(ctx, pod_id, done, began, unlisted_is_gone, newer_than is not None)

    def wait_gone(
        self, ctx: Context, pod_id: str, done: Callable[[Pod | None], bool], deleted_at: float
    ) -> None:
        """Block until ``done(pod)`` holds for the pod whose DELETE was answered at ``deleted_at``
        (monotonic): as :meth:`wait` with ``unlisted_is_gone``, and besides the listings, the pod is read
        on its own (at most :data:`_GONE_PROBES` times) once a deletion has been seen to last that long."""
        with self._waiting_on(pod_id):
            self._wait(ctx, pod_id, done, time.monotonic(), True, False, _GoneProbe(deleted_at))

    @contextmanager
    def _waiting_on(self, pod_id: str) -> Iterator[None]:
        """Count a waiter of ``pod_id`` while the block runs (the listings are timed by what is waited)."""
        with self._cond:
            self._waiting[pod_id] += 1
        try:
            yield
        finally:
            with self._cond:
                self._waiting[pod_id] -= 1
                if not self._waiting[pod_id]:
                    del self._waiting[pod_id]
                    self._seen.pop(pod_id, None)

    def _deletion_over(self, probe: _GoneProbe, gone_at: float) -> None:
        """The deleted pod is gone in a view sent at ``gone_at``: its deletion lasted at least until the
        last view that showed it, and at most until that one. Only finished deletions teach, so the
        first ones are not read on their own."""
        self._deletion_ceiling = min(self._deletion_ceiling, gone_at - probe.deleted_at)
        if probe.present_at is not None:
            length = probe.present_at - probe.deleted_at
            if self._deletion_floor is None or length > self._deletion_floor:
                self._deletion_floor = length

    def _probe_at(self, probe: _GoneProbe) -> float:
        """When the deleted pod is read on its own next (infinity: never again)."""
        if probe.count >= _GONE_PROBES or self._deletion_floor is None:
            return float("inf")
        at = max(probe.deleted_at + self._deletion_floor, probe.last + self._hot)
        return (
            at
            if at <= probe.deleted_at + max(self._deletion_ceiling, self._deletion_floor) + self._hot
            else float("inf")
        )

    def _wait(
        self,
        ctx: Context,
        pod_id: str,
        done: Callable[[Pod | None], bool],
        began: float,
        unlisted_is_gone: bool,
        only_newer: bool,
        probe: _GoneProbe | None = None,
    ) -> Pod | None:
        seen = -1
        oldest = began if only_newer else float("-inf")
        while True:
            ctx.check()
            refresh = confirm = False
            with self._cond:
                if only_newer and self._failed_at >= oldest and self._failed_at > self._sent_at:
                    # The latest listing recent enough for this read failed: it must not queue for a
                    # listing of its own (at the budget's rate, 50 reads would wait ~45 s to fail in turn).
                    raise _ListingFailed()
                if self._generation != seen and self._taken_at > float("-inf") and self._sent_at >= oldest:
                    seen = self._generation
                    pod = self._pods.get(pod_id)
                    if pod is not None and done(pod):
                        if probe is not None:
                            self._deletion_over(probe, self._sent_at)
                        return pod
                    if pod is not None and probe is not None:
                        probe.seen(self._sent_at)
                    unlisted = pod is None and self._sent_at >= began
                    if unlisted and unlisted_is_gone and done(None):
                        if probe is not None:
                            self._deletion_over(probe, self._sent_at)
                        return None
                    confirm = unlisted and not unlisted_is_gone
                if not confirm:
                    now = time.monotonic()
                    next_at = self._next_listing_at(now)
                    probe_at = self._probe_at(probe) if probe is not None else float("inf")
                    if next_at <= now and not self._refreshing:
                        self._refreshing = refresh = True
                        self._budget.spend(now)
                    elif probe is not None and probe_at <= now:
                        confirm = True
                        probe.count, probe.last = probe.count + 1, now
                    else:
                        wake = min(next_at, probe_at) - now
                        self._cond.wait(timeout=min(_WAKE_SECONDS, max(wake, 0.01)))
            if confirm and probe is not None:
                sent_at = time.monotonic()
                read: Pod | None
                try:
                    read = self._client.read_pod(pod_id)
                except LiumNotFound as e:
                    if e.code != POD_NOT_FOUND:
                        probe.count = _GONE_PROBES  # not Lium's answer: the listings alone tell
                        continue
                    read = None
                except LiumError:
                    probe.count = _GONE_PROBES  # the listings alone tell, as they would have anyway
                    continue
                with self._cond:
                    if done(read):
                        self._read_gone[pod_id] = sent_at
                        self._deletion_over(probe, sent_at)
                        return read
                    probe.seen(sent_at)
            elif confirm:
                confirmed = self._client.get_pod(pod_id)
                if done(confirmed):
                    return confirmed
            elif refresh:
                self._refresh()


def _any_view(pod: Pod | None) -> bool:
    return True


@dataclass
class _GoneProbe:
    """A wait for a deleted pod to be gone: when its DELETE was answered, and its own reads so far."""

    deleted_at: float
    count: int = 0
    last: float = float("-inf")
    present_at: float | None = None  # when the latest view that still showed the pod was sent

    def seen(self, sent_at: float) -> None:
        if sent_at >= self.deleted_at and (self.present_at is None or sent_at > self.present_at):
            self.present_at = sent_at


class _ListingFailed(Exception):
    """A listing recent enough for this read failed (in another thread, which raised its error)."""
