"""A CI runner killed mid-create leaves nothing paid behind, whichever of its processes dies.

The stack is the quickstart's shape, a template and a pod created in the same apply, with state in
PostgreSQL (``backend "pg"``), which Terraform writes only at intervals and at the end: a killed run may
have saved nothing of what it made. The pod is RUNNING (billed) but not yet answering SSH when the kill
comes. Then a fresh runner (its own checkout directory, HOME and empty rent journal, the same backend)
applies and destroys the stack. Through all of it, exactly one template is ever made (the fresh runner
finds the killed run's by the stack tag in its description), no two pods of the instance are billed at
the same time, and after the destroy nothing is left in the account.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.chaos.audit import duplicate_rentals
from tests.support.lium import PROVIDER_BLOCK, Account, pod_block, sleeping_template, state_id
from tests.support.postgres import PostgresServer, running_postgres
from tests.support.procs import kill_provider, kill_provider_and_server, providers_in, wait_for
from tests.support.terraform import Terraform, kill_group, reaped

pytestmark = pytest.mark.terraform

# The first pod runs (and is billed) but answers SSH only well after the kill: the create is still
# waiting for it when its runner dies, and a fresh runner that adopts it waits out the rest.
LATE_SSH = {
    "seed": 5,
    "rules": [{"method": "POST", "path": "/executors/*/rent", "kind": "ssh_late", "seconds": 20, "first": 1}],
}
WAIT_SECONDS = 60.0


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    with running_postgres() as server:
        yield server


def pg_stack(conn_str: str, schema: str) -> str:
    backend = f'  backend "pg" {{\n    conn_str    = "{conn_str}"\n    schema_name = "{schema}"\n  }}\n'
    body = PROVIDER_BLOCK + sleeping_template("killed-runner") + pod_block("p0")
    return body.replace("terraform {\n", "terraform {\n" + backend, 1)


def fresh_runner(
    make_terraform: Callable[..., Terraform], account: Account, body: str, home: Path, zygote: bool
) -> Terraform:
    """A new CI runner: its own checkout directory, HOME and (empty) rent journal."""
    home.mkdir(parents=True)
    env = {**account.env, "HOME": str(home), "LIUM_STATE_DIR": str(home / "state")}
    tf = make_terraform(body, **env, TFBRIDGE_ZYGOTE="1" if zygote else "0")
    tf.init()
    return tf


def running(account: Account) -> list[dict[str, Any]]:
    return [p for p in account.report()["pods"] if p["status"] == "RUNNING"]


# What dies, and how the provider was started. "machine": the provider's server and launcher and
# terraform all at once, so no process is left to undo the rent and the fresh runner must adopt it.
KILLS = [
    ("terraform", True),
    ("terraform", False),
    ("provider", True),
    ("provider", False),
    ("machine", False),
]


@pytest.mark.parametrize(
    ("killed", "zygote"), KILLS, ids=[f"{k}-{'zygote' if z else 'cold'}" for k, z in KILLS]
)
def test_a_fresh_runner_after_a_killed_one_leaves_no_pod_or_template_and_never_bills_two_pods(
    make_terraform: Callable[..., Terraform],
    account: Account,
    postgres: PostgresServer,
    tmp_path: Path,
    killed: str,
    zygote: bool,
) -> None:
    body = pg_stack(postgres.conn_str, f"killed_{killed}_{'zygote' if zygote else 'cold'}")
    first = fresh_runner(make_terraform, account, body, tmp_path / "runner-1", zygote)
    with account.faults(LATE_SSH), reaped(first.start("apply", "-auto-approve", "-no-color")) as process:
        wait_for(lambda: bool(running(account)), "the pod runs", WAIT_SECONDS, process=process)
        if killed == "terraform":
            os.kill(process.pid, signal.SIGKILL)  # a CI timeout: the provider sees its peer go
        elif killed == "provider":
            kill_provider(process.pid)
        else:
            kill_provider_and_server(process.pid)
            kill_group(process)
        process.wait(timeout=WAIT_SECONDS)
    assert process.returncode != 0
    (template,) = account.live()["templates"]
    if killed != "machine":  # a surviving process undoes the rent before it exits
        wait_for(lambda: running(account) == [], "the killed run deletes its pod", WAIT_SECONDS)
    wait_for(lambda: providers_in(first.workdir) == [], "the killed run's provider exits", WAIT_SECONDS)
    # The parameter is how the killed run's provider started; the fresh runner starts its providers the
    # default way (warm, from the zygote) whichever it is: what it must do (adopt, never bill two pods)
    # does not depend on it, and a cold start repeats the provider's imports (~0.8 s of CPU) each time.
    second = fresh_runner(make_terraform, account, body, tmp_path / "runner-2", zygote=True)
    second.apply()
    assert state_id(second, "lium_template") == template["id"], "the fresh runner made a second template"
    if killed == "machine":
        (orphan,) = [p for p in account.report()["pods"] if p["status"] != "DELETED"]
        assert state_id(second, "lium_pod") == orphan["id"], "the fresh runner did not adopt the pod"
    assert second.plan_exitcode()[0] == 0
    second.destroy()
    wait_for(lambda: running(account) == [], "no pod is left running", WAIT_SECONDS)
    report = account.report()
    assert duplicate_rentals(report) == [], report["pods"]
    live = account.live()
    assert (live["templates"], live["docker_credentials"]) == ([], []), live
