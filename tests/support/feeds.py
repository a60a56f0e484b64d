"""A nodes feed served over real HTTP on loopback, for the code that reads Lium's public feed."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@contextlib.contextmanager
def serving_feed(nodes: list[Any]) -> Iterator[str]:
    """The URL of a throw-away server answering every GET with ``{"nodes": nodes}``; stopped on exit."""
    body = json.dumps({"nodes": nodes}).encode()

    class Feed(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Feed)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/public/v1/nodes"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
