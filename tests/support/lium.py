"""Lium-side helpers for end-to-end tests: an emulator account, an SSH key pair and the provider block."""

from __future__ import annotations

import base64
import functools
import io
import secrets
import subprocess
import time
from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import paramiko

from lium_emulator.launcher import RunningEmulator
from lium_provider.domain.stack import parse_lium_pod_name
from lium_provider.sshkeys import fetch_host_key
from tests.support import http
from tests.support.faults import NO_FAULTS, faults
from tests.support.terraform import Terraform

PROVIDER_BLOCK = """
terraform {
  required_providers {
    lium = { source = "lium-stacks/lium" }
  }
}
provider "lium" {}
"""


def sleeping_template(name: str, image: str = "python:3.11-slim", extra: str = "", label: str = "t") -> str:
    """The HCL of ``lium_template.<label>``: ``image`` kept alive by ``/bin/sh -c 'exec sleep infinity'``,
    so its pods stay running for SSH; ``extra`` is one more line of arguments inside the block."""
    return f"""
resource "lium_template" "{label}" {{
  name             = "{name}"
  image            = "{image}"
  entrypoint       = "/bin/sh"
  startup_commands = "-c 'exec sleep infinity'"
{_extra_line(extra)}}}
"""


def pod_block(name: str, extra: str = "") -> str:
    """The HCL of ``lium_pod.p`` running ``lium_template.t``; ``extra`` is more arguments inside the block."""
    return f"""
resource "lium_pod" "p" {{
  name        = "{name}"
  template_id = lium_template.t.id
{_extra_line(extra)}}}
"""


def name_in_state(lium_name: str) -> str:
    """A pod's ``name`` attribute, from the name Lium holds (``<name>-<stack tag><generation>``)."""
    parsed = parse_lium_pod_name(lium_name)
    assert parsed is not None, f"{lium_name!r} carries no stack tag"
    return parsed[0]


def _extra_line(extra: str) -> str:
    return f"  {extra}\n" if extra else ""


# Short lifecycle timings keep each pod test around a second.
FAST_TIMINGS = ("--pending-seconds", "0.3", "--ssh-delay-seconds", "0.2", "--deleting-seconds", "0.2")


