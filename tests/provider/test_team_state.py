"""Team state: concurrent ``terraform apply`` runs sharing one ``pg`` backend on a real PostgreSQL.

The stack is the GitOps example's own ``examples/gitops/infra``, applied against the emulator. To make
"one run holds the lock" a fact rather than a race, the emulator keeps the first run's pod PENDING (a
``stuck_pending`` fault) until the test has watched the other runs collide with the lock; then the
fault is lifted and every run finishes. Also here: the example's HCL validates and its workflow parses.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.lium import Account
from tests.support.postgres import PostgresServer, running_postgres
from tests.support.terraform import REPO, Terraform, kill_group

pytestmark = pytest.mark.terraform

GITOPS = REPO / "examples" / "gitops"
STACK_DIR = GITOPS / "infra"
WORKFLOW = GITOPS / ".github" / "workflows" / "terraform.yml"
HOLD_RENTS = {
    "seed": 1,
    "rules": [{"name": "hold", "method": "POST", "path": "/executors/*/rent", "kind": "stuck_pending"}],
}
LOCK_ERROR = "Error acquiring the state lock"
DEADLINE_SECONDS = 120.0


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    with running_postgres() as server:
        yield server


class Background:
    """A terraform run in the background whose combined output is collected line by line."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: list[str] = []
        assert process.stdout is not None
        self._reader = threading.Thread(target=self._read, args=(process.stdout,), daemon=True)
        self._reader.start()

    def _read(self, stream: Any) -> None:
        for line in iter(stream.readline, ""):
            self.lines.append(line)

    @property
    def output(self) -> str:
        return "".join(self.lines)

    def finish(self, timeout: float = DEADLINE_SECONDS) -> tuple[int, str]:
        code = self.process.wait(timeout)
        self._reader.join(timeout)
        return code, self.output


def wait_until(condition: Callable[[], bool], what: str, timeout: float = DEADLINE_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.1)


def advisory_locks(postgres: PostgresServer) -> int:
    with postgres.connect() as connection:
        row = connection.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
        ).fetchone()
    assert row is not None
    count: int = row[0]
    return count


def stored_state(postgres: PostgresServer) -> dict[str, Any]:
    """The default workspace's state, read straight from the backend's table."""
    with postgres.connect() as connection:
        rows = connection.execute("SELECT name, data FROM terraform_remote_state.states").fetchall()
    assert [name for name, _ in rows] == ["default"], rows
    state: dict[str, Any] = json.loads(rows[0][1])
    return state


@pytest.fixture
def team(
    make_terraform: Callable[..., Terraform], account: Account, postgres: PostgresServer
) -> Callable[[], Terraform]:
    """A new teammate: a fresh working directory with the example stack, initialised on the shared backend."""
    main_tf = (STACK_DIR / "main.tf").read_text()

    def join() -> Terraform:
        tf = make_terraform(main_tf, **account.env, PG_CONN_STR=postgres.conn_str)
        tf.init()
        return tf

    return join


