"""Removal deadlines that need no local disk, through real Terraform.

``lium_pod.termination_hours`` and the provider's ``default_termination_hours`` make Lium remove a pod
by itself; every rent carries a provisional deadline that the end of the create replaces. What Lium holds
is read back from the emulator's pod rows, its inspection report (``running_at``) and its event log.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from lium_provider.domain.removal import provisional_hours
from lium_provider.resources.pod import PodResource
from tests.support.lium import (
    PROVIDER_BLOCK,
    Account,
    assert_nothing_left,
    instances,
    pod_block,
    sleeping_template,
)
from tests.support.procs import kill_provider_and_server, wait_for
from tests.support.terraform import Terraform, reaped

pytestmark = pytest.mark.terraform

TEMPLATE = sleeping_template("deadline-template")
# The default create timeout gives this provisional deadline (1 h): the tests' hours are chosen around it.
PROVISIONAL = provisional_hours(PodResource.default_timeouts["create"])
SCHEDULED = "pod-schedule-removal.scheduled"
CANCELLED = "pod-schedule-removal.cancelled"


def pod(resource: str, name: str, extra: str = "") -> str:
    return pod_block(name, extra).replace('"lium_pod" "p"', f'"lium_pod" "{resource}"')


def at(text: str | None) -> datetime | None:
    """An ISO time of the API or the state as an aware UTC datetime (the emulator's are naive UTC)."""
    if text is None:
        return None
    moment = datetime.fromisoformat(text)
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def pod_state(tf: Terraform, resource: str) -> dict[str, Any]:
    return next(
        r["instances"][0] for r in tf.resources() if r["type"] == "lium_pod" and r["name"] == resource
    )


def lium_row(account: Account, pod_id: str) -> dict[str, Any]:
    with account.api() as api:
        response = api.get(f"/pods/{pod_id}")
    assert response.status_code == 200, response.text
    row: dict[str, Any] = response.json()
    return row


def running_at(account: Account, pod_id: str) -> datetime:
    started = at(next(p for p in account.report()["pods"] if p["id"] == pod_id)["running_at"])
    assert started is not None, f"pod {pod_id} never ran"
    return started


def schedule_events(account: Account, pod_id: str) -> list[str]:
    """The pod's schedule-removal events, oldest first."""
    with account.api() as api:
        events = api.get("/users/me/events", params={"pod_id": pod_id, "limit": 100}).json()
    return [e["sub_event_type"] for e in reversed(events) if e["sub_event_type"] in (SCHEDULED, CANCELLED)]


def assert_removal(account: Account, state: dict[str, Any], hours: int | None) -> None:
    """State and Lium agree that the pod is removed ``hours`` after it ran (or never)."""
    attributes = state["attributes"]
    row = lium_row(account, attributes["id"])
    started = running_at(account, attributes["id"])
    expected = None if hours is None else started + timedelta(hours=hours)
    assert attributes["termination_hours"] == hours, attributes
    assert at(row["removal_scheduled_at"]) == expected, (row["removal_scheduled_at"], expected)
    assert at(attributes["removal_scheduled_at"]) == expected, (attributes["removal_scheduled_at"], expected)
    assert at(attributes["started_at"]) == started, (attributes["started_at"], started)


def test_termination_hours_sets_moves_and_cancels_the_removal(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    assert PROVISIONAL == 1, "the hours below assume a one-hour provisional deadline"
    longer, shorter = (
        pod("p", "deadline-8h", "termination_hours = 8"),
        pod("s", "deadline-1h", "termination_hours = 1"),
    )
    unbounded = pod("u", "deadline-none")
    tf = stack(TEMPLATE + longer + shorter + unbounded)
    tf.apply()
    p, s, u = (pod_state(tf, r) for r in ("p", "s", "u"))

    # Longer than the provisional deadline: the rent carried the provisional hour, then the create moved it.
    assert_removal(account, p, 8)
    assert lium_row(account, p["attributes"]["id"])["termination_hours"] == PROVISIONAL
    assert schedule_events(account, p["attributes"]["id"]) == [SCHEDULED]
    # Shorter: the rent carried the pod's own hour, and nothing needed replacing.
    assert_removal(account, s, 1)
    assert schedule_events(account, s["attributes"]["id"]) == []
    # None: the provisional deadline was there during the create and cancelled once it finished.
    assert_removal(account, u, None)
    assert schedule_events(account, u["attributes"]["id"]) == [CANCELLED]
    code, plan = tf.plan_exitcode()
    assert code == 0, plan

    # A change moves the removal in place (POST), counted from the same start.
    tf.write(PROVIDER_BLOCK + TEMPLATE + longer.replace("= 8", "= 12") + shorter + unbounded)
    code, plan = tf.plan_exitcode()
    assert code == 2 and "0 to add, 1 to change, 0 to destroy" in plan, plan
    tf.apply()
    p = pod_state(tf, "p")
    assert_removal(account, p, 12)
    assert schedule_events(account, p["attributes"]["id"]) == [SCHEDULED, SCHEDULED]

    # Removing it cancels the removal (DELETE).
    tf.write(PROVIDER_BLOCK + TEMPLATE + pod("p", "deadline-8h") + shorter + unbounded)
    tf.apply()
    p = pod_state(tf, "p")
    assert_removal(account, p, None)
    assert schedule_events(account, p["attributes"]["id"])[-1] == CANCELLED

    # Someone schedules the unbounded pod's removal in Lium's UI: the plan sets it back (in place).
    pod_id = u["attributes"]["id"]
    with account.api() as api:
        later = (datetime.now(UTC) + timedelta(hours=3)).isoformat()
        assert (
            api.post(f"/pods/{pod_id}/schedule-removal", json={"removal_scheduled_at": later}).status_code
            == 200
        )
    code, plan = tf.plan_exitcode()
    assert code == 2 and "0 to add, 1 to change, 0 to destroy" in plan and "removal_scheduled_at" in plan, (
        plan
    )
    tf.apply()
    assert_removal(account, pod_state(tf, "u"), None)
    assert tf.plan_exitcode()[0] == 0

    tf.destroy()
    assert_nothing_left(account)


def test_the_provider_default_applies_to_pods_that_set_none(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    body = TEMPLATE + pod("p", "default-6h") + pod("own", "own-3h", "termination_hours = 3")
    tf = make_terraform(PROVIDER_BLOCK + body, **account.env, LIUM_DEFAULT_TERMINATION_HOURS="6")
    tf.init()
    tf.run("plan", "-input=false", "-out=tfplan")
    planned = {
        c["name"]: c["change"]["after"]["termination_hours"]
        for c in tf.show_json("tfplan")["resource_changes"]
        if c["type"] == "lium_pod"
    }
    assert planned == {"p": 6, "own": 3}, planned  # visible in the plan, so plan-summary counts it
    tf.apply()
    assert_removal(account, pod_state(tf, "p"), 6)
    assert_removal(account, pod_state(tf, "own"), 3)
    tf.destroy()
    assert_nothing_left(account)


@pytest.mark.parametrize(
    ("provider_argument", "env", "pod_argument", "attribute"),
    [
        ("", "0", "", "default_termination_hours"),
        ("", "a day", "", "default_termination_hours"),
        ("default_termination_hours = 721", "", "", "default_termination_hours"),
        ("", "", "termination_hours = 0", "termination_hours"),
        ("", "", "termination_hours = 721", "termination_hours"),
    ],
)
def test_out_of_bounds_hours_fail_the_plan_naming_the_attribute(
    make_terraform: Callable[..., Terraform],
    account: Account,
    provider_argument: str,
    env: str,
    pod_argument: str,
    attribute: str,
) -> None:
    provider = PROVIDER_BLOCK.replace('provider "lium" {}', f'provider "lium" {{\n  {provider_argument}\n}}')
    extra_env = {"LIUM_DEFAULT_TERMINATION_HOURS": env} if env else {}
    tf = make_terraform(provider + TEMPLATE + pod("p", "bounds", pod_argument), **account.env, **extra_env)
    tf.init()
    failed = tf.run("plan", "-input=false", "-no-color", check=False)
    assert failed.returncode == 1, failed.stdout
    assert attribute in failed.stderr, failed.stderr
    assert_nothing_left(account)


def test_a_failed_final_schedule_fails_the_create_with_the_pod_recorded(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    refuse_cancel = {
        "seed": 0,
        "rules": [
            {
                "method": "DELETE",
                "path": "/pods/*/schedule-removal",
                "kind": "status",
                "status": 400,
                "code": "schedule_refused",
                "message": "refused by the test",
            }
        ],
        "rate_limits": [],
    }
    tf = stack(TEMPLATE + pod("p", "unbounded"))
    with account.faults(refuse_cancel):
        failed = tf.apply(check=False)
    assert failed.returncode == 1
    assert "Setting the pod's removal deadline failed" in " ".join(failed.stderr.split()), failed.stderr
    state = pod_state(tf, "p")
    assert state.get("status") == "tainted", state  # recorded: the paid pod is never forgotten
    pod_id = state["attributes"]["id"]
    provisional = running_at(account, pod_id) + timedelta(hours=PROVISIONAL)
    assert at(lium_row(account, pod_id)["removal_scheduled_at"]) == provisional

    # Kept (untainted), the next plan shows the fix in place and the apply makes the pod unbounded.
    tf.run("untaint", "lium_pod.p")
    code, plan = tf.plan_exitcode()
    assert code == 2 and "0 to add, 1 to change, 0 to destroy" in plan and "removal_scheduled_at" in plan, (
        plan
    )
    tf.apply()
    assert_removal(account, pod_state(tf, "p"), None)
    assert instances(tf, "lium_pod")[0]["id"] == pod_id
    tf.destroy()
    assert_nothing_left(account)


@pytest.mark.parametrize(
    ("fault", "taken"),
    [
        ({"kind": "drop_after_commit"}, "cancelled, then the connection dropped"),
        ({"kind": "status", "status": 503, "code": "unavailable"}, "refused before it took effect"),
    ],
)
def test_an_unknown_outcome_of_the_final_schedule_is_read_back_not_guessed(
    stack: Callable[[str], Terraform], account: Account, fault: dict[str, Any], taken: str
) -> None:
    """The cancel of the provisional deadline gets no answer (a connection the server closed, a 5xx):
    the create reads the pod back, resends only if the schedule is still there, and succeeds."""
    unanswered = {
        "seed": 0,
        "rules": [{"method": "DELETE", "path": "/pods/*/schedule-removal", "times": 1, **fault}],
        "rate_limits": [],
    }
    tf = stack(TEMPLATE + pod("p", "unanswered"))
    with account.faults(unanswered):
        tf.apply()
    state = pod_state(tf, "p")
    assert state.get("status") != "tainted", (taken, state)
    assert_removal(account, state, None)
    # Exactly one cancel took effect either way: never resent when the read-back shows it done.
    assert schedule_events(account, state["attributes"]["id"]) == [CANCELLED], taken
    tf.destroy()
    assert_nothing_left(account)


def test_a_create_killed_after_the_rent_leaves_a_pod_that_lium_removes_by_itself(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    """The provider SIGKILLed, with nothing left to clean up, while it waits for a running pod's sshd
    (held back by an ``ssh_late`` fault): whatever becomes of the journal, Lium already holds the
    provisional removal."""
    silent_sshd = {
        "seed": 0,
        "rules": [{"method": "POST", "path": "/executors/*/rent", "kind": "ssh_late", "seconds": 300}],
        "rate_limits": [],
    }
    # A cold start (no zygote), its launcher and server both killed: no process is left that could
    # delete the pod it rented, which is the case (a runner lost whole) that only Lium's own deadline ends.
    tf = make_terraform(PROVIDER_BLOCK + TEMPLATE + pod("p", "killed"), **account.env, TFBRIDGE_ZYGOTE="0")
    tf.init()
    with account.faults(silent_sshd), reaped(tf.start("apply", "-auto-approve", "-no-color")) as process:
        wait_for(
            lambda: [p for p in account.live()["pods"] if p["status"] == "RUNNING" and p["ssh_connect_cmd"]],
            "the pod runs",
            120,
            process=process,
        )
        kill_provider_and_server(process.pid)
        output, _ = process.communicate(timeout=60)
    assert process.returncode != 0, output
    (killed,) = account.live()["pods"]
    row = lium_row(account, killed["id"])
    assert at(row["removal_scheduled_at"]) == running_at(account, killed["id"]) + timedelta(hours=PROVISIONAL)
    tf.env["TFBRIDGE_ZYGOTE"] = "1"  # the destroy's providers start warm: a cold start only costs CPU here
    tf.destroy()  # the local journal still knows the rent: the next destroy deletes the pod at once
    assert_nothing_left(account)
