"""A team's job on a stack: ``lium-tf run`` through the stack's runners, and ``lium-tf logs``.

Through real terraform, the emulator's pods (real sshd) and its dstack-runner stand-in: examples/cluster
applied once for the module; ``lium-tf run`` uploads the caller's directory and runs a collective on both
nodes with their ranks, streams both nodes' output, returns the job's exit code, stops every node on
Ctrl-C and when one node fails, and refuses a busy runner. A runner environment value a smoke test, a job
or the container prints reaches no state, plan, summary, stream or ``lium-tf logs`` output.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from lium_emulator.launcher import RunningEmulator
from lium_provider.runner.task_api import ROUTES
from tests.support.dstack_runner import DSTACK_RUNNER_ROUTES
from tests.support.examples import copy_example
from tests.support.lium import PROVIDER_BLOCK, Account, assert_nothing_left, new_account, ssh_run
from tests.support.terraform import REPO, Terraform

pytestmark = pytest.mark.terraform

EXAMPLE = REPO / "examples" / "cluster"
COLLECTIVE = (EXAMPLE / "allreduce.py").read_text()


@dataclass(frozen=True)
class Applied:
    tf: Terraform
    account: Account

    def nodes(self) -> list[dict[str, object]]:
        (cluster,) = [
            i["attributes"]
            for r in self.tf.resources()
            if r["type"] == "lium_cluster"
            for i in r["instances"]
        ]
        nodes: list[dict[str, object]] = cluster["nodes"]
        return nodes

    def lium_tf(self, *args: str, cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "lium_provider.cli", *args],
            cwd=cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            check=False,
        )

    def start(self, *args: str, cwd: Path) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "lium_provider.cli", *args],
            cwd=cwd,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, **self.tf.env}


@pytest.fixture(scope="module")
def cluster(
    emulator: RunningEmulator, terraform_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Applied]:
    directory = tmp_path_factory.mktemp("jobs")
    account = new_account(emulator, directory)
    tf = Terraform(directory / "stack", {**terraform_env, **account.env})
    copy_example(EXAMPLE, tf.workdir)
    tf.init()
    try:
        tf.apply()
        yield Applied(tf, account)
    finally:
        tf.destroy()
        assert_nothing_left(account)


def job_processes(applied: Applied, pattern: str) -> list[str]:
    """The processes on any node whose command line has ``pattern`` (pgrep -f, this probe left out)."""
    found = []
    for node in applied.nodes():
        listed = ssh_run(applied.account, node, f"pgrep -af {pattern!r} | grep -v pgrep || true")
        found += [line for line in listed.splitlines() if line.strip()]
    return found


def test_a_collective_in_the_callers_directory_runs_on_both_nodes_with_their_ranks(
    cluster: Applied, tmp_path: Path
) -> None:
    (tmp_path / "collective.py").write_text(COLLECTIVE)
    (tmp_path / "data.bin").write_bytes(b"left out")
    (tmp_path / ".gitignore").write_text("data.bin\n")
    ran = cluster.lium_tf(
        "run",
        "--dir",
        str(cluster.tf.workdir),
        "--",
        "ls; echo rank=$RANK node_rank=$NODE_RANK world=$WORLD_SIZE master=$MASTER_ADDR:$MASTER_PORT;",
        "python3",
        "collective.py",
        cwd=tmp_path,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    master = cluster.nodes()[0]["overlay_ip"]
    for rank in (0, 1):
        said = [line for line in ran.stdout.splitlines() if line.startswith(f"[node {rank}] ")]
        assert f"[node {rank}] rank={rank} node_rank={rank} world=2 master={master}:29500" in said, ran.stdout
        assert any(f"all-reduce ok on rank {rank} of 2: tcp sum 5;" in line for line in said), ran.stdout
        assert f"[node {rank}] collective.py" in said and f"[node {rank}] data.bin" not in said, said
    # What the runners were sent is what dstack's server sends a runner, and nothing else.
    for node in cluster.nodes():
        served = ssh_run(cluster.account, node, "cat /tmp/runner/default.log")
        routes = {(m, path) for m, path in re.findall(r'"(GET|POST) (/api/[a-z_]+)', served)}
        assert routes <= DSTACK_RUNNER_ROUTES, routes
        assert {("POST", "/api/submit"), ("POST", "/api/upload_code"), ("POST", "/api/run")} <= routes, routes


def test_the_jobs_guides_run_from_the_stacks_own_directory_leaves_its_state_behind(cluster: Applied) -> None:
    """As docs/guides/jobs.md runs it: from the example's directory, no --dir, its own allreduce.py."""
    ran = cluster.lium_tf("run", "--", "ls -a -1; python3 allreduce.py", cwd=cluster.tf.workdir)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    listed = {line.split("] ", 1)[1] for line in ran.stdout.splitlines() if "] " in line}
    assert {"allreduce.py", "main.tf"} <= listed, listed
    assert "terraform.tfstate" not in listed and ".terraform" not in listed, listed
    for rank in (0, 1):
        assert any(f"all-reduce ok on rank {rank} of 2" in line for line in ran.stdout.splitlines())