def collide(
    account: Account, postgres: PostgresServer, holder: Terraform, loser: Terraform, waiter: Terraform
) -> str:
    """``holder`` applies and holds the lock; ``loser`` fails on it at once; ``waiter`` waits it out.

    Returns the waiter's output. Every process started here is ended before returning, even on failure.
    """
    runs: list[Background] = []
    try:
        with account.faults(HOLD_RENTS):  # the end of the block lets the held rents go on
            held = Background(holder.start("apply", "-auto-approve", "-input=false", "-no-color"))
            runs.append(held)
            # A pod of the holder's apply exists: the holder is mid-apply, so it holds the state lock.
            pods_before = {p["id"] for p in account.live()["pods"] if p["status"] != "PENDING"}
            wait_until(
                lambda: any(
                    p["status"] == "PENDING" and p["id"] not in pods_before for p in account.live()["pods"]
                ),
                "the holder's pod is pending",
            )
            assert advisory_locks(postgres) >= 1, "the holder's lock is a PostgreSQL advisory lock"

            refused = loser.apply("-lock-timeout=0s", check=False)
            assert refused.returncode == 1, refused.stdout
            assert LOCK_ERROR in refused.stderr and "Operation: OperationTypeApply" in refused.stderr

            waiting = Background(
                waiter.start("apply", "-auto-approve", "-input=false", "-no-color", "-lock-timeout=2m")
            )
            runs.append(waiting)
            # Terraform prints this only when the lock is not granted at once (an uncontended run
            # does not).
            wait_until(lambda: "Acquiring state lock" in waiting.output, "the waiter waits for the lock")
            assert waiting.process.poll() is None and held.process.poll() is None
            assert "Refreshing state" not in waiting.output, (
                "the waiter must not read the state before the lock"
            )

        code, held_output = held.finish()
        assert code == 0, held_output
        code, waited_output = waiting.finish()
        assert code == 0, waited_output
        return waited_output
    finally:
        for run in runs:
            if run.process.poll() is None:
                kill_group(run.process)


def test_concurrent_applies_share_one_locked_state(
    team: Callable[[], Terraform], account: Account, postgres: PostgresServer
) -> None:
    alice, bob, carol = team(), team(), team()

    # A fresh workspace: the lock taken is the backend's workspace-creation lock.
    waited = collide(account, postgres, holder=alice, loser=bob, waiter=carol)
    assert "Apply complete! Resources: 0 added, 0 changed, 0 destroyed." in waited
    (pod,) = account.live()["pods"]
    assert pod["pod_name"] == "trainer-0" and pod["status"] == "RUNNING"
    assert [t["name"] for t in account.live()["templates"]] == ["trainer"]

    # An existing workspace, everyone scaling to two trainers: the lock is now the state row's.
    for tf in (alice, bob, carol):
        tf.env["TF_VAR_trainers"] = "2"
    waited = collide(account, postgres, holder=carol, loser=alice, waiter=bob)
    assert "Apply complete! Resources: 0 added, 0 changed, 0 destroyed." in waited
    pods = account.live()["pods"]
    assert sorted(p["pod_name"] for p in pods) == ["trainer-0", "trainer-1"]
    assert pod["id"] in {p["id"] for p in pods}, "the first trainer is kept"

    # A third working directory sees one intact state: each resource once, nothing left to do.
    dave = team()
    dave.env["TF_VAR_trainers"] = "2"
    listed = dave.run("state", "list").stdout.split()
    assert listed == ["lium_pod.trainer[0]", "lium_pod.trainer[1]", "lium_template.trainer"]
    code, plan_output = dave.plan_exitcode()
    assert code == 0, plan_output
    state = stored_state(postgres)
    state_ids = {
        i["attributes"]["id"] for r in state["resources"] if r["type"] == "lium_pod" for i in r["instances"]
    }
    assert state_ids == {p["id"] for p in pods}
    assert state["serial"] >= 2 and state["lineage"]

    dave.destroy("-lock-timeout=1m")
    assert account.live() == {"pods": [], "templates": [], "docker_credentials": [], "volumes": []}
    assert dave.run("state", "list").stdout.split() == []
    assert stored_state(postgres)["resources"] == []
    assert advisory_locks(postgres) == 0, "every lock is released"


def test_example_stack_validates(make_terraform: Callable[..., Terraform]) -> None:
    fmt = subprocess.run(
        ["terraform", "fmt", "-check", "-diff", str(STACK_DIR)], capture_output=True, text=True
    )
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr
    tf = make_terraform((STACK_DIR / "main.tf").read_text())
    tf.run("init", "-backend=false", "-input=false", "-no-color")
    result = json.loads(tf.run("validate", "-json", "-no-color").stdout)
    assert result["valid"] is True and result["error_count"] == 0, result
    assert not (STACK_DIR / ".terraform").exists(), "validation must not write into the example"


