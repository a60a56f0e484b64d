"""A new ``template_id`` keeps the pod and its node: Lium switches its container in place.

Through real terraform and the emulator's ``PUT /pods/{id}/switch-template``: the plan updates the pod
in place and replaces its runner (the new container has a new host key); the apply keeps the pod's id,
executor and Lium name, pins the new host key and starts the runner on the new container. A switch Lium
refuses fails the apply naming the pod, and the next plan switches again in place: never a re-rent.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.lium import Account, assert_nothing_left, instances, sleeping_template, ssh_run
from tests.support.terraform import Terraform, flat

pytestmark = pytest.mark.terraform

STACK = (
    sleeping_template("switch-from")
    + sleeping_template("switch-to", extra='environment = { CONTAINER = "second" }', label="u")
    + """
resource "lium_pod" "p" {
  name        = "switched"
  template_id = %s
}
resource "lium_runner" "r" {
  pod_id       = lium_pod.p.id
  ssh_host_key = lium_pod.p.ssh_host_key
}
"""
)
SWITCH = {"method": "PUT", "path": "/pods/*/switch-template"}


def planned_actions(tf: Terraform) -> dict[str, list[str]]:
    tf.run("plan", "-input=false", "-no-color", "-out=plan.bin")
    plan = json.loads(tf.run("show", "-json", "plan.bin").stdout)
    return {c["address"]: c["change"]["actions"] for c in plan["resource_changes"]}


def the_pod(tf: Terraform) -> dict[str, Any]:
    (pod,) = instances(tf, "lium_pod")
    return pod


def test_a_new_template_switches_the_pod_in_place_and_replaces_its_runner(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    tf = stack(STACK % "lium_template.t.id")
    tf.apply()
    before = the_pod(tf)
    tf.write(
        tf.workdir.joinpath("main.tf").read_text().replace("= lium_template.t.id", "= lium_template.u.id")
    )
    actions = planned_actions(tf)
    assert actions["lium_pod.p"] == ["update"], actions
    assert actions["lium_runner.r"] == ["delete", "create"], "the runner is pinned to the old host key"
    tf.run("apply", "-input=false", "-no-color", "plan.bin")
    after = the_pod(tf)
    assert (after["id"], after["executor_id"], after["lium_name"]) == (
        before["id"],
        before["executor_id"],
        before["lium_name"],
    ), "the node was given up"
    assert after["ssh_host_key"] != before["ssh_host_key"] and after["status"] == "RUNNING"
    assert after["known_hosts"].endswith(after["ssh_host_key"])
    assert ssh_run(
        account, after, "echo $CONTAINER; tr '\\0' ' ' < /proc/1/environ | grep -o CONTAINER=second"
    )
    (runner,) = instances(tf, "lium_runner")
    assert runner["healthy"] is True and runner["ssh_host_key"] == after["ssh_host_key"]
    assert len([p for p in account.live()["pods"] if p["status"] != "DELETED"]) == 1, "a second pod rented"
    assert tf.plan_exitcode()[0] == 0
    tf.destroy()
    assert_nothing_left(account)


def test_a_switch_lium_refuses_is_retried_in_place_never_re_rented(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    tf = stack(STACK % "lium_template.t.id")
    tf.apply()
    before = the_pod(tf)
    tf.write(
        tf.workdir.joinpath("main.tf").read_text().replace("= lium_template.t.id", "= lium_template.u.id")
    )
    refusal = {**SWITCH, "kind": "status", "status": 409, "code": "pod_state_conflict", "first": 1}
    with account.faults({"rules": [refusal]}):
        failed = tf.apply(check=False)
    assert failed.returncode == 1
    said = flat(failed.stdout + failed.stderr)
    assert f"Lium refused to switch pod {before['id']} to template" in said, said
    assert "nothing was re-rented" in said
    assert planned_actions(tf)["lium_pod.p"] == ["update"], "the next plan re-rents the node"
    tf.apply()
    after = the_pod(tf)
    assert after["id"] == before["id"] and after["template_id"] != before["template_id"]
    tf.destroy()
    assert_nothing_left(account)


def to_template(tf: Terraform, address: str) -> None:
    text = tf.workdir.joinpath("main.tf").read_text()
    tf.write(
        text.replace("= lium_template.t.id", f"= {address}").replace("= lium_template.u.id", f"= {address}")
    )


def test_a_template_that_does_not_exist_fails_the_plan_before_the_runner_is_replaced(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    tf = stack(STACK % "lium_template.t.id")
    tf.apply()
    (runner,) = instances(tf, "lium_runner")
    to_template(tf, '"0b6f6f7e-1d2c-4b8a-9a53-5c2f0d7e8a42"')
    refused = tf.run("plan", "-input=false", "-no-color", check=False)
    assert refused.returncode == 1, refused.stdout
    assert "The pod's template does not exist" in flat(refused.stderr), refused.stderr
    assert instances(tf, "lium_runner") == [runner]
    to_template(tf, "lium_template.t.id")
    tf.destroy()
    assert_nothing_left(account)


def test_a_switch_made_behind_the_states_back_is_read_and_its_new_host_key_pinned(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    tf = stack(STACK % "lium_template.t.id")
    tf.apply()
    before = the_pod(tf)
    (other,) = [i for r in tf.resources() if r["name"] == "u" for i in r["instances"]]
    with account.api() as api:  # as a switch killed half-way leaves it: Lium runs u, the state says t
        answer = api.put(
            f"/pods/{before['id']}/switch-template", json={"template_id": other["attributes"]["id"]}
        )
        assert answer.status_code == 200, answer.text
    actions = planned_actions(tf)
    assert actions["lium_pod.p"] == ["update"], "the state's template is switched back to, in place"
    assert actions["lium_runner.r"] == ["delete", "create"], "its runner follows the new container"
    tf.run("apply", "-input=false", "-no-color", "plan.bin")
    after = the_pod(tf)
    assert after["id"] == before["id"] and after["template_id"] == before["template_id"]
    assert tf.plan_exitcode()[0] == 0
    tf.destroy()
    assert_nothing_left(account)


def test_a_switched_container_that_dies_is_re_rented_and_a_port_it_never_served_is_waited_for_again(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    dying = (
        sleeping_template("switch-from")
        + """
