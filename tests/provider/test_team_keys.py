"""A team's keys on a pod: account keys a stack registers (``lium_ssh_key``), read back by
``data.lium_ssh_keys``, and authorised for root beside the stack's own key (``authorized_keys``).

Through real terraform, the emulator's sshd and OpenSSH keys: a teammate's key logs in; the same keys in
another order re-rent nothing; sweep finds the stack's keys by the tag in their names; destroy removes
them, and an account key no stack made is never touched.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from lium_provider.domain.stack import parse_tagged_name
from tests.support.lium import (
    PROVIDER_BLOCK,
    Account,
    assert_nothing_left,
    instances,
    pod_block,
    sleeping_template,
    ssh_keypair,
    ssh_run,
)
from tests.support.terraform import Terraform, flat

pytestmark = pytest.mark.terraform

TEAM = """
variable "bob" {
  type = string
}
resource "lium_ssh_key" "bob" {
  name       = "team-bob"
  public_key = var.bob
}
data "lium_ssh_keys" "team" {
  name_prefix = "team-"
  depends_on  = [lium_ssh_key.bob]
}
"""


def public_line(private_key: Path) -> str:
    return Path(f"{private_key}.pub").read_text().strip()


def test_a_teammates_account_key_logs_in_to_the_pod(
    stack: Callable[[str], Terraform], account: Account, tmp_path: Path
) -> None:
    bob = ssh_keypair(tmp_path / "bob")
    someone = ssh_keypair(tmp_path / "someone")
    with account.api() as api:  # a key on the account that no stack made
        response = api.post(
            "/ssh-keys", json={"name": "cli-alice@lab-desktop2", "public_key": public_line(someone)}
        )
        assert response.status_code == 200, response.text
    body = (
        sleeping_template("team")
        + TEAM
        + pod_block("team", "authorized_keys = data.lium_ssh_keys.team.keys[*].public_key")
    )
    tf = stack(body)
    tf.env["TF_VAR_bob"] = public_line(bob)
    tf.apply()

    (key,) = instances(tf, "lium_ssh_key")
    (pod,) = instances(tf, "lium_pod")
    assert parse_tagged_name(key["lium_name"]) == ("team-bob", key["stack_tag"]), key
    assert key["fingerprint"].startswith("ssh-ed25519 SHA256:"), key
    assert pod["authorized_keys"] == [public_line(bob)]
    assert ssh_run(account, pod, "id -u", key_file=bob).strip() == "0", "the teammate's key logs in"
    assert ssh_run(account, pod, "id -u").strip() == "0", "the stack's own key still logs in"
    assert tf.plan_exitcode()[0] == 0

    # The same keys listed again in another order (and once more): the pod is kept.
    tf.write(
        PROVIDER_BLOCK
        + sleeping_template("team")
        + TEAM
        + pod_block(
            "team",
            "authorized_keys = concat(data.lium_ssh_keys.team.keys[*].public_key, [var.bob, "
            f'"{public_line(account.key_file)}"])',
        )
    )
    code, plan = tf.plan_exitcode()
    assert code == 2 and "0 to add, 1 to change, 0 to destroy" in plan, plan
    tf.apply()
    (kept,) = instances(tf, "lium_pod")
    assert kept["id"] == pod["id"]

    # sweep --stack lists the stack's key and not the person's.
    env = {**os.environ, **account.env}
    sweep = [sys.executable, "-m", "lium_provider.cli", "sweep", "--stack", key["stack_tag"]]
    listed = json.loads(subprocess.run(sweep, env=env, capture_output=True, text=True, check=True).stdout)
    assert [k["name"] for k in listed["ssh_keys"]] == [key["lium_name"]], listed
    # A person's key whose name merely ends like a tag is no stack's, whichever way sweep narrows.
    for narrowing in (["--stack", "desktop2"], ["--name-prefix", "cli-alice"]):
        found = subprocess.run(
            [*sweep[:-2], *narrowing], env=env, capture_output=True, text=True, check=True
        ).stdout
        assert json.loads(found)["ssh_keys"] == [], found

    tf.destroy()
    live = account.live()
    assert [k["name"] for k in live["ssh_keys"]] == ["cli-alice@lab-desktop2"], live
    with account.api() as api:
        (left,) = api.get("/ssh-keys").json()
        assert api.delete(f"/ssh-keys/{left['id']}").status_code == 200
    assert_nothing_left(account)


def test_a_changed_key_is_updated_in_place_and_an_imported_one_gets_the_stacks_mark(
    stack: Callable[[str], Terraform], account: Account, tmp_path: Path
) -> None:
    first, second = ssh_keypair(tmp_path / "first"), ssh_keypair(tmp_path / "second")
    with account.api() as api:  # registered by hand, as Lium's CLI does
        made = api.post("/ssh-keys", json={"name": "carol", "public_key": public_line(first)}).json()
    config = 'resource "lium_ssh_key" "carol" {\n  name       = "carol"\n  public_key = var.key\n}\n'
    tf = stack('variable "key" {\n  type = string\n}\n' + config)
    tf.env["TF_VAR_key"] = public_line(first)
    tf.run("import", "-no-color", "lium_ssh_key.carol", made["id"])
    code, plan = tf.plan_exitcode()
    assert code == 2 and "1 to change" in plan, plan  # the stack's tag goes into its name
    tf.apply()
    (imported,) = instances(tf, "lium_ssh_key")
    assert (
        imported["id"] == made["id"] and imported["lium_name"] == f"carol.lium-stacks-{imported['stack_tag']}"
    )

    tf.env["TF_VAR_key"] = public_line(second)
    tf.apply()
    (rotated,) = instances(tf, "lium_ssh_key")
    with account.api() as api:
        (row,) = api.get("/ssh-keys").json()
    assert rotated["id"] == made["id"] and row["public_key"] == public_line(second)
    tf.destroy()
    assert_nothing_left(account)


def test_a_name_used_twice_and_bad_keys_are_refused_at_plan(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    line = public_line(account.key_file)
    twice = "".join(
        f'resource "lium_ssh_key" "{label}" {{\n  name       = "ops"\n  public_key = "{line}"\n}}\n'
        for label in ("a", "b")
    )
    tf = stack(twice)
    refused = tf.run("plan", "-input=false", "-no-color", check=False)
    said = flat(refused.stderr)
    assert refused.returncode == 1
    assert "Another lium_ssh_key of this stack is also named 'ops'" in said, said

    tf.write(
        PROVIDER_BLOCK + 'resource "lium_ssh_key" "a" {\n  name = "ops"\n  public_key = "not a key"\n}\n'
    )
    refused = tf.run("plan", "-input=false", "-no-color", check=False)
    assert refused.returncode == 1 and "public_key" in flat(refused.stderr), refused.stderr

    tf.write(PROVIDER_BLOCK + sleeping_template("bad") + pod_block("bad", 'authorized_keys = ["not a key"]'))
    refused = tf.run("plan", "-input=false", "-no-color", check=False)
    assert refused.returncode == 1 and "authorized_keys" in flat(refused.stderr), refused.stderr
    assert_nothing_left(account)
