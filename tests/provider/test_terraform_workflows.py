"""Terraform's own refactoring and testing workflows, through real terraform against the emulator.

``moved`` blocks rename a pod's address and move it into a module without touching the pod; a
``removed`` block with ``destroy = false`` lets go of a running pod, which the next stack imports and
owns under the ownership rules (refused until it adopts the first stack); ``terraform state rm`` then
``terraform import`` takes a pod back with no change; and ``terraform test`` runs the example module's
``.tftest.hcl`` (plan runs, then an apply run it destroys) as a stack of its own, so a test run never
acts on the pod that an apply of the same directory manages.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lium_provider.domain.stack import stack_tag
from tests.support.examples import copy_example
from tests.support.lium import PROVIDER_BLOCK, Account, assert_nothing_left, instances
from tests.support.terraform import REPO, Terraform, flat

pytestmark = pytest.mark.terraform

MODULE = REPO / "examples" / "module"
# The module's resources as a root stack writes them: what `moved` carries into the module unchanged.
ROOT_POD = """
resource "lium_template" "t" {
  name             = "refactor"
  image            = "python:3.11-slim"
  entrypoint       = "/bin/sh"
  startup_commands = "-c 'exec sleep infinity'"
}
resource "lium_pod" "p" {
  name        = "refactor-0"
  template_id = lium_template.t.id
}
"""


def planned(tf: Terraform, *args: str) -> dict[str, Any]:
    """The JSON of a saved plan of the current configuration."""
    tf.run("plan", "-input=false", "-no-color", "-out=tfplan", *args)
    return tf.show_json("tfplan")


def actions(plan: dict[str, Any]) -> dict[str, tuple[list[str], str | None]]:
    """Each resource's planned actions and the address it had before (for a move)."""
    return {
        c["address"]: (c["change"]["actions"], c.get("previous_address")) for c in plan["resource_changes"]
    }


def running_pods(account: Account) -> list[str]:
    return sorted(p["id"] for p in account.live()["pods"] if p["status"] != "DELETING")


def applied_root_pod(make_terraform: Callable[..., Terraform], account: Account, **env: str) -> Terraform:
    """A stack of :data:`ROOT_POD`, applied."""
    tf = make_terraform(PROVIDER_BLOCK + ROOT_POD, **account.env, **env)
    tf.init()
    tf.apply()
    return tf


