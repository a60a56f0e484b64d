"""The provider executable's first step: hand this start to a warm zygote, or start cold and make one.

Run as a script, ``python -I -S .../tfbridge/serving/launch.py <module or script.py> [args...]``: no ``site`` and only
C-level standard modules (``_socket``, ``_signal``, ``_sha256``: the friendlier wrappers import
``enum``, ``re`` and ``collections``, which would triple this script's cost), so it takes under 10 ms.
The names it shares with the bridge (the magic cookie's name, the zygote flag, the letters of its
messages to and from the zygote) come from ``tfbridge/serving/constants.py``, which it executes by path.
See :mod:`tfbridge.serving.zygote` for the whole design. Without a usable zygote (none yet, a stale one,
``TFBRIDGE_ZYGOTE=0``) it starts the server cold, ``python -I -m <module>`` (or ``python -I
<script.py>``), after starting a zygote in the background for the next start. A cold server too runs in a
session of its own with this process standing for it, exactly as a forked one: so whichever of the two
Terraform's end kills (this process alone, or its whole process group), the server is left to undo an
in-flight create before it exits (:mod:`tfbridge.serving.hosts`). Only when not started by Terraform (no
magic cookie) is the program exec'ed in place, to say that it is a plugin. A start that asks for a warm
zygote only (``TFBRIDGE_WARM_ONLY``, :mod:`tfbridge.serving.reattach`) and finds none exits at once instead,
with no handshake, starting nothing.

The request to the zygote is ``[4-byte length][cwd NUL umask NUL argc NUL argv... NUL env "k=v"...]`` with this
process's stdin, stdout and stderr attached (SCM_RIGHTS); the zygote answers ``P<pid>\\n`` when its
forked server runs (or ``S\\n`` when stale), and the server ends with ``X<exit code>\\n``. The
launcher sends ``O`` when Terraform died (the server then stops as an orphaned provider does); a
launcher that dies itself closes the socket, and the server dies at once, as the provider process
Terraform knows did.
"""

import _signal  # type: ignore[import-not-found]  # no stubs: signal's own wrapper imports enum
import _socket
import os
import sys

try:
    from _sha256 import sha256  # type: ignore[import-not-found]
except ImportError:  # Python 3.12+ renamed the module
    from _sha2 import sha256  # type: ignore[import-not-found]


def _shared_constants() -> dict[str, str]:
    """The names ``tfbridge/serving/constants.py`` defines, read by path and executed.

    This script cannot import the ``tfbridge`` package: under ``-I -S`` neither this script's directory
    nor site-packages is on ``sys.path``, and the package's ``__init__`` costs more than this whole
    script. That file imports nothing, so executing it takes about 0.1 ms.
    """
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "constants.py")
    namespace: dict[str, object] = {}
    with open(path, "rb") as source:
        exec(compile(source.read(), path, "exec"), namespace)
    return {name: value for name, value in namespace.items() if isinstance(value, str)}


_CONSTANTS = _shared_constants()
MAGIC_COOKIE_KEY = _CONSTANTS["MAGIC_COOKIE_KEY"]
ZYGOTE_FLAG = _CONSTANTS["ZYGOTE_FLAG"]
FORKED, EXITED, ORPHANED = (_CONSTANTS[name].encode() for name in ("FORKED", "EXITED", "ORPHANED"))
LAUNCHER_FD_ENV = _CONSTANTS["LAUNCHER_FD_ENV"]
TERRAFORM_PID_ENV = _CONSTANTS["TERRAFORM_PID_ENV"]
WARM_ONLY_ENV = _CONSTANTS["WARM_ONLY_ENV"]
DEFAULT_IDLE_SECONDS = "300"
PARENT_POLL_SECONDS = 1.0
NOT_SERVED_EXIT_CODE = 75  # EX_TEMPFAIL: a warm-only start found no warm zygote
# What the zygote keeps of the environment of the start that launches it. The TLS trust settings are
# among them so that the TLS context it prepares for its forks is the one they use (each fork still
# builds its own when its settings differ).
ZYGOTE_ENVIRONMENT = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TMPDIR",
    "TZ",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
)