resource "lium_template" "dies" {
  name             = "dies"
  image            = "python:3.11-slim"
  entrypoint       = "/bin/sh"
  startup_commands = "-c 'echo dying-now; exit 3'"
}
resource "lium_template" "quiet" {
  name             = "quiet"
  image            = "python:3.11-slim"
  entrypoint       = "/bin/sh"
  startup_commands = "-c 'exec sleep infinity'"
}
resource "lium_pod" "p" {
  name           = "switched"
  template_id    = %s
  %s
  timeouts {
    update = "20s"
  }
}
"""
    )
    tf = stack(dying % ("lium_template.t.id", ""))
    tf.apply()
    first = the_pod(tf)
    tf.write(
        tf.workdir.joinpath("main.tf")
        .read_text()
        .replace("= lium_template.t.id", "= lium_template.quiet.id")
        .replace("  \n  timeouts", "  wait_for_ports = [8000]\n  timeouts")
    )
    failed = tf.apply(check=False)
    assert failed.returncode == 1 and "Port 8000" in flat(failed.stdout + failed.stderr)
    code, plan = tf.plan_exitcode()
    assert code == 2 and "wait_for_ports" in plan, "the port it never served is waited for again"
    tf.write(
        tf.workdir.joinpath("main.tf")
        .read_text()
        .replace("= lium_template.quiet.id", "= lium_template.dies.id")
        .replace("wait_for_ports = [8000]", "")
    )
    died = tf.apply(check=False)
    said = flat(died.stdout + died.stderr)
    assert died.returncode == 1 and "the next apply replaces it" in said, said
    actions = planned_actions(tf)
    assert actions["lium_pod.p"] == ["delete", "create"], "a dead container cannot be switched: re-rented"
    assert the_pod(tf)["id"] == first["id"]
    tf.write(
        tf.workdir.joinpath("main.tf").read_text().replace("= lium_template.dies.id", "= lium_template.t.id")
    )
    tf.destroy()
    assert_nothing_left(account)
