"""Pod networking, seen from inside real pods over SSH: every pod reaches every pod's published ports at
their advertised addresses, and the members of a cluster share a private overlay network that no
other cluster and nothing on the host's interfaces sees (docs/emulator.md, "Pod networking")."""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

import paramiko
import pytest

from lium_emulator.sandbox.advertised import POD_SOURCE_ADDRESS
from lium_emulator.sandbox.manager import PodSpec, SandboxError, SandboxManager
from lium_emulator.sandbox.overlay import OverlayMember
from lium_emulator.sandbox.portforward import MAX_CONNECTIONS_PER_POD, POD_RELAY_BYTES_PER_SECOND
from tests.emulator.test_sandbox_support import (
    ClientKey,
    HeldPidNamespaces,
    check,
    http_server,
    make_client_key,
    manager_at,
    pod_spec,
    poll,
    processes_in,
    run,
    ssh,
    try_ssh,
)
from tests.support.procs import open_files

pytestmark = pytest.mark.sandbox  # every test here starts pod sandboxes

REPO = Path(__file__).resolve().parents[2]
# What a client inside a pod gets from host:port: the first line the server sends, "closed" when the
# connection ends without one, or the error's name.
PROBE = """
import socket, sys
try:
    with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3])) as s:
        s.settimeout(float(sys.argv[3]))
        print(s.recv(256).decode(errors="replace").strip() or "closed")
except OSError as e:
    print(type(e).__name__)
"""


@pytest.fixture(scope="module")
def key() -> ClientKey:
    return make_client_key()


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[SandboxManager]:
    with manager_at(tmp_path / "root", 0) as sandboxes:
        yield sandboxes


def probe(client: paramiko.SSHClient, host: str, port: int, timeout: float = 5.0) -> str:
    return check(client, f"python3 -c {shlex.quote(PROBE)} {host} {port} {timeout}").strip()


def host_key(client: paramiko.SSHClient) -> str:
    """The pod's own ed25519 host key (base64), as its sshd serves it."""
    return check(client, "cut -d' ' -f2 /etc/ssh/ssh_host_ed25519_key.pub").strip()


def host_key_at(client: paramiko.SSHClient, host: str, port: int) -> str:
    """The ed25519 host key of the sshd that answers ``host:port`` from inside the pod."""
    _, output = run(client, f"ssh-keyscan -T 5 -t ed25519 -p {port} {host} 2>/dev/null")
    fields = output.split()
    return fields[2] if len(fields) == 3 else ""


def interfaces(client: paramiko.SSHClient) -> list[str]:
    """The names of the pod's network interfaces."""
    names = check(client, "python3 -c 'import socket; print(*(n for _, n in socket.if_nameindex()))'")
    return names.split()


def namespace_fds() -> list[str]:
    """Network namespaces this (test) process holds fds on: the emulator's, as the manager runs here."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("net:["):
            found.append(target)
    return sorted(found)


def test_pods_reach_every_pods_published_ports_at_their_advertised_addresses(
    manager: SandboxManager, tmp_path: Path, key: ClientKey
) -> None:
    a = manager.start(pod_spec(tmp_path, "adv-a", key))
    b = manager.start(pod_spec(tmp_path, "adv-b", key))
    with ssh(a[22], key) as pod_a, ssh(b[22], key) as pod_b:
        key_a, key_b = host_key(pod_a), host_key(pod_b)
        assert key_a != key_b
        # Another pod's advertised SSH address is that pod's sshd, and the pod's own is its own.
        assert host_key_at(pod_a, "127.0.0.1", b[22]) == key_b
        assert host_key_at(pod_a, "127.0.0.1", a[22]) == key_a
        assert host_key_at(pod_b, "127.0.0.1", a[22]) == key_a
        # A pod started later sees the running pods' addresses, and they see its.
        c = manager.start(pod_spec(tmp_path, "adv-c", key))
        with ssh(c[22], key) as pod_c:
            assert host_key_at(pod_c, "127.0.0.1", a[22]) == key_a
            assert host_key_at(pod_a, "127.0.0.1", c[22]) == host_key(pod_c)
            # A stopped pod's addresses close in every pod at once (the pod's relay accepts, then
            # closes: nothing is there).
            manager.stop("adv-b")
            assert probe(pod_a, "127.0.0.1", b[22]) == "closed"
            assert probe(pod_c, "127.0.0.1", b[22]) == "closed"
            # The pods that stay keep each other's addresses, and their own.
            assert host_key_at(pod_a, "127.0.0.1", c[22]) == host_key(pod_c)
            assert host_key_at(pod_c, "127.0.0.1", a[22]) == key_a
            manager.stop("adv-c")
            assert probe(pod_a, "127.0.0.1", c[22]) == "closed"
            assert probe(pod_a, "127.0.0.1", a[22]).startswith("SSH-2.0-")


def listeners(client: paramiko.SSHClient) -> set[str]:
    """The addresses listening for TCP in the pod's network namespace."""
    return {line.split()[3] for line in check(client, "ss -Hltn").splitlines()}