def build_identity() -> str:
    """What tells this provider build from another, so every copy of one build shares one zygote.

    Terraform gives each working directory a copy of the provider (``.terraform/providers/...``), so a
    path names a copy, not a build. Installed from a wheel (the release bundle, a pip install), the
    build is its distributions: the name and version of each beside it in site-packages, and the RECORD
    (every file's hash) of the one holding this script. From a checkout there is no RECORD: the
    interpreter and this script's path say which checkout. The zygote still watches its own copy's
    sources and goes when they change or vanish, and the launcher then starts cold.
    """
    here = os.path.abspath(__file__)
    site = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    try:
        distributions = sorted(name for name in os.listdir(site) if name.endswith(".dist-info"))
    except OSError:
        distributions = []
    for name in distributions:
        try:
            with open(os.path.join(site, name, "RECORD"), "rb") as record:
                files = record.read()
        except OSError:
            continue
        if b"tfbridge/serving/launch.py," in files:
            return "\0".join((sys.version, *distributions, sha256(files).hexdigest()))
    return "\0".join((sys.executable, here))


def socket_path(program: str) -> str:
    """One zygote per user, provider build (:func:`build_identity`) and program, in a private directory."""
    base = os.environ.get("TFBRIDGE_ZYGOTE_DIR") or os.path.join(
        os.environ.get("XDG_RUNTIME_DIR") or os.environ.get("TMPDIR") or "/tmp", f"tfbridge-{os.getuid()}"
    )
    os.makedirs(base, mode=0o700, exist_ok=True)
    info = os.stat(base)
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise PermissionError(f"{base} must be a private directory of this user")
    key = sha256("\0".join((build_identity(), program)).encode())
    return os.path.join(base, key.hexdigest()[:20] + ".sock")


def python_command(program: str) -> list[str]:
    """``python -I -m <module>``, or ``python -I <script.py>``; with ``-B`` if this launcher has it (a
    packaged provider must never write bytecode into its own directory, whose hash Terraform checks)."""
    python = [sys.executable, "-I", *(["-B"] if sys.flags.dont_write_bytecode else [])]
    return [*python, program] if program.endswith(".py") else [*python, "-m", program]


def start_zygote(program: str, path: str, idle_seconds: str) -> None:
    """Start the zygote detached (its own session, no stdio), and do not wait for it."""
    pid = os.fork()
    if pid:
        os.waitpid(pid, 0)
        return
    try:
        os.setsid()
        if os.fork() == 0:
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            # Not this start's environment: it may hold secrets (API keys), and the zygote outlives
            # the start; each fork receives its own launcher's environment instead.
            environment = {key: os.environ[key] for key in ZYGOTE_ENVIRONMENT if key in os.environ}
            os.execve(
                sys.executable, [*python_command(program), ZYGOTE_FLAG, path, idle_seconds], environment
            )
    finally:
        os._exit(0)


def encode_request(program: str, args: list[str]) -> bytes:
    umask = os.umask(0o077)
    os.umask(umask)
    fields = [
        os.getcwdb(),
        b"%d" % umask,
        b"%d" % (len(args) + 1),
        os.fsencode(program),
        *map(os.fsencode, args),
    ]
    fields += [key + b"=" + value for key, value in os.environb.items()]
    body = b"\0".join(fields)
    return len(body).to_bytes(4, "big") + body


def read_line(connection: _socket.socket) -> bytes:
    line = b""
    while not line.endswith(b"\n"):
        chunk = connection.recv(1)
        if not chunk:
            break
        line += chunk
    return line


def wait_for_exit(connection: _socket.socket, terraform: int) -> bytes:
    """The server's ``X<code>`` line; tells it ``O`` (orphaned) if Terraform dies first, as a provider's
    own parent watch would notice.

    Returns as soon as the line is complete: the server sends it as the last thing before ``os._exit``,
    and the kernel's teardown of a process of its size (threads, a forked 60 MB heap) takes about 2 ms
    (measured under load) that Terraform, which waits for this process to exit after every Shutdown,
    need not wait for.
    """
    connection.settimeout(PARENT_POLL_SECONDS)
    status = b""
    told = False
    while True:
        try:
            chunk = connection.recv(64)
        except TimeoutError:
            if not told and os.getppid() != terraform:
                connection.sendall(ORPHANED)
                told = True
            continue
        if not chunk:
            return status
        status += chunk
        if status.endswith(b"\n"):
            return status


