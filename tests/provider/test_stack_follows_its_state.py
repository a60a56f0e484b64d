"""A stack that is not named is its state: everyday moves of the state keep it, and its destroy leaves
nothing; two states stay two stacks.

Moving or renaming the project directory (local state), or migrating the state to another backend
(``terraform init -migrate-state``), changes where the state lives, from which a new state's identity is
derived: the objects the state already holds stay its own (each records its stack tag, and Lium holds
the same), the next plan changes nothing, and a create after the move takes the tag the state's objects
record. Two directories with their own states and the same names never touch each other's objects.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from lium_provider.domain.stack import parse_lium_pod_name
from tests.support.lium import PROVIDER_BLOCK, Account, assert_nothing_left, instances, sleeping_template
from tests.support.postgres import PostgresServer, running_postgres
from tests.support.terraform import Terraform

pytestmark = pytest.mark.terraform

POD = """
resource "lium_pod" "%s" {
  name        = "%s"
  template_id = lium_template.t.id
}
"""
STACK = PROVIDER_BLOCK + sleeping_template("travelling") + POD % ("p", "trainer")


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    with running_postgres() as server:
        yield server


def tags(tf: Terraform) -> set[str]:
    """The stack tags the state's objects record, and those their pods' Lium names carry."""
    pods = instances(tf, "lium_pod")
    recorded = {i["stack_tag"] for t in ("lium_pod", "lium_template") for i in instances(tf, t)}
    named = {parsed[1] for p in pods if (parsed := parse_lium_pod_name(p["lium_name"]))}
    return recorded | named


def moved(tf: Terraform, to: Path) -> Terraform:
    """``tf``'s directory moved (``mv``) to ``to``, state and ``.terraform`` included."""
    shutil.move(tf.workdir, to)
    return Terraform(to, dict(tf.env))


def test_a_moved_directory_keeps_its_stack_and_its_destroy_leaves_nothing(
    make_terraform: Callable[..., Terraform], account: Account, tmp_path: Path
) -> None:
    tf = make_terraform(STACK, **account.env)
    tf.init()
    tf.apply()
    (tag,) = tags(tf)
    tf = moved(tf, tmp_path / "renamed-project")
    code, plan = tf.plan_exitcode()
    assert code == 0, f"the moved stack plans changes:\n{plan}"
    # A pod added after the move is the same stack's: it carries the tag the state's objects record.
    tf.write(STACK + POD % ("q", "evaluator"))
    tf.apply()
    assert tags(tf) == {tag}, "the stack's tag changed with its directory"
    tf.destroy()
    assert tf.resources() == []
    assert_nothing_left(account)


def test_a_state_migrated_to_postgres_keeps_its_stack_and_its_destroy_leaves_nothing(
    make_terraform: Callable[..., Terraform], account: Account, postgres: PostgresServer
) -> None:
    tf = make_terraform(STACK, **account.env)
    tf.init()
    tf.apply()
    owned = {p["id"] for p in account.live()["pods"]}
    backend = 'terraform {\n  backend "pg" {\n    schema_name = "migrated"\n  }\n}\n'
    tf.write(STACK + backend)
    tf.env["PG_CONN_STR"] = postgres.conn_str
    tf.run("init", "-migrate-state", "-force-copy", "-input=false", "-no-color")
    (tf.workdir / "terraform.tfstate").unlink()  # the local copy is gone: only PostgreSQL holds the state
    code, plan = tf.plan_exitcode()
    assert code == 0, f"the migrated stack plans changes:\n{plan}"
    assert {p["id"] for p in account.live()["pods"]} == owned
    tf.destroy()
    assert_nothing_left(account)


def test_two_directories_with_their_own_states_and_the_same_names_stay_two_stacks(
    make_terraform: Callable[..., Terraform], account: Account
) -> None:
    first, second = make_terraform(STACK, **account.env), make_terraform(STACK, **account.env)
    for tf in (first, second):
        tf.init()
        tf.apply()
    assert tags(first) != tags(second), "two states share a stack tag"
    kept = {p["id"] for p in instances(second, "lium_pod")}
    first.destroy()
    assert {p["id"] for p in account.live()["pods"] if p["status"] == "RUNNING"} == kept
    assert second.plan_exitcode()[0] == 0, "the first stack's destroy changed the second's"
    second.destroy()
    assert_nothing_left(account)
