"""A recording reverse proxy: what each provider process sent to the emulator, and when.

The emulator counts requests per account and route but keeps no times and cannot tell two provider
processes of one account apart. A test that needs either puts each process behind its own proxy (real
HTTP, in the test's process): every exchange is recorded with its method, path, ``Idempotency-Key``, JSON
bodies and monotonic timestamps. An upstream that drops the connection (``drop_after_commit``) is passed
on as a dropped connection, recorded with status 0.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from tests.support import http

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding", "host"}
DROPPED = 0  # the status recorded when the upstream closed the connection without an answer


@dataclass(frozen=True)
class Exchange:
    """One proxied request: what it was, when it arrived, and when (and with what) its answer left."""

    method: str
    path: str  # with the query string
    idempotency_key: str
    request_json: Any
    arrived: float
    status: int
    answered: float
    retry_after: float | None
    response_json: Any
    body_digest: str

    @property
    def identity(self) -> str:
        """What makes two requests the same request resent: method, path, key and body."""
        return " ".join((self.method, self.path, self.idempotency_key, self.body_digest))

    @property
    def route(self) -> str:
        """The path without its query string."""
        return self.path.split("?", 1)[0]


def _json_or_none(content: bytes) -> Any:
    try:
        return json.loads(content) if content else None
    except ValueError:
        return None


Rewrite = Callable[[str, str, bytes], bytes]
"""What a proxy makes of an upstream answer's body, given the request's method and path."""


class RecordingProxy:
    """A reverse proxy to ``upstream`` that records every exchange with monotonic timestamps; with
    ``rewrite``, the bodies it passes on are that function's (an upstream that answers otherwise than
    the emulator does: a listing that lags, say)."""

    def __init__(self, upstream: str, rewrite: Rewrite | None = None) -> None:
        self.upstream = upstream.rstrip("/")
        self._rewrite = rewrite
        self.exchanges: list[Exchange] = []
        self._lock = threading.Lock()
        self._client = http.client(timeout=120, follow_redirects=False)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def snapshot(self) -> list[Exchange]:
        """The exchanges recorded so far (a copy: requests in flight keep being added)."""
        with self._lock:
            return list(self.exchanges)

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._client.close()

    def _record(self, exchange: Exchange) -> None:
        with self._lock:
            self.exchanges.append(exchange)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                arrived = time.monotonic()
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
                seen = {
                    "method": self.command,
                    "path": self.path,
                    "idempotency_key": self.headers.get("Idempotency-Key", ""),
                    "request_json": _json_or_none(body),
                    "arrived": arrived,
                    "body_digest": hashlib.sha256(body).hexdigest(),
                }
                try:
                    upstream = proxy._client.request(
                        self.command, proxy.upstream + self.path, headers=headers, content=body
                    )
                except httpx.HTTPError:  # dropped upstream: drop this connection too
                    proxy._record(
                        Exchange(
                            **seen,
                            status=DROPPED,
                            answered=time.monotonic(),
                            retry_after=None,
                            response_json=None,
                        )
                    )
                    self.close_connection = True
                    return
                content = upstream.content
                if proxy._rewrite is not None:
                    content = proxy._rewrite(self.command, self.path, content)
                self.send_response(upstream.status_code)
                for key, value in upstream.headers.items():
                    if key.lower() not in _HOP_BY_HOP:
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(content)))
                answered = time.monotonic()  # before the client can see the answer
                self.end_headers()
                self.wfile.write(content)
                retry_after = upstream.headers.get("Retry-After")
                proxy._record(
                    Exchange(
                        **seen,
                        status=upstream.status_code,
                        answered=answered,
                        retry_after=float(retry_after) if retry_after is not None else None,
                        response_json=_json_or_none(content),
                    )
                )

            do_GET = do_POST = do_PUT = do_DELETE = _forward

            def log_message(self, format: str, *args: object) -> None:
                return

        return Handler


def early_resends(exchanges: list[Exchange]) -> list[str]:
    """Resends that arrived before the previous 429's ``Retry-After`` ran out, and 429s never resent."""
    by_identity: dict[str, list[Exchange]] = defaultdict(list)
    for exchange in sorted(exchanges, key=lambda e: e.arrived):
        by_identity[exchange.identity].append(exchange)
    found = []
    for identity, sequence in by_identity.items():
        for limited, after in zip(sequence, [*sequence[1:], None], strict=True):
            if limited.status != 429:
                continue
            if after is None:
                found.append(f"{identity}: a 429 was never resent")
            elif after.arrived < limited.answered + (limited.retry_after or 0):
                early = limited.answered + (limited.retry_after or 0) - after.arrived
                found.append(f"{identity}: resent {early:.3f} s before Retry-After ran out")
    return found


def busiest_minute(exchanges: list[Exchange], method: str, route: str) -> int:
    """The most ``method route`` requests that arrived within any 60-second window."""
    times = sorted(e.arrived for e in exchanges if e.method == method and e.route == route)
    most, start = 0, 0
    for end, arrived in enumerate(times):
        while arrived - times[start] >= 60.0:
            start += 1
        most = max(most, end - start + 1)
    return most
