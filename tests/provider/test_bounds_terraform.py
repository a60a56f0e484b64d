"""Bounds through real Terraform: input refused at plan time naming its attribute, API timeouts
that end a stalled command within them naming the URL, and an imported pod's host key pinned on its
first read so a ``lium_runner`` can be added."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pytest

from lium_provider.sshkeys import fetch_host_key, fingerprint
from tests.support.lium import (
    PROVIDER_BLOCK,
    Account,
    assert_nothing_left,
    instances,
    pod_block,
    sleeping_template,
)
from tests.support.terraform import Terraform

pytestmark = pytest.mark.terraform

TEMPLATE = sleeping_template("bounds-template")
POD = pod_block("bounds-pod")
RUNNER = """
resource "lium_runner" "r" {
  pod_id       = lium_pod.p.id
  ssh_host_key = lium_pod.p.ssh_host_key
}
"""
# Terraform's own start-up, init of the plugin and the error's rendering, on a loaded 2-core machine.
TERRAFORM_OVERHEAD_SECONDS = 20.0


def one_line(text: str) -> str:
    return " ".join(text.split())


def ssh_keygen_public(directory: Path, key_type: str) -> str:
    """A fresh public key line of ``key_type`` from ssh-keygen (no private key is used)."""
    path = directory / f"id_{key_type}"
    subprocess.run(["ssh-keygen", "-q", "-t", key_type, "-N", "", "-f", str(path)], check=True)
    return path.with_suffix(".pub").read_text().strip()


def test_a_garbage_ssh_public_key_fails_the_plan_naming_it(
    stack: Callable[[str], Terraform], account: Account, tmp_path: Path
) -> None:
    bad = TEMPLATE + POD.replace(
        "template_id", 'ssh_public_key = "ssh-ed25519 this-is-not-a-key"\n  template_id'
    )
    tf = stack(bad)
    failed = tf.run("plan", "-input=false", "-no-color", check=False)
    assert failed.returncode == 1
    error = one_line(failed.stderr)
    assert "Invalid value for ssh_public_key" in error and "is not an OpenSSH public key" in error, error
    assert 'in resource "lium_pod" "p"' in error, error

    # Every OpenSSH key type a pod can be logged into with passes the same rule.
    keys = [ssh_keygen_public(tmp_path, key_type) for key_type in ("ed25519", "ecdsa", "rsa")]
    good = TEMPLATE + "".join(
        POD.replace('"p"', f'"p{i}"')
        .replace('"bounds-pod"', f'"bounds-pod-{i}"')  # pod names are unique within a stack
        .replace("template_id", f'ssh_public_key = "{key}"\n  template_id')
        for i, key in enumerate(keys)
    )
    tf.write(PROVIDER_BLOCK + good)
    code, plan = tf.plan_exitcode()
    assert code == 2 and "Plan: 4 to add" in plan, plan
    assert_nothing_left(account)


def test_names_with_control_characters_are_refused_at_plan_time(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    body = """
resource "lium_template" "t" {
  name  = "two\\nlines"
  image = "python:3.11-slim"
}
resource "lium_pod" "p" {
  name        = "tab\\there"
  template_id = "0e1d3eb8-a544-4f51-a55d-70b35e2ef6ff"
}
resource "lium_volume" "v" {
  name = "data\\n"
}
resource "lium_docker_credential" "c" {
  username = "escape\\u001b[31m"
  password_wo = "secret"
  password_wo_version = 1
}
"""
    tf = stack(body)
    failed = tf.run("plan", "-input=false", "-no-color", check=False)
    assert failed.returncode == 1
    error = one_line(failed.stderr)
    for resource, attribute, shown in [
        ('"lium_template" "t"', "name", r"'\n' at position 3"),
        ('"lium_pod" "p"', "name", r"'\t' at position 3"),
        ('"lium_volume" "v"', "name", r"'\n' at position 4"),  # its alphabet's $ let a newline by
        ('"lium_docker_credential" "c"', "username", r"'\x1b' at position 6"),
    ]:
        assert f"Invalid value for {attribute}" in error and f"in resource {resource}" in error, error
        assert f"contains a control character ({shown})" in error, error
    assert error.count("contains a control character") == 4, error
    assert_nothing_left(account)


@contextmanager
def silent_endpoint() -> Iterator[str]:
    """A loopback HTTP "server" that accepts connections (the kernel does, from the backlog) and never
    answers a byte; its URL."""
    with closing(socket.socket()) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        yield f"http://127.0.0.1:{server.getsockname()[1]}/api"


@contextmanager
def closed_port() -> Iterator[str]:
    """The URL of a loopback port nothing listens on (bound, so no one else takes it, but not listening)."""
    with closing(socket.socket()) as holder:
        holder.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{holder.getsockname()[1]}/api"


def plan_against(
    make_terraform: Callable[..., Terraform], account: Account, url: str, provider: str, **env: str
) -> tuple[float, str]:
    """``terraform plan`` of a template with the provider pointed at ``url``: seconds taken, error text."""
    tf = make_terraform(
        PROVIDER_BLOCK.replace('provider "lium" {}', f'provider "lium" {{\n{provider}\n}}') + TEMPLATE,
        **{**account.env, "LIUM_API_URL": url, **env},
    )
    tf.init()
    started = time.monotonic()
    failed = tf.run("plan", "-input=false", "-no-color", check=False)
    elapsed = time.monotonic() - started
    assert failed.returncode == 1, failed.stdout
    return elapsed, one_line(failed.stderr)


def test_an_endpoint_that_never_answers_fails_within_the_request_timeout_naming_the_url(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    with silent_endpoint() as url:
        # From the environment ...
        elapsed, error = plan_against(make_terraform, account, url, "", LIUM_REQUEST_TIMEOUT="2s")
        assert "Cannot reach the Lium API" in error and f"no answer from {url}/users/me" in error, error
        assert "timed out" in error and "request timeout 2 s" in error, error
        assert 2.0 <= elapsed < 2.0 + TERRAFORM_OVERHEAD_SECONDS, elapsed
        # ... and from the provider block, which wins over it.
        elapsed, error = plan_against(
            make_terraform, account, url, '  request_timeout = "3s"', LIUM_REQUEST_TIMEOUT="10m"
        )
        assert f"no answer from {url}/users/me" in error and "request timeout 3 s" in error, error
        assert 3.0 <= elapsed < 3.0 + TERRAFORM_OVERHEAD_SECONDS, elapsed


def test_a_closed_port_fails_within_the_request_timeout_naming_the_url(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    with closed_port() as url:
        elapsed, error = plan_against(
            make_terraform, account, url, '  request_timeout = "3s"\n  connect_timeout = "1s"'
        )
    assert "Cannot reach the Lium API" in error and f"no answer from {url}/users/me" in error, error
    assert "connection failed: ConnectError" in error and "connect timeout 1 s" in error, error
    assert elapsed < 3.0 + TERRAFORM_OVERHEAD_SECONDS, elapsed


@pytest.mark.parametrize(
    ("provider", "env", "attribute"),
    [
        ('  request_timeout = "soon"', {}, "request_timeout"),
        ('  connect_timeout = "0s"', {}, "connect_timeout"),
        ("", {"LIUM_CONNECT_TIMEOUT": "ten"}, "connect_timeout"),
    ],
    ids=["request-argument", "zero-connect-argument", "connect-env"],
)
def test_a_bad_timeout_names_its_attribute(
    make_terraform: Callable[..., Terraform],
    account: Account,
    provider: str,
    env: dict[str, str],
    attribute: str,
) -> None:
    _, error = plan_against(make_terraform, account, account.emulator.api_url, provider, **env)
    assert attribute in error and ("is not a duration" in error or "must be longer than zero" in error), error


def test_an_imported_pod_gets_its_host_key_pinned_so_a_runner_can_be_added(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    tf = stack(TEMPLATE + POD)
    tf.apply()
    (pod,) = instances(tf, "lium_pod")
    tf.run("state", "rm", "lium_pod.p")

    imported = tf.run("import", "-input=false", "-no-color", "lium_pod.p", pod["id"])
    output = one_line(imported.stdout + imported.stderr)
    (state,) = instances(tf, "lium_pod")
    offered = fetch_host_key(pod["ssh_host"], pod["ssh_port"])
    assert state["ssh_host_key"] == offered == pod["ssh_host_key"]
    assert f"Pinned pod {pod['id']}'s SSH host key on first read" in output, output
    assert fingerprint(pod["ssh_host_key"]) in output and "trusted on first use" in output, output

    tf.write(PROVIDER_BLOCK + TEMPLATE + POD + RUNNER)
    tf.apply()
    (runner,) = instances(tf, "lium_runner")
    assert runner["healthy"] is True and runner["pod_id"] == pod["id"]
    assert [p["id"] for p in instances(tf, "lium_pod")] == [pod["id"]], "the pod was kept, not replaced"
    tf.destroy()
    assert_nothing_left(account)
