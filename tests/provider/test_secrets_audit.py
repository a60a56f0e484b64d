"""No secret ever leaves the provider: not in state, plans, TRACE logs, diagnostics or crash output.

The secrets are the Lium API key, a registry password and the SSH private key. Each variant runs a whole
life cycle with ``TF_LOG=TRACE`` (a failing apply with a wrong registry password, a saved plan and its
JSON, an apply of that plan, an interrupted or killed apply, a destroy) and then searches everything it
captured for each secret and for each line of the PEM key.

* ``env``: the API key from ``LIUM_API_KEY``, the key from ``LIUM_SSH_PRIVATE_KEY_FILE``; the provider
  process is SIGKILLed mid-create.
* ``ephemeral``: the API key and the private key from ephemeral variables into the provider block's
  ``api_key`` and ``ssh_private_key``; the apply is interrupted with Ctrl-C mid-create.

The registry password always comes from an ephemeral variable into ``password_wo``.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from lium_emulator.catalogs.images import image_catalog
from lium_provider.domain.stack import parse_lium_pod_name
from tests.chaos.audit import find_crashes, find_secrets, secret_needles
from tests.chaos.harness import APPLY, DESTROY, Finished, run_command, wait_until
from tests.support.lium import NOTHING_LIVE, Account, name_in_state
from tests.support.procs import kill_provider
from tests.support.terraform import Terraform, interrupt

pytestmark = pytest.mark.terraform

PRIVATE = next(image for image in image_catalog() if image.private)
WRONG_PASSWORD = "chaos-wrong-registry-password-7Qx"
REQUIRED = 'terraform {\n  required_providers {\n    lium = { source = "lium-stacks/lium" }\n  }\n}\n'
PROVIDER = {
    "env": 'provider "lium" {}\n',
    "ephemeral": """
