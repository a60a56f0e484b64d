"""``GET /pods/{id}/logs?tail&follow`` (docs/lium-api.md#other-pod-routes): the container's output — its PID 1's stdout
and stderr, as ``docker logs`` shows it — as plain text, one line per line."""

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Query
from fastapi.responses import StreamingResponse

from lium_emulator.api.caller import CallerDep
from lium_emulator.api.deps import RuntimeDep
from lium_emulator.api.pods import visible_pod
from lium_emulator.records.entities import Pod

router = APIRouter()

MAX_TAIL_LINES = 10_000
_TAIL_WINDOW_BYTES = 4 * 1024 * 1024  # the last lines are looked for in this much of the file's end
_FOLLOW_POLL_SECONDS = 0.2
# While a pod is in these statuses its container may still write; following stops after them.
_WRITING_STATUSES = frozenset({"PENDING", "RUNNING"})


def _tail(path: Path, lines: int) -> tuple[list[bytes], int]:
    """The last ``lines`` complete or final lines of ``path`` and the offset its end had."""
    try:
        with path.open("rb") as file:
            size = file.seek(0, 2)
            start = max(0, size - _TAIL_WINDOW_BYTES)
            file.seek(start)
            data = file.read(size - start)
    except FileNotFoundError:
        return [], 0
    found = data.splitlines(keepends=True)
    if start > 0 and found:
        found = found[1:]  # the window began mid-line
    return (found[-lines:] if lines else []), size


def _read_from(path: Path, offset: int) -> tuple[bytes, int]:
    """What was appended to ``path`` after ``offset``, and the new offset."""
    try:
        with path.open("rb") as file:
            file.seek(offset)
            data = file.read()
    except FileNotFoundError:
        return b"", offset
    return data, offset + len(data)


def _terminated(line: bytes) -> bytes:
    return line if line.endswith(b"\n") else line + b"\n"


async def _stream(path: Path, pod: Pod, tail: int, follow: bool) -> AsyncIterator[bytes]:
    lines, offset = await asyncio.to_thread(_tail, path, tail)
    for line in lines:
        yield _terminated(line)
    if not follow:
        return
    partial = b""
    while pod.status in _WRITING_STATUSES:
        await asyncio.sleep(_FOLLOW_POLL_SECONDS)
        data, offset = await asyncio.to_thread(_read_from, path, offset)
        *complete, partial = (partial + data).split(b"\n")
        for line in complete:
            yield line + b"\n"
    if partial:
        yield partial + b"\n"


@router.get("/pods/{pod_id}/logs")
async def pod_logs(
    pod_id: UUID,
    runtime: RuntimeDep,
    caller: CallerDep,
    tail: Annotated[int, Query(ge=0, le=MAX_TAIL_LINES)] = 100,
    follow: bool = False,
) -> StreamingResponse:
    """The last ``tail`` lines of the container's output; with ``follow``, then what it writes next,
    until the pod stops running or the client goes away. Empty before the container starts."""
    pod = visible_pod(runtime, caller, pod_id)
    path = runtime.lifecycle.container_output(pod.id)
    return StreamingResponse(_stream(path, pod, tail, follow), media_type="text/plain; charset=utf-8")
