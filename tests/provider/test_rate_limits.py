"""A 25-pod apply under sustained 429s completes, honours every ``Retry-After`` and sends nothing early.

The emulator limits the account with the fault plan: a token bucket on ``GET /pods`` (Lium's listing
limit, below the provider's polling rate) and fixed-``Retry-After`` rules on rents (a burst that refuses
the first 80), ``GET /pods/{id}``, deletes and template creation. The emulator counts requests but does
not log their times, so the provider talks to it through a recording reverse proxy (``tests/support/proxy.py``): for
every 429 it notes the moment just before the answer left and the ``Retry-After``; a resend of the same
request (method, path, query, ``Idempotency-Key`` and body) must not arrive before that moment plus
``Retry-After``.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from lium_emulator.launcher import RunningEmulator
from tests.support import http
from tests.support.lium import NOTHING_LIVE, PROVIDER_BLOCK, Account, pod_block, sleeping_template
from tests.support.proxy import RecordingProxy, early_resends
from tests.support.terraform import Terraform

pytestmark = pytest.mark.terraform

# More pods than Terraform's 10 parallel creates: later creates queue behind ones still under 429s. (It
# was 50; 25 keep that and the number of 429s, at half the sandboxes' CPU.)
PODS = 25
# Every rent is refused until 80 rents were refused: with Terraform's 10 parallel creates, each of the
# first ten pods meets about eight 429s in a row. GET /pods stays above its token bucket all along.
# Every other pod delete is refused, so the destroy meets one 429 per pod: with the 80 rents and the two
# templates, 107 in all.
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
            "every": 2,
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


def one_gpu_slots(emulator: RunningEmulator) -> list[str]:
    """An executor id per free GPU of the nodes that rent single GPUs, cheapest first."""
    nodes = http.get(f"{emulator.api_url}/public/v1/nodes", timeout=30).json()["nodes"]
    slots = [
        node["id"]
        for node in sorted(nodes, key=lambda n: (n["price_per_gpu_hour"], n["id"]))
        if node["min_rentable_gpu_count"] == 1
        for _ in range(node["gpu_count"])
    ]
    assert len(slots) >= PODS, f"the catalog has {len(slots)} single-GPU slots"
    return slots[:PODS]


def test_twenty_five_pods_under_sustained_429s(
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
    assert account.live() == NOTHING_LIVE
    assert all(k["rent_count"] == 1 for k in account.report()["idempotency_keys"])


ENDLESS_RENT_LIMIT = {
    "seed": 12,
    "rules": [
        {"method": "POST", "path": "/executors/*/rent", "kind": "rate_limit", "seconds": 2},
    ],
}
TIMED_POD = sleeping_template("limited") + pod_block("limited", 'timeouts {\n    create = "6s"\n  }')


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
    assert account.live() == NOTHING_LIVE


# The first two listings refused for 6 s each: the pod's delete (10 s) sees none before its timeout; the
# template's delete, which lists the stack's pods that use it, gets the third.
LISTINGS_REFUSED = {
    "seed": 13,
    "rules": [{"method": "GET", "path": "/pods", "kind": "rate_limit", "seconds": 6, "first": 2}],
}
SHORT_DELETE_POD = sleeping_template("unlisted") + pod_block(
    "unlisted", 'timeouts {\n    delete = "10s"\n  }'
)


def test_a_destroy_outlasting_the_listing_limit_reads_the_pod_itself(
    emulator: RunningEmulator, account: Account, make_terraform: Callable[..., Terraform]
) -> None:
    """The shared listing may not come back within a delete's timeout; the pod's own read settles it."""
    with RecordingProxy(emulator.root_url) as proxy:
        env = {**account.env, "LIUM_API_URL": f"{proxy.url}/api"}
        tf = make_terraform(PROVIDER_BLOCK + SHORT_DELETE_POD, **env)
        tf.init()
        tf.apply()
        with account.faults(LISTINGS_REFUSED):
            destroyed = tf.destroy(check=False)
        exchanges = list(proxy.exchanges)
    assert destroyed.returncode == 0, destroyed.stdout[-3000:] + destroyed.stderr
    assert account.live()["pods"] == []
    refused = [e for e in exchanges if e.method == "GET" and e.route == "/api/pods" and e.status == 429]
    assert len(refused) == 2, [(e.method, e.route, e.status) for e in exchanges]
