"""tfbridge.serving.launch and tfbridge.serving.zygote: warm starts behave exactly like cold ones, for Terraform.

The launcher is what Terraform execs; it must hand the start to the zygote when one is warm, exit as
its forked server exits, pass SIGTERM on, take the server down when it is killed itself, stop it when
Terraform dies, and fall back to a cold start whenever the zygote cannot be trusted.
"""

from __future__ import annotations

import ast
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from tests.support.procs import children, cmdline, private_zygotes
from tests.tfbridge.plugin_host import (
    ClientIdentity,
    Handshake,
    PluginProcess,
    plugin_env,
    read_handshake_line,
    stub,
)
from tfbridge.proto import grpc_controller_pb2, grpc_controller_pb2_grpc, health_pb2, health_pb2_grpc
from tfbridge.serving import constants, launch
from tfbridge.serving.constants import ZYGOTE_FLAG
from tfbridge.serving.install import LAUNCH_SCRIPT
from tfbridge.serving.zygote import live_zygotes
from tfbridge.serving.zygote import process_running as running

HERE = Path(__file__).resolve().parent
SERVE_SCRIPT = HERE / "serve_empty_provider.py"
LAUNCHER = [sys.executable, "-I", "-S", str(LAUNCH_SCRIPT), str(SERVE_SCRIPT)]
DEADLINE = 15.0
SERVING = health_pb2.HealthCheckResponse.SERVING


