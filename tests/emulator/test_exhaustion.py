"""One pod cannot exhaust the host: a fork bomb stops at the pod's process limit, an offer asking for
more memory than the host has is cut to the host's share, and a disk filler fills only its own
bounded tmpfs and its local volume's bounded image (whose size an offer of more disk than the host has
is cut to the host's share of the free space). Meanwhile another pod and the host keep working."""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
from pathlib import Path

import pytest

from lium_emulator.sandbox.cgroups import HOST_MEMORY_SHARE, PIDS_PER_POD, host_memory_gib
from lium_emulator.sandbox.console import MAX_LOG_BYTES
from lium_emulator.sandbox.portforward import MAX_CONNECTIONS_PER_POD
from lium_emulator.sandbox.volume_image import HOST_DISK_SHARE, MIN_MIB, size_mib
from tests.emulator.test_sandbox_support import make_client_key, manager_at, pod_spec, poll, ssh
from tests.emulator.test_sandbox_support import run as run_as_root

pytestmark = pytest.mark.sandbox

# Forks until refused, each child parked: counts what the pod could start. Bounded, so that a host
# without a pids controller is not bombed for real.
FORKS = PIDS_PER_POD + 500
FORK_BOMB = f"""python3 - <<'EOF'
import os, signal
children, refused = [], 0
for _ in range({FORKS}):
    try:
        pid = os.fork()
    except OSError:
        refused += 1
        continue
    if pid == 0:
        os.closerange(0, 256)  # nothing of the session: the command ends when the parent does
        signal.pause()
        os._exit(0)
    children.append(pid)
for pid in children:
    os.kill(pid, signal.SIGKILL)
for pid in children:
    os.waitpid(pid, 0)
print("started", len(children), "refused", refused)
EOF"""
DISK_FILLER = (
    "dd if=/dev/zero of={path}/fill bs=1M count=10000000 2>&1; df -B1 {path} | tail -1; rm -f {path}/fill"
)


def test_a_fork_bomb_a_disk_filler_and_an_overallocation_leave_the_host_and_other_pods_working(
    tmp_path: Path,
) -> None:
    key = make_client_key()
    with manager_at(tmp_path / "root", 0) as manager:
        limits = manager.limits_report()
        stats = os.statvfs(tmp_path)
        free = stats.f_bavail * stats.f_frsize
        greedy = dataclasses.replace(
            pod_spec(tmp_path, "greedy", key),
            memory_gib=host_memory_gib() * 4,
            cpu_count=1,
            disk_quota_gb=1,
            local_volume_image=tmp_path / "greedy.img",
            local_volume_gb=1,
        )
        bystander = pod_spec(tmp_path, "bystander", key)
        greedy_ports = manager.start(greedy)
        bystander_ports = manager.start(bystander)
        with ssh(greedy_ports[22], key) as attacker, ssh(bystander_ports[22], key) as victim:
            if limits["memory"]["enforced"]:
                status, memory = run_as_root(
                    attacker,
                    "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes",
                )
                cap = int(host_memory_gib() * HOST_MEMORY_SHARE) << 30
                assert status == 0 and int(memory) == cap == limits["memory"]["at_most_gib"] << 30, memory
            status, output = run_as_root(attacker, FORK_BOMB, timeout=120)
            assert status == 0, output
            started = int(output.split()[1])
            if limits["pids"]["enforced"]:
                assert started < PIDS_PER_POD and "refused" in output, output
            status, filled = run_as_root(attacker, DISK_FILLER.format(path=""), timeout=120)
            assert "No space left on device" in filled, filled
            # The local volume (/root) holds what its image holds, not the host's disk.
            status, filled = run_as_root(attacker, DISK_FILLER.format(path="/root"), timeout=120)
            assert "No space left on device" in filled and int(filled.split()[-5]) <= 1 << 30, filled
            # An offer of more disk than the host has free is cut to its share.
            assert size_mib((free >> 30) * 4, tmp_path) <= (free >> 20) * HOST_DISK_SHARE
            # The host and the other pod still start processes and answer.
            assert subprocess.run(["true"], check=False).returncode == 0
            assert run_as_root(victim, "echo alive") == (0, "alive\n")
            assert run_as_root(victim, "python3 -c 'import os; print(os.fork() >= 0)'")[0] == 0


