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

from lium_emulator.records.entities import Pod
from lium_emulator.records.state import EmulatorState
from lium_emulator.records.timeutil import utcnow
from lium_emulator.sandbox.inside import InsideProcess
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
        # The token of each pod's latest install: an earlier one still starting must not write its answer.
        self._latest: dict[str, str] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def install(self, pod: Pod, port: int) -> None:
        """Start installing on the pod's internal port ``port``; the row says IN_PROGRESS until it is done."""
        clear_notebook(pod)
        pod.jupyter_port, pod.jupyter_installation_status = port, INSTALLING
        pod.updated_at = utcnow()
        self._state.save(pod)
        token = secrets.token_hex(24)
        self._latest[pod.id] = token
        task = asyncio.get_running_loop().create_task(self._install(pod.id, port, token))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _install(self, pod_id: str, port: int, token: str) -> None:
        try:
            error = await self._start(pod_id, port, token)
        finally:
            latest = self._latest.get(pod_id) == token
            if latest:
                del self._latest[pod_id]
        current = self._state.pods.get(pod_id)
        if (
            not latest
            or current is None
            or current.status != "RUNNING"
            or current.jupyter_installation_status != INSTALLING
        ):
            return  # asked again, or the container was replaced or removed meanwhile: this answer is stale
        if error is None and current.ports_mapping and port in current.ports_mapping:
            current.jupyter_installation_status = INSTALLED
            current.jupyter_url = f"http://{self._host}:{current.ports_mapping[port]}/?token={token}"
        else:
            current.jupyter_installation_status = INSTALL_FAILED
            current.jupyter_error = error or f"internal port {port} is not published"
        current.updated_at = utcnow()
        self._state.save(current)

    async def _start(self, pod_id: str, port: int, token: str) -> str | None:
        """Run the stand-in in the pod; None once it serves, else why it does not.

        Its answer is awaited on the event loop, not in a thread: a stand-in the pod made hang holds no
        thread the rest of the emulator shares."""
        argv = [_PYTHON, "-I", "-S", "-c", _SERVER, str(port), NOTEBOOK_VERSION]
        try:
            process = await asyncio.to_thread(self._sandboxes.start_inside, pod_id, argv)
        except (SandboxError, OSError) as exc:
            return f"the notebook server could not start: {exc}"
        assert process.stdin is not None and process.stdout is not None
        try:
            process.stdin.write(token.encode() + b"\n")  # a few bytes into an empty pipe: never blocks
            process.stdin.close()
        except OSError:
            process.stdout.close()
            return "the notebook server exited at once"
        server = InsideProcess(process)
        try:
            answer = await asyncio.wait_for(_first_line(server), _START_SECONDS)
        except TimeoutError:
            server.kill()
            return "the notebook server did not start in time"
        line = answer.decode(errors="replace").strip()
        if line == "READY":
            return None
        return line.removeprefix("ERR ").strip()[:200] or "the notebook server exited at once"


async def _first_line(server: InsideProcess) -> bytes:
    """The first line the server prints (at most ``_MAX_ANSWER`` bytes of it); closes its stdout."""
    reader, transport = await server.stdout_reader(_MAX_ANSWER)
    answer = b""
    try:
        while b"\n" not in answer and len(answer) < _MAX_ANSWER:
            chunk = await reader.read(_MAX_ANSWER - len(answer))
            if not chunk:
                break
            answer += chunk
    finally:
        transport.close()
    return answer.split(b"\n", 1)[0]
