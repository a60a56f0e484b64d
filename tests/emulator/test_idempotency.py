"""``Idempotency-Key`` on rent (docs/lium-api.md#idempotency) over real HTTP: replay, refusal replay, in progress, outcome
unknown after a dropped connection, per-account scope, body mismatch, fresh pre-checks, feature off."""

import secrets
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import httpx
import pytest

from lium_emulator.catalogs.nodes import Catalog
from lium_emulator.launcher import RunningEmulator, launch
from lium_emulator.records.idempotency import (
    IN_FLIGHT_LOCK,
    RETENTION,
    IdempotencyLedger,
    request_fingerprint,
)
from lium_emulator.records.state import EmulatorState
from lium_emulator.records.store import Store
from lium_emulator.records.timeutil import utcnow
from tests.emulator.testkit import (
    DEFAULT_KEY,
    FAST_TIMINGS,
    account_report,
    admin_client,
    api_client,
    assert_error,
    create_template,
    delete_and_wait,
    rent,
    rent_body,
    splittable_node,
    wait_until,
)


def _key_state(emulator: RunningEmulator, client: httpx.Client, key: str) -> str | None:
    """The key's state in the report; None while the request carrying it has not reached the emulator."""
    keys = [k for k in account_report(emulator, client)["idempotency_keys"] if k["key"] == key]
    return keys[0]["state"] if keys else None


def _key_report(emulator: RunningEmulator, client: httpx.Client, key: str) -> dict[str, Any]:
    return next(k for k in account_report(emulator, client)["idempotency_keys"] if k["key"] == key)


def test_a_repeat_replays_the_first_answer_and_rents_once(
    emulator: RunningEmulator, account: httpx.Client
) -> None:
    template = create_template(account)
    node = splittable_node(account, "RTX 3090")
    body, key = rent_body(template["id"]), secrets.token_hex(16)
    first = rent(account, node["id"], body, key)
    replays = [rent(account, node["id"], body, key) for _ in range(3)]
    assert all(r.status_code == 200 and r.json() == first.json() for r in replays)
    assert all(r.headers["idempotent-replayed"] == "true" for r in replays)
    assert [p["id"] for p in account.get("/pods").json()] == [first.json()["pod_id"]]
    assert _key_report(emulator, account, key) == {
        **_key_report(emulator, account, key),
        "rent_count": 1,
        "state": "completed",
    }
    # same key, different body: refused, nothing rented
    other = rent(account, node["id"], {**body, "pod_name": "another"}, key)
    assert_error(other, 422, "idempotency_key_reused")
    assert "idempotent-replayed" not in other.headers
    delete_and_wait(account, first.json()["pod_id"])


def test_a_stored_refusal_is_replayed_too(emulator: RunningEmulator, account: httpx.Client) -> None:
    template = create_template(account)
    whole = next(
        n for n in account.get("/public/v1/nodes").json()["nodes"] if n["min_rentable_gpu_count"] == 2
    )
    body, key = rent_body(template["id"], gpu_count=1), secrets.token_hex(16)
    first = rent(account, whole["id"], body, key)
    assert_error(first, 400, "gpu_split_not_allowed")
    again = rent(account, whole["id"], body, key)
    assert again.status_code == 400 and again.json() == first.json()
    assert again.headers["idempotent-replayed"] == "true"
    assert _key_report(emulator, account, key)["rent_count"] == 0


def test_balance_refusals_answer_freshly_and_store_nothing(
    emulator: RunningEmulator, account: httpx.Client
) -> None:
    template = create_template(account)
    node = splittable_node(account, "H100 80GB HBM3")
    user_id = account.get("/users/me").json()["id"]
    body, key = rent_body(template["id"]), secrets.token_hex(16)
    with admin_client(emulator) as admin:
        assert admin.patch(f"/_emulator/accounts/{user_id}", json={"balance": 0.25}).status_code == 200
        refused = rent(account, node["id"], body, key)
        message = assert_error(refused, 403, "insufficient_balance")["error"]["message"]
        assert "Your balance is $0.25" in message and "15 minutes" in message
        assert "idempotent-replayed" not in rent(account, node["id"], body, key).headers
        assert admin.patch(f"/_emulator/accounts/{user_id}", json={"balance": 50}).status_code == 200
    rented = rent(account, node["id"], body, key)
    assert rented.status_code == 200 and "idempotent-replayed" not in rented.headers
    delete_and_wait(account, rented.json()["pod_id"])


