"""The client checklist (docs/lium-api.md#client-checklist), one test per item, over real HTTP against a real emulator process."""

import re
import secrets
from datetime import UTC, datetime, timedelta

import httpx

from lium_emulator.launcher import RunningEmulator, launch
from tests.emulator.testkit import (
    DEFAULT_KEY,
    SshKey,
    api_client,
    assert_error,
    create_template,
    delete_and_wait,
    feed_node,
    get_pod,
    rent,
    rent_body,
    rent_pod,
    splittable_node,
    ssh_run,
    wait_gone,
    wait_ssh_ready,
    wait_status,
    wait_until,
)

UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
NAIVE_ISO_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}$")


def test_1_users_me_answers_200_for_a_valid_key_and_401_otherwise(emulator: RunningEmulator) -> None:
    with api_client(emulator, DEFAULT_KEY) as client:
        me = client.get("/users/me")
        assert me.status_code == 200
        body = me.json()
        assert UUID_RE.match(body["id"]) and isinstance(body["balance"], float)
        assert "stripe_customer_id" in body and body["email"]
        # header names are case-insensitive (dstack spells it X-API-Key)
        same = client.get("/users/me", headers={"x-api-key": DEFAULT_KEY}).json()
        assert same["id"] == body["id"]
    with api_client(emulator, None) as anonymous:
        assert_error(anonymous.get("/users/me"), 401, "invalid_api_key")
    with api_client(emulator, "not-a-key") as wrong:
        assert_error(wrong.get("/users/me"), 401, "invalid_api_key")


def test_2_version_needs_no_key_and_features_are_configurable(emulator: RunningEmulator) -> None:
    with api_client(emulator, None) as anonymous:
        version = anonymous.get("/version").json()
    assert version["features"] == ["rent_idempotency", "multinode_clusters"]
    assert isinstance(version["uptime_seconds"], int)
    assert datetime.fromisoformat(version["started_at"]).tzinfo is not None
    with launch(["--features", "rent_by_spec,run_record"]) as other, api_client(other, None) as client:
        assert client.get("/version").json()["features"] == ["rent_by_spec", "run_record"]
    with launch(["--features", ""]) as bare, api_client(bare, None) as client:
        assert client.get("/version").json()["features"] == []


def test_3_docker_credentials_create_list_delete_without_leaking_the_password(account: httpx.Client) -> None:
    created = account.post(
        "/docker-credentials/", json={"docker_username": "bot", "docker_password": "s3cret-pw"}
    )
    assert created.status_code == 200
    credential = created.json()
    assert UUID_RE.match(credential["id"]) and credential["username"] == "bot"
    assert "s3cret-pw" not in created.text
    listed = account.get("/docker-credentials/")
    assert [c["id"] for c in listed.json()] == [credential["id"]] and "s3cret-pw" not in listed.text
    updated = account.put(
        f"/docker-credentials/{credential['id']}",
        json={"docker_username": "bot2", "docker_password": "other"},
    )
    assert updated.json()["username"] == "bot2"
    assert account.delete(f"/docker-credentials/{credential['id']}").json() == {"success": True}
    assert_error(
        account.delete(f"/docker-credentials/{credential['id']}"), 404, "docker_credential_not_found"
    )
    # legacy flow: no body -> platform-generated default credential
    default = account.post("/docker-credentials/")
    assert default.status_code == 200 and default.json()["username"].startswith("lium-default-")


def test_4_templates_create_list_read_delete(account: httpx.Client) -> None:
    template = create_template(account, image="python:3.11-slim")
    assert UUID_RE.match(template["id"])
    # an empty tag makes the backend split the full reference
    assert (template["docker_image"], template["docker_image_tag"]) == ("python", "3.11-slim")
    assert template["user_id"] == account.get("/users/me").json()["id"]
    listed = account.get("/templates").json()
    assert template["id"] in [t["id"] for t in listed]
    assert any(t["user_id"] is None for t in listed), "public templates are listed too"
    assert account.get(f"/templates/{template['id']}").json() == template
    assert_error(account.get("/templates/not-a-uuid"), 422, "validation_error")
    assert account.delete(f"/templates/{template['id']}").json() == {"success": True}
    assert_error(account.delete(f"/templates/{template['id']}"), 404, "template_not_found")
    assert_error(account.get(f"/templates/{template['id']}"), 404, "template_not_found")