def test_pods_starting_and_stopping_at_once_leave_exactly_the_running_pods_addresses(
    tmp_path: Path, key: ClientKey
) -> None:
    files_before = open_files()
    with manager_at(tmp_path / "root", 0) as manager:
        first = [pod_spec(tmp_path, f"churn-{index}", key) for index in range(6)]
        second = [pod_spec(tmp_path, f"churn-{index}", key) for index in range(6, 12)]
        with ThreadPoolExecutor(max_workers=8) as pool:
            ports = dict(zip([spec.pod_id for spec in first], pool.map(manager.start, first), strict=True))
            started = pool.map(manager.start, second)
            list(pool.map(manager.stop, [spec.pod_id for spec in first[1:]]))
            ports.update(zip([spec.pod_id for spec in second], started, strict=True))
        running = ["churn-0", *(spec.pod_id for spec in second)]
        with ssh(ports["churn-0"][22], key) as survivor:
            # One relay listens for every pod's addresses, besides the pod's own sshd.
            assert listeners(survivor) == {"0.0.0.0:22", "[::]:22", "127.255.255.254:1"}
            for pod_id in running:
                assert probe(survivor, "127.0.0.1", ports[pod_id][22]).startswith("SSH-2.0-"), pod_id
            for spec in first[1:]:
                assert probe(survivor, "127.0.0.1", ports[spec.pod_id][22]) == "closed", spec.pod_id
    assert open_files() - files_before == Counter()


# In a pod: listen on 127.0.0.1:PORT and answer every connection with a line naming the pod.
LISTENER = (
    "(nohup python3 -c \"import socket; s = socket.socket(); s.bind(('127.0.0.1', PORT)); s.listen(); "
    "[c.sendall(b'pod-a-itself\\n') for c, _ in iter(s.accept, None)]\" > /dev/null 2>&1 < /dev/null &)"
)


