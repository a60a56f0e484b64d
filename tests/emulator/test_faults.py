"""The fault plan: loaded from ``--faults FILE`` and replaced through ``PUT /_emulator/faults``; every
fault kind observed over real HTTP, plus the seeded engine's determinism."""

import json
import secrets
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import paramiko
import pytest

from lium_emulator.faults import FaultEngine, FaultPlan
from lium_emulator.launcher import RunningEmulator, launch
from tests.emulator.testkit import (
    DEFAULT_KEY,
    SshKey,
    account_report,
    admin_client,
    api_client,
    assert_error,
    create_template,
    delete_and_wait,
    get_pod,
    rent,
    rent_body,
    rent_pod,
    splittable_node,
    ssh_run,
    ssh_target,
    wait_gone,
    wait_ssh_ready,
    wait_status,
    wait_until,
)
from tests.support import http


@pytest.mark.sandbox  # starts an emulator of its own
def test_a_plan_from_a_file_injects_status_errors_and_rate_limits(tmp_path: Path) -> None:
    plan = {
        "seed": 7,
        "rules": [
            {
                "name": "me-down",
                "method": "GET",
                "path": "/users/me",
                "kind": "status",
                "status": 503,
                "first": 1,
            }
        ],
        "rate_limits": [{"method": "GET", "path": "/pods", "per_minute": 2}],
    }
    (tmp_path / "faults.json").write_text(json.dumps(plan))
    with (
        launch(["--faults", str(tmp_path / "faults.json")]) as emulator,
        api_client(emulator, DEFAULT_KEY) as client,
    ):
        assert_error(client.get("/users/me"), 503, "service_unavailable")
        assert client.get("/users/me").status_code == 200
        assert [client.get("/pods").status_code for _ in range(2)] == [200, 200]
        limited = assert_error(client.get("/pods"), 429, "rate_limited")
        assert limited["error"]["hint"]
        assert int(client.get("/pods").headers["retry-after"]) >= 1
        assert client.get("/templates").status_code == 200, "other routes are not limited"
        with api_client(emulator, None) as anonymous:
            assert anonymous.get("/pods").status_code == 401, "limits count per account"
        with admin_client(emulator) as admin:
            counters = admin.get("/_emulator/faults").json()["counters"]
        assert counters == {"me-down": {"matched": 2, "fired": 1}}
        assert emulator.stop() == 0


def test_the_admin_endpoint_needs_the_admin_key_and_validates_plans(emulator: RunningEmulator) -> None:
    with http.client(base_url=emulator.root_url) as anonymous:
        assert_error(anonymous.get("/_emulator/faults"), 401, "invalid_admin_key")
        assert_error(anonymous.get("/_emulator/resources"), 401, "invalid_admin_key")
        assert anonymous.get("/_emulator/health").json()["status"] == "ok"
    with admin_client(emulator) as admin:
        for bad in (
            {"rules": [{"path": "/pods", "kind": "explode"}]},
            {"rules": [{"path": "/pods", "kind": "latency"}]},
            {"rules": [{"path": "/pods", "kind": "status", "first": 1, "every": 2}]},
            {"rules": [{"path": "pods", "kind": "status"}]},
            {"unknown": 1},
        ):
            assert_error(admin.put("/_emulator/faults", json=bad), 422, "validation_error")
        assert admin.get("/_emulator/faults").json()["rules"] == []


def test_status_latency_garbage_and_rate_limit_rules(
    account: httpx.Client, set_faults: Callable[[dict[str, Any]], dict[str, Any]]
) -> None:
    set_faults(
        {
            "rules": [
                {"path": "/templates", "method": "GET", "kind": "garbage", "body": "truncated", "first": 1},
                {
                    "path": "/templates",
                    "method": "GET",
                    "kind": "garbage",
                    "body": "wrong_type",
                    "every": 2,
                    "times": 1,
                },
                {"path": "/volumes", "method": "GET", "kind": "garbage", "body": "not_json", "first": 1},
                {"path": "/users/me", "kind": "latency", "seconds": 0.6, "first": 1},
                {"path": "/volumes", "method": "POST", "kind": "rate_limit", "seconds": 7, "first": 1},
                {
                    "path": "/ssh-keys",
                    "method": "POST",
                    "kind": "status",
                    "status": 402,
                    "code": "API_KEY_BUDGET_EXCEEDED",
                    "first": 1,
                },
            ]
        }
    )
    truncated = account.get("/templates")
    assert truncated.status_code == 200
    with pytest.raises(json.JSONDecodeError):
        truncated.json()
    wrong = account.get("/templates")
    assert wrong.status_code == 200 and isinstance(wrong.json(), dict), "a list answered as an object"
    assert isinstance(account.get("/templates").json(), list)
    html = account.get("/volumes")
    assert html.status_code == 200 and html.headers["content-type"].startswith("text/html")
    started = time.monotonic()
    assert account.get("/users/me").status_code == 200
    assert time.monotonic() - started >= 0.6
    limited = account.post("/volumes", json={"name": "v"})
    assert_error(limited, 429, "rate_limited")
    assert limited.headers["retry-after"] == "7"
    assert account.get("/volumes").json() == [], "a 429'd POST was not executed"
    budget = account.post("/ssh-keys", json={"name": "k", "public_key": "ssh-ed25519 AAAA"})
    assert_error(budget, 402, "API_KEY_BUDGET_EXCEEDED")
    assert account.get("/ssh-keys").json() == []