def test_5_rent_with_idempotency_key_returns_pod_id_and_codes_in_error_code(account: httpx.Client) -> None:
    template = create_template(account)
    node = splittable_node(account, "RTX 3090")
    body = rent_body(template["id"])
    key = secrets.token_hex(16)
    first = rent(account, node["id"], body, key)
    assert first.status_code == 200
    assert first.json() == {"success": True, "pod_id": first.json()["pod_id"]}
    assert "idempotent-replayed" not in first.headers
    again = rent(account, node["id"], body, key)
    assert again.json() == first.json() and again.headers["idempotent-replayed"] == "true"
    assert_error(
        rent(account, "00000000-0000-4000-8000-000000000000", body, secrets.token_hex(8)),
        404,
        "node_not_found",
    )
    delete_and_wait(account, first.json()["pod_id"])


def test_6_pod_rows_carry_what_dstack_reads_and_404_after_removal(
    account: httpx.Client, ssh_key: SshKey
) -> None:
    template = create_template(account)
    node = splittable_node(account, "RTX 4090")
    body = rent_body(template["id"], ssh_key.public)
    pod_id = rent_pod(account, node["id"], body)
    listed = next(p for p in account.get("/pods").json() if p["id"] == pod_id)  # listed at once
    assert listed["status"] in ("PENDING", "RUNNING")  # PENDING fields: see the stuck_pending fault test
    pod = wait_ssh_ready(account, pod_id)
    assert (pod["pod_name"], pod["executor_id"]) == (body["pod_name"], node["id"])
    assert set(pod["ports_mapping"]) == {"22", "10022"}
    assert pod["ssh_connect_cmd"] == f"ssh root@127.0.0.1 -p {pod['ports_mapping']['22']}"
    assert pod["gpu_count"] == "1" and pod["price"] == node["price_per_gpu_hour"]
    assert pod["template"]["id"] == template["id"] and pod["executor"]["id"] == node["id"]
    assert pod["local_volume_path"] == "/root" and pod["last_event"]["pod_id"] == pod_id
    assert NAIVE_ISO_RE.match(pod["created_at"]) and "phase" not in pod
    assert ssh_run(pod, ssh_key, "echo pod-$((6 * 7))").strip() == "pod-42"
    delete_and_wait(account, pod_id)
    assert_error(account.get(f"/pods/{pod_id}"), 404, "pod_not_found")
    assert pod_id not in [p["id"] for p in account.get("/pods").json()]


def test_7_delete_goes_deleting_then_deleted_then_404(account: httpx.Client) -> None:
    template = create_template(account)
    node = splittable_node(account, "RTX 5090")
    pod_id = rent_pod(account, node["id"], rent_body(template["id"]))
    wait_status(account, pod_id, "RUNNING")
    deleted = account.delete(f"/pods/{pod_id}")
    assert deleted.status_code == 200 and deleted.json()["success"] is True
    assert get_pod(account, pod_id)["status"] == "DELETING"  # type: ignore[index]
    assert account.delete(f"/pods/{pod_id}").status_code == 200, "repeating the delete is harmless"
    wait_gone(account, pod_id)
    moves = [
        (e["from_status"], e["to_status"])
        for e in account.get(f"/pods/{pod_id}/events").json()
        if e["to_status"]
    ]
    assert moves[-2:] == [("RUNNING", "DELETING"), ("DELETING", "DELETED")]
    assert_error(account.delete(f"/pods/{pod_id}"), 404, "pod_not_found")


def test_8_account_events_keep_deleted_pods_and_honour_limit_and_since(account: httpx.Client) -> None:
    started = datetime.now(UTC) - timedelta(minutes=1)
    template = create_template(account)
    node = splittable_node(account, "RTX 3090")
    body = rent_body(template["id"])
    pod_id = rent_pod(account, node["id"], body)
    wait_status(account, pod_id, "RUNNING")
    delete_and_wait(account, pod_id)
    events = account.get("/users/me/events", params={"limit": 1000, "since": started.isoformat()}).json()
    mine = [e for e in events if e["pod_id"] == pod_id]
    assert {e["pod_name"] for e in mine} == {body["pod_name"]}
    assert [e["created_at"] for e in events] == sorted((e["created_at"] for e in events), reverse=True)
    assert mine[0]["to_status"] == "DELETED", "newest first"
    assert any(e["sub_event_type"] == "pod-delete.success" for e in mine)
    assert {e["sub_event_type"] for e in mine} >= {
        "pod-rent.requested",
        "pod-create.success",
        "pod-lifecycle.status",
    }
    # what dstack does after an uncertain rent: find the pod by name, then GET it
    found = next(e for e in events if e["pod_name"] == body["pod_name"] and e["pod_id"])
    assert get_pod(account, found["pod_id"]) is None
    assert len(account.get("/users/me/events", params={"limit": 2}).json()) == 2
    future = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    assert account.get("/users/me/events", params={"since": future}).json() == []
    by_pod = account.get("/users/me/events", params={"pod_id": pod_id}).json()
    assert by_pod and all(e["pod_id"] == pod_id for e in by_pod)


