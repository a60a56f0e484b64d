"""A state never acts on another stack's objects, and a damaged id blocks nothing.

A named stack (``LIUM_STACK``) holding a state copied from another named stack holds objects whose
recorded stack tag is not its own: the plan refuses them, naming both stacks and the setting that takes
them over; a destroy leaves them running for their own stack and fails, naming each, until the state
lets go of them (``terraform state rm``) or takes them over (``adopt_stacks``, in place). An id that
names no Lium object (empty, or hand-edited) fails the plan with the attribute named and is forgotten
by a destroy.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable

import pytest

from lium_provider.domain.stack import stack_tag
from tests.support.lium import PROVIDER_BLOCK, Account, assert_nothing_left, pod_block, sleeping_template
from tests.support.terraform import Terraform, flat

pytestmark = pytest.mark.terraform

STACK = PROVIDER_BLOCK + sleeping_template("foreign") + pod_block("p0")


def live_ids(account: Account) -> tuple[list[str], list[str]]:
    live = account.live()
    running = [p["id"] for p in live["pods"] if p["status"] != "DELETING"]
    return running, [t["id"] for t in live["templates"]]


def state_ids(tf: Terraform) -> tuple[list[str], list[str]]:
    def ids(type_name: str) -> list[str]:
        return [
            i["attributes"]["id"] for r in tf.resources() if r["type"] == type_name for i in r["instances"]
        ]

    return ids("lium_pod"), ids("lium_template")


def applied_team_a(make_terraform: Callable[..., Terraform], account: Account) -> Terraform:
    """:data:`STACK` applied as stack ``team-a``."""
    tf = make_terraform(STACK, **account.env, LIUM_STACK="team-a")
    tf.init()
    tf.apply()
    return tf


def copied_stack(
    make_terraform: Callable[..., Terraform], account: Account, source: Terraform, **env: str
) -> Terraform:
    """Another stack's directory holding ``source``'s state file, as a mistaken copy would."""
    tf = make_terraform(STACK, **account.env, **env)
    tf.init()
    shutil.copy(source.workdir / "terraform.tfstate", tf.workdir / "terraform.tfstate")
    return tf


def let_go(tf: Terraform) -> None:
    """The copy lets go of everything it holds, as the destroy's error says: ``terraform state rm``."""
    addresses = tf.run("state", "list").stdout.split()
    tf.run("state", "rm", *addresses)