def test_a_pod_keeps_its_own_ports_and_its_ephemeral_ports_stay_out_of_the_advertised_range(
    manager: SandboxManager, tmp_path: Path, key: ClientKey
) -> None:
    a = manager.start(pod_spec(tmp_path, "holder-a", key))
    with ssh(a[22], key) as pod_a, socket.socket() as reserved:
        # Pod A listens on a port of the host's range that no pod advertises: one free on the host, held
        # there until pod B asks for it.
        reserved.bind(("127.0.0.1", 0))
        taken = reserved.getsockname()[1]
        check(pod_a, LISTENER.replace("PORT", str(taken)))
        poll(lambda: probe(pod_a, "127.0.0.1", taken) == "pod-a-itself", 10, "pod A's own listener")
        # The ports pod A's programs get from the kernel are never in the host's range.
        host_low, host_high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
        low, high = map(int, check(pod_a, "cat /proc/sys/net/ipv4/ip_local_port_range").split())
        assert high < host_low or low > host_high
        auto = int(
            check(
                pod_a,
                "python3 -c 'import socket; s = socket.socket(); s.bind((\"127.0.0.1\", 0)); print(s.getsockname()[1])'",
            )
        )
        assert low <= auto <= high
        # Its namespace forgets a closed connection in seconds, not the kernel's two minutes, so a pod
        # opening and closing connections fast cannot fill the connection table all namespaces share.
        assert check(pod_a, "cat /proc/sys/net/netfilter/nf_conntrack_tcp_timeout_time_wait").strip() == "2"
        # Once pod B advertises that very port, it is pod B's address in every pod, pod A's as well.
        reserved.close()
        spec = dataclasses.replace(pod_spec(tmp_path, "holder-b", key), preferred_ports={22: taken})
        b = manager.start(spec)
        assert b[22] == taken
        with ssh(b[22], key) as pod_b:
            assert host_key_at(pod_a, "127.0.0.1", taken) == host_key(pod_b)
            assert host_key_at(pod_b, "127.0.0.1", taken) == host_key(pod_b)
        manager.stop("holder-b")
        assert probe(pod_a, "127.0.0.1", taken) == "pod-a-itself"


def test_a_pod_reaches_no_host_service_through_its_relay(
    manager: SandboxManager, tmp_path: Path, key: ClientKey
) -> None:
    with socket.socket() as host_service:
        # A service on the host's loopback, in the range advertised addresses come from.
        host_service.bind(("127.0.0.1", 0))
        host_service.listen()
        host_service.settimeout(0.5)
        a = manager.start(pod_spec(tmp_path, "curious", key))
        with ssh(a[22], key) as pod:
            assert probe(pod, "127.0.0.1", host_service.getsockname()[1]) == "closed"
            # Nor by dialling the relay itself, whatever it is told.
            assert probe(pod, "127.255.255.254", 1) == "closed"
        with pytest.raises(TimeoutError):
            host_service.accept()


# A server in the pod that never accepts: the kernel completes the handshakes (up to its backlog), so
# every relayed connection stays open and idle.
HOLDER = (
    "-c 'python3 -c \"import socket, time; s = socket.socket(); "
    's.bind((socket.inet_ntoa(bytes([127, 0, 0, 1])), 8000)); s.listen(4096); time.sleep(10 ** 6)" '
    "& exec sleep infinity'"
)
# Inside the opening pod: COUNT connections to 127.0.0.1:PORT; prints whether the last four are kept
# open, then holds them all until its standard input closes.
OPENER = """
import json, socket, sys
def is_open(sock):
    sock.settimeout(0.2)
    try:
        return sock.recv(1) != b""
    except TimeoutError:
        return True
    except ConnectionResetError:
        return False
held = [socket.create_connection(("127.0.0.1", PORT), timeout=10) for _ in range(COUNT)]
print(json.dumps([is_open(sock) for sock in held[-4:]]), flush=True)
sys.stdin.read()
"""


def is_open(sock: socket.socket) -> bool:
    sock.settimeout(0.2)
    try:
        return sock.recv(1) != b""
    except TimeoutError:
        return True
    except ConnectionResetError:
        return False