def test_every_call_to_a_runner_is_one_dstacks_server_makes() -> None:
    assert ROUTES <= DSTACK_RUNNER_ROUTES, ROUTES - DSTACK_RUNNER_ROUTES


def test_a_failing_command_exits_with_its_code_and_stops_the_other_node(
    cluster: Applied, tmp_path: Path
) -> None:
    ran = cluster.lium_tf(
        "run",
        "--dir",
        str(cluster.tf.workdir),
        "--no-code",
        "--",
        'if [ "$RANK" = 1 ]; then sleep 1; exit 7; fi; exec sleep 607',
        cwd=tmp_path,
    )
    assert ran.returncode == 7, ran.stdout + ran.stderr
    assert "node 1 failed" in ran.stderr and "node 0 was stopped" in ran.stderr, ran.stderr
    assert job_processes(cluster, "sleep 607") == []


def test_ctrl_c_stops_the_job_on_every_node(cluster: Applied, tmp_path: Path) -> None:
    running = cluster.start(
        "run",
        "--dir",
        str(cluster.tf.workdir),
        "--no-code",
        "--",
        "echo started; exec sleep 608",
        cwd=tmp_path,
    )
    try:
        assert running.stdout is not None
        started = {running.stdout.readline().strip() for _ in range(2)}
        assert started == {"[node 0] started", "[node 1] started"}, started
        os.killpg(running.pid, signal.SIGINT)
        _, stderr = running.communicate(timeout=60)
    finally:
        if running.poll() is None:
            os.killpg(running.pid, signal.SIGKILL)
    assert running.returncode == 130, stderr
    assert "interrupted" in stderr
    assert job_processes(cluster, "sleep 608") == []


def test_a_busy_runner_is_a_clear_error(cluster: Applied, tmp_path: Path) -> None:
    first = cluster.start(
        "run",
        "--dir",
        str(cluster.tf.workdir),
        "--no-code",
        "--",
        "echo started; exec sleep 609",
        cwd=tmp_path,
    )
    try:
        assert first.stdout is not None
        line = first.stdout.readline()
        assert line.strip().endswith("started"), line + (
            first.stderr.read() if first.stderr and not line else ""
        )
        second = cluster.lium_tf(
            "run", "--dir", str(cluster.tf.workdir), "--no-code", "--", "true", cwd=tmp_path
        )
        assert second.returncode == 1
        assert "busy with another job" in second.stderr, second.stderr
    finally:
        os.killpg(first.pid, signal.SIGINT)
        first.communicate(timeout=60)
    assert job_processes(cluster, "sleep 609") == []