variable "api_key" {
  type      = string
  sensitive = true
  ephemeral = true
}
variable "ssh_private_key" {
  type      = string
  sensitive = true
  ephemeral = true
}
provider "lium" {
  api_key         = var.api_key
  ssh_private_key = var.ssh_private_key
}
""",
}
STACK = """
variable "registry_password" {
  type      = string
  sensitive = true
  ephemeral = true
}
resource "lium_docker_credential" "c" {
  username            = "%(user)s"
  password_wo         = var.registry_password
  password_wo_version = %(version)d
}
resource "lium_template" "t" {
  name                 = "audit"
  image                = "%(image)s"
  entrypoint           = "/bin/sh"
  startup_commands     = "-c 'exec sleep infinity'"
  docker_credential_id = lium_docker_credential.c.id
}
resource "lium_pod" "p" {
  name        = "%(pod)s"
  template_id = lium_template.t.id
  timeouts {
    create = "60s"
  }
}
"""
STUCK = {
    "seed": 1,
    "rules": [{"name": "hold", "path": "/executors/*/rent", "kind": "stuck_pending", "first": 1}],
}


def config(variant: str, version: int, pod: str) -> str:
    values = {"user": PRIVATE.registry_username, "version": version, "image": PRIVATE.reference, "pod": pod}
    return REQUIRED + PROVIDER[variant] + STACK % values


class Capture:
    """Runs terraform with TRACE logging into a file per command and keeps every byte it produced."""

    def __init__(self, tf: Terraform, logs: Path) -> None:
        self.tf = tf
        self.logs = logs
        self.outputs: dict[str, str] = {}
        logs.mkdir()

    def run(
        self, label: str, args: list[str], during: Callable[[subprocess.Popen[str]], None] | None = None
    ) -> Finished:
        log = self.logs / f"{label}.log"
        self.tf.env.update({"TF_LOG": "TRACE", "TF_LOG_PATH": str(log)})
        finished = run_command(self.tf, args, during=during)
        self.outputs[label] = finished.output
        return finished

    def texts(self, state_dir: Path) -> dict[str, str]:
        """Command outputs, TRACE logs, every file Terraform wrote (state, backup, plan file, lock) and
        every file the provider kept in its state directory (the rent journal)."""
        texts = {f"output of {label}": text for label, text in self.outputs.items()}
        texts |= {f"TRACE log {p.name}": p.read_text(errors="replace") for p in self.logs.iterdir()}
        written = [p for p in self.tf.workdir.rglob("*") if ".terraform" not in p.parts and p.suffix != ".tf"]
        for path in [*written, *state_dir.rglob("*")]:
            if path.is_file():
                texts[str(path)] = path.read_text(errors="replace")
        return texts


@pytest.mark.parametrize("variant", ["env", "ephemeral"])
def test_no_secret_in_any_output(
    variant: str, make_terraform: Callable[..., Terraform], account: Account, tmp_path: Path
) -> None:
    private_key = account.key_file.read_text()
    env = {**account.env, "TF_VAR_registry_password": WRONG_PASSWORD}
    if variant == "ephemeral":
        env |= {"TF_VAR_api_key": account.api_key, "TF_VAR_ssh_private_key": private_key}
        env |= {"LIUM_API_KEY": "", "LIUM_SSH_PRIVATE_KEY_FILE": ""}  # only the provider block has them
    tf = make_terraform(config(variant, 1, "audit-0"), **env)
    tf.init()
    capture = Capture(tf, tmp_path / "logs")

    # A diagnostic: the registry rejects the wrong password, the pod ends CREATION_FAILED.
    failed = capture.run("apply-wrong-password", APPLY)
    assert failed.returncode != 0 and "CREATION_FAILED" in failed.output, failed.output

    # A saved plan with the right password (rotation), its JSON, and its apply.
    tf.write(config(variant, 2, "audit-0"))
    tf.env["TF_VAR_registry_password"] = PRIVATE.registry_password or ""
    assert capture.run("plan-out", ["plan", "-input=false", "-no-color", "-out=audit.tfplan"]).returncode == 0
    plan_json = capture.run("show-plan-json", ["show", "-json", "audit.tfplan"])
    assert plan_json.returncode == 0 and '"resource_changes"' in plan_json.output
    applied = capture.run("apply-plan", ["apply", "-input=false", "-no-color", "audit.tfplan"])
    assert applied.returncode == 0, applied.output
    assert capture.run("show-state-json", ["show", "-json"]).returncode == 0

    # Crash output: replace the pod, hold it PENDING, and kill the provider / press Ctrl-C mid-create.
    tf.write(config(variant, 2, "audit-1"))

    def crash(process: subprocess.Popen[str]) -> None:
        rented = wait_until(lambda: _renting(account, "audit-1"), process, time.monotonic() + 60)
        assert rented, "the replacement pod was never rented"
        if variant == "env":
            kill_provider(process.pid)
        else:
            interrupt(process)

    with account.faults(STUCK):
        crashed = capture.run(f"apply-{variant}-crash", APPLY, during=crash)
    assert crashed.returncode != 0, crashed.output

    destroyed = capture.run("destroy", DESTROY)
    assert destroyed.returncode == 0, destroyed.output
    live = account.live()
    assert live == NOTHING_LIVE, live

    texts = capture.texts(account.state_dir)
    secrets = {
        "the API key": account.api_key,
        "the registry password": PRIVATE.registry_password or "",
        "the wrong registry password": WRONG_PASSWORD,
        "the SSH private key": private_key,
    }
    assert len(secret_needles(private_key)) > 2, "the PEM key's lines are searched one by one"
    assert sum(len(t) for t in texts.values()) > 100_000, "TRACE logs were captured"
    assert find_secrets(texts, secrets) == []
    assert find_crashes({k: v for k, v in texts.items() if k.startswith("output of")}) == []


def _renting(account: Account, name: str) -> bool:
    return any(
        parse_lium_pod_name(p["pod_name"]) is not None
        and name_in_state(p["pod_name"]) == name
        and p["status"] != "DELETED"
        for p in account.report()["pods"]
    )
