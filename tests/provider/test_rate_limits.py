"""A 50-pod apply under sustained 429s completes, honours every ``Retry-After`` and sends nothing early.

The emulator limits the account with the fault plan: a token bucket on ``GET /pods`` (Lium's listing
limit, below the provider's polling rate) and fixed-``Retry-After`` rules on rents (a burst that refuses
the first 80), ``GET /pods/{id}``, deletes and template creation. The emulator counts requests but does
not log their times, so the provider talks to it through a recording reverse proxy (real HTTP, in this process): for
every 429 it notes the moment just before the answer left and the ``Retry-After``; a resend of the same
request (method, path, query, ``Idempotency-Key`` and body) must not arrive before that moment plus
``Retry-After``.
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

import httpx
import pytest

from lium_emulator.launcher import RunningEmulator
from tests.support.lium import PROVIDER_BLOCK, Account, sleeping_template
from tests.support.terraform import Terraform

pytestmark = pytest.mark.terraform

PODS = 50
# Every rent is refused until 80 rents were refused: with Terraform's 10 parallel creates, each of the
# first ten pods meets about eight 429s in a row. GET /pods stays above its token bucket all along.
LIMITS = {
    "seed": 11,
    "rules": [
        {
            "name": "rents",
            "method": "POST",
            "path": "/executors/*/rent",
            "kind": "rate_limit",
            "seconds": 1,
            "first": 80,
        },
        {
            "name": "template",
            "method": "POST",
            "path": "/templates",
            "kind": "rate_limit",
            "seconds": 2,
            "first": 2,
        },
        {
            "name": "pod-reads",
            "method": "GET",
            "path": "/pods/*",
            "kind": "rate_limit",
            "seconds": 1,
            "every": 3,
        },
        {
            "name": "deletes",
            "method": "DELETE",
            "path": "/pods/*",
            "kind": "rate_limit",
            "seconds": 2,
            "every": 3,
        },
    ],
    "rate_limits": [{"method": "GET", "path": "/pods", "per_minute": 30}],
}
STACK = """
variable "executors" {
  type = list(string)
}
resource "lium_template" "t" {
  name             = "rate-limited"
  image            = "python:3.11-slim"
  entrypoint       = "/bin/sh"
  startup_commands = "-c 'exec sleep infinity'"
}
resource "lium_pod" "p" {
  count       = length(var.executors)
  name        = "rl-${count.index}"
  template_id = lium_template.t.id
  executor_id = var.executors[count.index]
  timeouts {
    create = "600s"
  }
}
"""
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding", "host"}


@dataclass(frozen=True)
class Exchange:
    """One proxied request: what it was, when it arrived, and (for a 429) when its answer left."""

    identity: str
    arrived: float
    status: int
    answered: float
    retry_after: float | None


class RecordingProxy:
    """A reverse proxy to ``upstream`` that records every exchange with monotonic timestamps."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.exchanges: list[Exchange] = []
        self._lock = threading.Lock()
        self._client = httpx.Client(timeout=60, follow_redirects=False)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> RecordingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._client.close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                arrived = time.monotonic()
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
                upstream = proxy._client.request(
                    self.command, proxy.upstream + self.path, headers=headers, content=body
                )
                content = upstream.content
                self.send_response(upstream.status_code)
                for key, value in upstream.headers.items():
                    if key.lower() not in _HOP_BY_HOP:
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(content)))
                answered = time.monotonic()  # before the client can see the answer
                self.end_headers()
                self.wfile.write(content)
                retry_after = upstream.headers.get("Retry-After")
                identity = " ".join(
                    (
                        self.command,
                        self.path,
                        self.headers.get("Idempotency-Key", ""),
                        hashlib.sha256(body).hexdigest(),
                    )
                )
                with proxy._lock:
                    proxy.exchanges.append(
                        Exchange(
                            identity,
                            arrived,
                            upstream.status_code,
                            answered,
                            float(retry_after) if retry_after is not None else None,
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


def one_gpu_slots(emulator: RunningEmulator) -> list[str]:
    """An executor id per free GPU of the nodes that rent single GPUs, cheapest first."""
    nodes = httpx.get(f"{emulator.api_url}/public/v1/nodes", timeout=30).json()["nodes"]
    slots = [
        node["id"]
        for node in sorted(nodes, key=lambda n: (n["price_per_gpu_hour"], n["id"]))
        if node["min_rentable_gpu_count"] == 1
        for _ in range(node["gpu_count"])
    ]
    assert len(slots) >= PODS, f"the catalog has {len(slots)} single-GPU slots"
    return slots[:PODS]


def test_fifty_pods_under_sustained_429s(
    emulator: RunningEmulator, account: Account, make_terraform: Callable[..., Terraform]
) -> None:
    with RecordingProxy(emulator.root_url) as proxy:
        env = {**account.env, "LIUM_API_URL": f"{proxy.url}/api"}
        tf = make_terraform(
            PROVIDER_BLOCK + STACK, **env, TF_VAR_executors=json.dumps(one_gpu_slots(emulator))
        )
        tf.init()
        with account.faults(LIMITS):
            applied = tf.apply(check=False)
            running = [p for p in account.live()["pods"] if p["status"] == "RUNNING"]
            destroyed = tf.destroy(check=False)
        exchanges = list(proxy.exchanges)
    limited = [e for e in exchanges if e.status == 429]
    assert len(limited) >= 100, f"only {len(limited)} 429s: the limits were not sustained"
    assert {e.retry_after for e in limited} <= {1.0, 2.0}
    assert early_resends(exchanges) == []
    assert applied.returncode == 0, applied.stdout[-3000:] + applied.stderr
    assert len(running) == PODS
    assert destroyed.returncode == 0, destroyed.stdout[-3000:] + destroyed.stderr
    assert account.live() == {"pods": [], "templates": [], "docker_credentials": [], "volumes": []}
    assert all(k["rent_count"] == 1 for k in account.report()["idempotency_keys"])


ENDLESS_RENT_LIMIT = {
    "seed": 12,
    "rules": [
        {"method": "POST", "path": "/executors/*/rent", "kind": "rate_limit", "seconds": 2},
    ],
}
TIMED_POD = (
    sleeping_template("limited")
    + """resource "lium_pod" "p" {
  name        = "limited"
  template_id = lium_template.t.id
  timeouts {
    create = "6s"
  }
}
"""
)


def test_a_lasting_429_ends_at_the_operation_timeout(
    account: Account, make_terraform: Callable[..., Terraform]
) -> None:
    """Reliability finding 6: the client's 15-minute 429 budget gives way to the resource's timeouts."""
    tf = make_terraform(PROVIDER_BLOCK + TIMED_POD, **account.env)
    tf.init()
    with account.faults(ENDLESS_RENT_LIMIT):
        # Without the deadline the apply would wait out the 900 s budget: Terraform.run's timeout fails it.
        applied = tf.run("apply", "-auto-approve", "-no-color", check=False, timeout=120)
    assert applied.returncode != 0
    assert "timeout" in applied.stderr.lower(), applied.stderr
    assert account.live()["pods"] == []
    tf.destroy()
    assert account.live() == {"pods": [], "templates": [], "docker_credentials": [], "volumes": []}
