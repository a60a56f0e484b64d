"""Ownership: recovery touches only this stack's own pods.

Stacks are told apart by the stack tag in every pod name sent to Lium (``lium_provider.domain.stack``): two
directories, or two workspaces, with the same pod name never adopt or delete each other's pod; a
create whose provider is killed deletes its pod before the server exits; and a runner that died with
its whole process tree (nothing could clean up) is recovered by the next apply of the same stack from a
fresh machine: same backend, empty HOME and journal.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from lium_provider.domain.stack import stack_tag
from tests.support.lium import PROVIDER_BLOCK, Account, pod_block, sleeping_template
from tests.support.postgres import PostgresServer, running_postgres
from tests.support.procs import kill_provider, kill_provider_and_server, wait_for
from tests.support.terraform import Terraform, kill_group, reaped

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
    """The id of the stack's one pod in its current state (of the selected workspace, local or pg)."""
    resources = tf.show_json().get("values", {}).get("root_module", {}).get("resources", [])
    (pod,) = [r for r in resources if r["type"] == "lium_pod"]
    value: str = pod["values"]["id"]
    return value


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


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    with running_postgres() as server:
        yield server


def pg_stack(conn_str: str, schema: str) -> str:
    backend = f'  backend "pg" {{\n    conn_str    = "{conn_str}"\n    schema_name = "{schema}"\n  }}\n'
    return stack_with_template("own-runner").replace("terraform {\n", "terraform {\n" + backend, 1)


def fresh_runner(
    make_terraform: Callable[..., Terraform], account: Account, body: str, home: Path
) -> Terraform:
    """A new CI runner: its own checkout directory, HOME and (empty) rent journal; the cold provider
    start, so that its server is a child the test can kill with it (nothing is left to clean up)."""
    home.mkdir(parents=True)
    env = {**account.env, "HOME": str(home), "LIUM_STATE_DIR": str(home / "state"), "TFBRIDGE_ZYGOTE": "0"}
    tf = make_terraform(body, **env)
    tf.init()
    return tf


@pytest.mark.parametrize("killed", ["provider", "terraform-and-provider"])
def test_a_fresh_runner_adopts_the_pod_of_a_runner_killed_mid_create(
    make_terraform: Callable[..., Terraform],
    account: Account,
    postgres: PostgresServer,
    tmp_path: Path,
    killed: str,
) -> None:
    body = pg_stack(postgres.conn_str, f"own_{killed.replace('-', '_')}")
    first = fresh_runner(make_terraform, account, body, tmp_path / "runner-1")
    # The template first: a killed terraform may not have saved anything of the run it was killed in.
    first.apply("-target=lium_template.t")
    with account.faults(HOLD_RENTS), reaped(first.start("apply", "-auto-approve", "-no-color")) as process:
        wait_for(lambda: bool(live_pods(account)), "the pod is rented", WAIT_SECONDS)
        kill_provider_and_server(process.pid)  # the runner's machine died: no process can undo the rent
        if killed == "terraform-and-provider":
            kill_group(process)  # terraform with them
        output, _ = process.communicate(timeout=WAIT_SECONDS)
    assert process.returncode != 0, output
    (orphan,) = live_pods(account)
    second = fresh_runner(make_terraform, account, body, tmp_path / "runner-2")
    applied = second.apply()
    assert pod_id(second) == orphan["id"], (pods(account), applied.stdout, applied.stderr)
    assert [p["id"] for p in pods(account)] == [orphan["id"]], "exactly one pod was ever rented"
    assert second.plan_exitcode()[0] == 0
    second.destroy()
    wait_for(lambda: live_pods(account) == [], "no pod is left running", WAIT_SECONDS)
    assert account.live()["templates"] == []


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


def test_sweep_stack_lists_and_deletes_exactly_that_stacks_pods(
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
    assert listed["templates"] == [] and listed["volumes"] == [] and listed["docker_credentials"] == []
    by_tag = [*command[:-1], stack_tag("stack:team-a")]
    assert (
        json.loads(subprocess.run(by_tag, env=env, capture_output=True, text=True, check=True).stdout)
        == listed
    )
    subprocess.run([*command, "--delete"], env=env, capture_output=True, text=True, check=True)
    assert [p["id"] for p in live_pods(account)] == [pod_id(team_b)], "only team-a's pod was deleted"
    assert team_b.plan_exitcode()[0] == 0
    team_b.destroy()
    team_a.destroy()
    assert account.live() == {"pods": [], "templates": [], "docker_credentials": [], "volumes": []}
