"""API keys, browser sessions and workspaces (docs/lium-api.md#api-keys, #workspaces) through Lium's own
SDK and CLI (``lium-io``, unchanged) and plain HTTP: scopes, budgets and their refusal ledger, the
billing tick that stops a key's pods, pod visibility, ``lium keys``/``lium workspaces``.

One emulator serves the module; its catalog is the generated one plus a node priced at $3600 per GPU
hour, so a pod there bills $1 a second and a budget runs out within seconds.
"""

import json
import os
import secrets
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from lium.sdk import Config, Lium, LiumAuthError

from lium_emulator.api.app import API_MODULES
from lium_emulator.api.scopes import FAMILIES, family_of
from lium_emulator.catalogs.nodes import Catalog
from lium_emulator.launcher import RunningEmulator
from lium_emulator.records.state import EmulatorState, sha256_hex
from lium_emulator.records.store import Store
from tests.emulator.testkit import (
    FAST_TIMINGS,
    admin_client,
    api_client,
    assert_error,
    create_template,
    rent_body,
    resources,
    wait_gone,
    wait_status,
    wait_until,
)
from tests.support import http
from tests.support.catalogs import PRICEY_HOURLY, PRICEY_NODE, with_pricey_node, write_catalog
from tests.support.forked_emulator import launch_forked

CONSOLE_SCRIPT = Path(sys.executable).with_name("lium-emulator")
LIUM_CLI = str(Path(sys.executable).with_name("lium"))


@pytest.fixture(scope="module")
def emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningEmulator]:
    generated = subprocess.run(
        [str(CONSOLE_SCRIPT), "catalog", "--count", "1", "--gpus-per-node", "2"],
        capture_output=True,
        text=True,
        check=True,
    )
    catalog = with_pricey_node(json.loads(generated.stdout))
    nodes_file = write_catalog(tmp_path_factory.mktemp("catalog"), catalog)
    running = launch_forked([*FAST_TIMINGS, "--nodes", str(nodes_file), "--budget-tick-seconds", "0.2"])
    try:
        yield running
    finally:
        assert running.stop() == 0


@dataclass
class User:
    """An emulator account with a password, its first key, and a browser session."""

    emulator: RunningEmulator
    user_id: str
    email: str
    password: str
    first_key: str
    session: str

    def session_client(self, workspace_id: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.session}"}
        if workspace_id:
            headers["X-Lium-Workspace-Id"] = workspace_id
        return http.client(
            base_url=self.emulator.api_url, headers=headers, timeout=30, follow_redirects=False
        )

    def new_key(self, **body: Any) -> tuple[str, dict[str, Any]]:
        """A key minted over the session: (secret, row)."""
        with self.session_client() as client:
            response = client.post("/keys", json={"name": "k-" + uuid.uuid4().hex[:6], **body})
        assert response.status_code == 200, response.text
        row: dict[str, Any] = response.json()
        return row.pop("key"), row


def make_user(emulator: RunningEmulator, balance: float = 10000.0) -> User:
    first_key = "test-" + secrets.token_hex(12)
    email = f"u{secrets.token_hex(4)}@example.test"
    password = secrets.token_hex(8)
    with admin_client(emulator) as admin:
        made = admin.post(
            "/_emulator/accounts",
            json={"api_key": first_key, "balance": balance, "email": email, "password": password},
        )
        assert made.status_code == 200, made.text
        user_id = made.json()["user_id"]
        token = admin.post(f"/_emulator/accounts/{user_id}/session-token")
        assert token.status_code == 200, token.text
    return User(emulator, user_id, email, password, first_key, token.json()["token"])


@pytest.fixture
def user(emulator: RunningEmulator) -> User:
    return make_user(emulator)


def cheap_node(client: httpx.Client) -> str:
    rows = [n for n in client.get("/executors").json() if n["id"] != PRICEY_NODE]
    node_id: str = rows[0]["id"]
    return node_id