def ssh_keypair(directory: Path) -> Path:
    """A fresh passwordless ed25519 key pair made by ssh-keygen; returns the private key's path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path


@dataclass
class Account:
    """One emulator account with the environment a Terraform run needs to use it."""

    emulator: RunningEmulator
    api_key: str
    key_file: Path
    state_dir: Path

    @property
    def env(self) -> dict[str, str]:
        return {
            "LIUM_API_URL": self.emulator.api_url,
            "LIUM_API_KEY": self.api_key,
            "LIUM_SSH_PRIVATE_KEY_FILE": str(self.key_file),
            "LIUM_RUNNER_DOWNLOAD_URL": self.emulator.runner_url,
            "LIUM_STATE_DIR": str(self.state_dir),
        }

    def api(self) -> httpx.Client:
        return http.client(
            base_url=self.emulator.api_url,
            headers={"X-API-KEY": self.api_key},
            timeout=30,
            follow_redirects=False,
        )

    @functools.cached_property
    def user_id(self) -> str:
        with self.api() as api:
            user_id: str = api.get("/users/me").json()["id"]
        return user_id

    def report(self) -> dict[str, Any]:
        """This account's part of the emulator's inspection report."""
        response = http.get(
            f"{self.emulator.root_url}/_emulator/resources",
            params={"user_id": self.user_id},
            headers=self.emulator.admin_headers,
            timeout=30,
        )
        response.raise_for_status()
        (account,) = response.json()["accounts"]
        assert account["user_id"] == self.user_id
        result: dict[str, Any] = account
        return result

    def live(self) -> dict[str, list[dict[str, Any]]]:
        """What this account still holds: live pods, templates, credentials, volumes and SSH keys."""
        report = self.report()
        return {
            "pods": [p for p in report["pods"] if p["status"] not in ("DELETED",)],
            "templates": report["templates"],
            "docker_credentials": report["docker_credentials"],
            "volumes": report["volumes"],
            "ssh_keys": report["ssh_keys"],
        }

    def faults(self, plan: Mapping[str, Any] = NO_FAULTS) -> AbstractContextManager[None]:
        """The emulator under ``plan`` for a ``with`` block, and without faults after it (see
        :mod:`tests.support.faults`)."""
        return faults(self.emulator, plan)


def register_account(emulator: RunningEmulator, api_key: str, balance: float | None = None) -> None:
    """Create the emulator account of ``api_key`` (with ``balance``, else the emulator's default)."""
    body: dict[str, Any] = {"api_key": api_key}
    if balance is not None:
        body["balance"] = balance
    response = http.post(
        f"{emulator.root_url}/_emulator/accounts", json=body, headers=emulator.admin_headers, timeout=30
    )
    assert response.status_code == 200, response.text


def new_account(emulator: RunningEmulator, directory: Path, balance: float = 1000.0) -> Account:
    """A fresh account with ``balance``, its own SSH key pair and state directory under ``directory``."""
    api_key = "tf-" + secrets.token_hex(12)
    register_account(emulator, api_key, balance)
    return Account(emulator, api_key, ssh_keypair(directory / "ssh"), directory / "state")


def instances(tf: Terraform, type_name: str) -> list[dict[str, Any]]:
    return [i["attributes"] for r in tf.resources() if r["type"] == type_name for i in r["instances"]]


def state_id(tf: Terraform, type_name: str) -> str:
    """The id of the stack's one ``type_name`` in its current state (of the selected workspace, local
    or pg)."""
    resources = tf.show_json().get("values", {}).get("root_module", {}).get("resources", [])
    (found,) = [r for r in resources if r["type"] == type_name]
    value: str = found["values"]["id"]
    return value


def ssh_run(account: Account, pod: dict[str, Any], command: str, key_file: Path | None = None) -> str:
    """Run a command on the pod (or cluster node) as root, checking the host key against the pinned one;
    logged in with the account's key, or the private key at ``key_file``."""
    key = paramiko.Ed25519Key.from_private_key(io.StringIO((key_file or account.key_file).read_text()))
    client = paramiko.SSHClient()
    key_type, key_b64 = pod["ssh_host_key"].split()
    pinned = paramiko.PKey.from_type_string(key_type, base64.b64decode(key_b64))
    client.get_host_keys().add(f"[{pod['ssh_host']}]:{pod['ssh_port']}", key_type, pinned)
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.connect(
        pod["ssh_host"],
        port=pod["ssh_port"],
        username="root",
        pkey=key,
        look_for_keys=False,
        allow_agent=False,
    )
    try:
        _, stdout, _ = client.exec_command(command, timeout=30)
        output: bytes = stdout.read()
        return output.decode()
    finally:
        client.close()


ROTATE_HOST_KEYS = (
    "rm -f /etc/ssh/ssh_host_*"
    " && ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key"
    " && ssh-keygen -q -t ecdsa -N '' -f /etc/ssh/ssh_host_ecdsa_key"
    " && kill -HUP $(cat /run/sshd.pid)"
)
KEY_CHANGE_WAIT_SECONDS = 30.0


def rotate_host_keys(account: Account, pod: dict[str, Any]) -> str:
    """New sshd host keys generated in the pod, as a key rotation there would; the key it offers now."""
    ssh_run(account, pod, ROTATE_HOST_KEYS)
    give_up = time.monotonic() + KEY_CHANGE_WAIT_SECONDS
    while time.monotonic() < give_up:  # sshd re-executes itself on SIGHUP: poll until it answers again
        offered = fetch_host_key(pod["ssh_host"], pod["ssh_port"], timeout=5.0)
        if offered is not None and offered != pod["ssh_host_key"]:
            return offered
        time.sleep(0.1)
    raise AssertionError("the pod's sshd never offered a new host key")


NOTHING_LIVE: dict[str, list[dict[str, Any]]] = {
    "pods": [],
    "templates": [],
    "docker_credentials": [],
    "volumes": [],
    "ssh_keys": [],
}
"""What :meth:`Account.live` returns for an account that holds nothing."""


def assert_nothing_left(account: Account) -> None:
    live = account.live()
    assert live == NOTHING_LIVE, live
