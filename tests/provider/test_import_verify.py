"""Import verify through real terraform, as terraform-plugin-testing's ``ImportStateVerify`` does it.

A stack sets every optional argument of every importable resource and is applied. A fresh state with the
same configuration then imports each object: the plan replaces nothing, and updates in place only the
arguments no read can return (the pod's offer bounds and timeouts, the credential's password version).
The pod's ``ssh_public_key`` is checked against the keys its Lium row lists, so a key the pod has is
taken in place and one it lacks replaces it, saying why. Terraform's own ``-generate-config-out`` on
import blocks alone writes a configuration that then plans with no error and no replacement.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from lium_emulator.launcher import RunningEmulator
from tests.support.arguments import arguments_of
from tests.support.lium import PROVIDER_BLOCK, Account, assert_nothing_left, new_account, ssh_keypair
from tests.support.plans import SavedPlan, saved_plan
from tests.support.terraform import Terraform

pytestmark = pytest.mark.terraform

REGISTRY_PASSWORD = "import-verify-registry-secret"
FULL_STACK = """
variable "registry_password" {
  type      = string
  sensitive = true
  ephemeral = true
}
resource "lium_docker_credential" "c" {
  username            = "verify-bot"
  password_wo         = var.registry_password
  password_wo_version = 3
}
resource "lium_template" "t" {
  name                 = "verify"
  image                = "python:3.11-slim"
  entrypoint           = "/bin/sh"
  startup_commands     = "-c 'exec sleep infinity'"
  environment          = { HF_HOME = "/root/.cache/huggingface" }
  internal_ports       = [22, 8888]
  local_volume_path    = "/data"
  docker_credential_id = lium_docker_credential.c.id
}
resource "lium_volume" "v" {
  name        = "verify-data"
  description = "training data"
}
resource "lium_pod" "p" {
  name               = "%(pod_name)s"
  template_id        = lium_template.t.id
  ssh_public_key     = file("%(public_key)s")
  volume_id          = lium_volume.v.id
  gpu                = "RTX 4090"
  gpu_count          = 1
  max_price_per_hour = 100
  regions            = ["us", "eu", "ca"]
  min_memory_gib     = 1
  min_disk_gb        = 1
  spot               = false
  termination_hours  = 48
  timeouts {
    create = "10m"
  }
}
"""
ADDRESSES = ("lium_docker_credential.c", "lium_template.t", "lium_volume.v", "lium_pod.p")
# What no read can return, so an import of this configuration updates exactly these in place.
NOT_IMPORTED = {
    "lium_docker_credential.c": ["password_wo_version"],
    "lium_pod.p": ["max_price_per_hour", "min_disk_gb", "min_memory_gib", "regions", "spot", "timeouts"],
}
# The pod's row lists its key without the comment that file() reads: the same key, recorded in place.
RESPELLED = {"lium_pod.p": ["ssh_public_key"]}


@dataclass(frozen=True)
class LiveStack:
    """The applied full stack: its terraform directory, account and the state ids of its objects."""

    tf: Terraform
    account: Account
    public_key: Path
    ids: dict[str, str]


def full_stack(public_key: Path, pod_name: str = "verify-pod") -> str:
    return PROVIDER_BLOCK + FULL_STACK % {"public_key": public_key, "pod_name": pod_name}


@pytest.fixture(scope="module")
def live(
    emulator: RunningEmulator, tmp_path_factory: pytest.TempPathFactory, terraform_env: dict[str, str]
) -> Iterator[LiveStack]:
    home = tmp_path_factory.mktemp("import-verify")
    account = new_account(emulator, home)
    public_key = Path(f"{ssh_keypair(home / 'pod-key')}.pub")
    # One stack, two states: the applied one and the fresh one each import goes into (a lost state).
    env = {
        **terraform_env,
        **account.env,
        "TF_VAR_registry_password": REGISTRY_PASSWORD,
        "LIUM_STACK": "verify",
    }
    tf = Terraform(home / "applied", env)
    tf.write(full_stack(public_key))
    tf.init()
    try:
        tf.apply()
        state = {f"{r['type']}.{r['name']}": r["instances"][0]["attributes"] for r in tf.resources()}
        yield LiveStack(tf, account, public_key, {a: state[a]["id"] for a in ADDRESSES})
    finally:
        tf.destroy(check=False)
    assert_nothing_left(account)


def import_blocks(live: LiveStack) -> str:
    return "".join(f'import {{\n  to = {a}\n  id = "{live.ids[a]}"\n}}\n' for a in ADDRESSES)


def importing(live: LiveStack, directory: Path, body: str) -> Terraform:
    """A fresh working directory (empty state) with ``body`` and an import block for each object."""
    tf = Terraform(directory, dict(live.tf.env))
    tf.write(body)
    tf.write(import_blocks(live), "imports.tf")
    tf.init()
    return tf


def changes_of(plan: SavedPlan) -> dict[str, tuple[str, list[str]]]:
    """Each planned resource's action and the attributes it changes (replacements: those forcing it)."""
    assert plan.returncode == 0 and not plan.crashes, plan.errors
    found = {}
    for address, change in plan.changes.items():
        assert change.importing, f"{address} is planned but not imported"
        forcing = sorted({str(p[0]) for p in change.replace_paths if p})
        arguments = arguments_of(change.type)
        found[address] = (change.action, forcing or sorted(set(change.changed_attributes()) & arguments))
    return found


