"""Hostile and sloppy requests get the contract's codes in Lium's envelope: never a 500, never a redirect,
never another account's data."""

import socket
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from lium_emulator.api.edge import MAX_BODY_BYTES
from lium_emulator.launcher import RunningEmulator
from tests.emulator.testkit import (
    assert_error,
    create_template,
    dstack_template,
    rent,
    rent_body,
    rent_pod,
    splittable_node,
)

RANDOM_ID = str(uuid.UUID(int=0x1234, version=4))
JSON = {"Content-Type": "application/json"}


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/templates"),
        ("PUT", f"/templates/{RANDOM_ID}"),
        ("POST", f"/executors/{RANDOM_ID}/rent"),
        ("POST", "/docker-credentials/"),
        ("POST", "/volumes"),
        ("POST", "/ssh-keys"),
        ("DELETE", f"/pods/{RANDOM_ID}"),
    ],
)
def test_malformed_json_is_a_422_in_the_validation_shape(
    account: httpx.Client, method: str, path: str
) -> None:
    response = account.request(method, path, content=b'{"name": "x",', headers=JSON)
    body = assert_error(response, 422, "validation_error")
    assert body["message"] == "Request validation failed"
    assert body["validation_errors"][0]["type"] == "json_invalid"
    assert set(body["validation_errors"][0]) == {"field", "message", "type"}


@pytest.mark.parametrize(
    ("path", "payload", "field"),
    [
        (
            "/templates",
            {"name": "t", "docker_image": "python", "internal_ports": ["ssh"]},
            "body -> internal_ports -> 0",
        ),
        ("/templates", {"name": "t", "docker_image": "python", "environment": None}, "body -> environment"),
        ("/templates", {"name": 5, "docker_image": "python"}, "body -> name"),
        ("/templates", ["not", "an", "object"], "body"),
        ("/volumes", {"name": 123}, "body -> name"),
        ("/docker-credentials/", {"docker_username": "u"}, "body -> docker_password"),
        ("/ssh-keys", {"name": "k"}, "body -> public_key"),
    ],
)
def test_wrong_types_name_the_field(account: httpx.Client, path: str, payload: object, field: str) -> None:
    body = assert_error(account.post(path, json=payload), 422, "validation_error")
    assert field in [problem["field"] for problem in body["validation_errors"]]


def test_rent_body_validation_and_rule_errors(account: httpx.Client) -> None:
    template = create_template(account)
    node = splittable_node(account, "RTX 4090")
    cases: list[tuple[dict[str, Any], int, str]] = [
        ({"gpu_count": "two"}, 422, "validation_error"),
        ({"gpu_count": 1.5}, 422, "validation_error"),
        ({"template_id": "not-a-uuid"}, 422, "validation_error"),
        ({"pod_name": ""}, 422, "validation_error"),
        ({"user_public_key": 7}, 422, "validation_error"),
        ({"initial_port_count": 500}, 422, "validation_error"),
        ({"gpu_count": 0}, 400, "gpu_count_invalid"),
        ({"gpu_count": 10**30}, 400, "gpu_count_invalid"),
        ({"termination_hours": 0}, 400, "ttl_invalid"),
        ({"termination_hours": 10**9}, 400, "ttl_invalid"),
        ({"template_id": RANDOM_ID}, 404, "template_not_found"),
        ({"volume_id": RANDOM_ID}, 404, "volume_not_found"),
    ]
    for fields, status, code in cases:
        body = {**rent_body(template["id"]), **fields}
        assert_error(rent(account, node["id"], body), status, code)
    missing = rent_body(template["id"])
    del missing["template_id"]
    assert_error(rent(account, node["id"], missing), 422, "validation_error")
    assert_error(rent(account, "executor-1", rent_body(template["id"])), 422, "validation_error")
    assert account.get("/pods").json() == [], "no refused rent created a pod"


def test_unknown_ids_are_404_and_non_uuid_ids_422(account: httpx.Client) -> None:
    for path, code in (
        (f"/pods/{RANDOM_ID}", "pod_not_found"),
        (f"/pods/{RANDOM_ID}/events", "pod_not_found"),
        (f"/templates/{RANDOM_ID}", "template_not_found"),
        (f"/volumes/{RANDOM_ID}", "volume_not_found"),
    ):
        assert_error(account.get(path), 404, code)
    assert_error(account.delete(f"/pods/{RANDOM_ID}"), 404, "pod_not_found")
    assert_error(account.delete(f"/docker-credentials/{RANDOM_ID}"), 404, "docker_credential_not_found")
    assert_error(account.delete(f"/ssh-keys/{RANDOM_ID}"), 404, "ssh_key_not_found")
    for path in (
        "/pods/123",
        "/templates/abc",
        "/volumes/x-y",
        "/users/me/events?pod_id=nope",
        "/users/me/events?limit=0",
    ):
        assert_error(account.get(path), 422, "validation_error")
    assert_error(account.get("/users/me/events", params={"since": "yesterday"}), 422, "validation_error")
    assert_error(account.get("/no/such/route"), 404, "not_found")