def test_a_repeat_during_the_first_request_is_in_progress(
    emulator: RunningEmulator, account: httpx.Client, set_faults: Callable[[dict[str, Any]], None]
) -> None:
    set_faults({"rules": [{"path": "/executors/*/rent", "kind": "latency", "seconds": 3, "first": 1}]})
    template = create_template(account)
    node = splittable_node(account, "RTX 4090")
    body, key = rent_body(template["id"]), secrets.token_hex(16)
    answers: list[httpx.Response] = []
    first = threading.Thread(target=lambda: answers.append(rent(account, node["id"], body, key)))
    first.start()
    try:
        wait_until(lambda: _key_state(emulator, account, key) == "in_flight", what="key in flight")
        assert_error(rent(account, node["id"], body, key), 409, "idempotency_in_progress")
    finally:
        first.join(30)
    assert answers[0].status_code == 200
    replay = rent(account, node["id"], body, key)
    assert replay.json() == answers[0].json() and replay.headers["idempotent-replayed"] == "true"
    delete_and_wait(account, answers[0].json()["pod_id"])


def test_a_dropped_answer_leaves_the_outcome_unknown(
    emulator: RunningEmulator, account: httpx.Client, set_faults: Callable[[dict[str, Any]], None]
) -> None:
    set_faults({"rules": [{"path": "/executors/*/rent", "kind": "drop_after_commit", "first": 1}]})
    template = create_template(account)
    node = splittable_node(account, "RTX 5090")
    body, key = rent_body(template["id"]), secrets.token_hex(16)
    with pytest.raises(httpx.RemoteProtocolError):
        rent(account, node["id"], body, key)
    for _ in range(2):
        assert_error(rent(account, node["id"], body, key), 409, "idempotency_outcome_unknown")
    report = _key_report(emulator, account, key)
    assert (report["state"], report["rent_count"]) == ("pending", 1)
    # the rent did happen: the pod is found by name, as dstack reconciles
    pod = next(p for p in account.get("/pods").json() if p["pod_name"] == body["pod_name"])
    delete_and_wait(account, pod["id"])


def test_keys_are_scoped_per_account(
    emulator: RunningEmulator, make_account: Callable[..., httpx.Client]
) -> None:
    first, second = make_account(), make_account()
    node = splittable_node(first, "RTX 3090")
    key = secrets.token_hex(16)
    pods = []
    for client in (first, second):
        template = create_template(client, name="same-name")
        response = rent(client, node["id"], rent_body(template["id"], pod_name="same-pod"), key)
        assert response.status_code == 200 and "idempotent-replayed" not in response.headers
        pods.append(response.json()["pod_id"])
    assert pods[0] != pods[1]
    for client, pod_id in zip((first, second), pods, strict=True):
        delete_and_wait(client, pod_id)


@pytest.mark.sandbox  # starts an emulator of its own
def test_without_the_feature_the_header_is_ignored() -> None:
    with launch([*FAST_TIMINGS, "--features", ""]) as emulator, api_client(emulator, DEFAULT_KEY) as client:
        template = create_template(client)
        node = splittable_node(client, "RTX 3090")
        body, key = rent_body(template["id"]), secrets.token_hex(16)
        answers = [rent(client, node["id"], body, key) for _ in range(2)]
        assert all(a.status_code == 200 and "idempotent-replayed" not in a.headers for a in answers)
        assert answers[0].json()["pod_id"] != answers[1].json()["pod_id"], "a resend rents twice"
        assert _key_report(emulator, client, key) == {
            "key": key,
            "state": "ignored",
            "status_code": None,
            "created_at": None,
            "rent_count": 2,
        }
        assert emulator.stop() == 0


def test_ledger_retention_and_in_flight_lock() -> None:
    """The 24 h retention and the 300 s in-flight lock, with a controlled clock."""
    state = EmulatorState(Store(None), Catalog.load(None))
    ledger = IdempotencyLedger(state)
    now = utcnow()
    fingerprint = request_fingerprint("node", {"b": 1, "a": [1, 2]})
    assert fingerprint == request_fingerprint("node", {"a": [1, 2], "b": 1}), "key order does not matter"
    record = ledger.reserve("user", "key", fingerprint, now)
    with pytest.raises(Exception, match="409 idempotency_in_progress"):
        ledger.lookup("user", "key", fingerprint, now + IN_FLIGHT_LOCK - timedelta(seconds=1))
    with pytest.raises(Exception, match="409 idempotency_outcome_unknown"):
        ledger.lookup("user", "key", fingerprint, now + IN_FLIGHT_LOCK)
    assert record.state == "pending"
    ledger.complete(record, 200, {"success": True, "pod_id": "p"})
    assert ledger.lookup("user", "key", fingerprint, now + RETENTION - timedelta(seconds=1)) is record
    assert ledger.lookup("user", "key", fingerprint, now + RETENTION) is None, "expired keys are new"
    assert ledger.lookup("other-user", "key", fingerprint, now) is None