def parse_workflow(make_terraform: Callable[..., Terraform]) -> dict[str, Any]:
    """The workflow file parsed by Terraform's own YAML decoder (``yamldecode``), as JSON."""
    copy = WORKFLOW.read_text()
    tf = make_terraform('output "workflow" {\n  value = yamldecode(file("${path.module}/workflow.yml"))\n}\n')
    tf.write(copy, name="workflow.yml")
    tf.init()
    tf.apply()
    workflow: dict[str, Any] = json.loads(tf.run("output", "-json", "workflow").stdout)
    return workflow


def test_example_workflow_plans_comments_and_applies(
    make_terraform: Callable[..., Terraform], tmp_path: Path
) -> None:
    workflow = parse_workflow(make_terraform)
    assert workflow["on"]["pull_request"]["branches"] == ["main"]
    assert workflow["on"]["push"]["branches"] == ["main"]
    assert workflow["defaults"]["run"]["working-directory"] == STACK_DIR.name

    plan, apply = workflow["jobs"]["plan"], workflow["jobs"]["apply"]
    assert "pull_request" in plan["if"] and "refs/heads/main" in apply["if"]
    assert plan["permissions"]["pull-requests"] == "write"
    assert apply["concurrency"]["cancel-in-progress"] is False
    for job in (plan, apply):
        assert job["env"] == {
            "LIUM_API_KEY": "${{ secrets.LIUM_API_KEY }}",
            "PG_CONN_STR": "${{ secrets.PG_CONN_STR }}",
        }
    plan_runs = "\n".join(step.get("run", "") for step in plan["steps"])
    apply_runs = "\n".join(step.get("run", "") for step in apply["steps"])
    assert (
        "terraform plan" in plan_runs and "-out=plan.bin" in plan_runs and "terraform apply" not in plan_runs
    )
    assert "lium-tf plan-summary plan.json" in plan_runs and "LIUM_SSH_PRIVATE_KEY" not in json.dumps(plan)
    assert re.search(r"terraform apply .*-lock-timeout=\S+ plan\.bin", apply_runs)
    assert "LIUM_SSH_PRIVATE_KEY_FILE" in apply_runs

    (comment,) = [s for s in plan["steps"] if s.get("uses", "").startswith("actions/github-script@")]
    assert comment["env"]["SUMMARY_FILE"] == f"{STACK_DIR.name}/summary.md"
    assert "summary.md" in plan_runs and "createComment" in comment["with"]["script"]

    steps = [s for job in workflow["jobs"].values() for s in job["steps"]]
    for step in steps:
        # Expressions are substituted into scripts before they run: secrets and PR data go through env.
        assert "${{" not in step.get("run", "") + step.get("with", {}).get("script", ""), step
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    for index, step in enumerate(s for s in steps if "run" in s):
        (scripts / f"{index}.sh").write_text(step["run"])
        syntax = subprocess.run(["bash", "-n", str(scripts / f"{index}.sh")], capture_output=True, text=True)
        assert syntax.returncode == 0, (step["run"], syntax.stderr)
    node = shutil.which("node")
    assert node is not None, "node (installed for cdktf) checks the github-script syntax"
    wrapped = scripts / "comment.js"
    wrapped.write_text("async function comment(github, context) {\n" + comment["with"]["script"] + "\n}\n")
    syntax = subprocess.run([node, "--check", str(wrapped)], capture_output=True, text=True)
    assert syntax.returncode == 0, syntax.stderr

    readme = (GITOPS / "README.md").read_text()
    secrets = set(re.findall(r"secrets\.([A-Z_]+)", WORKFLOW.read_text()))
    assert secrets == {"LIUM_API_KEY", "PG_CONN_STR", "LIUM_SSH_PRIVATE_KEY"}
    assert all(f"`{name}`" in readme for name in secrets), "every secret the workflow reads is documented"
