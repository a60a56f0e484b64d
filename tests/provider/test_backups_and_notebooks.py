"""Lium's pod services through real terraform and the emulator: a ``lium_backup_config`` backs a pod's
directory up on its schedule (the emulator's schedule clock moved on, no sleeping), a new pod restored
from ``data.lium_backups`` has the file when its apply ends, and a pod with ``jupyter_port`` has a
``jupyter_url`` that answers as a notebook server does, kept out of the plan output."""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable

import httpx
import pytest

from tests.support import http
from tests.support.lium import PROVIDER_BLOCK, Account, assert_nothing_left, instances, ssh_run
from tests.support.terraform import Terraform, flat

pytestmark = pytest.mark.terraform

TRAINING = """
resource "lium_template" "t" {
  name             = "train"
  image            = "python:3.11-slim"
  entrypoint       = "/bin/sh"
  startup_commands = "-c 'exec sleep infinity'"
  internal_ports   = [22, 8888]
}
resource "lium_pod" "train" {
  name         = "train"
  template_id  = lium_template.t.id
  jupyter_port = 8888
}
resource "lium_backup_config" "ckpt" {
  pod_id          = lium_pod.train.id
  path            = "/root/ckpt"
  frequency_hours = 2
  retention_days  = 3
}
output "notebook" {
  value     = lium_pod.train.jupyter_url
  sensitive = true
}
"""
RESUMED = """
data "lium_backups" "train" {
  pod_id = lium_pod.train.id
}
resource "lium_pod" "resumed" {
  name              = "resumed"
  template_id       = lium_template.t.id
  restore_backup_id = data.lium_backups.train.latest_completed_id
  restore_path      = "/root/restored"
}
"""


def run_due(account: Account, after_hours: float) -> list[str]:
    answer = http.post(
        f"{account.emulator.root_url}/_emulator/backups/run-due",
        params={"after_hours": after_hours},
        headers=account.emulator.admin_headers,
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    started: list[str] = answer.json()["started"]
    return started


def test_a_scheduled_backup_restores_into_a_new_pod_and_the_notebook_answers(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    tf = stack(TRAINING)
    applied = tf.apply()
    (pod,) = instances(tf, "lium_pod")
    url = pod["jupyter_url"]
    assert url and url not in applied.stdout + applied.stderr, "the URL carries the notebook's token"
    base, token = url.split("/?token=")
    assert httpx.get(f"{base}/api", params={"token": token}, timeout=10).json()["version"]
    assert httpx.get(f"{base}/api", timeout=10).status_code == 403
    with account.api() as api:
        assert api.get(f"/backup-configs/pod/{pod['id']}").json()["backup_path"] == "/root/ckpt"

    weights = secrets.token_hex(8)
    ssh_run(account, pod, f"mkdir -p /root/ckpt && echo {weights} > /root/ckpt/model.txt")
    assert run_due(account, 1) == [], "not due before its two hours"
    (scheduled,) = run_due(account, 2)

    tf.write(PROVIDER_BLOCK + TRAINING + RESUMED)
    tf.apply()
    resumed = next(p for p in instances(tf, "lium_pod") if p["name"] == "resumed")
    assert resumed["restore_backup_id"] == scheduled
    assert ssh_run(account, resumed, "cat /root/restored/model.txt").strip() == weights
    with account.api() as api:
        assert api.get(f"/backup-configs/pod/{resumed['id']}").status_code == 404, (
            "no backups nobody declared"
        )
    assert tf.plan_exitcode()[0] == 0

    # A template switch gives the pod a new container, which gets its notebook again.
    second = TRAINING.split('resource "lium_pod"')[0].replace('"t"', '"t2"').replace('"train"', '"train-2"')
    moved = TRAINING.replace("template_id  = lium_template.t.id", "template_id  = lium_template.t2.id")
    tf.write(PROVIDER_BLOCK + moved + second + RESUMED)
    tf.apply()
    (again,) = [p for p in instances(tf, "lium_pod") if p["name"] == "train"]
    assert again["id"] == pod["id"] and again["jupyter_url"] not in (None, url)
    base, token = again["jupyter_url"].split("/?token=")
    assert httpx.get(f"{base}/api", params={"token": token}, timeout=10).status_code == 200

    # The pod re-rented (its name changed): the new pod gets a schedule of its own, in place, and the old
    # schedule is kept with its backups, which are what outlives a pod.
    (config,) = instances(tf, "lium_backup_config")
    tf.write(PROVIDER_BLOCK + moved.replace('name         = "train"', 'name         = "train-b"') + second)
    tf.apply()
    (moved_config,) = instances(tf, "lium_backup_config")
    assert moved_config["id"] != config["id"] and moved_config["retired_ids"] == [config["id"]]
    with account.api() as api:
        assert api.get(f"/backup-logs/{scheduled}").json()["deletion_state"] is None, "still restorable"

    tf.destroy()
    with account.api() as api:
        assert api.get("/backup-configs").json() == [], "destroy leaves no schedule"
        assert api.get(f"/backup-logs/{scheduled}").json()["deletion_state"] == "deleted", "nor a copy"
    assert_nothing_left(account)


BACKED_UP = """
resource "lium_template" "t" {
  name             = "kept"
  image            = "python:3.11-slim"
  entrypoint       = "/bin/sh"
  startup_commands = "-c 'exec sleep infinity'"
}
resource "lium_pod" "p" {
  name        = "kept"
  template_id = lium_template.t.id
}
resource "lium_backup_config" "b" {
  pod_id = lium_pod.p.id
  path   = "/root"
}
"""


def test_a_state_edited_to_another_stacks_backup_schedule_never_deletes_it(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    alpha, beta = (
        make_terraform(PROVIDER_BLOCK + BACKED_UP, **account.env, LIUM_STACK=name)
        for name in ("alpha", "beta")
    )
    for tf in (alpha, beta):
        tf.init()
        tf.apply()
    (theirs,) = instances(alpha, "lium_backup_config")
    state = beta.state_file()
    (config,) = [r for r in state["resources"] if r["type"] == "lium_backup_config"]
    ours = config["instances"][0]["attributes"]["id"]
    config["instances"][0]["attributes"]["id"] = theirs["id"]
    (beta.workdir / "terraform.tfstate").write_text(json.dumps(state))

    refused = beta.destroy("-refresh=false", check=False)
    assert refused.returncode != 0 and "another stack" in flat(refused.stderr), refused.stderr
    with account.api() as api:
        assert {c["id"] for c in api.get("/backup-configs").json()} == {theirs["id"], ours}, "both kept"

    config["instances"][0]["attributes"]["id"] = ours
    (beta.workdir / "terraform.tfstate").write_text(json.dumps(state))
    for tf in (beta, alpha):
        tf.destroy()
    assert_nothing_left(account)
