"""Runs the emulator under uvicorn on a pre-bound socket, so ``--port 0`` knows its port before the
sandboxes (which need it) are set up, and announces itself once it serves: its URLs, a generated
admin key (once; also written 0600 to the state directory), and which pod limits it enforces."""

import contextlib
import os
import signal
import socket
import sys
from collections.abc import Callable, Iterator

import uvicorn

from lium_emulator.api.admin import RUNNER_PATH
from lium_emulator.api.app import create_app
from lium_emulator.config import ADMIN_KEY_FILE, EmulatorConfig
from lium_emulator.runtime import Runtime, build_runtime
from lium_emulator.sandbox.manager import SandboxError

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class _Server(uvicorn.Server):
    """uvicorn that announces itself after startup and, after a graceful stop on SIGTERM/SIGINT,
    exits normally instead of re-raising the signal (so the process ends with status 0)."""

    def __init__(self, config: uvicorn.Config, on_started: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_started = on_started

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in _STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            self._on_started()


def bind_listener(host: str, port: int) -> socket.socket:
    """A listening-ready TCP socket on ``host``:``port`` (0 = any free port)."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    listener = socket.socket(family, kind, proto)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(address)
    return listener


def _write_admin_key(path: os.PathLike[str], key: str) -> None:
    """Replace ``path`` with the key, readable by the emulator's user only (never by pods)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    os.fchmod(fd, 0o600)  # an older file may have had other bits
    with os.fdopen(fd, "w") as out:
        out.write(key + "\n")


def limits_summary(runtime: Runtime) -> str:
    """One line: each limit of the offer and whether (how, or why not) pods get it here."""
    parts = []
    for name, limit in runtime.sandboxes.limits_report().items():
        if limit["enforced"]:
            scaled = f"; {limit['scaled']}" if "scaled" in limit else ""
            parts.append(f"{name} enforced ({limit['how']}{scaled})")
        else:
            parts.append(f"{name} NOT enforced ({limit['why_not']})")
    return "; ".join(parts)


def serve(config: EmulatorConfig) -> int:
    """Serve until SIGTERM/SIGINT; every pod is torn down before returning. Returns the exit status."""
    try:
        listener = bind_listener(config.host, config.port)
        host, port = listener.getsockname()[:2]
        # Pods' way to the emulator leads to this very address: the host's 127.0.0.1:<port> may be
        # another service when --host is not loopback or any.
        runtime = build_runtime(config, port, host)
        if config.admin_key_generated and config.state_dir is not None:
            _write_admin_key(config.state_dir / ADMIN_KEY_FILE, config.admin_key)
    except (OSError, ValueError, SandboxError) as error:
        # A taken port, an unreadable or invalid --nodes/--faults file, an unusable --state-dir.
        print(f"lium-emulator cannot start: {error}", file=sys.stderr, flush=True)
        return 2

    def announce() -> None:
        print(f"listening on {runtime.base_url}/api", flush=True)
        print(f"runner download URL: {runtime.base_url}{RUNNER_PATH}", flush=True)
        if config.admin_key_generated:
            print(f"admin key: {config.admin_key}", flush=True)
        print(f"pod limits: {limits_summary(runtime)}", flush=True)

    uvicorn_config = uvicorn.Config(
        create_app(runtime),
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=5,
        # No proxy stands in front of the emulator, and pods' requests arrive from 127.0.0.1 like the
        # host's: honouring X-Forwarded-For from there would let a pod pass for another client
        # (the admin routes' pod check, rate limits per address) just by sending the header.
        proxy_headers=False,
    )
    server = _Server(uvicorn_config, announce)
    server.run(sockets=[listener])
    if not server.started:
        print("lium-emulator failed to start", file=sys.stderr, flush=True)
        return 1
    return 0