def test_connections_to_advertised_addresses_count_against_the_pod_that_opens_them(
    manager: SandboxManager, tmp_path: Path, key: ClientKey
) -> None:
    target = manager.start(
        pod_spec(tmp_path, "target", key, internal_ports=[22, 8000], startup_commands=HOLDER)
    )
    opener = manager.start(pod_spec(tmp_path, "opener", key))
    with ssh(target[22], key) as client:
        poll(lambda: run(client, "ss -ltn | grep -c :8000")[1].strip() == "1", 10, "the holder")
    with ssh(opener[22], key) as client:
        code = OPENER.replace("COUNT", str(MAX_CONNECTIONS_PER_POD)).replace("PORT", str(target[8000]))
        channel = client.get_transport().open_session(timeout=30)
        channel.exec_command(f"python3 -c {shlex.quote(code)}")
        with channel.makefile("r") as output:
            kept = json.loads(output.readline())
        # The opener's share is shared with its other relays: this SSH session is one of them, so the
        # last of its connections is one too many.
        assert kept == [True, True, True, False]
        # Its share is used up, so the host no longer gets in either; the target's share is untouched.
        with socket.create_connection(("127.0.0.1", opener[22]), timeout=10) as refused:
            assert not is_open(refused)
        with socket.create_connection(("127.0.0.1", target[8000]), timeout=10) as served:
            assert is_open(served)
        channel.shutdown_write()
        assert channel.recv_exit_status() == 0
    # The holder never closes its side, so those relays stay half-open until the target pod stops.
    manager.stop("target")
    poll(lambda: manager.forwarded_connections() == 0, 10, "the relays to close")


def test_idle_connections_from_another_pod_never_lock_the_host_out_of_a_pods_ssh(
    manager: SandboxManager, tmp_path: Path, key: ClientKey
) -> None:
    hog = manager.start(pod_spec(tmp_path, "idle-hog", key))
    target = manager.start(pod_spec(tmp_path, "idle-target", key))
    with ssh(hog[22], key) as client:
        # More unauthenticated connections to the target's advertised SSH than its sshd keeps at once.
        code = OPENER.replace("COUNT", "110").replace("PORT", str(target[22]))
        channel = client.get_transport().open_session(timeout=30)
        channel.exec_command(f"python3 -c {shlex.quote(code)}")
        with channel.makefile("r") as output:
            json.loads(output.readline())
        # The target sees them come from the pods' source address, never from the host's.
        with ssh(target[22], key) as pod:
            peers = {
                line.split()[-1].rsplit(":", 1)[0]
                for line in check(pod, "ss -Htn state established sport = :22").splitlines()
            }
        assert POD_SOURCE_ADDRESS in peers
        # The host gets in at every try while they are held (an sshd past its limit drops new
        # connections at random: some of ten tries would fail).
        for _ in range(10):
            host_session = try_ssh(target[22], key)
            assert host_session is not None
            host_session.close()
        channel.shutdown_write()
        assert channel.recv_exit_status() == 0


# Inside a pod: a sink on 127.0.0.1:PORT, and COUNT MiB sent to it (through the pod's relay when PORT
# is in the host's range); prints the MiB received and the seconds they took.
PUMP = """
import json, socket, threading, time
server = socket.socket(); server.bind(("127.0.0.1", PORT)); server.listen()
received = [0]
def sink():
    conn, _ = server.accept()
    while chunk := conn.recv(1 << 20):
        received[0] += len(chunk)
reader = threading.Thread(target=sink); reader.start()
began = time.monotonic()
with socket.create_connection(("127.0.0.1", PORT)) as sender:
    block = bytes(1 << 20)
    for _ in range(COUNT):
        sender.sendall(block)
reader.join()
print(json.dumps([received[0] / (1 << 20), time.monotonic() - began]))
"""


def test_the_bytes_a_pod_sends_through_the_relays_are_held_to_its_rate(
    manager: SandboxManager, tmp_path: Path, key: ClientKey
) -> None:
    a = manager.start(pod_spec(tmp_path, "pump", key))
    rate_mib = POD_RELAY_BYTES_PER_SECOND / (1 << 20)
    with ssh(a[22], key) as pod, socket.socket() as free:
        free.bind(("127.0.0.1", 0))  # a port of the host's range, which the pod's relay carries
        port = free.getsockname()[1]
        free.close()
        sent = int(2.5 * rate_mib)
        code = PUMP.replace("PORT", str(port)).replace("COUNT", str(sent))
        received, seconds = json.loads(check(pod, f"python3 -c {shlex.quote(code)}", timeout=60))
    assert received == sent
    # Beyond the first second's worth (the bucket's burst), the relays carried no more than the rate.
    assert seconds >= (sent - rate_mib) / rate_mib