def test_errors_and_drops_after_commit_keep_the_change(
    account: httpx.Client, set_faults: Callable[[dict[str, Any]], dict[str, Any]]
) -> None:
    set_faults(
        {
            "rules": [
                {
                    "path": "/templates",
                    "method": "POST",
                    "kind": "status",
                    "status": 502,
                    "after_commit": True,
                    "first": 1,
                },
                {"path": "/volumes", "method": "POST", "kind": "drop_after_commit", "first": 1},
            ]
        }
    )
    name = "tpl-" + secrets.token_hex(4)
    assert_error(
        account.post("/templates", json={"name": name, "docker_image": "python:3.11-slim"}),
        502,
        "bad_gateway",
    )
    assert [t["name"] for t in account.get("/templates").json()].count(name) == 1, "dstack finds it by name"
    with pytest.raises(httpx.RemoteProtocolError):
        account.post("/volumes", json={"name": "lost-answer"})
    assert [v["name"] for v in account.get("/volumes").json()] == ["lost-answer"]


def test_rent_refusals_are_stored_under_the_key(
    emulator: RunningEmulator, account: httpx.Client, set_faults: Callable[[dict[str, Any]], dict[str, Any]]
) -> None:
    set_faults(
        {
            "rules": [
                {"path": "/executors/*/rent", "kind": "node_rent_in_progress", "first": 1},
                {"path": "/executors/*/rent", "kind": "node_unavailable", "every": 3, "times": 1},
            ]
        }
    )
    template = create_template(account)
    node = splittable_node(account, "RTX 3090")
    body, key = rent_body(template["id"]), secrets.token_hex(16)
    assert_error(rent(account, node["id"], body, key), 409, "node_rent_in_progress")
    replay = rent(account, node["id"], body, key)
    assert_error(replay, 409, "node_rent_in_progress")
    assert replay.headers["idempotent-replayed"] == "true"
    assert_error(rent(account, node["id"], body, secrets.token_hex(16)), 400, "node_unavailable")
    rented = rent(account, node["id"], body, secrets.token_hex(16))
    assert rented.status_code == 200
    delete_and_wait(account, rented.json()["pod_id"])
    assert account_report(emulator, account)["pods"][0]["status"] == "DELETED"


def rent_stuck_pod(account: httpx.Client, set_faults: Callable[[dict[str, Any]], dict[str, Any]]) -> str:
    """Rent a pod under a ``stuck_pending`` rule, so it stays PENDING until the rule is removed."""
    set_faults({"rules": [{"name": "stuck", "path": "/executors/*/rent", "kind": "stuck_pending"}]})
    template = create_template(account)
    node = splittable_node(account, "RTX 4090")
    return rent_pod(account, node["id"], rent_body(template["id"]))


def test_stuck_pending_holds_the_pod_until_the_rule_is_removed(
    account: httpx.Client, set_faults: Callable[[dict[str, Any]], dict[str, Any]]
) -> None:
    pod_id = rent_stuck_pod(account, set_faults)
    pending = next(p for p in account.get("/pods").json() if p["id"] == pod_id)
    assert (pending["status"], pending["ssh_connect_cmd"], pending["ports_mapping"]) == (
        "PENDING",
        None,
        None,
    )
    assert pending["phase"] and isinstance(pending["estimated_ready_seconds"], int)
    assert pending["eta_basis"] == "fleet_default"
    stuck_since = time.monotonic()
    # well past --pending-seconds (0.3 s) it is still PENDING
    wait_until(
        lambda: time.monotonic() - stuck_since > 1.5 and get_pod(account, pod_id), what="1.5 s to pass"
    )
    assert get_pod(account, pod_id)["status"] == "PENDING"  # type: ignore[index]
    set_faults({})
    wait_status(account, pod_id, "RUNNING")
    delete_and_wait(account, pod_id)


