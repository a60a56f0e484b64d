"""Team state: concurrent ``terraform apply`` runs sharing one ``pg`` backend on a real PostgreSQL.

The stack is the GitOps example's own ``examples/gitops/infra``, applied against the emulator. To make
"one run holds the lock" a fact rather than a race, the emulator keeps the first run's pod PENDING (a
``stuck_pending`` fault) until the test has watched the other runs collide with the lock; then the
fault is lifted and every run finishes. Also here: the example's HCL validates (its workflow is checked
in test_gitops.py, which runs its steps).
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from lium_provider.domain.stack import parse_lium_pod_name
from tests.support.lium import NOTHING_LIVE, Account, name_in_state
from tests.support.postgres import PostgresServer, running_postgres
from tests.support.procs import wait_for
from tests.support.terraform import REPO, Terraform, kill_group

pytestmark = pytest.mark.terraform

GITOPS = REPO / "examples" / "gitops"
STACK_DIR = GITOPS / "infra"
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
        rows = connection.execute("SELECT name, data FROM lium_gitops_hcl.states").fetchall()
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
            wait_for(
                lambda: any(
                    p["status"] == "PENDING" and p["id"] not in pods_before for p in account.live()["pods"]
                ),
                "the holder's pod is pending",
                DEADLINE_SECONDS,
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
            wait_for(
                lambda: "Acquiring state lock" in waiting.output,
                "the waiter waits for the lock",
                DEADLINE_SECONDS,
            )
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
    assert name_in_state(pod["pod_name"]) == "trainer-0" and pod["status"] == "RUNNING"
    assert [t["name"] for t in account.live()["templates"]] == ["trainer"]

    # An existing workspace, everyone scaling to two trainers: the lock is now the state row's.
    for tf in (alice, bob, carol):
        tf.env["TF_VAR_trainers"] = "2"
    waited = collide(account, postgres, holder=carol, loser=alice, waiter=bob)
    assert "Apply complete! Resources: 0 added, 0 changed, 0 destroyed." in waited
    pods = account.live()["pods"]
    assert sorted(name_in_state(p["pod_name"]) for p in pods) == ["trainer-0", "trainer-1"]
    tags = {parsed[1] for p in pods if (parsed := parse_lium_pod_name(p["pod_name"])) is not None}
    assert len(tags) == 1, "three checkouts of one pg backend are one stack: one tag"
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
    assert account.live() == NOTHING_LIVE
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
