"""A warm, pre-imported copy of the provider that forks one serving process per Terraform start.

Terraform starts a provider three to five times per command, and a Python start spends most of its
time importing (the interpreter, grpc, pydantic, httpx, the provider itself) before it can answer a
call. The zygote does that once: it imports everything, then waits on a private unix socket. Each
start of the provider runs the tiny launcher (:mod:`tfbridge.serving.launch`, standard library only), which
hands the zygote its stdin/stdout/stderr, environment, working directory and arguments; the zygote
forks, and the child serves exactly as a freshly started provider would (:func:`tfbridge.serving.handshake.serve`),
writing the handshake line to Terraform's own pipe. The launcher stays as the process Terraform
watches: it forwards SIGTERM to the child, ignores SIGINT as the provider does, exits with the
child's exit code, and tells the child when Terraform dies (the child then stops as an orphaned
provider does); if the launcher itself is killed, the child sees its connection close and kills itself,
as the provider process Terraform knows was killed.

Safety rules, each checked here rather than assumed:

* only the same user may connect (``SO_PEERCRED``), the socket lives in a 0700 directory;
* the server learns Terraform's pid as this PID namespace numbers it (the launcher's parent, found
  through ``SO_PEERCRED``), so a launcher in a PID namespace of its own never points it at another
  process's command line;
* the zygote has no threads when it forks (grpc is imported but never started in it);
* every fork serves with a TLS key and certificate of its own: the zygote makes the next fork's
  ahead (:class:`tfbridge.serving.tls_relay.ServerIdentity`), hands it to exactly one child and replaces it;
* a zygote any of whose imported sources (the provider's or a dependency's) changed since it imported
  them refuses to fork and exits, so an upgraded, edited or broken install is never served by stale
  code; the launcher then starts cold;
* one zygote per socket (an exclusive ``flock``); it exits after ``idle_seconds`` without a start.

The zygote is started by the first launcher that finds none (which then serves cold itself).
``TFBRIDGE_ZYGOTE=0`` turns all of this off; ``TFBRIDGE_ZYGOTE_IDLE_SECONDS`` (default 300) sets the
idle time; ``TFBRIDGE_ZYGOTE_DIR`` moves the sockets (default ``$XDG_RUNTIME_DIR`` or ``/tmp``,
``tfbridge-<uid>``). :func:`close_directory` stops every zygote of a directory for good.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import select
import signal
import socket
import ssl
import struct
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from tfbridge.serving.commands import Command, run_command
from tfbridge.serving.constants import COMMAND_FLAG, FORKED, STALE, TERRAFORM_PID_ENV
from tfbridge.serving.handshake import serve
from tfbridge.serving.hosts import LauncherLink, message
from tfbridge.serving.tls_relay import ServerIdentity

if TYPE_CHECKING:
    from tfbridge.proto import tfplugin6_pb2_grpc

CLOSED_MARKER = "closed"  # a zygote directory holding this file gets no new zygotes
_MAX_REQUEST_BYTES = 4 << 20
_LOCK_WAIT_SECONDS = 2.0


@dataclass(frozen=True)
class _Request:
    cwd: bytes
    umask: int
    argv: list[str]
    environment: dict[bytes, bytes]


class _SourceWatch:
    """Every source file the zygote imported, the provider's and its dependencies' alike, as it imported
    them: a change to any (an edited checkout, an upgraded or broken package) makes the zygote stale,
    so that a warm start never runs code a cold start would not. One ``stat`` per file and fork."""

    def __init__(self) -> None:
        self._mtimes = {
            path: self._mtime(path)
            for module in list(sys.modules.values())
            if isinstance(path := getattr(module, "__file__", None), str)
        }

    @staticmethod
    def _mtime(path: str) -> int:
        try:
            return os.stat(path).st_mtime_ns
        except OSError:
            return -1

    def changed(self) -> bool:
        return any(self._mtime(path) != mtime for path, mtime in self._mtimes.items())


def run_zygote(
    argv: list[str],
    servicer_factory: Callable[[], tfplugin6_pb2_grpc.ProviderServicer],
    *,
    preload: Callable[[], None],
    commands: Mapping[str, Command],
) -> NoReturn:
    """Serve forks on the socket ``argv[0]`` until idle for ``argv[1]`` seconds (the launcher's call).

    ``preload`` imports what ``servicer_factory`` and ``commands`` need; every source file imported by
    then is watched for changes.
    """
    socket_path, idle_seconds = Path(argv[0]).absolute(), float(argv[1])
    os.chdir("/")  # a long-lived process must not pin the first start's directory; forks chdir anyway
    lock = _lock_or_exit(socket_path.with_suffix(".lock"))
    if (socket_path.parent / CLOSED_MARKER).exists():
        os._exit(0)  # checked after locking: whoever closed the directory saw, or will see, our lock
    _preload_bridge()
    preload()
    sources = _SourceWatch()
    with contextlib.suppress(FileNotFoundError):
        socket_path.unlink()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(socket_path))
    os.chmod(socket_path, 0o600)
    listener.listen(64)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    # The next fork's certificate and TLS context, made while no start waits for them.
    identity = ServerIdentity.create()
    try:
        while select.select([listener], [], [], idle_seconds)[0]:
            connection, _ = listener.accept()
            outcome = _serve_request(
                connection, listener, lock, sources, _Program(servicer_factory, commands), identity
            )
            if outcome == "stale":
                break
            if outcome == "forked":
                identity = ServerIdentity.create()  # never shared: each server has a key of its own
    finally:
        with contextlib.suppress(FileNotFoundError):
            socket_path.unlink()
    os._exit(0)


def _lock_or_exit(lock_path: Path) -> int:
    """Hold the zygote's lock for its whole life; a second zygote for the same socket just exits."""
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + _LOCK_WAIT_SECONDS  # a stale zygote may still be on its way out
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:
                os._exit(0)
            time.sleep(0.05)
    os.ftruncate(fd, 0)
    os.write(fd, b"%d\n" % os.getpid())  # for whoever must stop it (tests, `kill $(cat ...)`)
    return fd


def _preload_bridge() -> None:
    """Import everything :func:`tfbridge.serving.handshake.serve` imports on its way to the handshake and after it.

    These imports are the zygote's whole point, and the cold path defers them, so they are made here.
    """
    import concurrent.futures.thread  # noqa: F401

    # grpc.server() imports grpc._server on first call: 10-60 ms in every fork if not imported here.
    import grpc._server  # noqa: F401

    # With it the generated stubs, which serve imports on its background thread after the handshake.
    from tfbridge.serving import plugin_services  # noqa: F401

    # Importing cryptography's primitives, and OpenSSL setting up its EC and TLS tables on first use
    # (about 12 ms): once here, not in every fork.
    warm_up = ServerIdentity.create()
    warm_up.trust_only(ssl.DER_cert_to_PEM_cert(warm_up.cert_der).encode())


@dataclass(frozen=True)
class _Program:
    """What a fork runs: the server, or one of the side commands."""

    servicer_factory: Callable[[], tfplugin6_pb2_grpc.ProviderServicer]
    commands: Mapping[str, Command]


def _serve_request(
    connection: socket.socket,
    listener: socket.socket,
    lock: int,
    sources: _SourceWatch,
    program: _Program,
    identity: ServerIdentity,
) -> str:
    """Fork a server with ``identity`` (or a side command) for one launcher; "forked" when ``identity``
    was used, "ran" for a command, or "stale" when the sources changed and the zygote must go, or
    "refused"."""
    fds: list[int] = []
    try:
        peer, uid, _ = struct.unpack("3i", connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
        request, fds = _read_request(connection)
        terraform = _parent_of(peer)
        if uid != os.getuid() or request is None or len(fds) != 3 or terraform is None:
            return "refused"
        # The launcher named its parent as its own PID namespace numbers it; the server reads that
        # process in this one (tfbridge.command), so name it as this namespace does.
        request.environment[TERRAFORM_PID_ENV.encode()] = str(terraform).encode()
        if sources.changed():
            connection.sendall(message(STALE))
            return "stale"
        if threading.active_count() != 1:
            return "refused"  # forking a threaded process is unsafe (the launcher then starts cold)
        command = request.argv[1:2] == [COMMAND_FLAG]
        pid = os.fork()
        if pid == 0:
            listener.close()
            os.close(lock)
            _become_server(connection, fds, request, program, identity)
        return "ran" if command else "forked"
    except OSError:
        return "refused"
    finally:
        for fd in fds:
            os.close(fd)
        connection.close()


def _parent_of(pid: int) -> int | None:
    """The parent of process ``pid`` as this PID namespace numbers it (None when it cannot be read).

    ``SO_PEERCRED`` gives the launcher's pid in this namespace even when the launcher runs in a PID
    namespace of its own (``unshare --pid``, a container sharing ``/tmp`` with the host)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("PPid:"):
            parent = int(line.split()[1])
            return parent or None
    return None


def _read_request(connection: socket.socket) -> tuple[_Request | None, list[int]]:
    """The launcher's request (see :mod:`tfbridge.serving.launch`) and the stdin, stdout and stderr it attached."""
    connection.settimeout(5.0)
    data, fds, _, _ = socket.recv_fds(connection, 65536, 3)
    if len(data) < 4:
        return None, fds
    length = int.from_bytes(data[:4], "big")
    if length > _MAX_REQUEST_BYTES:
        return None, fds
    body = bytearray(data[4:])
    while len(body) < length:
        chunk = connection.recv(min(65536, length - len(body)))
        if not chunk:
            return None, fds
        body += chunk
    connection.settimeout(None)
    fields = bytes(body).split(b"\0")
    try:
        umask, argc = int(fields[1]), int(fields[2])
    except (IndexError, ValueError):
        return None, fds
    argv, env_items = fields[3 : 3 + argc], fields[3 + argc :]
    environment = dict(item.split(b"=", 1) for item in env_items if b"=" in item)
    argv_text = [os.fsdecode(arg) for arg in argv]
    return _Request(cwd=fields[0], umask=umask, argv=argv_text, environment=environment), fds


def _become_server(
    connection: socket.socket,
    fds: list[int],
    request: _Request,
    program: _Program,
    identity: ServerIdentity,
) -> NoReturn:
    """In the forked child: take on the launcher's stdio, environment and directory, then serve (or
    run the side command the arguments name)."""
    exit_code = 1
    launcher = LauncherLink(connection)
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.environ.clear()
        os.environb.update(request.environment)
        os.chdir(request.cwd)
        os.umask(request.umask)
        sys.argv = request.argv
        random.seed()  # forked children must not share the zygote's random sequence (jitter)
        connection.sendall(message(FORKED, os.getpid()))
        if request.argv[1:2] == [COMMAND_FLAG]:
            exit_code = run_command(program.commands, request.argv[2:], launcher)
        else:
            serve(program.servicer_factory, host=launcher, identity=identity)
    except SystemExit as stop:
        exit_code = stop.code if isinstance(stop.code, int) else 1
    except BaseException:
        import traceback

        with contextlib.suppress(OSError, ValueError):  # stderr is Terraform's pipe: it may be gone
            traceback.print_exc()
    for stream in (sys.stdout, sys.stderr):  # a command's output, buffered until now
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    launcher.exited(exit_code)
    os._exit(exit_code)


def process_running(pid: int) -> bool:
    """Alive and not a zombie (a zygote is nobody's child, and some inits never reap orphans)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def live_zygotes(directory: Path) -> list[int]:
    """The pids of the zygotes running for ``directory``: those that hold their ``.lock`` file.

    A lock that can be taken belongs to a zygote that is gone already (the pid in the file may be
    another process's by now).
    """
    pids = []
    for lock_path in directory.glob("*.lock"):
        with lock_path.open("r") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pid = int(lock.read().strip() or 0)
                if pid:
                    pids.append(pid)
    return pids


def close_directory(directory: Path, grace_seconds: float = 10.0) -> list[int]:
    """Stop every zygote of ``directory`` for good (SIGTERM, SIGKILL after ``grace_seconds``).

    The directory is closed first, so a zygote starting right now exits by itself. Returns the pids
    that were stopped.
    """
    (directory / CLOSED_MARKER).touch()
    stopped = live_zygotes(directory)
    for pid in stopped:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_seconds
    for pid in stopped:
        while process_running(pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        if process_running(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    return stopped
