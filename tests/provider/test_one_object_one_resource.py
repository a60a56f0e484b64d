"""One Lium object belongs to one resource of one stack, whatever the state or the input says.

A create never takes over what another resource of the stack records (``count`` scaled up with a fixed
``name``); a state whose id was edited to another stack's pod never deletes that pod, and its destroy
says so instead of reporting success; an id that is not a Lium id fails at import; ``lium-tf sweep``
refuses an empty prefix or stack before it sends anything.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable

import pytest

from tests.support.lium import PROVIDER_BLOCK, Account, assert_nothing_left, instances, sleeping_template
from tests.support.terraform import Terraform, flat

pytestmark = pytest.mark.terraform

TEMPLATE = sleeping_template("one-object")


def counted(count: int) -> str:
    return (
        PROVIDER_BLOCK
        + TEMPLATE
        + f"""
resource "lium_pod" "p" {{
  count       = {count}
  name        = "trainer"
  template_id = lium_template.t.id
}}
"""
    )


def running(account: Account) -> set[str]:
    return {p["id"] for p in account.live()["pods"] if p["status"] == "RUNNING"}


def test_count_raised_with_one_fixed_name_is_refused_at_plan_naming_the_lium_name(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    tf = make_terraform(counted(1), **account.env)
    tf.init()
    tf.apply()
    (pod,) = instances(tf, "lium_pod")
    tf.write(counted(2))
    refused = tf.run("plan", "-input=false", "-no-color", check=False)
    message = flat(refused.stderr)
    assert refused.returncode == 1, refused.stdout
    assert f"Two resources of this stack would share {pod['lium_name']}" in message, message
    assert "count.index" in message, message
    assert running(account) == {pod["id"]}, "the refused plan rented or deleted a pod"
    tf.write(counted(1))
    assert tf.plan_exitcode()[0] == 0
    tf.destroy()
    assert_nothing_left(account)


def keyed(key: str) -> str:
    return (
        PROVIDER_BLOCK
        + TEMPLATE
        + f"""