def cli(emulator: RunningEmulator, home: Path, *args: str, session: str) -> str:
    """``lium ARGS`` with only a browser session (no API key); fails the test on a non-zero exit."""
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "LIUM_BASE_URL": emulator.api_url,
        "LIUM_SESSION_TOKEN": session,
        "LIUM_TELEMETRY": "0",
        "LIUM_SENTRY_DSN": "",
        "LIUM_SELF_UPDATE_DISABLE": "1",
        "NO_COLOR": "1",
        "COLUMNS": "200",
        "HTTP_PROXY": "http://127.0.0.1:9",
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "NO_PROXY": "127.0.0.1,localhost",
    }
    done = subprocess.run(
        [LIUM_CLI, *args], env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 0, (
        f"lium {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    )
    return done.stdout


# --- the scope table ----------------------------------------------------------------------------------


def test_every_api_route_has_a_scope_family() -> None:
    declared = {route for family in FAMILIES for route in family.routes}
    served = set()
    for module in API_MODULES:
        for route in module.router.routes:
            for method in getattr(route, "methods", set()) - {"HEAD"}:
                path = getattr(route, "path", "")
                served.add(f"{method} {path}")
                assert family_of(method, path) is not None, f"{method} {path} has no scope"
    assert declared == served, declared ^ served


def test_scopes_document_needs_no_credential(emulator: RunningEmulator) -> None:
    with api_client(emulator, None) as client:
        body = client.get("/keys/scopes").json()
    assert [s["scope"] for s in body["scopes"]] == ["read", "rent", "manage", "billing"]
    assert {s["scope"]: s["default"] for s in body["scopes"]} == {
        "read": True,
        "rent": True,
        "manage": True,
        "billing": False,
    }
    rent_scope = next(s for s in body["scopes"] if s["scope"] == "rent")
    assert "rent" in rent_scope["route_families"] and rent_scope["can"]
    assert {v["value"] for v in body["pod_visibility"]} == {"own", "account"}
    assert body["money_routes"] == []


# --- the CLI and the SDK over a session ---------------------------------------------------------------


def test_cli_keys_and_workspaces_with_a_session(
    emulator: RunningEmulator, user: User, tmp_path: Path
) -> None:
    scopes = cli(emulator, tmp_path, "keys", "scopes", "--json", session=user.session)
    assert {s["scope"] for s in json.loads(scopes)["scopes"]} == {"read", "rent", "manage", "billing"}
    assert "manage" in cli(emulator, tmp_path, "keys", "scopes", session=user.session)

    created = json.loads(
        cli(
            emulator,
            tmp_path,
            "keys",
            "create",
            "agent-1",
            "--scope",
            "read",
            "--scope",
            "rent",
            "--max-budget",
            "25",
            "--daily-budget",
            "5",
            "--pod-visibility",
            "own",
            "--json",
            session=user.session,
        )
    )
    assert created["key"] and created["max_budget_usd"] == 25 and created["daily_budget_usd"] == 5
    assert created["pod_visibility"] == "own" and created["scopes"] == ["read", "rent"]
    assert created["workspace_id"] == user.user_id

    listed = json.loads(cli(emulator, tmp_path, "keys", "list", "--json", session=user.session))
    names = {row["name"] for row in listed}
    assert "agent-1" in names and len(listed) == 2  # the account's first key and the new one
    assert all("key" not in row or not row["key"] for row in listed)
    assert "agent-1" in cli(emulator, tmp_path, "keys", "list", session=user.session)

    shown = cli(emulator, tmp_path, "keys", "show", "agent-1", session=user.session)
    assert created["id"] in shown
    budget = json.loads(
        cli(
            emulator,
            tmp_path,
            "keys",
            "budget",
            "agent-1",
            "--daily-budget",
            "3",
            "--json",
            session=user.session,
        )
    )
    assert budget["daily_budget_usd"] == 3 and budget["max_budget_usd"] == 25

    spaces = cli(emulator, tmp_path, "workspaces", "list", session=user.session)
    assert "Personal" in spaces
    members = cli(emulator, tmp_path, "workspaces", "members", session=user.session)
    assert user.email in members

    # the new key works, and acts in the personal workspace
    with api_client(emulator, created["key"]) as client:
        me = client.get("/users/me").json()
    assert me["api_key_id"] == created["id"] and me["workspace"]["id"] == user.user_id
    assert me["workspace"]["is_personal"] is True and me["workspace"]["role"] == "owner"
    assert me["scopes"] == ["read", "rent"] and me["pod_visibility"] == "own"


def test_sdk_login_create_update_refusals_revoke(emulator: RunningEmulator, user: User) -> None:
    lium = Lium(config=Config(api_key=user.first_key, base_url=emulator.api_url))
    try:
        token = lium.workspaces.login(user.email, user.password)
        assert token
        with pytest.raises(Exception, match="Login refused"):
            Lium(config=Config(api_key=user.first_key, base_url=emulator.api_url)).workspaces.login(
                user.email, "wrong"
            )
        key = lium.api_keys.create(
            "sdk-agent",
            ["read", "rent"],
            daily_budget_usd=2,
            monthly_budget_usd=10,
            max_budget_usd=50,
            pod_visibility="own",
        )
        assert key.key and key.daily_budget_usd == 2 and key.pod_visibility == "own"
        assert lium.api_keys.get(key.id).name == "sdk-agent"
        assert key.id in {k.id for k in lium.api_keys.list()}

        updated = lium.api_keys.update(key.id, daily_budget_usd=None, max_budget_usd=40)
        assert (
            updated.daily_budget_usd is None
            and updated.max_budget_usd == 40
            and updated.monthly_budget_usd == 10
        )
        assert lium.api_keys.refusals(key.id) == []
        workspace = lium.workspaces.current()
        assert workspace is not None and workspace.is_personal and workspace.id == user.user_id

        with user.session_client() as session:
            assert_error(
                session.post("/keys", json={"name": "x", "scopes": ["billing", "read"]}),
                422,
                "validation_error",
            )
            assert_error(
                session.post("/keys", json={"name": "x", "max_budget_usd": 0.5}), 422, "validation_error"
            )
            assert_error(
                session.post("/keys", json={"name": "x", "max_budget_usd": 1.005}), 422, "validation_error"
            )
            assert_error(
                session.post("/keys", json={"name": "x", "daily_budget_usd": 9, "max_budget_usd": 5}),
                422,
                "validation_error",
            )
            assert_error(session.patch(f"/keys/{key.id}", json={"scopes": ["read"]}), 422, "validation_error")
        # keys cannot manage keys
        with api_client(emulator, key.key) as as_key:
            assert_error(as_key.get("/keys"), 401, "session_required")
            assert as_key.get(f"/keys/{key.id}/refusals").json() == {"refusals": []}
            first = as_key.get("/users/me").json()["api_key_id"]
            assert first == key.id

        lium.api_keys.revoke(key.id)
        revoked = Lium(config=Config(api_key=key.key, base_url=emulator.api_url))
        with pytest.raises(LiumAuthError):
            revoked.ps()
        revoked.close()
        events = {
            e["sub_event_type"] for e in api_client(emulator, user.first_key).get("/users/me/events").json()
        }
        assert {"api-key-create.success", "api-key-update.success", "api-key-delete.success"} <= events
        report = resources(emulator, user.user_id)["accounts"][0]
        row = next(k for k in report["api_keys"] if k["id"] == key.id)
        assert row["revoked"] is True and "key" not in row and "key_sha256" not in row
    finally:
        lium.close()


# --- budgets ------------------------------------------------------------------------------------------


def test_rent_over_the_budget_is_refused_with_402_and_ledgered(emulator: RunningEmulator, user: User) -> None:
    secret, row = user.new_key(max_budget_usd=100)
    with api_client(emulator, secret) as client:
        template = create_template_as_first_key(emulator, user)
        body = rent_body(template, "")
        idem = str(uuid.uuid4())
        for attempt in range(2):
            response = client.post(
                f"/executors/{PRICEY_NODE}/rent", json=body, headers={"Idempotency-Key": idem}
            )
            error = assert_error(response, 402, "API_KEY_BUDGET_EXCEEDED")
            assert "Idempotent-Replayed" not in response.headers, attempt
            detail = error["message"]
            assert isinstance(detail, dict), error
            assert detail["window"] == "max" and detail["budget_usd"] == 100 and detail["spent_usd"] == 0
            assert detail["amount_usd"] == PRICEY_HOURLY / 4 and detail["api_key_id"] == row["id"]
            assert detail["route"] == "POST /executors/{executor_id}/rent"
            assert "max" in error["error"]["message"] and "$100.00" in error["error"]["message"]
        assert client.get("/pods").json() == []
        ledger = client.get(f"/keys/{row['id']}/refusals").json()["refusals"]
        assert len(ledger) == 2 and ledger[0]["created_at"] >= ledger[1]["created_at"]
        assert (
            ledger[0]["window"] == "max"
            and ledger[0]["amount_usd"] == 900
            and ledger[0]["api_key_id"] == row["id"]
        )
        # another key's ledger is not this key's business
        other = client.get(f"/keys/{uuid.uuid4()}/refusals")
        assert_error(other, 404, "api_key_not_found")
    report = resources(emulator, user.user_id)["accounts"][0]
    assert report["pods"] == [] and report["idempotency_keys"] == []
    # the SDK reads the refusal as a budget error with its fields
    lium = Lium(config=Config(api_key=secret, base_url=emulator.api_url))
    try:
        with pytest.raises(Exception) as refused:
            lium._request("POST", f"/executors/{PRICEY_NODE}/rent", json=body)
        assert type(refused.value).__name__ == "LiumBudgetExceededError"
        assert getattr(refused.value, "window", None) == "max"
        assert getattr(refused.value, "budget_usd", None) == 100
    finally:
        lium.close()


def create_template_as_first_key(emulator: RunningEmulator, user: User) -> str:
    with api_client(emulator, user.first_key) as client:
        template_id: str = create_template(client)["id"]
    return template_id


def test_a_running_pod_is_deleted_when_its_key_budget_runs_out(emulator: RunningEmulator, user: User) -> None:
    secret, row = user.new_key()
    template = create_template_as_first_key(emulator, user)
    with api_client(emulator, secret) as client:
        rented = client.post(f"/executors/{PRICEY_NODE}/rent", json=rent_body(template, ""))
        assert rented.status_code == 200, rented.text
        pod_id = rented.json()["pod_id"]
        wait_status(client, pod_id, "RUNNING")
        with user.session_client() as session:
            patched = session.patch(f"/keys/{row['id']}", json={"max_budget_usd": 2})
            assert patched.status_code == 200, patched.text

        def stopped() -> dict[str, Any] | None:
            events = client.get(f"/pods/{pod_id}/events").json()
            return next((e for e in events if e.get("reason") == "api_key_budget_exceeded"), None)

        event = wait_until(stopped, timeout=20, what="the budget to stop the pod")
        assert event["sub_event_type"] == "pod-lifecycle.status" and event["to_status"] == "DELETING"
        assert row["name"] in event["detail"] and "max" in event["detail"]
        wait_gone(client, pod_id)
        account_events = client.get("/users/me/events", params={"pod_id": pod_id}).json()
        assert any(e.get("reason") == "api_key_budget_exceeded" for e in account_events)
        with user.session_client() as session:
            after = session.get(f"/keys/{row['id']}").json()
        assert after["spent_total_usd"] >= 2 and after["pods_count"] == 0
        # and a new rent through the key is refused
        assert_error(
            client.post(f"/executors/{PRICEY_NODE}/rent", json=rent_body(template, "")),
            402,
            "API_KEY_BUDGET_EXCEEDED",
        )


# --- visibility and scopes ----------------------------------------------------------------------------


def test_own_keys_see_only_their_pods_and_scopes_are_enforced(emulator: RunningEmulator, user: User) -> None:
    own_a, row_a = user.new_key(pod_visibility="own")
    own_b, row_b = user.new_key(pod_visibility="own")
    everything, _ = user.new_key(pod_visibility="account", scopes=["read", "rent"])
    reader, reader_row = user.new_key(scopes=["read"])
    template = create_template_as_first_key(emulator, user)
    a, b = api_client(emulator, own_a), api_client(emulator, own_b)
    wide, read_only = api_client(emulator, everything), api_client(emulator, reader)
    try:
        node = cheap_node(a)
        pod_a = a.post(f"/executors/{node}/rent", json=rent_body(template, "")).json()["pod_id"]
        pod_b = b.post(f"/executors/{node}/rent", json=rent_body(template, "")).json()["pod_id"]
        assert [p["id"] for p in a.get("/pods").json()] == [pod_a]
        assert [p["id"] for p in b.get("/pods").json()] == [pod_b]
        for path in (f"/pods/{pod_b}", f"/pods/{pod_b}/events", f"/pods/{pod_b}/logs"):
            assert_error(a.get(path), 404, "pod_not_found")
        assert_error(a.delete(f"/pods/{pod_b}"), 404, "pod_not_found")
        assert not any(e.get("pod_id") == pod_b for e in a.get("/users/me/events").json())
        row = a.get(f"/pods/{pod_a}").json()
        assert row["api_key_id"] == row_a["id"] == row["created_by_api_key_id"]
        assert row["api_key_name"] == row_a["name"] and row["workspace_id"] == user.user_id
        assert b.get(f"/pods/{pod_b}").json()["api_key_id"] == row_b["id"]
        assert {p["id"] for p in wide.get("/pods").json()} == {pod_a, pod_b}
        statement = a.get("/billing/statement").json()
        assert all(s["pod_id"] != pod_b for s in statement["pods"]) if statement["pods"] else True

        # scopes: a read key reads and cannot rent; a rent key cannot delete another key's pod
        assert read_only.get("/pods").status_code == 200
        refused = assert_error(
            read_only.post(f"/executors/{node}/rent", json=rent_body(template, "")), 403, "missing_scope"
        )
        assert refused["error"]["message"] == f"API key '{reader_row['name']}' does not have the 'rent' scope"
        assert_error(read_only.post("/volumes", json={"name": "v"}), 403, "missing_scope")
        taken = assert_error(wide.delete(f"/pods/{pod_b}"), 403, "missing_scope")
        assert "'manage' scope" in taken["error"]["message"]
        assert_error(read_only.delete(f"/pods/{pod_a}"), 403, "missing_scope")

        # the SDK's ps shows the creating key
        lium = Lium(config=Config(api_key=own_a, base_url=emulator.api_url))
        try:
            assert [p.id for p in lium.ps()] == [pod_a]
        finally:
            lium.close()
        assert a.delete(f"/pods/{pod_a}").status_code == 200
        assert b.delete(f"/pods/{pod_b}").status_code == 200
        wait_gone(wide, pod_a)
        wait_gone(wide, pod_b)
    finally:
        for client in (a, b, wide, read_only):
            client.close()


def test_workspaces_team_invite_transfer_and_delete(emulator: RunningEmulator, user: User) -> None:
    other = make_user(emulator)
    with user.session_client() as session:
        team = session.post("/workspaces", json={"name": "Research"}).json()
        assert team["role"] == "owner" and team["is_personal"] is False
        invited = session.post(
            f"/workspaces/{team['id']}/invitations", json={"email": other.email, "role": "member"}
        )
        assert invited.status_code == 200 and invited.json()["status"] == "accepted", invited.text
        pending = session.post(f"/workspaces/{team['id']}/invitations", json={"email": "nobody@example.test"})
        assert pending.json()["status"] == "pending"
        members = session.get(f"/workspaces/{team['id']}/members").json()
        assert {m["user_id"] for m in members} == {user.user_id, other.user_id}
        assert next(m for m in members if m["user_id"] == user.user_id)["is_billing_owner"] is True
        assert_error(
            session.post(f"/workspaces/{user.user_id}/invitations", json={"email": other.email}),
            400,
            "personal_workspace",
        )
    with user.session_client(team["id"]) as in_team:
        made = in_team.post("/keys", json={"name": "team-key"})
        assert made.status_code == 200, made.text
        team_key = made.json()
        assert team_key["workspace_id"] == team["id"]
    with api_client(emulator, team_key["key"]) as client:
        me = client.get("/users/me").json()
        assert me["workspace"]["id"] == team["id"] and me["workspace"]["role"] == "owner"
        assert [w["id"] for w in client.get("/workspaces").json()] == [team["id"]]
        assert_error(client.get(f"/workspaces/{user.user_id}"), 404, "workspace_not_found")
    with other.session_client() as theirs:
        listed = {w["id"] for w in theirs.get("/workspaces").json()}
        assert listed == {other.user_id, team["id"]}
        assert_error(theirs.delete(f"/workspaces/{team['id']}"), 403, "workspace_role_required")
    with user.session_client() as session:
        moved = session.post(
            f"/workspaces/{team['id']}/billing-owner/transfer", json={"user_id": other.user_id}
        )
        assert moved.status_code == 200 and moved.json()["billing_owner_user_id"] == other.user_id, moved.text
        assert session.delete(f"/workspaces/{team['id']}").status_code == 200
    with api_client(emulator, team_key["key"]) as client:
        assert_error(client.get("/users/me"), 401, "invalid_api_key")


# --- state ----------------------------------------------------------------------------------------------


def test_an_account_stored_before_keys_gets_its_workspace_and_first_key(tmp_path: Path) -> None:
    """State written before keys and workspaces existed loads: the account's key becomes its first key
    (all four scopes, visibility ``account``) in a personal workspace whose id is the user id."""
    store = Store(tmp_path / "state.sqlite3")
    old = {
        "user_id": str(uuid.uuid4()),
        "api_key_id": str(uuid.uuid4()),
        "api_key_name": "emulator-key-1",
        "key_sha256": sha256_hex("old-key-123"),
        "email": "user1@lium-emulator.local",
        "credit_usd": 1000.0,
        "created_at": "2026-01-01T00:00:00",
    }
    store.put("account", old["user_id"], old)
    state = EmulatorState(store, Catalog.load(None))
    key = state.key_for_secret("old-key-123")
    assert key is not None and key.id == old["api_key_id"] and key.workspace_id == old["user_id"]
    assert key.scopes == ["read", "rent", "manage", "billing"] and key.pod_visibility == "account"
    assert state.workspaces[old["user_id"]].is_personal
    assert state.membership(old["user_id"], old["user_id"]) is not None
    store.close()
    reloaded = EmulatorState(Store(tmp_path / "state.sqlite3"), Catalog.load(None))
    assert reloaded.key_for_secret("old-key-123") is not None and len(reloaded.api_keys) == 1
    reloaded.store.close()


def test_another_keys_repeat_of_an_idempotency_key_is_a_new_rent(
    emulator: RunningEmulator, user: User
) -> None:
    own_a, _ = user.new_key(pod_visibility="own")
    own_b, _ = user.new_key(pod_visibility="own")
    template = create_template_as_first_key(emulator, user)
    a, b = api_client(emulator, own_a), api_client(emulator, own_b)
    try:
        node = cheap_node(a)
        headers, body = {"Idempotency-Key": str(uuid.uuid4())}, rent_body(template, "")
        first = a.post(f"/executors/{node}/rent", json=body, headers=headers)
        again = b.post(f"/executors/{node}/rent", json=body, headers=headers)
        assert first.status_code == again.status_code == 200, (first.text, again.text)
        assert "idempotent-replayed" not in again.headers, "no replay of another key's rent"
        assert again.json()["pod_id"] != first.json()["pod_id"], "another key never learns this key's pod"
        replay = a.post(f"/executors/{node}/rent", json=body, headers=headers)
        assert replay.headers.get("idempotent-replayed") == "true" and replay.json() == first.json()
        for client, pod_id in ((a, first.json()["pod_id"]), (b, again.json()["pod_id"])):
            assert client.delete(f"/pods/{pod_id}").status_code == 200
            wait_gone(client, pod_id)
    finally:
        a.close()
        b.close()