def test_a_copied_state_is_refused_at_plan_and_its_destroy_fails_leaving_the_other_stacks_pod(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    team_a = applied_team_a(make_terraform, account)
    owned = state_ids(team_a)
    copy = copied_stack(make_terraform, account, team_a, LIUM_STACK="team-b")
    plan = copy.run("plan", "-input=false", "-no-color", check=False)
    assert plan.returncode == 1, plan.stdout
    message = flat(plan.stderr)
    tag_a, tag_b = stack_tag("stack:team-a"), stack_tag("stack:team-b")
    assert "belongs to another stack" in message, message
    assert f"records it as stack {tag_a}'s, and this stack is named 'team-b' (tag {tag_b};" in message, (
        message
    )
    assert f'adopt_stacks = ["{tag_a}"]' in message and f"LIUM_ADOPT_STACKS={tag_a}" in message, message
    destroyed = copy.destroy(check=False)
    message = flat(destroyed.stdout + destroyed.stderr)
    assert destroyed.returncode == 1, "a destroy that left a billed pod reported success"
    (pod_id,), _ = owned
    assert f"lium_pod {pod_id} belongs to another stack" in message and "It was not deleted" in message
    assert "terraform state rm" in message, message
    assert live_ids(account) == owned and state_ids(copy) == owned, (
        "the copy's destroy touched team-a's objects"
    )
    let_go(copy)
    assert copy.destroy().returncode == 0 and copy.resources() == []
    assert team_a.plan_exitcode()[0] == 0
    team_a.destroy()
    assert_nothing_left(account)


def test_a_destroy_in_a_pid_namespace_of_its_own_still_leaves_the_other_stacks_pod_alone(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    """A CI job in a PID namespace of its own (a container) that shares ``/tmp``, and so the warm
    provider, with the host: the provider still reads that it serves a destroy, which must complete."""
    team_a = applied_team_a(make_terraform, account)
    owned = state_ids(team_a)
    copy = copied_stack(make_terraform, account, team_a, LIUM_STACK="team-b")
    copy.run("validate", "-no-color")  # the provider's zygote is warm outside the namespace
    destroyed = subprocess.run(
        [
            *("unshare", "--pid", "--fork", "--kill-child", "--mount-proc"),
            *("terraform", "destroy", "-auto-approve", "-no-color"),
        ],
        cwd=copy.workdir,
        env={**os.environ, **copy.env},
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )
    # It fails at the pod's delete (the plan's refusal is skipped: a destroy is never blocked there).
    assert destroyed.returncode == 1, destroyed.stdout + destroyed.stderr
    assert "It was not deleted" in flat(destroyed.stdout + destroyed.stderr)
    assert live_ids(account) == owned
    team_a.destroy()
    assert_nothing_left(account)


def test_a_runner_on_another_stacks_pod_is_refused_at_plan(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    team_a = applied_team_a(make_terraform, account)
    (pod,) = [r["instances"][0]["attributes"] for r in team_a.resources() if r["type"] == "lium_pod"]
    runner = f"""
resource "lium_runner" "r" {{
  pod_id       = "{pod["id"]}"
  ssh_host_key = "{pod["ssh_host_key"]}"
}}
"""
    team_b = make_terraform(PROVIDER_BLOCK + runner, **account.env, LIUM_STACK="team-b")
    team_b.init()
    refused = team_b.run("plan", "-input=false", "-no-color", check=False)
    assert refused.returncode == 1, refused.stdout
    message = flat(refused.stderr)
    tag_a = stack_tag("stack:team-a")
    assert f"Pod {pod['id']} belongs to another stack" in message, message
    assert f'adopt_stacks = ["{tag_a}"]' in message, message
    # The refusal blocks no destroy of the rest of team-b's stack (Terraform plans before it destroys).
    assert team_b.destroy().returncode == 0
    team_a.destroy()
    assert_nothing_left(account)


def test_adopt_stacks_takes_another_stacks_objects_over_in_place(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    old = make_terraform(STACK, **account.env, LIUM_STACK="before-the-move")
    old.init()
    old.apply()
    owned = state_ids(old)
    moved = copied_stack(
        make_terraform,
        account,
        old,
        LIUM_STACK="after-the-move",
        LIUM_ADOPT_STACKS=stack_tag("stack:before-the-move"),
    )
    code, plan = moved.plan_exitcode()
    assert code == 2 and "2 to change, 0 to destroy" in plan, plan
    moved.apply()
    assert state_ids(moved) == owned and live_ids(account) == owned, "the take-over replaced something"
    moved.env.pop("LIUM_ADOPT_STACKS")
    assert moved.plan_exitcode()[0] == 0, "the taken-over objects are not this stack's"
    moved.destroy()
    assert_nothing_left(account)


@pytest.mark.parametrize("damaged", ["", "not-a-lium-id"])
def test_a_damaged_pod_id_fails_the_plan_naming_it_and_is_forgotten_by_destroy(
    make_terraform: Callable[..., Terraform], account: Account, damaged: str
) -> None:
    tf = make_terraform(STACK, **account.env)
    tf.init()
    tf.apply()
    state = tf.state_file()
    (pod,) = [r for r in state["resources"] if r["type"] == "lium_pod"]
    pod["instances"][0]["attributes"]["id"] = damaged
    (tf.workdir / "terraform.tfstate").write_text(json.dumps(state))
    plan = tf.run("plan", "-input=false", "-no-color", check=False)
    assert plan.returncode == 1, plan.stdout
    message = flat(plan.stderr)
    assert "lium_pod has no usable id in the state" in message and "terraform state rm" in message, message
    assert "with lium_pod.p, on main.tf line" in message and "internal" not in message.lower(), message
    destroyed = tf.destroy()
    assert "Forgot a lium_pod without a usable id" in flat(destroyed.stdout + destroyed.stderr)
    # The template's delete still settles the stack's pod that ran it, now recorded nowhere.
    assert tf.resources() == []
    assert_nothing_left(account)


RUNNER = """
resource "lium_runner" "r" {
  pod_id       = lium_pod.p.id
  ssh_host_key = lium_pod.p.ssh_host_key
}
"""
EVERYTHING = (
    PROVIDER_BLOCK
    + 'variable "password" {\n  type      = string\n  sensitive = true\n  ephemeral = true\n}\n'
    + 'resource "lium_docker_credential" "c" {\n  username            = "bot"\n'
    + "  password_wo         = var.password\n  password_wo_version = 1\n}\n"
    + 'resource "lium_volume" "v" {\n  name = "foreign-data"\n}\n'
    + sleeping_template("foreign", extra="docker_credential_id = lium_docker_credential.c.id")
    + pod_block("p0", extra="volume_id = lium_volume.v.id")
    + RUNNER
)


def holdings(account: Account) -> dict[str, list[tuple[str, str]]]:
    """What the account holds, by kind: ids with the status of each (pods) or ``""``."""
    return {
        kind: sorted((o["id"], o.get("status", "")) for o in objects)
        for kind, objects in account.live().items()
    }


def without_stack_tags(tf: Terraform) -> None:
    """The state as a provider from before the stack tag wrote it: no resource records its stack."""
    state = tf.state_file()
    for resource in state["resources"]:
        for instance in resource["instances"]:
            instance["attributes"].pop("stack_tag", None)
    (tf.workdir / "terraform.tfstate").write_text(json.dumps(state))


@pytest.mark.parametrize("refresh", ["-refresh=true", "-refresh=false"])
def test_a_copied_state_that_records_no_stack_still_leaves_every_object_of_the_other_stack_alone(
    make_terraform: Callable[..., Terraform], account: Account, refresh: str
) -> None:
    env = {**account.env, "TF_VAR_password": "registry-secret"}
    owner = make_terraform(EVERYTHING, **env, LIUM_STACK="owner")
    owner.init()
    owner.apply()
    kept = holdings(account)
    copy = make_terraform(EVERYTHING, **env, LIUM_STACK="copier")
    copy.init()
    shutil.copy(owner.workdir / "terraform.tfstate", copy.workdir / "terraform.tfstate")
    without_stack_tags(copy)
    plan = copy.run("plan", "-input=false", "-no-color", check=False)
    assert plan.returncode == 1 and "belongs to another stack" in flat(plan.stderr), plan.stdout
    destroyed = copy.destroy(refresh, check=False)
    assert destroyed.returncode == 1 and "It was not deleted" in flat(destroyed.stdout + destroyed.stderr)
    assert holdings(account) == kept, "the copy's destroy touched the owner's objects"
    assert owner.plan_exitcode()[0] == 0, "the owner's runner or pod changed"
    owner.destroy()
    assert_nothing_left(account)


def test_a_damaged_runner_pod_id_fails_the_plan_and_blocks_no_destroy(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    tf = make_terraform(STACK + RUNNER.replace("lium_pod.p.", "lium_pod.p."), **account.env)
    tf.init()
    tf.apply()
    state = tf.state_file()
    (runner,) = [r for r in state["resources"] if r["type"] == "lium_runner"]
    runner["instances"][0]["attributes"]["pod_id"] = ""
    (tf.workdir / "terraform.tfstate").write_text(json.dumps(state))
    plan = tf.run("plan", "-input=false", "-no-color", check=False)
    assert plan.returncode == 1, plan.stdout
    message = flat(plan.stderr)
    assert "lium_runner has no usable pod_id in the state" in message and "internal" not in message.lower()
    destroyed = tf.destroy("-refresh=false")
    assert "Forgot a lium_runner without a usable pod_id" in flat(destroyed.stdout + destroyed.stderr)
    assert_nothing_left(account)


def test_a_pod_whose_id_was_lost_is_deleted_by_its_lium_name(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    templates = make_terraform(PROVIDER_BLOCK + sleeping_template("foreign-lost"), **account.env)
    templates.init()
    templates.apply()
    (template_id,) = state_ids(templates)[1]
    pod_only = PROVIDER_BLOCK + pod_block("lost").replace("lium_template.t.id", f'"{template_id}"')
    tf = make_terraform(pod_only, **account.env)
    tf.init()
    tf.apply()
    state = tf.state_file()
    (pod,) = [r for r in state["resources"] if r["type"] == "lium_pod"]
    pod["instances"][0]["attributes"]["id"] = pod["instances"][0]["attributes"]["id"].upper()
    (tf.workdir / "terraform.tfstate").write_text(json.dumps(state))
    plan = tf.run("plan", "-input=false", "-no-color", check=False)
    assert plan.returncode == 1 and "lium_pod has no usable id in the state" in flat(plan.stderr)
    destroyed = tf.destroy()
    assert "by its Lium name" in flat(destroyed.stdout + destroyed.stderr)
    assert live_ids(account)[0] == [], "the pod whose id was lost is still running"
    templates.destroy()
    assert_nothing_left(account)