def test_the_same_full_configuration_imports_replacing_nothing(live: LiveStack, tmp_path: Path) -> None:
    tf = importing(live, tmp_path / "import", full_stack(live.public_key))
    expected = {
        a: ("update", sorted(NOT_IMPORTED[a] + RESPELLED.get(a, []))) if a in NOT_IMPORTED else ("keep", [])
        for a in ADDRESSES
    }
    planned = changes_of(saved_plan(tf))
    assert planned == expected, json.dumps(planned)

    # Applied, the imports take those arguments into the state; then nothing is left to change.
    tf.apply()
    assert tf.plan_exitcode()[0] == 0
    assert sorted(p["id"] for p in live.account.live()["pods"]) == [live.ids["lium_pod.p"]], (
        "nothing re-rented"
    )
    assert tf.run("state", "rm", *ADDRESSES).returncode == 0  # the module's stack destroys them


def test_an_imported_pods_name_and_key_are_taken_in_place_when_the_pod_has_them(
    live: LiveStack, tmp_path: Path
) -> None:
    """Lium cannot rename a pod, so another ``name`` is taken in place; the key is one the pod lists."""
    body = full_stack(live.public_key, pod_name="renamed-in-code")
    tf = importing(live, tmp_path / "import", body)
    action, changed = changes_of(saved_plan(tf))["lium_pod.p"]
    assert action == "update" and "name" in changed, changed


def test_an_imported_pod_without_the_configured_key_is_replaced_saying_why(
    live: LiveStack, tmp_path: Path
) -> None:
    other_key = Path(f"{ssh_keypair(tmp_path / 'other-key')}.pub")
    tf = importing(live, tmp_path / "import", full_stack(other_key))
    plan = saved_plan(tf)
    assert changes_of(plan)["lium_pod.p"] == ("replace", ["ssh_public_key"])
    assert "does not authorise this ssh_public_key" in " ".join(plan.stdout.split()), plan.stdout


def test_generated_configuration_plans_with_no_error_and_no_replacement(
    live: LiveStack, tmp_path: Path
) -> None:
    """Import blocks alone: terraform writes the configuration, and the next plan accepts it."""
    tf = Terraform(tmp_path / "generate", dict(live.tf.env))
    tf.write(PROVIDER_BLOCK + import_blocks(live))
    tf.init()
    generated = tf.run("plan", "-input=false", "-no-color", "-generate-config-out=generated.tf", check=False)
    assert (tf.workdir / "generated.tf").is_file(), generated.stderr
    text = (tf.workdir / "generated.tf").read_text()
    assert "lium_pod" in text and "executor_id" in text, text
    plan = saved_plan(tf)
    changes = changes_of(plan)
    assert set(changes) == set(ADDRESSES)
    assert all(action != "replace" for action, _ in changes.values()), changes
    # The credential's password is write-only: the generated configuration cannot hold it.
    assert REGISTRY_PASSWORD not in text and "password_wo         = null" in text
