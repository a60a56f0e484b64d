"""Start ``lium-emulator serve`` as a child process and learn its URLs (for tests, demos and tools).

    with launch(["--pending-seconds", "0.2"]) as emulator:
        httpx.get(f"{emulator.api_url}/version")

The child listens on a free port (``--port 0``); ``launch`` waits for its ``listening on`` line.
Leaving the ``with`` block sends SIGTERM, which makes the emulator tear down every pod and exit 0.
"""

import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from types import TracebackType

from lium_emulator.config import random_admin_key

_LISTENING = re.compile(r"^listening on (http://\S+/api)$")
_RUNNER = re.compile(r"^runner download URL: (\S+)$")


class EmulatorStartError(RuntimeError):
    """The emulator exited or stayed silent instead of announcing its URL."""


class RunningEmulator:
    """A started emulator process and its URLs."""

    def __init__(self, process: subprocess.Popen[str], api_url: str, runner_url: str, admin_key: str) -> None:
        self.process = process
        self.api_url = api_url  # http://127.0.0.1:PORT/api
        self.runner_url = runner_url  # contains the literal "{version}"
        self.admin_key = admin_key

    @property
    def root_url(self) -> str:
        """``http://127.0.0.1:PORT`` (where the ``/_emulator`` routes live)."""
        return self.api_url.removesuffix("/api")

    @property
    def admin_headers(self) -> dict[str, str]:
        """Headers for the ``/_emulator`` admin routes."""
        return {"X-Emulator-Admin": self.admin_key}

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, wait for the clean exit (pods torn down), SIGKILL after ``timeout``; the exit status."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def __enter__(self) -> "RunningEmulator":
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()


def launch(
    args: Sequence[str] = (),
    *,
    admin_key: str | None = None,
    env: Mapping[str, str] | None = None,
    startup_timeout: float = 20.0,
) -> RunningEmulator:
    """Run ``lium-emulator serve --port 0 <args>`` with this interpreter and wait until it serves; it runs
    in a process group of its own.

    ``admin_key`` defaults to a fresh random key, passed with ``--admin-key`` and kept in the result.
    """
    admin_key = admin_key or random_admin_key()
    # A process group of its own: a terminal's Ctrl-C reaches its starter (which then cleans up through
    # it, and stops it), not the emulator itself.
    process = subprocess.Popen(
        serve_command(args, admin_key),
        stdout=subprocess.PIPE,
        text=True,
        env=dict(env) if env is not None else None,
        process_group=0,
    )
    return announced(process, admin_key, startup_timeout)


def serve_arguments(args: Sequence[str], admin_key: str) -> list[str]:
    """The arguments of ``lium-emulator`` that serve on a free port with ``admin_key`` and ``args``."""
    return [
        "serve",
        "--port",
        "0",
        f"--admin-key={admin_key}",  # one argument, whatever the key starts with
        *args,
    ]


def serve_command(args: Sequence[str], admin_key: str) -> list[str]:
    """:func:`serve_arguments` as a command line run by this interpreter."""
    return [sys.executable, "-m", "lium_emulator.cli", *serve_arguments(args, admin_key)]


def announced(
    process: subprocess.Popen[str], admin_key: str, startup_timeout: float = 20.0
) -> RunningEmulator:
    """The emulator ``process`` (started with :func:`serve_command`, its stdout a text pipe) once it has
    announced its URLs; killed, and :class:`EmulatorStartError`, if it exits or stays silent instead."""
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_pump, args=(process, lines), daemon=True).start()
    api_url = runner_url = None
    deadline = time.monotonic() + startup_timeout
    try:
        while api_url is None or runner_url is None:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
            if line is None:
                raise EmulatorStartError(f"lium-emulator exited with status {process.wait()} before serving")
            if match := _LISTENING.match(line):
                api_url = match.group(1)
            elif match := _RUNNER.match(line):
                runner_url = match.group(1)
    except queue.Empty:
        process.kill()
        process.wait()
        raise EmulatorStartError(f"lium-emulator did not start within {startup_timeout} s") from None
    except BaseException:
        process.kill()
        process.wait()
        raise
    return RunningEmulator(process, api_url, runner_url, admin_key)


def _pump(process: subprocess.Popen[str], lines: "queue.Queue[str | None]") -> None:
    """Forward the child's stdout lines (and keep draining it so the child never blocks on a full pipe)."""
    assert process.stdout is not None
    for line in process.stdout:
        lines.put(line.strip())
    lines.put(None)
