"""Two CI runners of one team, one Lium account: they apply and destroy at the same time.

Each runner is a ``terraform`` process of its own stack (``LIUM_STACK``), in its own checkout, with its
own ``HOME`` and rent journal; both stacks declare the same names. Each runner's provider talks to the
emulator through its own recording proxy (``tests/support/proxy.py``), so every request is known to come
from one runner although both use one API key. The runners must never interfere: after the applies each
stack's state holds exactly the pods its own runner rented and the account holds nothing else; no
request of one runner acts on the other's objects; after the destroys nothing is left. Under a 429 storm
(the account's ``GET /pods`` bucket well below what two runners would poll, and refusals on rents, pod
reads, deletes and template creation) the same holds, every ``Retry-After`` is honoured, and each
process keeps within the listing limit one account has (docs/reliability.md, "Several processes, one
account").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from lium_emulator.catalogs.images import image_catalog
from tests.chaos.audit import cross_stack_effects, stack_owners, template_owners
from tests.chaos.scenarios import Stack, render
from tests.support.lium import PROVIDER_BLOCK, Account, assert_nothing_left, instances
from tests.support.proxy import RecordingProxy, busiest_minute, early_resends
from tests.support.terraform import Terraform

pytestmark = pytest.mark.terraform

RUNNERS = ("a", "b")
PODS_PER_STACK = 2
# Lium's listing limit: about 60 `GET /pods` a minute per account (docs/lium-api.md, rate limits).
ACCOUNT_LISTING_LIMIT = 60
# The storm: the account's listing bucket at a fifth of the limit (12 a minute), shared by two runners
# that each need more than that and may each poll up to the limit; the first six rents, every third pod read, every other pod delete and the first
# template creation are refused with Retry-After too.
STORM = {
    "seed": 12,
    "rules": [
        {
            "name": "rents",
            "method": "POST",
            "path": "/executors/*/rent",
            "kind": "rate_limit",
            "seconds": 1,
            "first": 6,
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
            "seconds": 1,
            "every": 2,
        },
        {
            "name": "template",
            "method": "POST",
            "path": "/templates",
            "kind": "rate_limit",
            "seconds": 2,
            "first": 1,
        },
    ],
    "rate_limits": [{"method": "GET", "path": "/pods", "per_minute": ACCOUNT_LISTING_LIMIT // 5}],
}
CALM: dict[str, Any] = {"seed": 12, "rules": []}
# The storm's bucket grants the account one listing every 5 s, and the two runners' pods race for each:
# a runner may see one listing in 15 s, so a destroy gets time for several (the chaos default is 40 s).
DELETE_TIMEOUT_SECONDS = 300


def runner(
    make_terraform: Callable[..., Terraform], account: Account, proxy: RecordingProxy, label: str, home: Path
) -> Terraform:
    """A CI runner's checkout of the team's configuration: its own stack, HOME and rent journal."""
    private = next(image for image in image_catalog() if image.private)
    body = render(
        Stack(
            pods=PODS_PER_STACK,
            credential=False,
            volume=False,
            create_timeout=300,
            delete_timeout=DELETE_TIMEOUT_SECONDS,
        ),
        "team",
        private.reference,
        labelled=True,
    )
    home.mkdir(parents=True)
    env = {
        **account.env,
        "LIUM_API_URL": f"{proxy.url}/api",
        "LIUM_STACK": f"team-{label}",
        "HOME": str(home),
        "LIUM_STATE_DIR": str(home / "state"),
        "TF_VAR_stack_label": label,
    }
    tf = make_terraform(PROVIDER_BLOCK + body, **env)
    tf.init()
    return tf


def at_once(stacks: Mapping[str, Terraform], command: str) -> dict[str, Any]:
    """``terraform <command>`` in every runner at the same time; the finished processes by runner."""
    with ThreadPoolExecutor(len(stacks)) as pool:
        futures = {label: pool.submit(getattr(tf, command), check=False) for label, tf in stacks.items()}
        return {label: future.result() for label, future in futures.items()}


def pod_ids(tf: Terraform) -> set[str]:
    return {pod["id"] for pod in instances(tf, "lium_pod")}


@pytest.mark.parametrize("plan", [CALM, STORM], ids=["calm", "429-storm"])
def test_two_ci_runners_apply_and_destroy_at_once_without_interfering(
    account: Account, make_terraform: Callable[..., Terraform], tmp_path: Path, plan: dict[str, Any]
) -> None:
    with ExitStack() as proxies_open:
        proxies = {
            label: proxies_open.enter_context(RecordingProxy(account.emulator.root_url)) for label in RUNNERS
        }
        stacks = {
            label: runner(make_terraform, account, proxies[label], label, tmp_path / f"home-{label}")
            for label in RUNNERS
        }
        with account.faults(plan):
            applied = at_once(stacks, "apply")
            for label, result in applied.items():
                assert result.returncode == 0, f"runner {label}:\n{result.stdout[-3000:]}{result.stderr}"
            report = account.report()
            exchanges = {label: proxy.snapshot() for label, proxy in proxies.items()}
            owners = stack_owners(report, exchanges)
            templates = template_owners(report)
            live = {p["id"] for p in report["pods"] if p["status"] != "DELETED"}
            for label, tf in stacks.items():
                own = {pod_id for pod_id in live if owners.get(pod_id) == label}
                assert pod_ids(tf) == own and len(own) == PODS_PER_STACK, (label, pod_ids(tf), own)
            assert len(live) == len(RUNNERS) * PODS_PER_STACK, report["pods"]
            destroyed = at_once(stacks, "destroy")
            for label, result in destroyed.items():
                assert result.returncode == 0, f"runner {label}:\n{result.stdout[-3000:]}{result.stderr}"
        exchanges = {label: proxy.snapshot() for label, proxy in proxies.items()}
    assert cross_stack_effects(account.report(), exchanges, templates) == []
    assert_nothing_left(account)
    assert all(k["rent_count"] == 1 for k in account.report()["idempotency_keys"])
    for label, sent in exchanges.items():
        assert early_resends(sent) == [], label
        assert busiest_minute(sent, "GET", "/api/pods") <= ACCOUNT_LISTING_LIMIT, label
    if plan is STORM:  # the storm happened: rents, the template and listings were refused
        refused = [
            (e.method, e.route.rsplit("/", 1)[-1])
            for sent in exchanges.values()
            for e in sent
            if e.status == 429
        ]
        assert refused.count(("POST", "rent")) == 6 and refused.count(("POST", "templates")) == 1, refused
        assert refused.count(("GET", "pods")) > 0, "the runners' listings together never met the bucket"
