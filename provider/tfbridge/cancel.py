"""Cancellation: Terraform's StopProvider flips a token that long operations poll.

StopProvider must never stop the gRPC server: Terraform still waits for the in-flight
ApplyResourceChange and records whatever object it returns. So cancellation is cooperative —
operations call :meth:`CancelToken.sleep` / :meth:`CancelToken.raise_if_cancelled` between steps and
return partial state when they stop early.
"""

from __future__ import annotations

import threading


class Cancelled(Exception):
    """Raised inside an operation once Terraform asked the provider to stop (Ctrl-C)."""

    def __init__(self) -> None:
        super().__init__("the operation was cancelled (Terraform asked the provider to stop)")


class CancelToken:
    """A process-wide flag set by StopProvider; cheap to poll, and sleeps wake up when it is set."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def raise_if_cancelled(self) -> None:
        if self._event.is_set():
            raise Cancelled()

    def sleep(self, seconds: float) -> None:
        """Wait up to ``seconds``; raise :class:`Cancelled` as soon as the token is set."""
        if self._event.wait(max(0.0, seconds)):
            raise Cancelled()
