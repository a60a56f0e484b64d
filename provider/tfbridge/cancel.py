"""Cancellation: Terraform's StopProvider flips a token that long operations poll.

StopProvider must never stop the gRPC server: Terraform still waits for the in-flight
ApplyResourceChange and records whatever object it returns. So cancellation is cooperative —
operations call :meth:`CancelToken.sleep` / :meth:`CancelToken.raise_if_cancelled` between steps and
return partial state when they stop early.
"""

from __future__ import annotations

import itertools
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager


class Cancelled(Exception):
    """Raised inside an operation once Terraform asked the provider to stop (Ctrl-C)."""

    def __init__(self) -> None:
        super().__init__("the operation was cancelled (Terraform asked the provider to stop)")


class CancelToken:
    """A process-wide flag set by StopProvider; cheap to poll, and sleeps wake up when it is set."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._abandoned = False
        _TOKENS.add(self)

    def cancel(self) -> None:
        self._event.set()

    def abandon(self) -> None:
        """Cancel because nobody will ever receive the results (Terraform, or its launcher, is gone)."""
        self._abandoned = True
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    @property
    def abandoned(self) -> bool:
        """True once :meth:`abandon` was called: what an operation made will never reach any state, so
        it should undo what it can (and may still call its API to do so) before the process exits."""
        return self._abandoned

    def raise_if_cancelled(self) -> None:
        if self._event.is_set():
            raise Cancelled()

    def sleep(self, seconds: float) -> None:
        """Wait up to ``seconds``; raise :class:`Cancelled` as soon as the token is set."""
        if self._event.wait(max(0.0, seconds)):
            raise Cancelled()


_TOKENS: weakref.WeakSet[CancelToken] = weakref.WeakSet()


def abandon_all() -> None:
    """Abandon every token of this process: the serving process's host is gone (:mod:`tfbridge.serving.handshake`)."""
    for token in list(_TOKENS):
        token.abandon()


_HOLDS: dict[int, float] = {}
_HOLDS_LOCK = threading.Lock()
_HOLD_KEYS = itertools.count()


@contextmanager
def outliving_the_host(seconds: float) -> Iterator[None]:
    """Around one request whose effect is not known until it answers (a rent): should the host go away
    meanwhile, the process waits for the block to end (at most ``seconds`` from its start) before the
    grace that abandoned operations get to undo what they made begins, so the undo can still see what
    the request made. Outside such a block an abandoned process exits after that grace alone."""
    key = next(_HOLD_KEYS)
    with _HOLDS_LOCK:
        _HOLDS[key] = time.monotonic() + seconds
    try:
        yield
    finally:
        with _HOLDS_LOCK:
            _HOLDS.pop(key, None)


def held_seconds() -> float:
    """How much longer the longest :func:`outliving_the_host` block now open may last (0: none is open)."""
    now = time.monotonic()
    with _HOLDS_LOCK:
        return max((until - now for until in _HOLDS.values()), default=0.0)