def overlay_spec(base: Path, pod_id: str, key: ClientKey, network: str | None, address: str = "") -> PodSpec:
    spec = pod_spec(base, pod_id, key)
    return dataclasses.replace(spec, overlay=OverlayMember(network, address) if network else None)


# Inside a cluster member: one datagram to each of 2 000 ports of the member at 10.42.0.2.
UDP_TO_EVERY_PORT = (
    "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
    "[s.sendto(b'x', ('10.42.0.2', port)) for port in range(20000, 22000)]"
)


def test_cluster_members_share_a_private_overlay_network(
    manager: SandboxManager, tmp_path: Path, key: ClientKey
) -> None:
    links_before, namespaces_before = socket.if_nameindex(), namespace_fds()
    a = manager.start(overlay_spec(tmp_path, "ov-a", key, "cluster-1", "10.42.0.1"))
    b = manager.start(overlay_spec(tmp_path, "ov-b", key, "cluster-1", "10.42.0.2"))
    c = manager.start(overlay_spec(tmp_path, "ov-c", key, "cluster-2", "10.42.0.1"))  # same address
    d = manager.start(overlay_spec(tmp_path, "ov-d", key, None))
    assert manager.overlay_members() == {"cluster-1": ["ov-a", "ov-b"], "cluster-2": ["ov-c"]}
    with ExitStack() as sessions:
        pod_a, pod_b, pod_c, pod_d = (sessions.enter_context(ssh(ports[22], key)) for ports in (a, b, c, d))
        key_a, key_b, key_c = host_key(pod_a), host_key(pod_b), host_key(pod_c)
        assert host_key_at(pod_a, "10.42.0.2", 22) == key_b
        assert host_key_at(pod_b, "10.42.0.1", 22) == key_a
        # The other cluster's 10.42.0.1 is its own member; cluster-1's are out of its sight.
        assert host_key_at(pod_c, "10.42.0.1", 22) == key_c
        assert not probe(pod_c, "10.42.0.2", 22, timeout=1).startswith("SSH-")
        # A member's datagrams to another member take no entry of the connection table all
        # namespaces share (a flood from one member would fill it for every pod on the host).
        tracked_before = int(check(pod_b, "cat /proc/sys/net/netfilter/nf_conntrack_count"))
        check(pod_a, f"python3 -c {shlex.quote(UDP_TO_EVERY_PORT)}")
        assert int(check(pod_b, "cat /proc/sys/net/netfilter/nf_conntrack_count")) <= tracked_before
        assert interfaces(pod_a) == ["lo", "overlay0"]
        assert interfaces(pod_d) == ["lo"]
        assert check(pod_a, "ip -4 -o addr show dev overlay0").split()[3] == "10.42.0.1/24"
        # No IPv6 source on it: sshd's per-source limits count each IPv6 address apart.
        assert check(pod_a, "ip -6 -o addr show dev overlay0").strip() == ""
        # The pod's root cannot reconfigure it: the namespace belongs to the host's user namespace.
        for attack in (
            "ip addr add 10.42.0.9/24 dev overlay0",
            "ip addr del 10.42.0.1/24 dev overlay0",
            "ip link set overlay0 down",
            "ip link add evil0 type dummy",
            "python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)'",
        ):
            status, output = run(pod_a, attack)
            assert status != 0 and "Operation not permitted" in output, (attack, output)
        (address,) = check(pod_a, "ip -4 -o addr show dev overlay0").splitlines()
        assert address.split()[3] == "10.42.0.1/24"
        assert "state UP" in check(pod_a, "ip -o link show overlay0")
        assert socket.if_nameindex() == links_before
        # A member that leaves is off the network at once; the last one takes the network along.
        manager.stop("ov-b")
        assert not probe(pod_a, "10.42.0.2", 22, timeout=1).startswith("SSH-")
        assert manager.overlay_members() == {"cluster-1": ["ov-a"], "cluster-2": ["ov-c"]}
    manager.stop_all()
    assert manager.overlay_members() == {}
    assert namespace_fds() == namespaces_before
    assert socket.if_nameindex() == links_before


