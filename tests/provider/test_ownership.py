"""Ownership: recovery touches only this stack's own pods.

Stacks are told apart by the stack tag in every pod name sent to Lium (``lium_provider.domain.stack``): two
directories, or two workspaces, with the same pod name never adopt or delete each other's pod; a
create whose provider is killed deletes its pod before the server exits; and ``sweep --stack`` finds
exactly one stack's objects. (A runner killed with its whole process tree: ``test_killed_runner``.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from lium_provider.domain.stack import stack_tag
from tests.support.lium import NOTHING_LIVE, PROVIDER_BLOCK, Account, pod_block, sleeping_template, state_id
from tests.support.procs import kill_provider, wait_for
from tests.support.terraform import Terraform, reaped

pytestmark = pytest.mark.terraform

HOLD_RENTS = {
    "seed": 3,
    "rules": [{"method": "POST", "path": "/executors/*/rent", "kind": "stuck_pending", "first": 1}],
}
WAIT_SECONDS = 60.0


def stack_with_template(template_name: str) -> str:
    return PROVIDER_BLOCK + sleeping_template(template_name) + pod_block("p0")


def pods(account: Account) -> list[dict[str, Any]]:
    pods: list[dict[str, Any]] = account.report()["pods"]
    return pods


def live_pods(account: Account) -> list[dict[str, Any]]:
    return [p for p in pods(account) if p["status"] not in ("DELETING", "DELETED")]


def pod_id(tf: Terraform) -> str:
    return state_id(tf, "lium_pod")


def template_id(tf: Terraform) -> str:
    return state_id(tf, "lium_template")


def test_two_directories_with_the_same_pod_name_keep_their_own_pods(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    first = make_terraform(stack_with_template("own-a"), **account.env)
    second = make_terraform(stack_with_template("own-b"), **account.env)
    first.init()
    second.init()
    first.apply()
    second.apply()
    assert pod_id(first) != pod_id(second)
    assert {p["id"]: p["status"] for p in pods(account)} == {
        pod_id(first): "RUNNING",
        pod_id(second): "RUNNING",
    }, "neither stack touched the other's pod"
    assert first.plan_exitcode()[0] == 0 and second.plan_exitcode()[0] == 0
    kept = pod_id(second)
    first.destroy()
    assert [p["id"] for p in live_pods(account)] == [kept], "destroying one stack left the other's pod"
    assert second.plan_exitcode()[0] == 0
    second.destroy()
    assert live_pods(account) == []


def test_a_new_workspace_keeps_the_default_workspaces_pod(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    tf = make_terraform(stack_with_template("own-ws"), **account.env)
    tf.init()
    tf.apply()
    (default_pod,) = [p["id"] for p in live_pods(account)]
    tf.run("workspace", "new", "-no-color", "staging")
    tf.apply()
    assert {p["id"]: p["status"] for p in pods(account)} == {default_pod: "RUNNING", pod_id(tf): "RUNNING"}
    tf.destroy()
    assert [p["id"] for p in live_pods(account)] == [default_pod]
    tf.run("workspace", "select", "-no-color", "default")
    assert tf.plan_exitcode()[0] == 0, "the default workspace's stack is unchanged"
    tf.destroy()
    assert live_pods(account) == []


def test_a_killed_provider_deletes_the_pod_of_its_create_when_the_template_comes_from_a_variable(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    templates = make_terraform(PROVIDER_BLOCK + sleeping_template("own-var-template"), **account.env)
    templates.init()
    templates.apply()
    (template,) = [r for r in templates.resources() if r["type"] == "lium_template"]
    template_id = template["instances"][0]["attributes"]["id"]
    pod_only = (
        PROVIDER_BLOCK
        + 'variable "template_id" {\n  type = string\n}\n'
        + pod_block("p0").replace("lium_template.t.id", "var.template_id")
    )
    tf = make_terraform(pod_only, **account.env, TF_VAR_template_id=template_id)
    tf.init()
    with account.faults(HOLD_RENTS), reaped(tf.start("apply", "-auto-approve", "-no-color")) as process:
        wait_for(lambda: bool(live_pods(account)), "the pod is rented", WAIT_SECONDS)
        kill_provider(process.pid)
        output, _ = process.communicate(timeout=WAIT_SECONDS)
    assert process.returncode != 0, output
    # Terraform may still get the create's answer (the server outlives the launcher by its cleanup):
    # then it records the deleted pod as tainted, and the destroy below forgets it.
    tf.destroy()
    wait_for(lambda: live_pods(account) == [], "no pod is left running", WAIT_SECONDS)
    assert [p["status"] for p in pods(account)] in (["DELETING"], ["DELETED"])
    templates.destroy()


def test_two_pods_of_one_name_in_one_stack_are_refused_at_plan(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    twice = stack_with_template("own-twice") + pod_block("p0").replace('"p" {', '"q" {')
    tf = make_terraform(twice, **account.env)
    tf.init()
    result = tf.run("plan", "-input=false", "-no-color", check=False)
    assert result.returncode == 1, result.stdout
    assert "Another lium_pod of this stack is also named" in result.stderr, result.stderr
    assert "name" in result.stderr and pods(account) == []


def test_sweep_stack_lists_and_deletes_exactly_that_stacks_pods_and_templates(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    team_a = make_terraform(stack_with_template("own-sweep-a"), **account.env, LIUM_STACK="team-a")
    team_b = make_terraform(stack_with_template("own-sweep-b"), **account.env, LIUM_STACK="team-b")
    for tf in (team_a, team_b):
        tf.init()
        tf.apply()
    env = {**os.environ, **account.env}
    command = [sys.executable, "-m", "lium_provider.cli", "sweep", "--stack", "team-a"]
    listed = json.loads(subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout)
    assert [p["id"] for p in listed["pods"]] == [pod_id(team_a)]
    assert [t["id"] for t in listed["templates"]] == [template_id(team_a)]
    assert listed["volumes"] == [] and listed["docker_credentials"] == []
    by_tag = [*command[:-1], stack_tag("stack:team-a")]
    assert (
        json.loads(subprocess.run(by_tag, env=env, capture_output=True, text=True, check=True).stdout)
        == listed
    )
    subprocess.run([*command, "--delete"], env=env, capture_output=True, text=True, check=True)
    assert [p["id"] for p in live_pods(account)] == [pod_id(team_b)], "only team-a's pod was deleted"
    assert [t["id"] for t in account.live()["templates"]] == [template_id(team_b)]
    assert team_b.plan_exitcode()[0] == 0
    team_b.destroy()
    team_a.destroy()
    assert account.live() == NOTHING_LIVE