def exit_code_of(status: bytes) -> int:
    """The exit code in a server's ``X<code>`` line; 1 when the server ended without one."""
    return int(status[1:]) if status.startswith(EXITED) and status[1:].strip().isdigit() else 1


def serve_cold(program: str, args: list[str], terraform: int) -> int:
    """Start the server as a child in a session of its own, stand for it until it exits; its exit code."""
    ours, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM)
    child = os.fork()
    if child == 0:
        try:
            ours.close()
            os.setsid()  # a kill of this process's group must leave the server its time to undo
            os.set_inheritable(theirs.fileno(), True)
            os.environ[LAUNCHER_FD_ENV] = str(theirs.fileno())
            os.execv(sys.executable, [*python_command(program), *args])
        finally:
            os._exit(127)
    theirs.close()
    _signal.signal(_signal.SIGTERM, lambda signum, frame: os.kill(child, _signal.SIGTERM))
    try:
        status = wait_for_exit(ours, terraform)
    except OSError:
        status = b""
    if status:
        return exit_code_of(status)
    # No X line: the server died before it could send one; its own status says how.
    _, wait_status = os.waitpid(child, 0)
    return os.waitstatus_to_exitcode(wait_status) if os.WIFEXITED(wait_status) else 1


def serve_through_zygote(program: str, args: list[str], path: str, terraform: int) -> int | None:
    """The forked server's exit code, or None when the zygote cannot serve this start (start cold)."""
    connection = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    child = 0
    status = b""
    try:
        connection.connect(path)
        message = encode_request(program, args)
        stdio = b"".join(fd.to_bytes(4, sys.byteorder) for fd in (0, 1, 2))
        sent = connection.sendmsg([message], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, stdio)])
        connection.sendall(message[sent:])
        reply = read_line(connection)
        if not reply.startswith(FORKED):
            return None  # the zygote refused (its sources changed): it is going away
        child = int(reply[1:])
        # Terraform ends a provider with SIGTERM (or SIGKILL, which the server notices as a closed socket).
        _signal.signal(_signal.SIGTERM, lambda signum, frame: os.kill(child, _signal.SIGTERM))
        status = wait_for_exit(connection, terraform)
    except OSError:
        if not child:
            return None
    finally:
        connection.close()
    # Once a server runs, this process stands for it: a lost connection is a failed provider, never a
    # reason to start a second server.
    return exit_code_of(status)


def main() -> None:
    terraform = os.getppid()  # read first: Terraform may be gone soon
    program, args = sys.argv[1], sys.argv[2:]
    # Terraform forwards Ctrl-C to the process group, then asks the provider to stop; this process must
    # outlive that, or the server it stands for would lose its connection.
    _signal.signal(_signal.SIGINT, _signal.SIG_IGN)
    if MAGIC_COOKIE_KEY not in os.environ:  # not started by Terraform: the program says what it is
        os.execv(sys.executable, [*python_command(program), *args])
    os.environ[TERRAFORM_PID_ENV] = str(terraform)  # the server's parent is not Terraform: tell it who is
    idle_seconds = os.environ.get("TFBRIDGE_ZYGOTE_IDLE_SECONDS", DEFAULT_IDLE_SECONDS)
    wanted = os.environ.get("TFBRIDGE_ZYGOTE", "1") != "0"
    if wanted and idle_seconds.replace(".", "", 1).isdigit() and float(idle_seconds) > 0:
        try:
            path = socket_path(program)
        except OSError as error:
            sys.stderr.write(f"tfbridge: starting without a zygote: {error}\n")
        else:
            exit_code = serve_through_zygote(program, args, path, terraform)
            if exit_code is not None:
                os._exit(exit_code)
            if WARM_ONLY_ENV not in os.environ:
                start_zygote(program, path, idle_seconds)
    if WARM_ONLY_ENV in os.environ:  # no warm zygote served it: no handshake, nothing started
        os._exit(NOT_SERVED_EXIT_CODE)
    os._exit(serve_cold(program, args, terraform))


if __name__ == "__main__":
    main()