SECRET = "s3cr3t-token-4417"
SECRET_STACK = f"""
resource "lium_template" "t" {{
  name             = "secret-printer"
  image            = "python:3.11-slim"
  entrypoint       = "/bin/sh"
  # prints the value without holding it (the template is not sensitive; it is in the state)
  startup_commands = "-c 'echo container says token=s3cr3t-token-$((4400+17)); exec sleep infinity'"
}}
resource "lium_pod" "p" {{
  name        = "secret-printer"
  template_id = lium_template.t.id
}}
resource "lium_runner" "r" {{
  pod_id       = lium_pod.p.id
  ssh_host_key = lium_pod.p.ssh_host_key
  environment  = {{ TOKEN = "{SECRET}" }}
  smoke_test   = ["echo smoke says token=$TOKEN"]
}}
"""


def test_a_runner_environment_value_printed_is_redacted_everywhere_it_could_leave(
    stack: Callable[[str], Terraform], account: Account, tmp_path: Path
) -> None:
    tf = stack(SECRET_STACK)
    tf.apply()
    (runner,) = [i for r in tf.resources() if r["type"] == "lium_runner" for i in r["instances"]]
    assert runner["attributes"]["smoke_test_output"] == "smoke says token=<redacted>"
    state = json.loads((tf.workdir / "terraform.tfstate").read_text())
    for resource in state["resources"]:
        for instance in resource["instances"]:
            instance["attributes"].pop("environment", None)  # the argument itself: Terraform keeps it
    assert SECRET not in json.dumps(state)

    tf.write(PROVIDER_BLOCK + SECRET_STACK.replace("smoke says", "smoke now says"))
    planned = tf.run("plan", "-no-color", "-out=tfplan")
    shown = tf.run("show", "-json", "tfplan").stdout
    summary = subprocess.run(
        [sys.executable, "-m", "lium_provider.cli", "plan-summary", "-"],
        input=shown,
        capture_output=True,
        text=True,
        env={**os.environ, **tf.env},
        check=False,
    )
    assert summary.returncode == 0, summary.stderr
    assert SECRET not in planned.stdout + planned.stderr + summary.stdout + summary.stderr

    applied = Applied(tf, account)
    ran = applied.lium_tf(
        "run",
        "--dir",
        str(tf.workdir),
        "--no-code",
        "--",
        "echo job says token=$TOKEN",
        cwd=tmp_path,
    )
    assert ran.returncode == 0, ran.stderr
    assert "[lium_runner.r] job says token=<redacted>" in ran.stdout.splitlines(), ran.stdout
    assert SECRET not in ran.stdout + ran.stderr

    deadline = time.monotonic() + 30
    while True:
        logged = applied.lium_tf("logs", "lium_pod.p", "--dir", str(tf.workdir), cwd=tmp_path)
        if "container says" in logged.stdout or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert logged.returncode == 0 and "container says token=<redacted>" in logged.stdout, logged.stdout
    by_runner = applied.lium_tf(
        "logs", "lium_runner.r", "--tail", "5", "--dir", str(tf.workdir), cwd=tmp_path
    )
    assert "container says token=<redacted>" in by_runner.stdout and SECRET not in by_runner.stdout

    following = applied.start("logs", "lium_pod.p", "--follow", "--dir", str(tf.workdir), cwd=tmp_path)
    try:
        assert following.stdout is not None
        assert "container says token=<redacted>" in following.stdout.readline()
        os.killpg(following.pid, signal.SIGINT)
        following.communicate(timeout=30)
    finally:
        if following.poll() is None:
            os.killpg(following.pid, signal.SIGKILL)
    assert following.returncode == 130
    tf.destroy()
    assert_nothing_left(account)


def test_a_stack_without_runners_says_how_to_add_one(
    stack: Callable[[str], Terraform], account: Account, tmp_path: Path
) -> None:
    tf = stack('resource "lium_volume" "v" {\n  name = "no-runner"\n}\n')
    tf.apply()
    ran = Applied(tf, account).lium_tf("run", "--dir", str(tf.workdir), "--", "true", cwd=tmp_path)
    assert ran.returncode == 1 and "has no lium_runner: add one" in ran.stderr, ran.stderr
    tf.destroy()
