"""A pod cannot fill the host's file table: one holding more open files than a pod may is killed and
says why, while the host and the other pods keep opening files."""

from __future__ import annotations

from pathlib import Path

import pytest

from lium_emulator.sandbox.file_guard import OPEN_FILES_EXHAUSTED, host_file_table
from tests.emulator.test_sandbox_support import make_client_key, manager_at, pod_spec, poll, ssh
from tests.emulator.test_sandbox_support import run as run_as_root
from tests.emulator.testkit import (
    FAST_TIMINGS,
    create_template,
    new_account,
    rent_body,
    rent_pod,
    resources,
    splittable_node,
    wait_until,
)
from tests.support.forked_emulator import launch_forked

pytestmark = pytest.mark.sandbox

LIMIT = 20_000
# PID 1 of the hoarding pod: opens `files` files in as many processes as its open-files limit needs,
# each keeping its share, then waits. (No single quotes: it is the argument of `-c '...'`.)
HOARDER = """
import os, resource, signal
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
each = max(1, hard - 64)
left = {files}
while left > 0:
    if os.fork() == 0:
        held = [os.open("/dev/null", os.O_RDONLY) for _ in range(min(each, left))]
        signal.pause()
    left -= each
signal.pause()
"""
HOARDING_COMMAND = "-c '" + HOARDER.format(files=LIMIT + LIMIT // 2) + "'"


def test_a_pod_holding_more_files_than_a_pod_may_is_killed_and_the_others_keep_working(
    tmp_path: Path,
) -> None:
    key = make_client_key()
    files_before = host_file_table()[0]
    with manager_at(tmp_path / "root", 0, pod_open_files_limit=LIMIT) as manager:
        assert manager.limits_report()["open_files"]["at_most"] == LIMIT
        bystander = manager.start(pod_spec(tmp_path, "bystander", key))
        manager.start(
            pod_spec(
                tmp_path, "hoarder", key, entrypoint="/usr/bin/python3", startup_commands=HOARDING_COMMAND
            )
        )
        poll(lambda: not manager.is_alive("hoarder"), 60, "the hoarding pod to be killed")
        verdict = manager.killed_because("hoarder")
        assert verdict is not None and f"more than the {LIMIT} a pod may hold" in verdict, verdict
        held = int(verdict.split("held ")[1].split()[0])
        assert held > LIMIT, verdict
        # The guard looked at the other pod too, with the host over the limit, and left it alone.
        assert manager.is_alive("bystander") and manager.killed_because("bystander") is None
        with ssh(bystander[22], key) as victim:
            opened = "python3 -c 'import os; print(len([os.open(\"/dev/null\", 0) for _ in range(1000)]))'"
            assert run_as_root(victim, opened) == (0, "1000\n")
        # The hoarder's files went with it (what else the host opened meanwhile aside).
        poll(lambda: host_file_table()[0] < files_before + LIMIT // 2, 30, "the host's files to be released")


def test_the_emulator_reports_the_killed_pod_broken_naming_its_open_files() -> None:
    with launch_forked([*FAST_TIMINGS, "--pod-open-files-limit", str(LIMIT)]) as emulator:
        assert resources(emulator)["pod_limits"]["open_files"]["at_most"] == LIMIT
        _, account = new_account(emulator)
        with account:
            template = create_template(
                account, entrypoint="/usr/bin/python3", startup_commands=HOARDING_COMMAND
            )
            node = splittable_node(account, "RTX 3090")
            pod_id = rent_pod(account, node["id"], rent_body(template["id"]))
            wait_until(
                lambda: account.get(f"/pods/{pod_id}").json()["status"] == "BROKEN",
                timeout=60,
                what="the hoarding pod to become BROKEN",
            )
            events = account.get("/users/me/events", params={"pod_id": pod_id}).json()
            (broken,) = [e for e in events if e.get("to_status") == "BROKEN"]
            assert broken["reason"] == OPEN_FILES_EXHAUSTED, broken
            assert f"more than the {LIMIT} a pod may hold" in broken["detail"], broken