def test_delete_while_pending_cancels_the_creation(
    account: httpx.Client, set_faults: Callable[[dict[str, Any]], dict[str, Any]]
) -> None:
    pod_id = rent_stuck_pod(account, set_faults)
    assert account.delete(f"/pods/{pod_id}").json()["status"] == "DELETING"
    wait_gone(account, pod_id)
    events = account.get(f"/pods/{pod_id}/events").json()
    assert [(e["from_status"], e["to_status"]) for e in events if e["to_status"]] == [
        (None, "PENDING"),
        ("PENDING", "DELETING"),
        ("DELETING", "DELETED"),
    ]
    failed = next(e for e in events if e["sub_event_type"] == "pod-create.failed")
    assert "cancelled" in failed["detail"]


def test_creation_failed_fault_and_row_expiry(
    emulator: RunningEmulator, account: httpx.Client, set_faults: Callable[[dict[str, Any]], dict[str, Any]]
) -> None:
    set_faults(
        {
            "rules": [
                {"path": "/executors/*/rent", "kind": "creation_failed", "message": "disk full", "first": 1}
            ]
        }
    )
    template = create_template(account)
    node = splittable_node(account, "RTX 5090")
    pod_id = rent_pod(account, node["id"], rent_body(template["id"]))
    failed = wait_status(account, pod_id, "CREATION_FAILED")
    assert failed["ssh_connect_cmd"] is None
    assert (
        failed["last_event"]["to_status"] == "CREATION_FAILED"
        and failed["last_event"]["detail"] == "disk full"
    )
    wait_gone(account, pod_id)  # --failed-seconds 1
    assert account_report(emulator, account)["billed_pod_seconds"] == 0


def test_ssh_late_and_slow_deleting(
    emulator: RunningEmulator,
    account: httpx.Client,
    ssh_key: SshKey,
    set_faults: Callable[[dict[str, Any]], dict[str, Any]],
) -> None:
    set_faults(
        {
            "rules": [
                {"path": "/executors/*/rent", "kind": "ssh_late", "seconds": 2.0, "first": 1},
                {"path": "/pods/*", "method": "DELETE", "kind": "slow_deleting", "seconds": 1.0, "first": 1},
            ]
        }
    )
    template = create_template(account)
    node = splittable_node(account, "RTX 3090")
    pod_id = rent_pod(account, node["id"], rent_body(template["id"], ssh_key.public))
    pod = wait_ssh_ready(account, pod_id)
    host, port = ssh_target(pod)
    with pytest.raises((paramiko.SSHException, OSError)), paramiko.Transport((host, port)) as transport:
        transport.banner_timeout = 0.5
        transport.start_client(timeout=0.5)
    wait_until(lambda: _ssh_works(pod, ssh_key), timeout=10, what="late sshd")
    assert account.delete(f"/pods/{pod_id}").status_code == 200
    wait_gone(account, pod_id)
    report = next(p for p in account_report(emulator, account)["pods"] if p["id"] == pod_id)
    assert report["faults"]["ssh_late_seconds"] == 2.0
    deleting = _seconds_between(report["deleting_at"], report["deleted_at"])
    assert deleting >= 1.2, "0.2 s deleting time plus 1 s injected"


def test_delete_conflict_then_success(
    account: httpx.Client, set_faults: Callable[[dict[str, Any]], dict[str, Any]]
) -> None:
    template = create_template(account)
    node = splittable_node(account, "RTX 3090")
    pod_id = rent_pod(account, node["id"], rent_body(template["id"]))
    wait_status(account, pod_id, "RUNNING")
    set_faults({"rules": [{"path": "/pods/*", "method": "DELETE", "kind": "pod_state_conflict", "first": 1}]})
    assert_error(account.delete(f"/pods/{pod_id}"), 409, "pod_state_conflict")
    assert get_pod(account, pod_id)["status"] == "RUNNING"  # type: ignore[index]
    delete_and_wait(account, pod_id)


def test_the_seeded_engine_is_deterministic() -> None:
    plan = FaultPlan.model_validate(
        {"seed": 42, "rules": [{"path": "/pods/*", "kind": "status", "status": 500, "probability": 0.3}]}
    )
    runs = []
    for _ in range(2):
        engine = FaultEngine(plan)
        runs.append([engine.decide("GET", f"/pods/{i}", "c").reject is not None for i in range(200)])
    assert runs[0] == runs[1]
    assert 30 < sum(runs[0]) < 90, "about 30 % fire"
    every = FaultEngine(
        FaultPlan.model_validate({"rules": [{"path": "/**", "kind": "status", "every": 3, "times": 2}]})
    )
    fired = [every.decide("POST", "/a/b", "c").reject is not None for _ in range(12)]
    assert [i for i, hit in enumerate(fired) if hit] == [2, 5]
    assert every.decide("GET", "/x", "c").fired == [], "times caps the firings"


def _ssh_works(pod: dict[str, Any], key: SshKey) -> bool:
    try:
        return ssh_run(pod, key, "echo up", timeout=2).strip() == "up"
    except (paramiko.SSHException, OSError):
        return False


def _seconds_between(start: str, end: str) -> float:
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()