def test_moved_blocks_rename_a_pod_and_move_it_into_a_module_without_touching_it(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    tf = applied_root_pod(make_terraform, account)
    (pod,) = instances(tf, "lium_pod")
    (template,) = instances(tf, "lium_template")

    renamed = ROOT_POD.replace('"lium_pod" "p"', '"lium_pod" "gpu"')
    tf.write(PROVIDER_BLOCK + renamed + "moved {\n  from = lium_pod.p\n  to   = lium_pod.gpu\n}\n")
    plan = actions(planned(tf))
    assert plan["lium_pod.gpu"] == (["no-op"], "lium_pod.p"), plan
    assert plan["lium_template.t"][0] == ["no-op"], plan
    tf.run("apply", "-input=false", "-no-color", "tfplan")

    module = tf.workdir / "gpu-module"
    copy_example(MODULE, module)
    into_module = f"""
module "gpu" {{
  source = "./{module.name}"
  name   = "refactor"
}}
moved {{
  from = lium_pod.gpu
  to   = module.gpu.lium_pod.this
}}
moved {{
  from = lium_template.t
  to   = module.gpu.lium_template.this
}}
"""
    tf.write(PROVIDER_BLOCK + into_module)
    tf.init()
    plan = actions(planned(tf))
    assert plan == {
        "module.gpu.lium_pod.this": (["no-op"], "lium_pod.gpu"),
        "module.gpu.lium_template.this": (["no-op"], "lium_template.t"),
    }, plan
    tf.run("apply", "-input=false", "-no-color", "tfplan")
    assert tf.plan_exitcode()[0] == 0
    (moved_pod,) = instances(tf, "lium_pod")
    assert (moved_pod["id"], instances(tf, "lium_template")[0]["id"]) == (pod["id"], template["id"])
    assert running_pods(account) == [pod["id"]], "a move rented or deleted a pod"
    tf.destroy()
    assert_nothing_left(account)


def test_a_removed_block_lets_go_of_a_running_pod_that_the_next_stack_imports_and_owns(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    team_a = applied_root_pod(make_terraform, account, LIUM_STACK="team-a")
    ids = {r["type"]: r["instances"][0]["attributes"]["id"] for r in team_a.resources()}
    let_go = "".join(
        f"removed {{\n  from = {address}\n  lifecycle {{\n    destroy = false\n  }}\n}}\n"
        for address in ("lium_pod.p", "lium_template.t")
    )
    team_a.write(PROVIDER_BLOCK + let_go)
    team_a.apply()
    assert team_a.resources() == []
    assert running_pods(account) == [ids["lium_pod"]], "destroy = false deleted the pod"

    imports = "".join(
        f'import {{\n  to = {address}\n  id = "{ids[address.split(".")[0]]}"\n}}\n'
        for address in ("lium_pod.p", "lium_template.t")
    )
    team_b = make_terraform(PROVIDER_BLOCK + ROOT_POD + imports, **account.env, LIUM_STACK="team-b")
    team_b.init()
    refused = team_b.run("plan", "-input=false", "-no-color", check=False)
    assert refused.returncode == 1, refused.stdout
    tag_a = stack_tag("stack:team-a")
    assert f'adopt_stacks = ["{tag_a}"]' in flat(refused.stderr), refused.stderr

    team_b.env["LIUM_ADOPT_STACKS"] = "team-a"
    plan = actions(planned(team_b))
    # Both are imported as team-b's with nothing to change in Lium: each keeps the tag it carries there
    # (a pod cannot be renamed; rewriting a template restarts its pods), remembered as adopted.
    assert {address: acts for address, (acts, _) in plan.items()} == {
        "lium_pod.p": ["no-op"],
        "lium_template.t": ["no-op"],
    }, plan
    team_b.run("apply", "-input=false", "-no-color", "tfplan")
    del team_b.env["LIUM_ADOPT_STACKS"]
    assert team_b.plan_exitcode()[0] == 0, "team-b does not own what it imported"
    records = {
        (i["stack_tag"], i["adopted_from"])
        for t in ("lium_pod", "lium_template")
        for i in instances(team_b, t)
    }
    assert records == {(stack_tag("stack:team-b"), tag_a)}, records
    assert running_pods(account) == [ids["lium_pod"]]
    team_b.destroy()
    assert_nothing_left(account)


def test_state_rm_then_import_takes_the_pod_back_with_no_change(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    tf = applied_root_pod(make_terraform, account)
    (pod,) = instances(tf, "lium_pod")
    tf.run("state", "rm", "-no-color", "lium_pod.p")
    assert instances(tf, "lium_pod") == []
    tf.run("import", "-input=false", "-no-color", "lium_pod.p", pod["id"])
    assert tf.plan_exitcode()[0] == 0
    assert running_pods(account) == [pod["id"]]
    tf.destroy()
    assert_nothing_left(account)


def test_terraform_test_runs_the_example_modules_tests_as_a_stack_of_its_own(
    make_terraform: Callable[..., Terraform], account: Account, tmp_path: Path
) -> None:
    module = tmp_path / "module"
    copy_example(MODULE, module)
    tf = Terraform(module, make_terraform("").env | account.env)
    tf.init()
    # The same directory also applies the module for real: the test run must leave that pod alone.
    tf.write('name = "tftest"\n', "terraform.tfvars")
    tf.apply()
    (applied,) = instances(tf, "lium_pod")
    result = tf.run("test", "-no-color", check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    summary = result.stdout
    assert "3 passed, 0 failed" in summary, summary
    for run in (
        "plan_names_the_template_and_the_pod",
        "a_name_lium_cannot_take_is_refused",
        "apply_rents_a_running_pod",
    ):
        assert f'run "{run}"... pass' in summary, summary
    assert running_pods(account) == [applied["id"]], "terraform test left a pod or took the applied one"
    assert tf.plan_exitcode()[0] == 0
    tf.destroy()
    assert_nothing_left(account)