resource "lium_pod" "p" {{
  for_each    = toset(["{key}"])
  name        = "keyed"
  template_id = lium_template.t.id
}}
"""
    )


def test_a_renamed_for_each_key_with_one_fixed_name_is_refused_rather_than_taking_over_the_deleted_pod(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    tf = make_terraform(keyed("a"), **account.env)
    tf.init()
    tf.apply()
    (pod,) = instances(tf, "lium_pod")
    tf.write(keyed("b"))
    refused = tf.run("plan", "-input=false", "-no-color", check=False)
    message = flat(refused.stderr)
    assert refused.returncode == 1, refused.stdout
    assert pod["lium_name"] in message and "moved" in message, message
    tf.write(keyed("b") + 'moved {\n  from = lium_pod.p["a"]\n  to   = lium_pod.p["b"]\n}\n')
    code, plan = tf.plan_exitcode()
    assert code == 0 or "0 to add, 0 to change, 0 to destroy" in plan, plan
    tf.apply()
    assert running(account) == {pod["id"]}, "the moved pod was replaced"
    tf.destroy()
    assert_nothing_left(account)


def test_a_state_edited_to_another_stacks_pod_never_deletes_it_and_its_destroy_fails_naming_it(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    stack = (
        PROVIDER_BLOCK
        + TEMPLATE
        + 'resource "lium_pod" "p" {\n  name = "p"\n  template_id = lium_template.t.id\n}\n'
    )
    other, edited = make_terraform(stack, **account.env), make_terraform(stack, **account.env)
    for tf in (other, edited):
        tf.init()
        tf.apply()
    (theirs,) = instances(other, "lium_pod")
    state = edited.state_file()
    (pod,) = [r for r in state["resources"] if r["type"] == "lium_pod"]
    pod["instances"][0]["attributes"]["id"] = theirs["id"]  # state surgery gone wrong
    (edited.workdir / "terraform.tfstate").write_text(json.dumps(state))
    plan = edited.run("plan", "-input=false", "-no-color", check=False)
    assert plan.returncode == 1 and "belongs to another stack" in flat(plan.stderr), plan.stdout
    destroyed = edited.destroy(check=False)
    message = flat(destroyed.stdout + destroyed.stderr)
    assert destroyed.returncode == 1, "the destroy reported success while the pod it held still bills"
    assert f"lium_pod {theirs['id']} belongs to another stack" in message, message
    assert f"stack {theirs['stack_tag']}'s tag" in message and "It was not deleted" in message, message
    assert theirs["id"] in running(account), "another stack's pod was deleted"
    assert other.plan_exitcode()[0] == 0
    edited.run("state", "rm", "lium_pod.p")  # let go, as the error says; the stack's own pod is unrecorded
    edited.destroy()  # its template's delete ends the pod no state records any more
    assert running(account) == {theirs["id"]}
    other.destroy()
    assert_nothing_left(account)


MINIMAL = {
    "lium_cluster": "node_count = 2",
    "lium_pod": 'template_id = "3f2a5c1e-8b7d-4e6f-9a0b-1c2d3e4f5a6b"',
    "lium_template": 'image = "python:3.11-slim"',
}


@pytest.mark.parametrize("type_name", sorted(MINIMAL))
def test_an_id_that_is_not_a_lium_id_fails_at_import(
    make_terraform: Callable[..., Terraform], account: Account, type_name: str
) -> None:
    block = f'resource "{type_name}" "x" {{\n  name = "x"\n  {MINIMAL[type_name]}\n}}\n'
    tf = make_terraform(PROVIDER_BLOCK + block, **account.env)
    tf.init()
    imported = tf.run("import", "-input=false", "-no-color", f"{type_name}.x", "garbage", check=False)
    assert imported.returncode == 1, imported.stdout
    assert f"Cannot import {type_name} 'garbage'" in flat(imported.stderr), imported.stderr
    assert "Import successful" not in imported.stdout and tf.resources() == []


@pytest.mark.parametrize("flag", ["--name-prefix", "--stack"])
def test_sweep_refuses_an_empty_value_that_would_widen_the_delete(
    make_terraform: Callable[..., Terraform], account: Account, flag: str
) -> None:
    tf = make_terraform(PROVIDER_BLOCK + TEMPLATE, **account.env)
    tf.init()
    tf.apply()
    before = account.live()
    swept = subprocess.run(
        [sys.executable, "-m", "lium_provider.cli", "sweep", flag, "", "--delete"],
        env={**os.environ, **tf.env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert swept.returncode == 2 and f"argument {flag}: must not be empty" in swept.stderr, swept.stderr
    assert "Traceback" not in swept.stderr and swept.stdout == ""
    assert account.live() == before, "the refused sweep deleted something"
    tf.destroy()
    assert_nothing_left(account)


def test_a_member_of_another_stacks_cluster_imported_as_a_pod_is_refused_at_plan(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    cluster = make_terraform(
        PROVIDER_BLOCK + 'resource "lium_cluster" "c" {\n  name = "shared"\n  node_count = 2\n}\n',
        **account.env,
    )
    cluster.init()
    cluster.apply()
    (record,) = instances(cluster, "lium_cluster")
    member = record["nodes"][1]["pod_id"]
    importer = make_terraform(
        PROVIDER_BLOCK
        + f'import {{\n  to = lium_pod.x\n  id = "{member}"\n}}\n'
        + f'resource "lium_pod" "x" {{\n  name = "shared"\n  template_id = "{record["template_id"]}"\n}}\n',
        **account.env,
    )
    importer.init()
    refused = importer.run("plan", "-input=false", "-no-color", check=False)
    message = flat(refused.stderr)
    assert refused.returncode == 1, refused.stdout
    assert f"Pod {member} is a member of cluster {record['id']}" in message, message
    importer.env["LIUM_ADOPT_STACKS"] = record["stack_tag"]  # even a take-over cannot split a cluster
    assert importer.run("plan", "-input=false", "-no-color", check=False).returncode == 1
    assert cluster.plan_exitcode()[0] == 0, "the refused import changed the cluster"
    cluster.destroy()
    assert_nothing_left(account)


CLUSTER = PROVIDER_BLOCK + 'resource "lium_cluster" "c" {\n  name       = "edited"\n  node_count = 2\n}\n'


@pytest.mark.parametrize("nodes", ["kept", "emptied"])
def test_a_cluster_id_edited_to_another_stacks_cluster_never_removes_it(
    make_terraform: Callable[..., Terraform], account: Account, nodes: str
) -> None:
    other, edited = make_terraform(CLUSTER, **account.env), make_terraform(CLUSTER, **account.env)
    for tf in (other, edited):
        tf.init()
        tf.apply()
    (theirs,) = instances(other, "lium_cluster")
    (mine,) = instances(edited, "lium_cluster")
    state = edited.state_file()
    (cluster,) = [r for r in state["resources"] if r["type"] == "lium_cluster"]
    cluster["instances"][0]["attributes"]["id"] = theirs["id"]  # only the id: its own members recorded
    if nodes == "emptied":
        cluster["instances"][0]["attributes"]["nodes"] = []
    (edited.workdir / "terraform.tfstate").write_text(json.dumps(state))
    plan = edited.run("plan", "-input=false", "-no-color", check=False)
    assert plan.returncode == 1 and "belongs to another stack" in flat(plan.stderr), plan.stdout
    destroyed = edited.destroy("-refresh=false", check=False)
    assert destroyed.returncode == 1, "the destroy reported success on another stack's cluster"
    assert {n["pod_id"] for n in theirs["nodes"]} <= running(account), "another stack's cluster was removed"
    assert other.plan_exitcode()[0] == 0
    edited.run("state", "rm", "lium_cluster.c")
    for node in mine["nodes"]:  # the edited stack's own cluster, which no state records any more
        with account.api() as api:
            assert api.delete(f"/pods/{node['pod_id']}").status_code in (200, 204)
    other.destroy()


def test_a_cluster_whose_id_was_damaged_is_removed_by_its_recorded_members_at_destroy(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    tf = make_terraform(CLUSTER, **account.env)
    tf.init()
    tf.apply()
    (cluster,) = instances(tf, "lium_cluster")
    state = tf.state_file()
    (recorded,) = [r for r in state["resources"] if r["type"] == "lium_cluster"]
    recorded["instances"][0]["attributes"]["id"] = cluster["id"].upper()  # no longer a Lium id
    (tf.workdir / "terraform.tfstate").write_text(json.dumps(state))
    destroyed = tf.destroy()
    assert "Removed this stack's cluster" in flat(destroyed.stdout + destroyed.stderr)
    assert not {n["pod_id"] for n in cluster["nodes"]} & running(account), "the cluster still bills"
    assert_nothing_left(account)
