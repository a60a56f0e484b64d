"""Hostile API answers: garbage on each read route during apply, plan and destroy.

The emulator's ``garbage`` fault answers 200 with the body cut in half, with its top-level JSON type
swapped, or as an HTML page. Whatever the route and the phase, Terraform must show a clear diagnostic —
never a Python traceback or an "internal provider error" — and no object may be left unrecorded: once the
fault is gone, ``destroy`` leaves nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import cycle
from pathlib import Path
from typing import Any

import pytest

from lium_emulator.catalogs.images import image_catalog
from lium_emulator.launcher import RunningEmulator
from tests.chaos.audit import find_crashes, leftovers
from tests.chaos.harness import APPLY, DESTROY, admin_report, run_command, user_id_of
from tests.chaos.scenarios import ROUTES, Stack, render
from tests.support.lium import PROVIDER_BLOCK, Account, new_account
from tests.support.terraform import Terraform

pytestmark = pytest.mark.terraform

PRIVATE = next(image for image in image_catalog() if image.private)
BODIES = ("truncated", "wrong_type", "not_json")
# Routes every refresh reads (so a plan or destroy stops there, before changing anything); not
# `GET /users/me`, which only the plan of a create sends (LiumSession.verify_access), nor the pod
# listing, whose failure a pod's read answers with its own GET (the test after the next).
REFRESH_READS = ("template-get", "credential-list", "volume-get")
# Routes an apply reads; events only when it explains a failed creation.
APPLY_READS = ("pods-list", "feed", "me", "events")
EVENTS_REASON = {"name": "reason", "path": ROUTES["rent"][1], "kind": "creation_failed", "first": 1}


def garbage_rule(route: str, body: str, name: str = "garbage") -> dict[str, object]:
    method, path = ROUTES[route]
    return {"name": name, "method": method, "path": path, "kind": "garbage", "body": body}


def garbage(route: str, body: str) -> dict[str, object]:
    rules = [garbage_rule(route, body)]
    if route == "events":
        rules.append(EVENTS_REASON)
    return {"seed": 9, "rules": rules}


@pytest.fixture
def account(shared_emulator: RunningEmulator, tmp_path: Path) -> Iterator[Account]:
    account = new_account(shared_emulator, tmp_path)
    with account.faults():
        yield account


@pytest.fixture
def stack(make_terraform: Callable[..., Terraform], account: Account) -> Terraform:
    body = render(
        Stack(pods=1, credential=True, volume=True, create_timeout=60), "hostile", PRIVATE.reference
    )
    tf = make_terraform(
        PROVIDER_BLOCK + body, **account.env, TF_VAR_registry_password=PRIVATE.registry_password or ""
    )
    tf.init()
    return tf


def holdings(report: dict[str, Any]) -> dict[str, list[str]]:
    """Ids of the account's live pods, templates, credentials and volumes."""
    live = {"pods": [p for p in report["pods"] if p["status"] != "DELETED"]}
    live |= {kind: report[kind] for kind in ("templates", "docker_credentials", "volumes")}
    return {kind: sorted(item["id"] for item in items) for kind, items in live.items()}


def converge_and_check(tf: Terraform, account: Account, outputs: dict[str, str]) -> None:
    """Faults gone: destroy (at most three runs) leaves nothing; no output showed a crash."""
    for _ in range(3):
        result = run_command(tf, DESTROY)
        outputs[f"converge destroy {len(outputs)}"] = result.output
        if result.returncode == 0:
            break
    assert result.returncode == 0, result.output
    assert leftovers(account.report()) == []
    assert find_crashes(outputs) == []


def test_garbage_during_refresh_stops_plan_and_destroy_cleanly(stack: Terraform, account: Account) -> None:
    assert run_command(stack, APPLY).returncode == 0
    user_id = user_id_of(account)
    held = holdings(admin_report(account, user_id))
    outputs: dict[str, str] = {}
    bodies = cycle(BODIES)
    for route in REFRESH_READS:
        for label, command in (("plan", ["plan", "-input=false", "-no-color"]), ("destroy", DESTROY)):
            body = next(bodies)
            with account.faults(garbage(route, body)):
                result = run_command(stack, command)
            outputs[f"{label} with {body} garbage on {route}"] = result.output
            assert result.returncode == 1 and "Error: " in result.output, result.output
            assert holdings(admin_report(account, user_id)) == held, "nothing may change"
    converge_and_check(stack, account, outputs)


def test_garbage_on_the_listing_during_refresh_is_answered_by_each_pods_get(
    stack: Terraform, account: Account
) -> None:
    """The listing holds every pod of the account: one unreadable answer there must not fail a refresh
    that the pod's own GET can do; both unreadable stop the plan, changing nothing."""
    assert run_command(stack, APPLY).returncode == 0
    user_id = user_id_of(account)
    held = holdings(admin_report(account, user_id))
    plan = ["plan", "-input=false", "-no-color", "-detailed-exitcode"]
    outputs: dict[str, str] = {}
    with account.faults(garbage("pods-list", "not_json")):
        result = run_command(stack, plan)
    outputs["plan with not_json garbage on pods-list"] = result.output
    assert result.returncode == 0, result.output  # refreshed, and nothing to change
    both = {
        "seed": 9,
        "rules": [
            garbage_rule("pods-list", "truncated", "listing"),
            garbage_rule("pod-get", "wrong_type", "pod"),
        ],
    }
    with account.faults(both):
        result = run_command(stack, plan)
    outputs["plan with garbage on pods-list and pod-get"] = result.output
    assert result.returncode == 1 and "Error: " in result.output, result.output
    assert holdings(admin_report(account, user_id)) == held, "nothing may change"
    converge_and_check(stack, account, outputs)


def test_garbage_while_destroy_waits_for_the_pod_is_a_clear_error(stack: Terraform, account: Account) -> None:
    """Without a refresh, GET /pods is read only after the pod's DELETE: the destroy stops half-way,
    recorded as it is."""
    assert run_command(stack, APPLY).returncode == 0
    with account.faults(garbage("pods-list", "not_json")):
        result = run_command(stack, [*DESTROY, "-refresh=false"])
    outputs = {"destroy with not_json garbage on pods-list": result.output}
    assert result.returncode == 1 and "Error: " in result.output, result.output
    converge_and_check(stack, account, outputs)


@pytest.mark.parametrize("route", APPLY_READS)
def test_garbage_during_apply_is_a_clear_error(route: str, stack: Terraform, account: Account) -> None:
    body = BODIES[APPLY_READS.index(route) % len(BODIES)]
    with account.faults(garbage(route, body)):
        result = run_command(stack, APPLY)
    outputs = {f"apply with {body} garbage on {route}": result.output}
    assert result.returncode == 0 or "Error: " in result.output, result.output
    converge_and_check(stack, account, outputs)
