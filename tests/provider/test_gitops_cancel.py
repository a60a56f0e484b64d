"""A cancelled pull-request job stops Terraform with it: SIGTERM to ``lium-tf gitops plan`` reaches
``terraform``, which stops as it does on its own (its state lock released), and nothing runs on.

Terraform is held in its plan by a nodes feed that accepts connections and never answers (the
provider checks at plan that an offer matches the pod's filter).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.lium import Account
from tests.support.terraform import Terraform

pytestmark = pytest.mark.terraform

STACK = """
terraform {
  required_providers {
    lium = { source = "lium-stacks/lium" }
  }
}
provider "lium" {
  nodes_feed_url  = "%(feed)s"
  request_timeout = "5s" # the interrupted plan waits for its offer check to give up
}
resource "lium_template" "t" {
  name  = "cancel"
  image = "python:3.11-slim"
}
resource "lium_pod" "p" {
  name        = "cancel-0"
  template_id = lium_template.t.id
  gpu         = "RTX 4090"
}
"""
WAIT_SECONDS = 60


@pytest.fixture
def silent_feed() -> Iterator[tuple[str, threading.Event]]:
    """A feed URL whose server accepts and never answers, and an event set at its first connection."""
    listener = socket.create_server(("127.0.0.1", 0))
    asked = threading.Event()
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            held.append(connection)
            asked.set()

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/public/v1/nodes", asked
    finally:
        listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept, which then ends
        listener.close()
        acceptor.join(timeout=10)
        for connection in held:
            connection.close()


def terraform_processes_in(directory: Path) -> list[int]:
    """Live ``terraform`` processes whose working directory is ``directory``."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if (proc / "comm").read_text().strip() == "terraform" and (
                proc / "cwd"
            ).resolve() == directory.resolve():
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def kill_all(job: subprocess.Popen[str], directory: Path) -> None:
    """The job's process group, and any terraform still running in ``directory`` with its provider (its
    own group, whose leader it is)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(job.pid, signal.SIGKILL)
    for pid in terraform_processes_in(directory):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(os.getpgid(pid), signal.SIGKILL)
    job.wait()


@pytest.mark.parametrize("to", ["the job", "its process group"])
def test_sigterm_to_the_plan_job_stops_terraform_and_releases_the_lock(
    make_terraform: Callable[..., Terraform],
    account: Account,
    silent_feed: tuple[str, threading.Event],
    tmp_path: Path,
    to: str,
) -> None:
    feed, asked = silent_feed
    tf = make_terraform(STACK % {"feed": feed}, **account.env)
    job = subprocess.Popen(
        [
            *(sys.executable, "-m", "lium_provider.cli", "gitops", "plan", "--dir", str(tf.workdir)),
            *("--artifact", str(tmp_path / "artifact"), "--commit", "c1"),
        ],
        env={**os.environ, **tf.env},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert asked.wait(WAIT_SECONDS), "terraform never reached the plan's offer check"
        if to == "the job":
            job.send_signal(signal.SIGTERM)
        else:  # as `timeout` or a CI runner's cancel does: once to the whole group
            os.killpg(job.pid, signal.SIGTERM)
        _, stderr = job.communicate(timeout=WAIT_SECONDS)
    finally:
        kill_all(job, tf.workdir)
    assert job.returncode == 1
    assert "Interrupt received" in stderr, stderr[-3000:]
    assert "Two interrupts received" not in stderr, "terraform was interrupted twice and abandoned its run"
    assert "lium-tf gitops plan: cancelled by SIGTERM during terraform plan" in stderr, stderr[-3000:]
    assert terraform_processes_in(tf.workdir) == [], "terraform ran on after the job ended"
    assert not (tf.workdir / ".terraform.tfstate.lock.info").exists(), "the state lock was left held"
    assert not (tmp_path / "artifact" / "manifest.json").exists()
