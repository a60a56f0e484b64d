"""A process the emulator started in a pod (:meth:`SandboxManager.start_inside`), driven on the event loop.

What runs in a pod is pod code (a pod can replace any program it is asked to run), so the emulator never
waits for it in a thread the rest of the emulator shares: its pipes are read and written through asyncio,
its exit is polled, and ending it kills its whole process group, the part in the pod included
(``start_inside`` starts each in a session of its own).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time

_POLL_SECONDS = 0.05  # how often an ended process's exit is looked for


class InsideProcess:
    """One process in a pod, with pipes to its stdin and stdout."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)

    async def exit_code(self, seconds: float) -> int | None:
        """Its exit code once it has ended, or None when it had not within ``seconds`` (then killed)."""
        deadline = time.monotonic() + seconds
        while (code := self.process.poll()) is None:
            if time.monotonic() > deadline:
                self.kill()
                await asyncio.sleep(0)
                self.process.poll()
                return None
            await asyncio.sleep(_POLL_SECONDS)
        return code

    async def stdout_reader(self, limit: int) -> tuple[asyncio.StreamReader, asyncio.BaseTransport]:
        """A reader of its stdout, and the pipe's transport (the caller closes it)."""
        assert self.process.stdout is not None
        reader = asyncio.StreamReader(limit=limit)
        transport, _ = await asyncio.get_running_loop().connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), self.process.stdout
        )
        return reader, transport

    async def stdin_writer(self) -> tuple[asyncio.BaseTransport, asyncio.StreamWriter]:
        """A writer of its stdin, and the pipe's transport (the caller closes it)."""
        assert self.process.stdin is not None
        loop = asyncio.get_running_loop()
        transport, protocol = await loop.connect_write_pipe(
            lambda: asyncio.streams.FlowControlMixin(), self.process.stdin
        )
        return transport, asyncio.StreamWriter(transport, protocol, None, loop)
