"""Helpers for the sandbox and runner stand-in suites: pod specs, real SSH clients, leak probes.

Named ``test_*`` only to sit with the suites it serves; it defines no tests.
"""

from __future__ import annotations

import io
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TypeVar

import paramiko
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from lium_emulator.catalogs.images import ImageConfig, resolve_image
from lium_emulator.sandbox.manager import PodSpec, SandboxManager

T = TypeVar("T")


@dataclass(frozen=True)
class ClientKey:
    pkey: paramiko.PKey
    public_line: str


def make_client_key() -> ClientKey:
    key = ed25519.Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    ).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return ClientKey(
        paramiko.Ed25519Key.from_private_key(io.StringIO(private)), public.decode() + " test@host"
    )


def image(reference: str) -> ImageConfig:
    config = resolve_image(reference, "")
    assert config is not None, reference
    return config


def pod_spec(
    base: Path,
    pod_id: str,
    key: ClientKey,
    *,
    image_ref: str = "python:3.11-slim",
    internal_ports: list[int] | None = None,
    environment: dict[str, str] | None = None,
    volume_dir: Path | None = None,
    entrypoint: str | None = "/bin/sh",
    startup_commands: str = "-c 'exec sleep infinity'",
    local_volume_path: str = "/root",
    ssh_delay_seconds: float = 0.0,
) -> PodSpec:
    """A spec like dstack's template (``/bin/sh -c 'exec sleep infinity'``, volume at /root)."""
    local_volume = base / "volumes" / pod_id
    local_volume.mkdir(parents=True, exist_ok=True)
    return PodSpec(
        pod_id=pod_id,
        hostname=f"host-{pod_id}",
        image=image(image_ref),
        entrypoint=entrypoint,
        startup_commands=startup_commands,
        environment=environment or {},
        authorized_keys=[key.public_line],
        internal_ports=internal_ports if internal_ports is not None else [22, 10022],
        local_volume_path=local_volume_path,
        local_volume_dir=local_volume,
        volume_dir=volume_dir,
        ssh_delay_seconds=ssh_delay_seconds,
        cpu_count=2,
        memory_gib=4,
        disk_quota_gb=10,
    )


def poll(condition: Callable[[], T | None], timeout: float, what: str, interval: float = 0.02) -> T:
    """The first truthy result of ``condition`` within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def try_ssh(port: int, key: ClientKey) -> paramiko.SSHClient | None:
    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
    try:
        client.connect(
            "127.0.0.1",
            port=port,
            username="root",
            pkey=key.pkey,
            timeout=5,
            banner_timeout=5,
            auth_timeout=5,
            allow_agent=False,
            look_for_keys=False,
        )
    except (paramiko.SSHException, OSError, EOFError):
        client.close()
        return None
    return client


@contextmanager
def ssh(port: int, key: ClientKey, timeout: float = 15.0) -> Iterator[paramiko.SSHClient]:
    """A root SSH session to a published port, retried until the pod's sshd answers."""
    client = poll(lambda: try_ssh(port, key), timeout, f"sshd on port {port}")
    try:
        yield client
    finally:
        client.close()


def run(client: paramiko.SSHClient, command: str, timeout: float = 30.0) -> tuple[int, str]:
    """Exit status and stdout+stderr of ``command`` run over SSH."""
    channel = client.get_transport().open_session(timeout=timeout)
    channel.settimeout(timeout)
    channel.set_combine_stderr(True)
    channel.exec_command(command)
    output = b"".join(iter(lambda: channel.recv(65536), b""))
    return channel.recv_exit_status(), output.decode()


def check(client: paramiko.SSHClient, command: str, timeout: float = 30.0) -> str:
    status, output = run(client, command, timeout)
    assert status == 0, f"{command!r} exited {status}: {output}"
    return output


class HeldPidNamespaces:
    """Names of PID namespaces (``pid:[<inode>]``), each held open until :meth:`close`.

    The kernel reuses a freed namespace's inode number at once, so a pod that another test starts a
    moment after this test's pods died may carry the very name this test looks for; a namespace held
    open is not freed, and its name stays its own.
    """

    def __init__(self) -> None:
        self._fds: list[int] = []

    def of(self, pid: int) -> str:
        fd = os.open(f"/proc/{pid}/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
        self._fds.append(fd)
        return os.readlink(f"/proc/self/fd/{fd}")

    def close(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds.clear()


def processes_in(namespaces: set[str]) -> list[int]:
    """Host pids of every live process whose PID namespace is one of ``namespaces``. A zombie is left
    out: it was killed already and only waits for its parent (outside the pod, as often as not) to
    collect its exit status, which under load may come a moment after whoever killed it returned."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.readlink(f"/proc/{entry}/ns/pid") in namespaces:
                    stat = Path(f"/proc/{entry}/stat").read_text()
                    if stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X"):
                        found.append(int(entry))
            except OSError:
                continue
    return found


def mounts_mentioning(path: Path) -> list[str]:
    return [line for line in Path("/proc/self/mountinfo").read_text().splitlines() if str(path) in line]


def port_listens(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def pss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


@contextmanager
def manager_at(
    root: Path, emulator_port: int, *, pod_open_files_limit: int | None = None
) -> Iterator[SandboxManager]:
    """A SandboxManager whose pods are all torn down afterwards, even when the test fails."""
    manager = SandboxManager(root, emulator_port=emulator_port, pod_open_files_limit=pod_open_files_limit)
    try:
        yield manager
    finally:
        manager.stop_all()


@contextmanager
def http_server(routes: dict[str, bytes]) -> Iterator[int]:
    """A host loopback HTTP server answering GET ``path`` with ``routes[path]``; yields its port."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = routes.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
