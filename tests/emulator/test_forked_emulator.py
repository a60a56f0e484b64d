"""The emulators the test modules fork (tests/support/forked_emulator.py) are the process ``launch`` starts:
a process group of their own, nothing of the test process's descriptors, a clean exit on SIGTERM."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import httpx
import pytest

from lium_emulator.launcher import launch
from tests.support.forked_emulator import launch_forked

pytestmark = pytest.mark.sandbox


def open_descriptors(pid: int) -> set[str]:
    """What each descriptor of process ``pid`` points at (``pipe:[inode]``, a path, a socket)."""
    fds = Path(f"/proc/{pid}/fd")
    return {os.readlink(fds / name) for name in os.listdir(fds)}


def test_a_forked_emulator_serves_alone_in_its_group_and_keeps_none_of_the_tests_pipes() -> None:
    read_end, write_end = os.pipe()  # a test's pipe, open while the emulator starts
    try:
        emulator = launch_forked()
        try:
            pid = emulator.process.pid
            assert os.getpgid(pid) == pid
            held = open_descriptors(pid)
            pipe = os.readlink(f"/proc/self/fd/{write_end}")
            assert pipe not in held, held
            assert os.readlink(f"/proc/{pid}/fd/0") == os.devnull
            answer = httpx.get(f"{emulator.root_url}/_emulator/health", headers=emulator.admin_headers)
            assert answer.status_code == 200
        finally:
            assert emulator.stop() == 0
    finally:
        os.close(read_end)
        os.close(write_end)


def test_a_killed_forked_emulator_reports_the_signal() -> None:
    emulator = launch_forked()
    os.kill(emulator.process.pid, signal.SIGKILL)
    assert emulator.process.wait(timeout=30) == -signal.SIGKILL


def ignored_signals(pid: int) -> int:
    """The mask of signals process ``pid`` ignores (``SigIgn`` in its status)."""
    status = Path(f"/proc/{pid}/status").read_text()
    (mask,) = [line.split()[1] for line in status.splitlines() if line.startswith("SigIgn:")]
    return int(mask, 16)


def test_a_forked_emulator_ignores_the_signals_a_launched_one_ignores() -> None:
    """SIGPIPE above all: a relay writing to a socket its peer has closed must get EPIPE, not die."""
    with launch() as launched, launch_forked() as forked:
        ignored = ignored_signals(launched.process.pid)
        assert ignored & (1 << (signal.SIGPIPE - 1)), "the interpreter's own start ignores SIGPIPE"
        assert ignored_signals(forked.process.pid) == ignored
