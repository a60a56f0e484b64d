"""Lium's notebook servers (docs/lium-api.md#notebooks): ``POST /pods/{id}/install-jupyter`` starts one on an
internal port of the pod, and the pod row follows it (``jupyter_installation_status`` IN_PROGRESS, then
SUCCESS with ``jupyter_url`` or FAILED with ``jupyter_error``).

No notebook package can be pulled into an emulated image, so the server is a stand-in that answers as a
notebook server's API root does (``GET /api`` -> its version), behind the token the URL carries. It runs
inside the pod, entered and confined as pod code is (:meth:`SandboxManager.start_inside`), with the
interpreter every pod has under ``/usr``; the token reaches it on stdin (never a command line another
process could read) and is never logged. A new container (a reboot, a template switch, a restart) has no
notebook: its fields are cleared, as on Lium.
"""

from __future__ import annotations

import asyncio
import secrets
import select
import time

from lium_emulator.records.entities import Pod
from lium_emulator.records.state import EmulatorState
from lium_emulator.records.timeutil import utcnow
from lium_emulator.sandbox.manager import SandboxError, SandboxManager

NOTEBOOK_VERSION = "7.2.2"
"""The notebook server version ``GET /api`` reports."""
INSTALLING, INSTALLED, INSTALL_FAILED = "IN_PROGRESS", "SUCCESS", "FAILED"
_START_SECONDS = 15.0  # how long the stand-in may take to bind its port
_MAX_ANSWER = 512  # of its one-line answer
_PYTHON = "/usr/bin/python3"  # the host's, through the pod's /usr overlay: every pod has it

# The stand-in: binds the port, says READY (or ERR <why>) on stdout, then serves until the pod ends.
_SERVER = r"""
import hmac, http.server, json, sys, urllib.parse
token = sys.stdin.readline().strip()
sys.stdin.close()
port = int(sys.argv[1])
version = sys.argv[2]
class Handler(http.server.BaseHTTPRequestHandler):
    server_version = "TornadoServer/6.4"
    sys_version = ""
    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        given = urllib.parse.parse_qs(url.query).get("token", [""])[0]
        header = self.headers.get("Authorization", "")
        if header.startswith("token "):
            given = header[6:]
        if not hmac.compare_digest(given.encode(), token.encode()):
            return self.answer(403, {"message": "Forbidden", "reason": None})
        if url.path.rstrip("/") == "/api":
            return self.answer(200, {"version": version})
        return self.answer(200, {"message": "lium-emulator notebook server", "api": "/api"})
    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def log_message(self, *args):
        pass
try:
    server = http.server.ThreadingHTTPServer(("0.0.0.0", port), Handler)
except OSError as error:
    print("ERR", error.strerror or error, flush=True)
    sys.exit(1)
print("READY", flush=True)
server.serve_forever()
"""


def clear_notebook(pod: Pod) -> None:
    """A new container has no notebook server: the row says none was installed."""
    pod.jupyter_port = pod.jupyter_installation_status = pod.jupyter_url = pod.jupyter_error = None


class Notebooks:
    """Installs notebook servers in pods and records how it went on their rows."""

    def __init__(self, state: EmulatorState, sandboxes: SandboxManager, host: str) -> None:
        self._state = state
        self._sandboxes = sandboxes
        self._host = host
        self._tasks: set[asyncio.Task[None]] = set()

    def install(self, pod: Pod, port: int) -> None:
        """Start installing on the pod's internal port ``port``; the row says IN_PROGRESS until it is done."""
        clear_notebook(pod)
        pod.jupyter_port, pod.jupyter_installation_status = port, INSTALLING
        pod.updated_at = utcnow()
        self._state.save(pod)
        task = asyncio.get_running_loop().create_task(self._install(pod, port, pod.updated_at))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _install(self, pod: Pod, port: int, asked_at: object) -> None:
        token = secrets.token_hex(24)
        loop = asyncio.get_running_loop()
        error = await loop.run_in_executor(None, self._start, pod.id, port, token)
        current = self._state.pods.get(pod.id)
        if current is None or current.updated_at != asked_at or current.status != "RUNNING":
            return  # the pod moved on meanwhile (deleted, rebooted, asked again): this answer is stale
        if error is None and current.ports_mapping and port in current.ports_mapping:
            current.jupyter_installation_status = INSTALLED
            current.jupyter_url = f"http://{self._host}:{current.ports_mapping[port]}/?token={token}"
        else:
            current.jupyter_installation_status = INSTALL_FAILED
            current.jupyter_error = error or f"internal port {port} is not published"
        current.updated_at = utcnow()
        self._state.save(current)

    def _start(self, pod_id: str, port: int, token: str) -> str | None:
        """Run the stand-in in the pod; None once it serves, else why it does not (blocking)."""
        try:
            process = self._sandboxes.start_inside(
                pod_id, [_PYTHON, "-I", "-S", "-c", _SERVER, str(port), NOTEBOOK_VERSION]
            )
        except (SandboxError, OSError) as exc:
            return f"the notebook server could not start: {exc}"
        assert process.stdin is not None and process.stdout is not None
        try:
            process.stdin.write(token.encode() + b"\n")
            process.stdin.close()
        except OSError:
            return "the notebook server exited at once"
        deadline = time.monotonic() + _START_SECONDS
        answer = b""
        while b"\n" not in answer and len(answer) < _MAX_ANSWER:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([process.stdout], [], [], left)[0]:
                process.kill()
                return "the notebook server did not start in time"
            chunk = process.stdout.read1(_MAX_ANSWER)  # type: ignore[attr-defined]
            if not chunk:
                break
            answer += chunk
        process.stdout.close()
        line = answer.split(b"\n", 1)[0].decode(errors="replace").strip()
        if line == "READY":
            return None
        return line.removeprefix("ERR ").strip()[:200] or "the notebook server exited at once"
