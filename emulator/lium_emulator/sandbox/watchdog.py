"""Pods die with the emulator however it dies, and a later start reaps what a dead one left behind.

The emulator's pods run in sessions of their own (they must outlive the thread that started them), so
nothing ends them when the emulator is SIGKILLed; without ``--state-dir`` no later start would even know
where their files are. Two mechanisms close that:

* **A watchdog** per emulator, a process in a session of its own, holds the read end of a pipe whose
  write end only the emulator holds. However the emulator ends, the pipe closes; a clean shutdown first
  writes :data:`RELEASED` (it has torn its pods down itself). Otherwise the watchdog waits for the
  emulator to be gone and reaps: :meth:`SandboxManager.cleanup_stale` (pods' processes, cgroups and
  directories), then the work directory when it was a temporary one. The pipe closing is not enough:
  a killed process closes its files (that pipe, its work directory's lock) a moment before it is gone,
  and until then ``/proc`` shows it running, so ``cleanup_stale`` would take its pods for those of a
  live emulator and leave them (:func:`reap`).
* **The instance registry** (:func:`instances_dir`, private to the user): each emulator registers its
  work directory there. Should the watchdog die as well (its session killed, the host rebooted), the
  next emulator start on the host reaps every registered instance whose process is gone
  (:func:`reap_dead_instances`).

A state directory is held under an exclusive ``flock`` by the emulator using it (:func:`hold_work_dir`):
a watchdog reaps a state directory's sandboxes only while it holds that lock, so it never races the
emulator that restarted on the same state directory (which cleans up itself when it gets the lock).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

# The sandbox manager (and what it imports: asyncio, cryptography, ...) is imported where it is used: the
# watchdog process itself needs it only to reap after an unclean end, and at a clean shutdown (every test
# emulator's) it just unregisters, so its start stays that of a bare interpreter.
from lium_emulator.sandbox.registry import Registration, instances_dir, registrations, unregister

RELEASED = b"R"  # emulator to watchdog: a clean shutdown, nothing is left to reap
LOCK_FILE = "sandboxes.lock"
# How long an emulator waits for the lock of its work directory (a dead predecessor's watchdog may be
# reaping it), and how long a watchdog waits for its emulator to be gone (and for the lock) after the
# pipe closed.
LOCK_WAIT_SECONDS = 30.0
EXIT_WAIT_SECONDS = 10.0
_POLL_SECONDS = 0.05


def hold_work_dir(work_dir: Path) -> int:
    """Take the work directory's lock for this process's lifetime (it is released when the process
    ends, however); waits while a dead predecessor's watchdog reaps it. Returns the descriptor."""
    fd = os.open(work_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    if not _lock_within(fd, LOCK_WAIT_SECONDS):
        os.close(fd)
        raise OSError(f"{work_dir} is in use by another emulator")
    return fd


@dataclass
class Watchdog:
    """The running watchdog of this emulator (see the module docstring)."""

    process: subprocess.Popen[bytes]
    lifeline: int | None
    registration: Path

    @classmethod
    def start(cls, work_dir: Path, *, temporary: bool) -> Watchdog:
        from lium_emulator.sandbox.manager import process_start_ticks

        directory = instances_dir()
        pid = os.getpid()
        me = Registration(pid, process_start_ticks(pid) or 0, work_dir.resolve(), temporary)
        registration = directory / f"{me.pid}-{me.start}.json"
        for attempt in range(3):  # another emulator's last unregister may remove the registry meanwhile
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            try:
                registration.write_text(me.to_json())
                break
            except FileNotFoundError:
                if attempt == 2:
                    raise
        read_end, write_end = os.pipe()  # both ends not inheritable: only the watchdog gets its end
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", "lium_emulator.sandbox.watchdog", str(registration)],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a kill of the emulator's process group must not take it along
            )
        finally:
            os.close(read_end)
        return cls(process, write_end, registration)

    def release(self) -> None:
        """At a clean shutdown, after the pods are torn down: the watchdog unregisters and exits."""
        if self.lifeline is None:
            return
        with contextlib.suppress(OSError):
            os.write(self.lifeline, RELEASED)
        os.close(self.lifeline)
        self.lifeline = None
        try:
            self.process.wait(EXIT_WAIT_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def reap(registration_file: Path, record: Registration, *, wait: float = 0.0) -> list[str]:
    """Everything the dead emulator ``record`` left: its pods, a temporary work directory, its
    registration. Returns the ids of the pods reaped.

    Only once its process is gone and while holding its work directory's lock, waiting up to ``wait``
    seconds for both. Either alone is not enough. A killed process releases the lock (and closes the
    watchdog's pipe) when its last thread drops its files, a moment before it is gone: until it is a
    zombie, ``/proc`` shows it running, and :meth:`SandboxManager.cleanup_stale` would leave its pods
    as those of a live emulator, for good once the work directory and registration are deleted. And
    its process, judged by its main thread, may already be a zombie while other threads still run and
    hold the lock. An emulator restarted on the same state directory holds the lock for good (and
    cleaned up at its own start). When either cannot be had in time, nothing is touched and the
    registration stays, for a later start to retry.
    """
    from lium_emulator.sandbox.manager import SandboxManager

    deadline = time.monotonic() + wait
    if not _gone_by(record, deadline):
        return []
    try:
        lock: int | None = os.open(record.work_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError:
        lock = None  # the work directory is gone: nobody can hold it
    try:
        if lock is not None and not _lock_within(lock, max(0.0, deadline - time.monotonic())):
            return []
        reaped = SandboxManager.cleanup_stale(record.sandbox_root)
        if record.temporary:
            shutil.rmtree(record.work_dir, ignore_errors=True)
        unregister(registration_file)
        return reaped
    finally:
        if lock is not None:
            os.close(lock)


def _gone_by(record: Registration, deadline: float) -> bool:
    """Wait until the process ``record`` is gone (a zombie, or reaped) or ``deadline`` (monotonic)."""
    from lium_emulator.sandbox.manager import process_is_running

    while process_is_running(record.pid, record.start):
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_SECONDS)
    return True


def _lock_within(fd: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(_POLL_SECONDS)


def reap_dead_instances() -> list[str]:
    """Reap every registered emulator of this user whose process is gone; the ids of the pods reaped."""
    from lium_emulator.sandbox.manager import process_is_running

    reaped: list[str] = []
    for path, record in registrations():
        if record is None:
            unregister(path)
        elif not process_is_running(record.pid, record.start):
            reaped += reap(path, record)
    return reaped


def main(registration_file: str) -> int:
    """The watchdog process: block until the emulator is gone, then reap (or, if released, just go)."""
    path = Path(registration_file)
    told = sys.stdin.buffer.read()  # returns when every write end is closed: the emulator has ended
    record = Registration.read(path)
    if record is None:
        return 0
    if told.startswith(RELEASED):
        unregister(path)
        return 0
    reap(path, record, wait=EXIT_WAIT_SECONDS)  # the pipe closes a moment before the emulator is gone
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
