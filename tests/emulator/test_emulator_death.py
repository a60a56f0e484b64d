"""However the emulator dies, its pods die with it and nothing of them stays on the host.

Killed alone (SIGKILL, no ``--state-dir``), its watchdog reaps the pods' processes, cgroups and the
temporary work directory within seconds. Killed together with its watchdog, the next emulator start
on the host reaps them. Each emulator here registers in a registry of the test's own, so no other
test's emulator is touched. The watchdog's :func:`reap` is also checked alone, against a stand-in for
an emulator that is not gone yet when its pipe closes (a killed process closes its files first).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lium_emulator.launcher import RunningEmulator, launch
from lium_emulator.sandbox.manager import process_is_running, process_start_ticks, processes_mentioning
from lium_emulator.sandbox.registry import INSTANCES_ENV, Registration
from lium_emulator.sandbox.watchdog import reap
from tests.emulator.testkit import (
    DEFAULT_KEY,
    FAST_TIMINGS,
    SshKey,
    api_client,
    create_template,
    rent_body,
    rent_pod,
    resources,
    splittable_node,
    wait_ssh_ready,
)

pytestmark = pytest.mark.sandbox

GONE_SECONDS = 20.0


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment of emulators that register in this test's own registry."""
    directory = tmp_path / "instances"
    yield {**os.environ, INSTANCES_ENV: str(directory)}


def registration(env: dict[str, str]) -> tuple[Path, Registration]:
    (path,) = Path(env[INSTANCES_ENV]).glob("*.json")
    record = Registration.read(path)
    assert record is not None
    return path, record


def running_pod(emulator: RunningEmulator, ssh_key: SshKey, record: Registration) -> dict[str, Any]:
    """A RUNNING pod of ``emulator``, with its PID 1 and its cgroup directories on the host."""
    with api_client(emulator, DEFAULT_KEY) as client:
        template = create_template(client)
        node = splittable_node(client, "RTX 4090")
        pod_id = rent_pod(client, node["id"], rent_body(template["id"], ssh_key.public))
        wait_ssh_ready(client, pod_id)
    pids = json.loads((record.sandbox_root / "pods" / pod_id / "pids.json").read_text())
    return {"id": pod_id, "pid1": (pids["pid1"], pids["pid1_start"]), "cgroups": cgroups_of(pod_id)}


def cgroups_of(pod_id: str) -> list[Path]:
    """The pod's cgroup directories on the host. Other tests' emulators create and remove theirs all the
    while: ``os.walk`` passes over a directory that is gone by the time it is read (``rglob`` raised)."""
    found: list[Path] = []
    for root, directories, _ in os.walk("/sys/fs/cgroup"):
        found += [Path(root, name) for name in directories if name.startswith(f"{pod_id}-")]
    return found


def wait_gone(what: str, still_there: Any) -> None:
    deadline = time.monotonic() + GONE_SECONDS
    while still_there():
        assert time.monotonic() < deadline, f"{what} is still there {GONE_SECONDS:.0f} s after the kill"
        time.sleep(0.1)


def assert_nothing_left(pod: dict[str, Any], record: Registration) -> None:
    wait_gone("the pod's PID 1", lambda: process_is_running(*pod["pid1"]))
    wait_gone("the pod's cgroups", lambda: any(p.exists() for p in pod["cgroups"]))
    wait_gone("the temporary work directory", record.work_dir.exists)
    assert processes_mentioning(str(record.work_dir)) == []


def test_a_killed_emulators_pods_die_with_it(registry: dict[str, str], ssh_key: SshKey) -> None:
    emulator = launch(FAST_TIMINGS, env=registry)
    try:
        path, record = registration(registry)
        assert record.temporary and record.pid == emulator.process.pid
        pod = running_pod(emulator, ssh_key, record)
    finally:
        emulator.process.send_signal(signal.SIGKILL)
        emulator.process.wait()
    assert_nothing_left(pod, record)
    wait_gone("the registration", path.exists)


def test_the_next_start_reaps_what_a_killed_emulator_and_its_watchdog_left(
    registry: dict[str, str], ssh_key: SshKey
) -> None:
    emulator = launch(FAST_TIMINGS, env=registry)
    watchdog = None
    try:
        path, record = registration(registry)
        pod = running_pod(emulator, ssh_key, record)
        (watchdog,) = processes_mentioning(str(path))  # the one process named after the registration
    finally:
        if watchdog is not None:
            os.kill(watchdog[0], signal.SIGKILL)  # the watchdog first: it must not see the emulator go
        emulator.process.send_signal(signal.SIGKILL)
        emulator.process.wait()
    assert process_is_running(*pod["pid1"]), "the pod died without anyone to kill it"
    with launch(FAST_TIMINGS, env=registry) as second:
        assert pod["id"] in resources(second)["stale_sandboxes_cleaned"]
        assert_nothing_left(pod, record)
        assert not path.exists()
        assert second.stop() == 0


def left_behind(
    tmp_path: Path, emulator: subprocess.Popen[bytes]
) -> tuple[Path, Registration, subprocess.Popen[bytes]]:
    """What ``emulator`` (a stand-in process) would leave: its registration, and a temporary work
    directory with one pod, whose PID 1 (a stand-in too) is returned."""
    pid1 = subprocess.Popen(["sleep", "60"], start_new_session=True)
    record = Registration(emulator.pid, process_start_ticks(emulator.pid) or 0, tmp_path / "work", True)
    pod_dir = record.sandbox_root / "pods" / "pod-1"
    pod_dir.mkdir(parents=True)
    pids = {
        "manager_pid": record.pid,
        "manager_start": record.start,
        "pid1": pid1.pid,
        "pid1_start": process_start_ticks(pid1.pid) or 0,
    }
    (pod_dir / "pids.json").write_text(json.dumps(pids))
    path = tmp_path / "instances" / f"{record.pid}-{record.start}.json"
    path.parent.mkdir()
    path.write_text(record.to_json())
    return path, record, pid1


def test_the_watchdog_reaps_once_its_emulator_is_gone_not_once_its_pipe_closed(tmp_path: Path) -> None:
    emulator = subprocess.Popen(["sleep", "60"])  # its files closed already, but still running
    path, record, pid1 = left_behind(tmp_path, emulator)
    try:
        threading.Timer(0.5, emulator.kill).start()
        assert reap(path, record, wait=10.0) == ["pod-1"]
        assert pid1.wait(5) == -signal.SIGKILL
        assert not record.work_dir.exists() and not path.exists()
    finally:
        for process in (emulator, pid1):
            process.kill()
            process.wait()


def test_the_watchdog_touches_nothing_while_its_emulator_stays(tmp_path: Path) -> None:
    emulator = subprocess.Popen(["sleep", "60"])
    path, record, pid1 = left_behind(tmp_path, emulator)
    try:
        assert reap(path, record, wait=0.3) == []
        assert process_is_running(pid1.pid, process_start_ticks(pid1.pid) or 0)
        assert record.work_dir.exists() and path.exists()
    finally:
        for process in (emulator, pid1):
            process.kill()
            process.wait()
