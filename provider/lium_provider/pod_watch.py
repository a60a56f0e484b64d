"""One shared poll of ``GET /pods`` for every pod the provider is waiting on.

Terraform applies up to 10 resources at once in one provider process; if each pod polled its own
status, 50 pods would send hundreds of listings a minute against Lium's limit of about 60 per account.
Instead, waiting threads share one snapshot: whichever waiter finds it stale refreshes it, the others
block until it is new. At one listing a second the process stays at Lium's limit however many pods
wait, and API requests per pod fall as more pods wait together.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from lium_provider.api.client import LiumClient
from lium_provider.api.models import Pod
from tfbridge import Context

_WAKE_SECONDS = 0.25  # how often a blocked waiter re-checks cancellation and deadlines


class PodWatcher:
    def __init__(self, client: LiumClient, interval: float = 1.0) -> None:
        self._client = client
        self._interval = interval
        self._cond = threading.Condition()
        self._pods: dict[str, Pod] = {}
        self._taken_at = float("-inf")
        self._generation = 0
        self._refreshing = False

    def _refresh(self) -> None:
        try:
            pods = {pod.id: pod for pod in self._client.list_pods()}
        finally:
            with self._cond:
                self._refreshing = False
                self._cond.notify_all()
        with self._cond:
            self._pods, self._taken_at = pods, time.monotonic()
            self._generation += 1
            self._cond.notify_all()

    def wait(self, ctx: Context, pod_id: str, done: Callable[[Pod | None], bool]) -> Pod | None:
        """Block until ``done(pod)`` holds for a fresh view of the pod (None: not in the listing, 404).

        A pod missing from the listing is confirmed with ``GET /pods/{id}`` before ``done(None)`` is
        asked, because a listing may lag behind a rent that just happened.
        """
        seen = -1
        while True:
            ctx.check()
            refresh = confirm = False
            with self._cond:
                if self._generation != seen and self._taken_at > float("-inf"):
                    seen = self._generation
                    pod = self._pods.get(pod_id)
                    if pod is not None and done(pod):
                        return pod
                    confirm = pod is None
                if not confirm:
                    stale = time.monotonic() - self._taken_at >= self._interval
                    if stale and not self._refreshing:
                        self._refreshing = refresh = True
                    else:
                        next_poll = self._taken_at + self._interval - time.monotonic()
                        self._cond.wait(timeout=min(_WAKE_SECONDS, max(next_poll, 0.01)))
            if confirm:
                confirmed = self._client.get_pod(pod_id)
                if done(confirmed):
                    return confirmed
            elif refresh:
                self._refresh()
