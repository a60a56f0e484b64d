"""The test modules' emulators, forked from the test process that has imported the emulator once.

Most of an emulator's start is importing FastAPI, pydantic and its own routes and models, and the suite
starts one emulator per test module: each xdist worker pays those imports once here, and every emulator
it starts after is a fork that runs ``lium-emulator serve`` from there. What a test sees is the same
process as ``lium_emulator.launcher.launch`` starts: a child in a process group of its own, its stdout
a pipe, driven through ``subprocess.Popen`` (signals, ``wait``, exit status), exiting 0 on SIGTERM.

The child keeps nothing of the test process but its memory: standard input is ``/dev/null``, every
other descriptor than its stdout pipe and stderr is closed (a test's pipes must not stay open in an
emulator), the test process's garbage is collected before that and never after (a finaliser must not
close a descriptor number the emulator reuses), signals are as a new interpreter has them, and the random
generator is seeded again.
"""

from __future__ import annotations

import gc
import os
import random
import signal
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

from lium_emulator.config import random_admin_key
from lium_emulator.launcher import RunningEmulator, announced, serve_arguments, serve_command

_EXIT_UNEXPECTED = 70  # what the child exits with when the emulator raised instead of returning


class _ForkedEmulator(subprocess.Popen[str]):
    """``subprocess.Popen`` whose child is a fork running the emulator's CLI instead of an ``exec`` of
    :func:`serve_command` (which it still names as its ``args``)."""

    def __init__(self, args: Sequence[str], admin_key: str) -> None:
        self._cli_arguments = serve_arguments(args, admin_key)
        super().__init__(serve_command(args, admin_key), stdout=subprocess.PIPE, text=True)

    def _execute_child(
        self,
        args: list[str],
        executable: Any,
        preexec_fn: Any,
        close_fds: bool,
        pass_fds: Any,
        cwd: Any,
        env: Any,
        startupinfo: Any,
        creationflags: int,
        shell: bool,
        p2cread: int,
        p2cwrite: int,
        c2pread: int,
        c2pwrite: int,
        errread: int,
        errwrite: int,
        *_: Any,
    ) -> None:
        assert c2pwrite != -1 and p2cread == -1 and errwrite == -1, (
            "stdout a pipe, stdin and stderr inherited"
        )
        pid = os.fork()
        if pid == 0:
            _serve_in_child(self._cli_arguments, c2pwrite)
        self.pid = pid
        self._child_created = True
        os.close(c2pwrite)  # the parent keeps only its reading end, as Popen does
        self._closed_child_pipe_fds = True


def _serve_in_child(cli_arguments: list[str], stdout_fd: int) -> None:
    code = _EXIT_UNEXPECTED
    try:
        os.setpgid(0, 0)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(stdout_fd, 1)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 (the standard streams live as long as the process)
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        gc.collect()
        gc.freeze()
        os.closerange(3, os.sysconf("SC_OPEN_MAX"))
        for number in (signal.SIGTERM, signal.SIGCHLD, signal.SIGALRM):
            signal.signal(number, signal.SIG_DFL)
        # As the interpreter of a real `lium-emulator serve` starts: a write to a socket its peer has
        # closed is an EPIPE error for the emulator to handle, not a signal that kills it.
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        random.seed()
        from lium_emulator.cli import main

        code = main(cli_arguments)
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os._exit(code)


def launch_forked(args: Sequence[str] = (), startup_timeout: float = 20.0) -> RunningEmulator:
    """``lium_emulator.launcher.launch(args)``, forked from this process (which imports the emulator's
    server once, on its first call)."""
    import lium_emulator.server  # noqa: F401  (what every fork then finds imported)

    admin_key = random_admin_key()
    process = _ForkedEmulator(args, admin_key)
    return announced(process, admin_key, startup_timeout)
