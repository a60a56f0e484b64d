"""Pod sandboxes: real namespaces, real OpenSSH, real port forwarding — checked from inside over SSH."""

from __future__ import annotations

import hashlib
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import paramiko
import pytest

from lium_emulator.sandbox.manager import PodSpec, SandboxError, SandboxManager
from lium_emulator.sandbox.plan import PLAN_FILE
from tests.emulator.test_sandbox_support import (
    ClientKey,
    HeldPidNamespaces,
    check,
    http_server,
    make_client_key,
    manager_at,
    mounts_mentioning,
    pod_spec,
    poll,
    port_listens,
    processes_in,
    pss_kib,
    run,
    ssh,
)
from tests.support.procs import children, open_files

pytestmark = pytest.mark.sandbox  # every test here starts pod sandboxes or an emulator

REPO = Path(__file__).resolve().parents[2]
MARKER = b"hello from the emulator"
StartPod = Callable[..., tuple[PodSpec, dict[int, int]]]


@pytest.fixture(scope="module")
def key() -> ClientKey:
    return make_client_key()


@pytest.fixture(scope="module")
def emulator_port() -> Iterator[int]:
    with http_server({"/marker": MARKER}) as port:
        yield port


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sandbox")


@pytest.fixture(scope="module")
def manager(base: Path, emulator_port: int) -> Iterator[SandboxManager]:
    with manager_at(base / "root", emulator_port) as sandboxes:
        yield sandboxes
    assert mounts_mentioning(base / "root") == []


@pytest.fixture
def start_pod(manager: SandboxManager, base: Path, key: ClientKey) -> Iterator[StartPod]:
    started: list[str] = []

    def start(pod_id: str, **options: object) -> tuple[PodSpec, dict[int, int]]:
        spec = pod_spec(base, pod_id, key, **options)  # type: ignore[arg-type]
        started.append(pod_id)
        return spec, manager.start(spec)

    yield start
    for pod_id in started:
        manager.stop(pod_id)


def environ_of_pid1(client: paramiko.SSHClient) -> dict[str, str]:
    raw = check(client, "cat /proc/1/environ")
    return dict(item.split("=", 1) for item in raw.split("\0") if item)


def test_pod_runs_the_image_like_docker_run(start_pod: StartPod, key: ClientKey, emulator_port: int) -> None:
    began = time.monotonic()
    spec, ports = start_pod(
        "torch",
        image_ref="pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime",
        environment={"LANG": "en_US.UTF-8", "RUN_MODE": "test"},
    )

    def banner() -> bytes | None:
        try:
            with socket.create_connection(("127.0.0.1", ports[22]), timeout=1) as conn:
                return conn.recv(64) or None
        except OSError:
            return None

    assert poll(banner, 10, "sshd banner").startswith(b"SSH-2.0-OpenSSH")
    print(f"start -> sshd banner: {time.monotonic() - began:.3f}s")

    with ssh(ports[22], key) as client:
        environ = environ_of_pid1(client)
        expected = {**spec.image.env, "LANG": "en_US.UTF-8", "RUN_MODE": "test", "HOSTNAME": spec.hostname}
        assert {name: environ.get(name) for name in expected} == expected
        assert check(client, "cd -P /proc/1/cwd && pwd").strip() == "/workspace"
        assert check(client, "tr '\\0' ' ' < /proc/1/cmdline").strip() == "sleep infinity"
        assert check(client, "hostname").strip() == spec.hostname
        assert (
            check(client, "/opt/conda/bin/python -c 'import sys; print(sys.version_info[0])'").strip() == "3"
        )
        # SSH sessions, login shells too, find what the image's PATH holds, as the image's command does.
        assert check(client, "command -v python").strip() == "/opt/conda/bin/python"
        assert check(client, "bash -l -c 'command -v python'").strip() == "/opt/conda/bin/python"
        assert check(client, f"curl -sS http://127.0.0.1:{emulator_port}/marker").encode() == MARKER
        # Its own PID namespace: the host's processes (this test runner included) are not there.
        assert run(client, f"grep -qs pytest /proc/{os.getpid()}/cmdline")[0] != 0


def test_background_process_outlives_the_ssh_session(start_pod: StartPod, key: ClientKey) -> None:
    _, ports = start_pod("background")
    with ssh(ports[22], key) as client:
        pid = int(check(client, "nohup sleep 300 > /dev/null 2>&1 < /dev/null & echo $!").strip())
    with ssh(ports[22], key) as client:
        assert check(client, f"tr '\\0' ' ' < /proc/{pid}/cmdline").strip() == "sleep 300"
        # Orphaned by the ended session, it now belongs to the pod's PID 1.
        poll(
            lambda: check(client, f"awk '/^PPid/ {{print $2}}' /proc/{pid}/status").strip() == "1",
            10,
            "reparent",
        )