def test_other_accounts_ids_are_not_found(make_account: Callable[..., httpx.Client]) -> None:
    owner, stranger = make_account(), make_account()
    template = create_template(owner)
    volume = owner.post("/volumes", json={"name": "private"}).json()
    credential = owner.post(
        "/docker-credentials/", json={"docker_username": "u", "docker_password": "p"}
    ).json()
    node = splittable_node(owner, "RTX 3090")
    pod_id = rent_pod(owner, node["id"], rent_body(template["id"]))

    assert_error(stranger.get(f"/pods/{pod_id}"), 404, "pod_not_found")
    assert_error(stranger.delete(f"/pods/{pod_id}"), 404, "pod_not_found")
    assert_error(stranger.get(f"/pods/{pod_id}/events"), 404, "pod_not_found")
    assert_error(stranger.get(f"/templates/{template['id']}"), 404, "template_not_found")
    assert_error(
        stranger.put(f"/templates/{template['id']}", json={"name": "x", "docker_image": "y"}),
        404,
        "template_not_found",
    )
    assert_error(stranger.delete(f"/templates/{template['id']}"), 404, "template_not_found")
    assert_error(stranger.get(f"/volumes/{volume['id']}"), 404, "volume_not_found")
    assert_error(stranger.delete(f"/volumes/{volume['id']}"), 404, "volume_not_found")
    assert_error(
        stranger.delete(f"/docker-credentials/{credential['id']}"), 404, "docker_credential_not_found"
    )
    stranger_template = create_template(stranger, docker_credential_id=None)
    assert_error(
        stranger.post(
            "/templates", json={"name": "t", "docker_image": "x", "docker_credential_id": credential["id"]}
        ),
        404,
        "docker_credential_not_found",
    )
    assert_error(rent(stranger, node["id"], rent_body(template["id"])), 404, "template_not_found")
    assert_error(
        rent(stranger, node["id"], rent_body(stranger_template["id"], volume_id=volume["id"])),
        404,
        "volume_not_found",
    )
    assert stranger.get("/pods").json() == [] and stranger.get("/volumes").json() == []
    assert stranger.get("/docker-credentials/").json() == []
    assert template["id"] not in [t["id"] for t in stranger.get("/templates").json()]
    assert all(e["pod_id"] != pod_id for e in stranger.get("/users/me/events").json())
    # the owner still has everything
    assert owner.get(f"/pods/{pod_id}").status_code == 200
    assert owner.delete(f"/pods/{pod_id}").status_code == 200


def test_public_templates_are_read_only(account: httpx.Client) -> None:
    public = next(t for t in account.get("/templates").json() if t["user_id"] is None)
    assert account.get(f"/templates/{public['id']}").status_code == 200
    assert_error(account.delete(f"/templates/{public['id']}"), 403, "template_read_only")
    assert_error(
        account.put(f"/templates/{public['id']}", json={"name": "mine", "docker_image": "x"}),
        403,
        "template_read_only",
    )


def test_a_body_past_the_limit_is_refused_unread(emulator: RunningEmulator, account: httpx.Client) -> None:
    # Every request's body is read into memory before anything else (the API key included) is
    # looked at: a body of a gigabyte, from anyone who reaches the port (a pod too), would take a
    # gigabyte of the emulator's memory.
    port = httpx.URL(emulator.root_url).port
    assert port is not None
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(
            b"POST /api/templates HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1073741824\r\n\r\n"
        )
        answer = b""
        while b"\r\n\r\n" not in answer:  # refused before a byte of the body is sent
            chunk = sock.recv(4096)
            assert chunk, answer
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 413 "), answer

    # Without a declared length (chunked), the body is counted as it comes.
    def chunks() -> Iterator[bytes]:
        yield b'{"name": "'
        for _ in range(MAX_BODY_BYTES // 65536 + 1):
            yield b"a" * 65536
        yield b'"}'

    assert_error(account.post("/templates", content=chunks(), headers=JSON), 413, "request_too_large")
    # A body within the limit is read as before: a template with a 1 MiB environment.
    environment = {"BLOB": "x" * (1024 * 1024)}
    created = account.post("/templates", json=dstack_template("big-env", environment=environment))
    assert created.status_code == 200, created.text[:200]
    assert account.get(f"/templates/{created.json()['id']}").json()["environment"] == environment
