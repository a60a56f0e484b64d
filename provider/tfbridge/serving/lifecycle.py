"""When a serving plugin process stops: shutdown coordination between gRPC threads, SIGTERM and main.

The main thread of :func:`tfbridge.serving.handshake.serve` blocks on a wake-up pipe. ``GRPCController/Shutdown``
(on a gRPC worker thread) and the host watch write :data:`_SHUTDOWN_REQUESTED` into it; SIGTERM writes its
signal number (``signal.set_wakeup_fd``). Streams that stay open until the end (health ``Watch``,
``GRPCStdio``) register to be released when the server begins to stop.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import grpc

_SHUTDOWN_REQUESTED = b"\x00"


def _note_signal(signum: int, frame: object) -> None:
    """Python-level SIGTERM handler; the wake-up fd carries the signal to the main thread."""


class Lifecycle:
    """The serving process's way from running to stopping, shared by all its threads."""

    def __init__(self) -> None:
        self._wake_read_fd, self._wake_write_fd = os.pipe()
        # signal.set_wakeup_fd requires a non-blocking descriptor.
        os.set_blocking(self._wake_write_fd, False)
        self._lock = threading.Lock()
        self._stopping = False
        self._stop_callbacks: list[Callable[[], None]] = []
        self.abandoned = False
        """Set when the host went away: in-flight operations get time to undo what they made."""
        self.abandon_grace = 0.0
        """How long, from the moment the host went away, in-flight operations get to undo what they made."""
        self._calls = 0
        self._calls_done = threading.Condition(self._lock)

    def catch_sigterm(self) -> None:
        """From now on SIGTERM ends :meth:`wait_for_exit_request`, not the process (main thread only)."""
        signal.signal(signal.SIGTERM, _note_signal)
        signal.set_wakeup_fd(self._wake_write_fd, warn_on_full_buffer=False)

    def request_shutdown(self) -> None:
        os.write(self._wake_write_fd, _SHUTDOWN_REQUESTED)

    def abandon(self, grace: float) -> None:
        """Stop because the host is gone: nobody receives answers any more (see ``abandoned``); in-flight
        operations get ``grace`` seconds from now."""
        self.abandon_grace = grace
        self.abandoned = True
        self.request_shutdown()

    def wait_for_exit_request(self) -> bool:
        """Block until Shutdown is called or SIGTERM arrives; True for SIGTERM."""
        while True:
            byte = os.read(self._wake_read_fd, 1)
            if byte == _SHUTDOWN_REQUESTED:
                return False
            if byte == bytes([signal.SIGTERM]):
                return True

    def call_when_stopping(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` when the server begins to stop (at once if it already has)."""
        with self._lock:
            if not self._stopping:
                self._stop_callbacks.append(callback)
                return
        callback()

    def begin_stopping(self) -> None:
        with self._lock:
            self._stopping = True
            callbacks, self._stop_callbacks = self._stop_callbacks, []
        for callback in callbacks:
            callback()

    @contextlib.contextmanager
    def serving_call(self) -> Iterator[None]:
        """Around a provider call's handler: :meth:`wait_for_calls` waits for it. gRPC's own stop does
        not: once Terraform is gone its calls count as cancelled, while their handlers still run the
        undo of what they made."""
        with self._lock:
            self._calls += 1
        try:
            yield
        finally:
            with self._lock:
                self._calls -= 1
                self._calls_done.notify_all()

    def wait_for_calls(self, timeout: float) -> bool:
        """Block until no provider call runs, at most ``timeout`` seconds; whether none runs."""
        with self._lock:
            return self._calls_done.wait_for(lambda: self._calls == 0, timeout)

    def wait_until_stopping_or_cancelled(self, context: grpc.ServicerContext) -> None:
        """Hold a server stream open until the server stops or the client goes away."""
        ended = threading.Event()
        if not context.add_callback(ended.set):
            return
        self.call_when_stopping(ended.set)
        ended.wait()
