"""A server that trickles its answer cannot hold a request past its timeout.

httpx bounds each read, so a body arriving a byte at a time within each read's timeout would keep a
plan (the nodes feed) or an apply (any Lium call) waiting forever. The transport's request timeout
bounds the whole answer. The server here sends a byte at a fixed pace until it is told to stop.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from lium_provider.api.client import fetch_nodes_feed
from lium_provider.api.errors import LiumError
from lium_provider.api.retry import RetryPolicy
from lium_provider.api.transport import HttpTransport

PACE_SECONDS = 0.05
REQUEST_TIMEOUT_SECONDS = 0.5
# The server gives up after this long, so a transport without the bound fails the test instead of hanging.
TRICKLE_SECONDS = 5.0


@pytest.fixture
def trickling_url() -> Iterator[str]:
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            with connection:
                connection.recv(65536)
                connection.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
                )
                until = time.monotonic() + TRICKLE_SECONDS
                while not stop.wait(PACE_SECONDS) and time.monotonic() < until:
                    try:
                        connection.sendall(b" ")
                    except OSError:
                        break

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/public/v1/nodes"
    finally:
        stop.set()
        listener.shutdown(socket.SHUT_RDWR)  # wakes a blocked accept
        listener.close()
        thread.join(timeout=10)


def test_a_trickled_answer_ends_the_request_at_its_timeout(trickling_url: str) -> None:
    http = HttpTransport(
        timeout=REQUEST_TIMEOUT_SECONDS,
        user_agent="test",
        sleep=None,
        cancel=None,
        policy=RetryPolicy(max_retries=0),
        rng=None,
    )
    started = time.monotonic()
    try:
        with pytest.raises(LiumError, match="no answer"):
            fetch_nodes_feed(http, trickling_url)
    finally:
        http.close()
    # One pace past the deadline at most, and far less than the body would take (100000 bytes at the pace).
    assert time.monotonic() - started < REQUEST_TIMEOUT_SECONDS + 1.0
