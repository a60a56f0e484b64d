"""Helpers for the emulator's HTTP tests: accounts, templates, rents, polling, SSH into pods."""

import io
import secrets
import shlex
import time
from collections.abc import Callable
from typing import Any, TypeVar

import httpx
import paramiko
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from lium_emulator.launcher import RunningEmulator
from tests.support import http
from tests.support.lium import FAST_TIMINGS as FAST_LIFECYCLE
from tests.support.lium import register_account

T = TypeVar("T")

# The end-to-end tests' short lifecycle, and CREATION_FAILED rows that expire after a second (so the
# expiry itself can be watched).
FAST_TIMINGS = (*FAST_LIFECYCLE, "--failed-seconds", "1")
DEFAULT_KEY = "lium-emulator-key"


def wait_until(probe: Callable[[], T | None], *, timeout: float = 15.0, what: str = "condition") -> T:
    """Poll ``probe`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def api_client(emulator: RunningEmulator, api_key: str | None) -> httpx.Client:
    """A client of the Lium API (never follows redirects, like dstack)."""
    headers = {"X-API-KEY": api_key} if api_key is not None else {}
    return http.client(base_url=emulator.api_url, headers=headers, timeout=30, follow_redirects=False)


def admin_client(emulator: RunningEmulator) -> httpx.Client:
    """A client of the emulator's ``/_emulator`` routes, with the admin key."""
    return http.client(base_url=emulator.root_url, headers=emulator.admin_headers, timeout=30)


def new_account(emulator: RunningEmulator, balance: float | None = None) -> tuple[str, httpx.Client]:
    """A fresh account (random API key) and a client for it."""
    api_key = "test-" + secrets.token_hex(12)
    register_account(emulator, api_key, balance)
    return api_key, api_client(emulator, api_key)


def resources(emulator: RunningEmulator, user_id: str | None = None) -> dict[str, Any]:
    """The inspection report (of the account ``user_id`` only, when given)."""
    with admin_client(emulator) as admin:
        response = admin.get("/_emulator/resources", params={"user_id": user_id} if user_id else None)
    assert response.status_code == 200, response.text
    report: dict[str, Any] = response.json()
    return report


def account_report(emulator: RunningEmulator, client: httpx.Client) -> dict[str, Any]:
    """The inspection report of ``client``'s account."""
    user_id = client.get("/users/me").json()["id"]
    (account,) = resources(emulator, user_id)["accounts"]
    assert account["user_id"] == user_id
    result: dict[str, Any] = account
    return result


def dstack_template(name: str, image: str = "python:3.11-slim", **fields: Any) -> dict[str, Any]:
    """A template body as dstack's Lium backend sends it."""
    return {
        "name": name,
        "docker_image": image,
        "docker_image_tag": "",
        "docker_image_digest": "",
        "entrypoint": "/bin/sh",
        "startup_commands": "-c 'exec sleep infinity'",
        "internal_ports": [22, 10022],
        "volumes": ["/root"],
        "is_private": True,
        "supports_docker": False,
        "supports_volume_encryption": False,
        "docker_credential_id": None,
        **fields,
    }


def create_template(client: httpx.Client, name: str | None = None, **fields: Any) -> dict[str, Any]:
    """Create a dstack-style template and return it."""
    response = client.post(
        "/templates", json=dstack_template(name or "tpl-" + secrets.token_hex(4), **fields)
    )
    assert response.status_code == 200, response.text
    template: dict[str, Any] = response.json()
    return template


def rent_body(template_id: str, public_key: str = "", **fields: Any) -> dict[str, Any]:
    """A rent body as dstack sends it."""
    return {
        "pod_name": "pod-" + secrets.token_hex(4),
        "template_id": template_id,
        "user_public_key": public_key,
        "gpu_count": 1,
        "initial_port_count": 2,
        "enable_jupyter": False,
        "enable_volume_encryption": False,
        **fields,
    }


def feed(client: httpx.Client) -> list[dict[str, Any]]:
    """The public nodes feed's nodes."""
    response = client.get("/public/v1/nodes")
    assert response.status_code == 200, response.text
    nodes: list[dict[str, Any]] = response.json()["nodes"]
    return nodes


def feed_node(client: httpx.Client, node_id: str) -> dict[str, Any] | None:
    """One node of the feed, or None when it is not listed."""
    return next((n for n in feed(client) if n["id"] == node_id), None)