def test_pods_are_isolated_from_each_other(start_pod: StartPod, key: ClientKey, base: Path) -> None:
    shared = base / "network-volume"
    shared.mkdir()
    (shared / "dataset.txt").write_text("weights")
    spec_a, a = start_pod("iso-a", internal_ports=[22, 10999], volume_dir=shared)
    spec_b, b = start_pod("iso-b", internal_ports=[22, 10999])
    with ssh(a[22], key) as pod_a, ssh(b[22], key) as pod_b:
        check(pod_a, "echo a-secret > /root/secret.txt && echo a > /tmp/scratch")
        assert run(pod_b, "test -e /root/secret.txt || test -e /tmp/scratch")[0] != 0
        assert check(pod_a, "cat /mnt/dataset.txt") == "weights"
        assert check(pod_b, "ls -A /mnt") == ""
        assert check(pod_b, "hostname").strip() == spec_b.hostname != spec_a.hostname
        key_a = pod_a.get_transport().get_remote_server_key()
        key_b = pod_b.get_transport().get_remote_server_key()
        assert key_a.asbytes() != key_b.asbytes()
        # Both pods serve the same internal port; each is reached through its own mapping.
        for client, name in ((pod_a, "a"), (pod_b, "b")):
            check(
                client,
                f"mkdir -p /srv/www && echo {name} > /srv/www/who && "
                "(nohup python3 -m http.server 10999 --bind 127.0.0.1 --directory /srv/www "
                "> /dev/null 2>&1 < /dev/null &)",
            )
        for port, name in ((a[10999], "a"), (b[10999], "b")):
            assert poll(partial(fetch, port, "/who"), 10, "http.server") == f"{name}\n"
        assert check(pod_a, "pgrep -c -f http.server").strip() == "1"
    assert (
        base / "volumes" / "iso-a" / "secret.txt"
    ).read_text() == "a-secret\n"  # /root is the local volume


def fetch(port: int, path: str) -> str | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as response:
            return str(response.read().decode())
    except OSError:
        return None


def test_non_root_image_user(start_pod: StartPod, key: ClientKey) -> None:
    _, ports = start_pod("nonroot", image_ref="lium-emulator/nonroot-python:3.11")
    with ssh(ports[22], key) as client:
        assert check(client, "getent passwd app").strip() == "app:x:1000:1000::/home/app:/bin/sh"
        assert check(client, "stat -c %u:%g:%a /home/app").strip() == "1000:1000:755"
        assert check(client, "cd -P /proc/1/cwd && pwd").strip() == "/home/app"
        assert check(client, "stat -c %u /proc/1").strip() == "1000"  # PID 1 runs as USER app
        environ = environ_of_pid1(client)
        assert (environ["HOME"], environ["APP_ENV"]) == ("/home/app", "emulator")
        as_app = (
            "setpriv --reuid=1000 --regid=1000 --init-groups sh -c 'id -un && touch ~/made && python3 -V'"
        )
        assert check(client, f"env HOME=/home/app {as_app}").split() == ["app", "Python", "3.11.2"]


def test_sshd_answers_only_after_the_delay_and_volume_path_is_honoured(
    start_pod: StartPod, key: ClientKey, base: Path
) -> None:
    (base / "volumes" / "late").mkdir(parents=True)
    (base / "volumes" / "late" / "notebook.ipynb").write_text("{}")
    began = time.monotonic()
    _, ports = start_pod("late", ssh_delay_seconds=0.6, local_volume_path="/workspace")
    with socket.create_connection(("127.0.0.1", ports[22]), timeout=5) as early:
        assert early.recv(64) == b""  # published, but nothing listens in the pod yet: closed
    with ssh(ports[22], key) as client:
        assert time.monotonic() - began >= 0.6
        assert check(client, "cat /workspace/notebook.ipynb") == "{}"
        assert check(client, "stat -c %a /root && ls /root/.ssh").split() == ["700", "authorized_keys"]


