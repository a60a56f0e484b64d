"""Process helpers: find the provider process Terraform started (to kill it mid-operation), keep the
provider zygotes a run starts private to it and stopped afterwards, and write small stand-in programs."""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import stat
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

from tfbridge.serving.zygote import close_directory


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (from /proc: every thread's ``children`` list)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def descendants(pid: int) -> list[int]:
    result: list[int] = []
    stack = children(pid)
    while stack:
        child = stack.pop()
        result.append(child)
        stack += children(child)
    return result


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def find_descendant(pid: int, needle: str) -> int | None:
    """The first descendant of ``pid`` whose command line contains ``needle``."""
    return next((p for p in descendants(pid) if needle in cmdline(p)), None)


def providers_in(workdir: Path) -> list[int]:
    """Live provider processes working in ``workdir``: launchers, and servers wherever they run (a
    zygote's fork, or a cold start's child in a session of its own), by their working directory."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            if Path(os.readlink(proc / "cwd")) == workdir and "lium_provider" in cmdline(int(proc.name)):
                found.append(int(proc.name))
    return found


def kill_provider(terraform_pid: int) -> None:
    """SIGKILL the Lium provider process Terraform (``terraform_pid``) started: the launcher, whose
    server (a zygote's fork, or its own cold-started child) then undoes what it made and exits; fails
    the test if there is none."""
    provider = find_descendant(terraform_pid, "lium_provider")
    assert provider is not None, "the provider process was not found"
    os.kill(provider, signal.SIGKILL)


def kill_provider_and_server(terraform_pid: int) -> None:
    """SIGKILL a cold-started provider's server and then its launcher, as when the runner's machine
    dies: nothing is left that could undo what the server made. (A cold start: its server is the
    launcher's child; with the zygote it is the zygote's.)"""
    launcher = find_descendant(terraform_pid, "lium_provider")
    assert launcher is not None, "the provider process was not found"
    servers = [pid for pid in children(launcher) if "lium_provider" in cmdline(pid)]
    assert servers, "no cold-started server: start the provider with TFBRIDGE_ZYGOTE=0"
    for pid in [*servers, launcher]:  # the server first: it must not see its launcher go
        with contextlib.suppress(ProcessLookupError):  # the launcher exits when its server is gone
            os.kill(pid, signal.SIGKILL)


def kill_machine(process: subprocess.Popen[str], workdir: Path) -> None:
    """The runner's machine dies under ``process`` (a terraform in ``workdir``, started in a process group
    of its own): the stack's provider servers first (a server that saw its launcher go would undo the
    rent, which a dead machine cannot), then terraform's process group (terraform and the launchers),
    then anything of the stack still running. Terraform's group is stopped first: a machine dies all at
    once, so terraform must not live to see its providers go and write its state (a write the kill
    would cut short, leaving an empty state file)."""
    workdir = workdir.resolve()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGSTOP)
    launchers = set(children(process.pid))
    for pid in [p for p in providers_in(workdir) if p not in launchers]:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    for pid in providers_in(workdir):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def open_files() -> Counter[str]:
    """What this process's file descriptors refer to (``socket:[inode]``, a path, ...), counted.

    Garbage is collected first, so that an earlier test's unreachable socket closing in the middle of
    a test neither hides a leak nor looks like one; compare two readings with ``-`` to see what was
    opened in between and is still open, whatever else closed meanwhile.
    """
    gc.collect()
    found: Counter[str] = Counter()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor is gone by now
            found[os.readlink(f"/proc/self/fd/{fd}")] += 1
    return found


def wait_for(
    condition: Callable[[], object],
    what: str,
    timeout: float = 30.0,
    *,
    process: subprocess.Popen[str] | None = None,
) -> None:
    """Poll ``condition`` (a fact of the emulator or of a command's output) until it holds.

    Fails the test after ``timeout`` seconds, or as soon as ``process`` (the command that should bring
    the condition about) has exited, with its output.
    """
    deadline = time.monotonic() + timeout
    while not condition():
        if process is not None:
            assert process.poll() is None, process.stdout.read() if process.stdout else ""
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.05)


@contextlib.contextmanager
def private_zygotes(directory: Path) -> Iterator[Path]:
    """Provider starts in this block use zygotes in ``directory`` (0700), all stopped at its end."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    directory.chmod(0o700)
    previous = os.environ.get("TFBRIDGE_ZYGOTE_DIR")
    os.environ["TFBRIDGE_ZYGOTE_DIR"] = str(directory)
    try:
        yield directory
    finally:
        if previous is None:
            os.environ.pop("TFBRIDGE_ZYGOTE_DIR", None)
        else:
            os.environ["TFBRIDGE_ZYGOTE_DIR"] = previous
        close_directory(directory)


def python_program(path: Path, body: str) -> Path:
    """An executable file at ``path`` that runs the Python ``body`` with this interpreter (a stand-in for a
    provider executable, say)."""
    path.write_text(f"#!{sys.executable}\n{body}")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path