def splittable_node(client: httpx.Client, gpu_model: str) -> dict[str, Any]:
    """A listed node of ``gpu_model`` that accepts 1-GPU orders."""
    return next(n for n in feed(client) if n["gpu_model"] == gpu_model and n["min_rentable_gpu_count"] == 1)


def rent(client: httpx.Client, node_id: str, body: dict[str, Any], key: str | None = None) -> httpx.Response:
    """POST a rent, with an Idempotency-Key when given."""
    headers = {"Idempotency-Key": key} if key is not None else {}
    return client.post(f"/executors/{node_id}/rent", json=body, headers=headers)


def rent_pod(client: httpx.Client, node_id: str, body: dict[str, Any]) -> str:
    """Rent and return the new pod id."""
    response = rent(client, node_id, body, key=secrets.token_hex(16))
    assert response.status_code == 200, response.text
    pod_id: str = response.json()["pod_id"]
    return pod_id


def get_pod(client: httpx.Client, pod_id: str) -> dict[str, Any] | None:
    """The pod row, or None on 404."""
    response = client.get(f"/pods/{pod_id}")
    if response.status_code == 404:
        return None
    assert response.status_code == 200, response.text
    row: dict[str, Any] = response.json()
    return row


def wait_status(client: httpx.Client, pod_id: str, status: str, timeout: float = 15.0) -> dict[str, Any]:
    """Poll until the pod has ``status``."""

    def probe() -> dict[str, Any] | None:
        pod = get_pod(client, pod_id)
        return pod if pod is not None and pod["status"] == status else None

    return wait_until(probe, timeout=timeout, what=f"pod {pod_id} to be {status}")


def wait_ssh_ready(client: httpx.Client, pod_id: str, timeout: float = 15.0) -> dict[str, Any]:
    """Poll until the pod is RUNNING with an ``ssh_connect_cmd``."""

    def probe() -> dict[str, Any] | None:
        pod = get_pod(client, pod_id)
        return pod if pod is not None and pod["status"] == "RUNNING" and pod["ssh_connect_cmd"] else None

    return wait_until(probe, timeout=timeout, what=f"pod {pod_id} to accept SSH")


def wait_gone(client: httpx.Client, pod_id: str, timeout: float = 15.0) -> None:
    """Poll until ``GET /pods/{id}`` answers 404."""
    wait_until(lambda: get_pod(client, pod_id) is None, timeout=timeout, what=f"pod {pod_id} to be removed")


def delete_and_wait(client: httpx.Client, pod_id: str) -> None:
    """Delete a pod and wait until its row is gone."""
    response = client.delete(f"/pods/{pod_id}")
    assert response.status_code in (200, 404), response.text
    wait_gone(client, pod_id)


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """The response is Lium's error envelope with ``status`` and ``error.code``."""
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert body["success"] is False
    assert body["status_code"] == status
    assert body["error"]["code"] == code, body
    if response.headers.get("idempotent-replayed") != "true":  # a replay keeps the first request's id
        assert body["error"]["request_id"] == response.headers["x-request-id"]
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return body


class SshKey:
    """A fresh Ed25519 key pair for SSH into pods."""

    def __init__(self) -> None:
        private = Ed25519PrivateKey.generate()
        pem = private.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
        ).decode()
        self.pkey = paramiko.Ed25519Key.from_private_key(io.StringIO(pem))
        self.public = (
            private.public_key()
            .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
            .decode()
        )


def ssh_target(pod: dict[str, Any]) -> tuple[str, int]:
    """Host and port from ``ssh_connect_cmd`` (``ssh root@HOST -p PORT``), parsed as dstack does."""
    parts = shlex.split(pod["ssh_connect_cmd"])
    assert parts[0] == "ssh" and parts[1].startswith("root@") and parts[2] == "-p"
    return parts[1].split("@", 1)[1], int(parts[3])


def ssh_run(pod: dict[str, Any], key: SshKey, command: str, timeout: float = 10.0) -> str:
    """Run ``command`` as root in the pod over its real sshd; returns stdout (fails on non-zero exit)."""
    host, port = ssh_target(pod)
    with paramiko.SSHClient() as client:
        client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        client.connect(
            host,
            port=port,
            username="root",
            pkey=key.pkey,
            timeout=timeout,
            banner_timeout=timeout,
            auth_timeout=timeout,
            allow_agent=False,
            look_for_keys=False,
        )
        _, stdout, stderr = client.exec_command(command, timeout=timeout)
        output: str = stdout.read().decode()
        status = stdout.channel.recv_exit_status()
        assert status == 0, f"{command!r} exited {status}: {stderr.read().decode()}"
        return output