# An entrypoint that looks at its network as its very first step, and reports on its output.
AT_START = (
    "import json, socket, urllib.request\n"
    "names = [name for _, name in socket.if_nameindex()]\n"
    "body = urllib.request.urlopen('http://127.0.0.1:PORT/marker', timeout=5).read().decode()\n"
    "print(json.dumps([names, body]), flush=True)\n"
)


def test_the_entrypoint_starts_with_its_network_complete(tmp_path: Path, key: ClientKey) -> None:
    with http_server({"/marker": b"the emulator"}) as port, manager_at(tmp_path / "root", port) as manager:
        code = AT_START.replace("PORT", str(port))
        spec = pod_spec(
            tmp_path, "early", key, entrypoint="python3", startup_commands=f"-c {shlex.quote(code)}"
        )
        manager.start(dataclasses.replace(spec, overlay=OverlayMember("cluster-1", "10.42.0.1")))
        log = manager.console_log("early")
        report = poll(lambda: log.read_text().strip(), 10, "the entrypoint's report")
        assert json.loads(report) == [["lo", "overlay0"], "the emulator"]


def test_a_bad_overlay_address_is_refused_before_anything_starts(
    manager: SandboxManager, tmp_path: Path, key: ClientKey
) -> None:
    for address in ("10.42.1.1", "10.42.0.255", "not-an-address"):
        with pytest.raises(SandboxError, match="overlay address"):
            manager.start(overlay_spec(tmp_path, "bad-overlay", key, "cluster-1", address))
    assert manager.overlay_members() == {}
    assert not (tmp_path / "root" / "pods" / "bad-overlay").exists()


OVERLAY_EMULATOR = """
import dataclasses, json, sys
from pathlib import Path
from lium_emulator.sandbox.manager import SandboxManager
from lium_emulator.sandbox.overlay import OverlayMember
from tests.emulator.test_sandbox_support import make_client_key, pod_spec
base = Path(sys.argv[1])
manager = SandboxManager(base / "root", emulator_port=0)
key = make_client_key()
pids = {}
for index in range(2):
    spec = pod_spec(base, f"dying-{index}", key)
    manager.start(dataclasses.replace(spec, overlay=OverlayMember("cluster-1", f"10.42.0.{index + 1}")))
    pids[spec.pod_id] = manager.pod_pids(spec.pod_id)[0]
print(json.dumps(pids), flush=True)
sys.stdin.read()
"""