def test_forwarding_carries_bulk_data_and_half_close(
    start_pod: StartPod, key: ClientKey, base: Path, manager: SandboxManager
) -> None:
    """8 MiB through the published port, then EOF; the pod answers with what it received."""
    (base / "volumes" / "bulk").mkdir(parents=True)
    (base / "volumes" / "bulk" / "digest_server.py").write_text(
        "import hashlib, socket\n"
        "server = socket.create_server(('127.0.0.1', 10999))\n"
        "while True:\n"
        "    conn, _ = server.accept()\n"
        "    digest, size = hashlib.sha256(), 0\n"
        "    while data := conn.recv(65536):\n"
        "        digest.update(data)\n"
        "        size += len(data)\n"
        "    conn.sendall(f'{size} {digest.hexdigest()}'.encode())\n"
        "    conn.close()\n"
    )
    _, ports = start_pod("bulk", internal_ports=[22, 10999])
    with ssh(ports[22], key) as client:
        check(client, "nohup python3 /root/digest_server.py > /dev/null 2>&1 < /dev/null &")
    payload = random.Random(1234).randbytes(8 * 1024 * 1024)

    def exchange() -> str | None:
        try:
            with socket.create_connection(("127.0.0.1", ports[10999]), timeout=10) as conn:
                conn.sendall(payload)
                conn.shutdown(socket.SHUT_WR)
                return b"".join(iter(lambda: conn.recv(65536), b"")).decode() or None
        except OSError:
            return None  # the server is not listening yet

    assert poll(exchange, 15, "digest server") == f"{len(payload)} {hashlib.sha256(payload).hexdigest()}"
    poll(lambda: manager.forwarded_connections() == 0, 5, "relays closed")


def test_stop_is_idempotent_and_frees_everything(
    start_pod: StartPod,
    key: ClientKey,
    manager: SandboxManager,
    base: Path,
    pid_namespaces: HeldPidNamespaces,
) -> None:
    _, ports = start_pod("stopme")
    with ssh(ports[22], key) as client:
        check(client, "true")
    pids = manager.pod_pids("stopme")
    assert pids is not None and manager.is_alive("stopme")
    namespace = pid_namespaces.of(pids[0])
    manager.stop("stopme")
    manager.stop("stopme")
    manager.stop("never-started")
    assert not manager.is_alive("stopme")
    assert processes_in({namespace}) == []
    assert not port_listens(ports[22])
    assert not (base / "root" / "pods" / "stopme").exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"entrypoint": "/no/such/binary"}, 'exec: "/no/such/binary": executable file not found'),
        (
            {"entrypoint": None, "startup_commands": "nonexistent-tool --flag"},
            "executable file not found in $PATH",
        ),
        ({"startup_commands": "-c 'unterminated"}, "cannot parse"),
        ({"local_volume_path": "/usr/lib/data"}, "cannot be mounted"),
    ],
)
def test_start_failures_explain_and_leave_nothing(
    start_pod: StartPod, base: Path, options: dict[str, object], message: str
) -> None:
    with pytest.raises(SandboxError, match=message.replace("$", r"\$")):
        start_pod("failing", **options)
    assert not (base / "root" / "pods" / "failing").exists()


def test_pod_whose_entrypoint_exits_is_not_alive(start_pod: StartPod, manager: SandboxManager) -> None:
    start_pod("short-lived", startup_commands="-c 'exit 3'")
    poll(lambda: not manager.is_alive("short-lived"), 10, "PID 1 exit")


def test_only_pid1_writes_the_console_never_the_unshare_that_launched_it(
    start_pod: StartPod, manager: SandboxManager, base: Path
) -> None:
    """util-linux's unshare says "sigprocmask unblock failed" when its child dies of SIGKILL, as every
    deleted pod's PID 1 does: said on the console, it would end the container's own logs."""
    start_pod(
        "quiet-launcher", startup_commands="-c 'echo from-pid1; echo to-stderr >&2; exec sleep infinity'"
    )
    pids = manager.pod_pids("quiet-launcher")
    assert pids is not None
    recorded = json.loads((base / "root" / "pods" / "quiet-launcher" / "pids.json").read_bytes())

    def stream(pid: int, fd: int) -> str:
        return os.readlink(f"/proc/{pid}/fd/{fd}")

    console = stream(pids[0], 1)
    assert console.startswith("pipe:") and stream(pids[0], 2) == console
    launcher = {stream(recorded["unshare_pid"], fd) for fd in (1, 2)}
    assert console not in launcher, "unshare writes into the container's console"
    poll(
        lambda: manager.console_log("quiet-launcher").read_bytes() == b"from-pid1\nto-stderr\n" or None,
        10,
        "PID 1's stdout and stderr on the console",
    )