def test_a_pod_that_prints_for_ever_keeps_only_the_newest_output_on_the_host(tmp_path: Path) -> None:
    key = make_client_key()
    chatty = "-c 'head -c 40000000 /dev/zero | tr \"\\000\" y; echo; echo done; exec sleep infinity'"
    with manager_at(tmp_path / "root", 0) as manager:
        manager.start(pod_spec(tmp_path, "chatty", key, startup_commands=chatty))
        log = manager.console_log("chatty")
        poll(lambda: log.read_bytes().endswith(b"done\n"), 60, "the pod's last line in its console log")
        assert log.stat().st_size <= MAX_LOG_BYTES, log.stat().st_size
        assert log.read_bytes()[: 1 << 10] == b"y" * (1 << 10), "the newest output was not the kept part"


def test_a_volume_image_gets_a_share_of_the_disk_other_images_have_not_promised(tmp_path: Path) -> None:
    stats = os.statvfs(tmp_path)
    free = stats.f_bavail * stats.f_frsize
    promised = tmp_path / "other-pod.img"  # a sparse image of another pod: it may still write all of it
    promised.touch()
    os.truncate(promised, free // 2)
    assert size_mib(1 << 20, tmp_path, [promised]) <= ((free - free // 2) >> 20) * HOST_DISK_SHARE + 1
    os.truncate(promised, free * 2)  # more promised than the disk has: the smallest volume still
    assert size_mib(1 << 20, tmp_path, [promised]) == MIN_MIB


# A server in the pod that never accepts: the kernel completes the handshakes (up to its backlog), so
# every relayed connection stays open and idle, as a hostile pod's would.
HOLDER = (
    "-c 'python3 -c \"import socket, time; s = socket.socket(); "
    's.bind((socket.inet_ntoa(bytes([127, 0, 0, 1])), 8000)); s.listen(4096); time.sleep(10 ** 6)" '
    "& exec sleep infinity'"
)


def is_open(sock: socket.socket) -> bool:
    """Whether the relay keeps ``sock`` open: nothing to read yet, and no close or reset."""
    sock.settimeout(0.2)
    try:
        return sock.recv(1) != b""
    except TimeoutError:
        return True
    except ConnectionResetError:
        return False


def test_a_pods_connections_beyond_its_share_are_closed_and_other_pods_still_served(tmp_path: Path) -> None:
    key = make_client_key()
    spec = pod_spec(tmp_path, "crowded", key, internal_ports=[22, 8000], startup_commands=HOLDER)
    with manager_at(tmp_path / "root", 0) as manager:
        ports = manager.start(spec)
        bystander = manager.start(pod_spec(tmp_path, "bystander", key))
        with ssh(ports[22], key) as client:  # up, and its holder listening
            poll(lambda: run_as_root(client, "ss -ltn | grep -c :8000")[1].strip() == "1", 10, "the holder")
        held = [
            socket.create_connection(("127.0.0.1", ports[8000]), timeout=10)
            for _ in range(MAX_CONNECTIONS_PER_POD)
        ]
        try:
            assert all(is_open(sock) for sock in held[-3:]), "a connection within the pod's share was closed"
            with socket.create_connection(("127.0.0.1", ports[8000]), timeout=10) as extra:
                assert not is_open(extra), "a connection over the pod's share was relayed"
            # The crowded pod used up only its own share: another pod is served as before.
            with ssh(bystander[22], key) as client:
                assert run_as_root(client, "echo served") == (0, "served\n")
        finally:
            for sock in held:
                sock.close()