def eventually(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


@pytest.fixture
def zygotes(socket_root: Path) -> Iterator[Path]:
    with private_zygotes(socket_root / "z") as directory:
        yield directory


def zygote_pid(directory: Path) -> int:
    """The pid of the zygote running for ``directory``, or 0."""
    return next(iter(live_zygotes(directory)), 0)


def warm_up(env: dict[str, str], directory: Path, launcher: list[str] = LAUNCHER) -> int:
    """One cold start (it starts the zygote); returns the zygote's pid once it listens."""
    with PluginProcess(launcher, env) as plugin:
        plugin.handshake()
    eventually(lambda: zygote_pid(directory) != 0 and any(directory.glob("*.sock")), "no zygote came up")
    return zygote_pid(directory)


@contextmanager
def warm_start(
    zygotes: Path, socket_root: Path, identity: ClientIdentity
) -> Iterator[tuple[PluginProcess, Handshake, int]]:
    """A start served by the zygote (warmed up first): the launcher, its handshake, the server's pid."""
    env = plugin_env(identity, socket_root)
    zygote = warm_up(env, zygotes)
    before = set(children(zygote))
    with PluginProcess(LAUNCHER, env) as plugin:
        handshake = plugin.handshake()
        (server,) = set(children(zygote)) - before
        yield plugin, handshake, server


def cold_server(launcher: int, script: Path = SERVE_SCRIPT) -> int:
    """The server a launcher started cold: its one child, leading a session of its own (a zygote's
    fork is the zygote's child, never the launcher's)."""
    eventually(lambda: len(children(launcher)) == 1, "the launcher has no cold server")
    (server,) = children(launcher)
    assert ZYGOTE_FLAG not in cmdline(server) and str(script) in cmdline(server)
    assert os.getsid(server) == server, "a cold server must lead its own session"
    return server


@contextmanager
def cold_start(
    zygotes: Path, socket_root: Path, identity: ClientIdentity
) -> Iterator[tuple[PluginProcess, Handshake, int]]:
    """A start without a zygote (``TFBRIDGE_ZYGOTE=0``): the launcher, its handshake, the server's pid."""
    with PluginProcess(LAUNCHER, plugin_env(identity, socket_root, TFBRIDGE_ZYGOTE="0")) as plugin:
        handshake = plugin.handshake()
        yield plugin, handshake, cold_server(plugin.process.pid)


STARTS = {"warm": warm_start, "cold": cold_start}


def health(handshake: Handshake, identity: ClientIdentity) -> int:
    with handshake.channel(identity) as channel:
        return int(
            stub(health_pb2_grpc.HealthStub, channel)
            .Check(health_pb2.HealthCheckRequest(service="plugin"), timeout=10)
            .status
        )


def test_a_warm_start_is_served_by_a_fork_of_the_zygote(
    zygotes: Path, socket_root: Path, identity: ClientIdentity
) -> None:
    with warm_start(zygotes, socket_root, identity) as (plugin, handshake, server):
        assert health(handshake, identity) == SERVING
        assert str(LAUNCH_SCRIPT) in cmdline(plugin.process.pid), "the launcher exec'd a cold start"
        assert children(plugin.process.pid) == [], "the server must not be the launcher's child"
        with handshake.channel(identity) as channel:
            stub(grpc_controller_pb2_grpc.GRPCControllerStub, channel).Shutdown(
                grpc_controller_pb2.Empty(), timeout=10
            )
        assert plugin.wait() == 0, "Shutdown must end the launcher with the server's exit code 0"
        eventually(lambda: not running(server), "the server outlived its Shutdown")


@pytest.mark.parametrize("start", STARTS)
def test_sigterm_to_the_launcher_reaches_the_server(
    start: str, zygotes: Path, socket_root: Path, identity: ClientIdentity
) -> None:
    with STARTS[start](zygotes, socket_root, identity) as (plugin, _, server):
        plugin.process.send_signal(signal.SIGTERM)
        assert plugin.wait() == 128 + signal.SIGTERM
        eventually(lambda: not running(server), "the server outlived SIGTERM")


@pytest.mark.parametrize("start", STARTS)
def test_sigint_is_ignored_by_launcher_and_server(
    start: str, zygotes: Path, socket_root: Path, identity: ClientIdentity
) -> None:
    with STARTS[start](zygotes, socket_root, identity) as (plugin, handshake, _):
        plugin.signal_group(signal.SIGINT)  # Terraform's Ctrl-C reaches the provider's process group
        assert health(handshake, identity) == SERVING
        assert plugin.process.poll() is None


@pytest.mark.parametrize("start", STARTS)
@pytest.mark.parametrize("killed", ["launcher", "process group"])
def test_a_killed_launcher_takes_its_server_along(
    start: str, killed: str, zygotes: Path, socket_root: Path, identity: ClientIdentity
) -> None:
    with STARTS[start](zygotes, socket_root, identity) as (plugin, _, server):
        if killed == "launcher":
            plugin.process.kill()
        else:  # what a CI system does to a job's process tree; the server is in a session of its own
            plugin.signal_group(signal.SIGKILL)
        plugin.wait()
        eventually(lambda: not running(server), "the server went on after its launcher was killed")
    if start == "warm":
        assert zygote_pid(zygotes) != 0, "the zygote itself stays for the next start"


def test_a_server_stops_once_terraform_is_killed(
    zygotes: Path, socket_root: Path, identity: ClientIdentity
) -> None:
    env = plugin_env(identity, socket_root)
    zygote = warm_up(env, zygotes)
    before = set(children(zygote))
    pid_file = socket_root / "launcher.pid"
    # A stand-in for Terraform: starts the launcher as its child, then waits.
    terraform = subprocess.Popen(
        ["sh", "-c", f"{shlex.join(LAUNCHER)} & echo $! > {shlex.quote(str(pid_file))}; wait"],
        env=env,
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        Handshake.parse(read_handshake_line(terraform))
        launcher = int(pid_file.read_text())
        (server,) = set(children(zygote)) - before
        terraform.kill()
        terraform.wait()
        eventually(lambda: not running(server), "the server kept serving a dead Terraform")
        eventually(lambda: not running(launcher), "the launcher kept running without its server")
    finally:
        if terraform.poll() is None:
            terraform.kill()
            terraform.wait()
        if terraform.stdout is not None:
            terraform.stdout.close()


# A provider whose zygote watches one more package, of this test's own: changing that package's source
# retires this zygote only (the shared test sources stay untouched, as zygotes of tests running
# alongside watch them).
PRIVATE_SERVE_SCRIPT = """
import sys
sys.path[:0] = [{repo!r}, {sources!r}]
from tfbridge.plugin import main
from tests.tfbridge.serve_empty_provider import build_provider

def preload() -> None:
    import watched_provider  # noqa: F401

main(build_provider, preload=preload)
"""


@pytest.mark.parametrize("changed", ["the provider's own module", "a dependency it imports"])
def test_changed_sources_retire_the_zygote(
    zygotes: Path, socket_root: Path, identity: ClientIdentity, changed: str
) -> None:
    """A source file the zygote imported changes, the provider's or a dependency's (an upgraded or
    broken package in the venv): the next start is cold, never a fork of the stale code."""
    sources = socket_root / "sources"
    (sources / "watched_provider").mkdir(parents=True)
    provider = sources / "watched_provider" / "__init__.py"
    provider.write_text('"""Imported by the zygote, so watched."""\nimport some_dependency  # noqa: F401\n')
    dependency = sources / "some_dependency.py"
    dependency.write_text('"""A package the provider imports."""\n')
    watched = provider if changed.startswith("the provider") else dependency
    script = sources / "serve.py"
    script.write_text(PRIVATE_SERVE_SCRIPT.format(repo=str(HERE.parents[1]), sources=str(sources)))
    launcher = [*LAUNCHER[:-1], str(script)]
    env = plugin_env(identity, socket_root)
    stale = warm_up(env, zygotes, launcher)
    times = watched.stat()
    os.utime(watched, ns=(times.st_atime_ns, times.st_mtime_ns + 1_000_000_000))
    with PluginProcess(launcher, env) as plugin:
        handshake = plugin.handshake()
        assert health(handshake, identity) == SERVING
        cold_server(plugin.process.pid, script)  # not a fork of the stale zygote
    eventually(lambda: not running(stale), "the stale zygote did not go away")
    eventually(lambda: zygote_pid(zygotes) not in (0, stale), "no fresh zygote replaced the stale one")


@pytest.mark.parametrize(
    "setting", ["TFBRIDGE_ZYGOTE=0", "TFBRIDGE_ZYGOTE_IDLE_SECONDS=0", "shared directory"]
)
def test_starts_cold_when_the_zygote_is_off_or_unsafe(
    setting: str, zygotes: Path, socket_root: Path, identity: ClientIdentity
) -> None:
    extra = dict([setting.split("=", 1)]) if "=" in setting else {}
    if setting == "shared directory":
        shared = socket_root / "shared"
        shared.mkdir(mode=0o755)
        shared.chmod(0o755)
        extra = {"TFBRIDGE_ZYGOTE_DIR": str(shared)}
    env = plugin_env(identity, socket_root, **extra)
    with PluginProcess(LAUNCHER, env) as plugin:
        handshake = plugin.handshake()
        assert health(handshake, identity) == SERVING
        cold_server(plugin.process.pid)
    directory = Path(extra.get("TFBRIDGE_ZYGOTE_DIR", str(zygotes)))
    assert not list(directory.glob("*.lock")), "no zygote may be started"


def test_a_closed_directory_gets_no_new_zygote(
    zygotes: Path, socket_root: Path, identity: ClientIdentity
) -> None:
    (zygotes / "closed").touch()
    env = plugin_env(identity, socket_root)
    with PluginProcess(LAUNCHER, env) as plugin:
        assert health(plugin.handshake(), identity) == SERVING
    # The zygote the start asked for takes its lock, sees the directory closed and exits.
    eventually(lambda: any(zygotes.glob("*.lock")), "the zygote was never started")
    eventually(lambda: zygote_pid(zygotes) == 0, "a zygote runs in a closed directory")
    assert not list(zygotes.glob("*.sock"))


def test_the_zygote_keeps_nothing_of_the_start_that_made_it(
    zygotes: Path, socket_root: Path, identity: ClientIdentity
) -> None:
    secret = "secret-api-key-0123456789"
    env = plugin_env(identity, socket_root, LIUM_API_KEY=secret)
    zygote = warm_up(env, zygotes)
    assert secret.encode() not in Path(f"/proc/{zygote}/environ").read_bytes()
    assert secret.encode() not in Path(f"/proc/{zygote}/cmdline").read_bytes()
    assert os.readlink(f"/proc/{zygote}/cwd") == "/", "the zygote pins the first start's directory"


def test_the_launcher_takes_the_shared_names_from_the_one_constants_file() -> None:
    """launch.py executes tfbridge/serving/constants.py by path (it cannot import tfbridge): the values are the
    bridge's, and the file imports nothing, so executing it stays cheap and standard-library only."""
    constants_file = Path(constants.__file__)
    tree = ast.parse(constants_file.read_text())
    assert [node for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)] == []
    assert (launch.MAGIC_COOKIE_KEY, launch.ZYGOTE_FLAG) == (
        constants.MAGIC_COOKIE_KEY,
        constants.ZYGOTE_FLAG,
    )
    sent = (launch.FORKED, launch.EXITED, launch.ORPHANED)
    assert sent == tuple(
        letter.encode() for letter in (constants.FORKED, constants.EXITED, constants.ORPHANED)
    )


def test_each_warm_start_serves_a_key_of_its_own(
    zygotes: Path, socket_root: Path, identity: ClientIdentity
) -> None:
    """The zygote makes each fork's TLS key ahead of the start: two starts must never share one."""
    env = plugin_env(identity, socket_root)
    zygote = warm_up(env, zygotes)
    with PluginProcess(LAUNCHER, env) as first, PluginProcess(LAUNCHER, env) as second:
        handshakes = [first.handshake(), second.handshake()]
        assert len(children(zygote)) == 2, "both starts must be forks of the zygote"
        keys = [
            x509.load_der_x509_certificate(h.server_cert_der or b"")
            .public_key()
            .public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
            for h in handshakes
        ]
        assert keys[0] != keys[1]
        # Each channel trusts only the certificate on its own handshake line: the server serves it.
        assert [health(h, identity) for h in handshakes] == [SERVING, SERVING]