def test_twenty_pods_at_once(base: Path, key: ClientKey, emulator_port: int) -> None:
    root = base / "many"
    specs = [pod_spec(base, f"many-{index:02d}", key) for index in range(20)]
    threads_before, files_before = set(threading.enumerate()), open_files()
    with manager_at(root, emulator_port) as sandboxes:
        began = time.monotonic()
        with ThreadPoolExecutor(max_workers=8) as pool:
            mappings = list(pool.map(sandboxes.start, specs))
        started = time.monotonic() - began
        for spec, ports in zip(specs, mappings, strict=True):
            with ssh(ports[22], key) as client:
                assert check(client, "hostname").strip() == spec.hostname
        pid1s = [sandboxes.pod_pids(spec.pod_id) for spec in specs]
        pid_namespaces = HeldPidNamespaces()  # closed before the open files are counted
        namespaces = {pid_namespaces.of(pids[0]) for pids in pid1s if pids is not None}
        assert len(namespaces) == 20
        pod_processes = processes_in(namespaces)
        pss_mib = sum(pss_kib(pid) for pid in pod_processes) / 1024
        began = time.monotonic()
        sandboxes.stop_all()
        stopped = time.monotonic() - began
    print(
        f"20 pods: started in {started:.2f}s, torn down in {stopped:.2f}s, "
        f"{len(pod_processes)} pod processes with {pss_mib:.1f} MiB PSS ({pss_mib / 20:.2f} MiB/pod)"
    )
    assert processes_in(namespaces) == []
    pid_namespaces.close()
    assert mounts_mentioning(root) == []
    assert not any(port_listens(port) for ports in mappings for port in ports.values())
    assert list((root / "pods").iterdir()) == []
    poll(lambda: set(threading.enumerate()) <= threads_before, 5, "sandbox threads to end")
    assert open_files() - files_before == Counter()


CRASHING_EMULATOR = """
import json, sys
from pathlib import Path
from lium_emulator.sandbox.manager import SandboxManager
from tests.emulator.test_sandbox_support import make_client_key, pod_spec
base = Path(sys.argv[1])
manager = SandboxManager(base / "root", emulator_port=0)
key = make_client_key()
pods = {}
for index in range(2):
    spec = pod_spec(base, f"crash-{index}", key)
    ports = manager.start(spec)
    pods[spec.pod_id] = [*manager.pod_pids(spec.pod_id), ports[22]]
print(json.dumps(pods), flush=True)
sys.stdin.read()
"""


def test_cleanup_stale_after_an_emulator_crash(tmp_path: Path, pid_namespaces: HeldPidNamespaces) -> None:
    root = tmp_path / "root"
    emulator = subprocess.Popen(
        [sys.executable, "-c", CRASHING_EMULATOR, str(tmp_path)],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert emulator.stdout is not None
        pods = json.loads(emulator.stdout.readline())
        assert sorted(pods) == ["crash-0", "crash-1"]
        assert SandboxManager.cleanup_stale(root) == []  # their emulator still runs them
        emulator.kill()
        emulator.wait()
        namespaces = {pid_namespaces.of(pid1) for pid1, _, _ in pods.values()}
        assert len(processes_in(namespaces)) >= 2  # the pods outlived their emulator
        assert SandboxManager.cleanup_stale(root) == ["crash-0", "crash-1"]
        assert processes_in(namespaces) == []
        assert mounts_mentioning(root) == []
        assert list((root / "pods").iterdir()) == []
        assert not any(port_listens(port) for _, _, port in pods.values())
    finally:
        emulator.kill()
        emulator.wait()
        SandboxManager.cleanup_stale(root)


def test_cleanup_stale_finds_a_sandbox_its_emulator_died_before_recording(tmp_path: Path) -> None:
    """Reliability finding 5: SIGKILL between starting a sandbox and writing its pids left it running."""
    root = tmp_path / "root"
    pod_dir = root / "pods" / "unrecorded-0"
    pod_dir.mkdir(parents=True)
    plan = pod_dir / PLAN_FILE
    plan.write_text("{}")
    # What the emulator starts, minus the namespaces: unshare, and under it the init with the plan.
    sandbox = subprocess.Popen(
        [
            "unshare",
            "--fork",
            "--kill-child=SIGKILL",
            sys.executable,
            "-c",
            "import time; time.sleep(600)",
            str(plan),
        ],
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        poll(lambda: len(children(sandbox.pid)) == 1, 10, "the init to start")
        (init,) = children(sandbox.pid)
        assert SandboxManager.cleanup_stale(root) == ["unrecorded-0"]
        poll(lambda: sandbox.poll() is not None, 10, "the unshare to exit")
        assert not Path(f"/proc/{init}").exists() or Path(f"/proc/{init}/stat").read_text().split()[2] == "Z"
        assert not pod_dir.exists()
    finally:
        if sandbox.poll() is None:
            sandbox.kill()
            sandbox.wait()