def links_in(pid: int) -> str:
    """``ip -o link`` in the network namespace of process ``pid`` (a pod's)."""
    return subprocess.run(
        ["nsenter", "--target", str(pid), "--net", "ip", "-o", "link"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def holders_of(namespace: str, pids: list[int]) -> list[str]:
    """The /proc entries of ``pids`` (a process's namespace, or an fd) that refer to ``namespace``.

    Only the processes that could hold it are looked at: once it is freed, the kernel gives its name
    (an inode number) to the next namespace made, another test's pod's as likely as not."""
    found = []
    for pid in map(str, pids):
        paths = [f"/proc/{pid}/ns/net"]
        try:
            paths += [f"/proc/{pid}/fd/{fd}" for fd in os.listdir(f"/proc/{pid}/fd")]
        except OSError:
            continue
        for path in paths:
            try:
                if os.readlink(path) == namespace:
                    found.append(path)
            except OSError:
                continue
    return found


def test_a_killed_emulators_cluster_networks_vanish_with_it(
    tmp_path: Path, pid_namespaces: HeldPidNamespaces
) -> None:
    root = tmp_path / "root"
    emulator = subprocess.Popen(
        [sys.executable, "-c", OVERLAY_EMULATOR, str(tmp_path)],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        assert emulator.stdout is not None
        pids = json.loads(emulator.stdout.readline())
        pod_namespaces = {os.readlink(f"/proc/{pid}/ns/net") for pid in pids.values()}
        held = {os.readlink(f"/proc/{emulator.pid}/fd/{fd}") for fd in os.listdir(f"/proc/{emulator.pid}/fd")}
        (cluster,) = {name for name in held if name.startswith("net:[")} - pod_namespaces
        assert all("overlay0" in links_in(pid) for pid in pids.values())
        emulator.send_signal(signal.SIGKILL)
        emulator.wait()
        # Nothing held the cluster's namespace but the emulator: it is gone, and the members' ends
        # of their veths with it, while the pods themselves still run.
        pid_namespace_names = {pid_namespaces.of(pid) for pid in pids.values()}
        assert holders_of(cluster, [os.getpid(), *processes_in(pid_namespace_names)]) == []
        poll(lambda: not any("overlay0" in links_in(pid) for pid in pids.values()), 10, "the veths to go")
        assert len(processes_in(pid_namespace_names)) >= 2
    finally:
        emulator.kill()
        emulator.wait()
        SandboxManager.cleanup_stale(root)


# A manager on a host whose nft is hidden (bind-mounted over by /dev/null, in a mount namespace of its
# own): what starting a pod prints.
WITHOUT_NFT = """
import json, sys
from pathlib import Path
from lium_emulator.sandbox.manager import SandboxError, SandboxManager
from tests.emulator.test_sandbox_support import make_client_key, pod_spec
base = Path(sys.argv[1])
manager = SandboxManager(base / "root", emulator_port=0)
try:
    manager.start(pod_spec(base, "no-nft", make_client_key()))
    print(json.dumps(["started"]))
except SandboxError as e:
    print(json.dumps(["refused", str(e)]))
finally:
    manager.stop_all()
"""


def test_a_pod_that_cannot_reach_the_other_pods_addresses_does_not_start(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            "unshare", "--mount", "--propagation", "private", "sh", "-c",
            'mount --bind /dev/null "$(command -v nft)" && exec "$0" -c "$1" "$2"',
            sys.executable, WITHOUT_NFT, str(tmp_path),
        ],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    outcome, *detail = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome == "refused"
    assert "no nft (nftables)" in detail[0] and "advertised addresses" in detail[0]
    assert not (tmp_path / "root" / "pods" / "no-nft").exists()


def test_a_published_port_in_the_hosts_range_reaches_its_own_pod_though_another_advertises_that_number(
    manager: SandboxManager, tmp_path: Path, key: ClientKey
) -> None:
    with socket.socket() as reserved:
        reserved.bind(("127.0.0.1", 0))
        number = reserved.getsockname()[1]  # in the host's range, free until pod A takes it
    a = manager.start(dataclasses.replace(pod_spec(tmp_path, "number-a", key), preferred_ports={22: number}))
    assert a[22] == number
    serve = (
        "-c 'python3 -c \"import socket; s = socket.socket(); "
        f"s.bind((socket.inet_ntoa(bytes([127, 0, 0, 1])), {number})); s.listen(); "
        '[c.sendall(b\\"pod-b-service\\\\n\\") for c, _ in iter(s.accept, None)]" & exec sleep infinity\''
    )
    b = manager.start(
        pod_spec(tmp_path, "number-b", key, internal_ports=[22, number], startup_commands=serve)
    )
    with ssh(b[22], key) as pod_b:
        poll(lambda: "LISTEN" in check(pod_b, f"ss -ltn sport = :{number}"), 10, "pod B's service")
    # The host's connection to pod B's published port is pod B's service, not pod A's sshd.
    with socket.create_connection(("127.0.0.1", b[number]), timeout=10) as client:
        client.settimeout(10)
        assert client.recv(64) == b"pod-b-service\n"
