"""Runs the emulator under uvicorn on a pre-bound socket, so ``--port 0`` knows its port before the
sandboxes (which need it) are set up, and announces itself once it serves."""

import contextlib
import signal
import socket
import sys
from collections.abc import Callable, Iterator

import uvicorn

from lium_emulator.api.admin import RUNNER_PATH
from lium_emulator.app import create_app
from lium_emulator.config import EmulatorConfig
from lium_emulator.runtime import build_runtime
from lium_emulator.sandbox import SandboxError

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


def serve(config: EmulatorConfig) -> int:
    """Serve until SIGTERM/SIGINT; every pod is torn down before returning. Returns the exit status."""
    try:
        listener = bind_listener(config.host, config.port)
        runtime = build_runtime(config, listener.getsockname()[1])
    except (OSError, ValueError, SandboxError) as error:
        # A taken port, an unreadable or invalid --nodes/--faults file, an unusable --state-dir.
        print(f"lium-emulator cannot start: {error}", file=sys.stderr, flush=True)
        return 2

    def announce() -> None:
        print(f"listening on {runtime.base_url}/api", flush=True)
        print(f"runner download URL: {runtime.base_url}{RUNNER_PATH}", flush=True)

    uvicorn_config = uvicorn.Config(
        create_app(runtime),
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=5,
    )
    server = _Server(uvicorn_config, announce)
    server.run(sockets=[listener])
    if not server.started:
        print("lium-emulator failed to start", file=sys.stderr, flush=True)
        return 1
    return 0