def test_9_volumes_create_list_read_delete(account: httpx.Client) -> None:
    created = account.post("/volumes", json={"name": "dstack-vol (1)"})
    assert created.status_code == 200
    volume = created.json()
    assert UUID_RE.match(volume["id"]) and volume["current_size_bytes"] == 0
    assert [v["id"] for v in account.get("/volumes").json()] == [volume["id"]]
    assert account.get(f"/volumes/{volume['id']}").json()["name"] == "dstack-vol (1)"
    renamed = account.put(f"/volumes/{volume['id']}", json={"description": "scratch"}).json()
    assert (renamed["name"], renamed["description"]) == ("dstack-vol (1)", "scratch")
    assert account.delete(f"/volumes/{volume['id']}").json() == {"success": True}
    assert_error(account.get(f"/volumes/{volume['id']}"), 404, "volume_not_found")
    assert_error(account.delete(f"/volumes/{volume['id']}"), 404, "volume_not_found")
    assert_error(account.post("/volumes", json={"name": "bad:name"}), 422, "validation_error")


def test_10_feed_ids_are_rentable_and_availability_follows_rents(account: httpx.Client) -> None:
    template = create_template(account)
    node = splittable_node(account, "L40S")
    assert node["available_gpu_count"] == node["gpu_count"] == 4
    pod_a = rent_pod(account, node["id"], rent_body(template["id"], gpu_count=3))
    assert feed_node(account, node["id"])["available_gpu_count"] == 1  # type: ignore[index]
    assert_error(rent(account, node["id"], rent_body(template["id"], gpu_count=2)), 400, "gpu_count_invalid")
    pod_b = rent_pod(account, node["id"], rent_body(template["id"], gpu_count=None))  # all free GPUs
    assert get_pod(account, pod_b)["gpu_count"] == "1"  # type: ignore[index]
    assert feed_node(account, node["id"]) is None, "a fully rented node leaves the feed"
    assert_error(rent(account, node["id"], rent_body(template["id"])), 400, "node_unavailable")
    whole = next(
        n
        for n in account.get("/public/v1/nodes").json()["nodes"]
        if n["gpu_model"] == "A100-SXM4-80GB" and n["min_rentable_gpu_count"] == 4
    )
    assert_error(
        rent(account, whole["id"], rent_body(template["id"], gpu_count=1)), 400, "gpu_split_not_allowed"
    )
    delete_and_wait(account, pod_a)
    assert feed_node(account, node["id"])["available_gpu_count"] == 3  # type: ignore[index]
    delete_and_wait(account, pod_b)
    wait_until(lambda: feed_node(account, node["id"])["available_gpu_count"] == 4, what="GPUs back")  # type: ignore[index]


def test_11_exact_paths_no_redirects_arrays_and_objects(account: httpx.Client) -> None:
    for path in ("/pods", "/templates", "/volumes", "/docker-credentials/", "/users/me/events", "/ssh-keys"):
        response = account.get(path)
        assert response.status_code == 200 and isinstance(response.json(), list), path
        assert all(isinstance(item, dict) for item in response.json())
    for path in ("/users/me", "/version", "/public/v1/nodes"):
        assert isinstance(account.get(path).json(), dict), path
    for method, path in (
        ("GET", "/pods/"),
        ("GET", "/templates/"),
        ("POST", "/templates/"),
        ("GET", "/docker-credentials"),
        ("POST", "/docker-credentials"),
        ("GET", "/volumes/"),
        ("GET", "/users/me/"),
        ("GET", "/public/v1/nodes/"),
        ("GET", "/version/"),
    ):
        response = account.request(method, path, json={} if method == "POST" else None)
        assert not response.is_redirect and "location" not in response.headers, (method, path)
        assert_error(response, 404, "not_found")
    assert_error(account.patch("/pods"), 405, "method_not_allowed")
