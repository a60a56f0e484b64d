"""Pods as hostile code: attacks run over SSH as root inside a real emulator pod, each of which must
fail and leave the host unchanged; the offer's limits in force and visible; admin routes out of the
pods' reach; a generated admin key per start (docs/emulator.md, "Threat model")."""

import dataclasses
import json
import os
import platform
import pwd
import secrets
import shlex
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import paramiko
import pytest

from lium_emulator.launcher import RunningEmulator, launch
from lium_emulator.sandbox import idmap
from lium_emulator.sandbox.confinement import KEPT_CAPABILITIES
from lium_emulator.sandbox.manager import host_private_paths
from tests.emulator.test_sandbox_support import make_client_key, manager_at, pod_spec, poll, ssh
from tests.emulator.test_sandbox_support import run as run_as_root
from tests.emulator.testkit import (
    FAST_TIMINGS,
    SshKey,
    create_template,
    new_account,
    rent_body,
    rent_pod,
    resources,
    splittable_node,
    ssh_target,
    wait_ssh_ready,
)
from tests.support import http

pytestmark = pytest.mark.sandbox  # every test here attacks a pod sandbox or the emulator

CONSOLE_SCRIPT = Path(sys.executable).with_name("lium-emulator")
SECRET = "victim-secret-" + secrets.token_hex(8)


@dataclasses.dataclass
class Pods:
    """The emulator, an attacker pod's root shell, and what a victim pod keeps."""

    emulator: RunningEmulator
    state_dir: Path
    attacker: paramiko.SSHClient
    attacker_row: dict[str, Any]
    victim_row: dict[str, Any]
    victim_volume_dir: Path


def root_shell(pod: dict[str, Any], key: SshKey) -> paramiko.SSHClient:
    host, port = ssh_target(pod)
    client = paramiko.SSHClient()
    client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
    client.connect(host, port=port, username="root", pkey=key.pkey, allow_agent=False, look_for_keys=False)
    return client


def run(pods: Pods, command: str) -> tuple[int, str]:
    """Exit status and output of ``command`` run as root in the attacker pod."""
    return run_as_root(pods.attacker, command)


def fails(pods: Pods, command: str) -> str:
    """Run an attack; it must exit non-zero. Returns its output (the error)."""
    status, output = run(pods, command)
    assert status != 0, f"{command!r} succeeded in the pod: {output}"
    return output


def succeeds(pods: Pods, command: str) -> str:
    status, output = run(pods, command)
    assert status == 0, f"{command!r} exited {status}: {output}"
    return output


def python_in_pod(pods: Pods, code: str) -> str:
    return succeeds(pods, f"python3 -c {shlex.quote(code)}")


@pytest.fixture(scope="module")
def pods(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pods]:
    state_dir = tmp_path_factory.mktemp("escape-state")
    key = SshKey()
    with launch([*FAST_TIMINGS, "--state-dir", str(state_dir)]) as emulator:
        _, client = new_account(emulator)
        with client:
            template = create_template(client)
            node = splittable_node(client, "RTX 4090")
            volume = client.post("/volumes", json={"name": "victim-data"}).json()
            victim_id = rent_pod(
                client, node["id"], rent_body(template["id"], key.public, volume_id=volume["id"])
            )
            victim_row = wait_ssh_ready(client, victim_id)
            with root_shell(victim_row, key) as victim:
                assert (
                    run_as_root(victim, f"echo {SECRET} > /root/secret && echo {SECRET} > /mnt/secret")[0]
                    == 0
                )
            attacker_id = rent_pod(client, node["id"], rent_body(template["id"], key.public))
            attacker_row = wait_ssh_ready(client, attacker_id)
            with root_shell(attacker_row, key) as attacker:
                yield Pods(
                    emulator,
                    state_dir,
                    attacker,
                    attacker_row,
                    victim_row,
                    state_dir / "volumes" / volume["id"],
                )
        assert emulator.stop() == 0


def test_the_pods_root_is_an_unprivileged_host_id_with_few_capabilities(pods: Pods) -> None:
    status = dict(
        line.split(":\t", 1) for line in succeeds(pods, "cat /proc/self/status").splitlines() if ":\t" in line
    )
    kept = sum(1 << cap for cap in KEPT_CAPABILITIES.values())
    assert int(status["CapEff"], 16) == kept and int(status["CapBnd"], 16) == kept, status
    assert (status["NoNewPrivs"].strip(), status["Seccomp"].strip()) == ("1", "2")
    inside, host, count = succeeds(pods, "cat /proc/self/uid_map").split()
    assert (inside, count) == ("0", str(idmap.ID_COUNT)) and int(host) >= idmap.ID_BASE
    # The pod's root owns no host file outside its pod: the host's root-owned files are nobody's inside.
    assert succeeds(pods, "stat -c %u /proc/sys/kernel/core_pattern").strip() == str(idmap.NOBODY)


def test_remounting_the_image_layers_fails_and_writes_stay_in_the_pod(pods: Pods) -> None:
    for target in ("/usr", "/", "/etc", "/root"):
        fails(pods, f"mount -o remount,rw {target}")
        fails(pods, f"mount -o remount,rw,bind {target}")
    probe = "lium-escape-" + secrets.token_hex(4)
    # What real pods let root do: write into the image's own layers (as apt-get does).
    succeeds(pods, f"echo x > /usr/bin/{probe} && echo x > /etc/{probe} && useradd -m {probe}")
    assert succeeds(pods, f"cat /usr/bin/{probe} && getent passwd {probe} | cut -d: -f1").split() == [
        "x",
        probe,
    ]
    assert not Path(f"/usr/bin/{probe}").exists() and not Path(f"/etc/{probe}").exists()
    assert probe not in Path("/etc/passwd").read_text()


def test_mounting_host_filesystems_and_devices_fails(pods: Pods) -> None:
    root_device = os.stat("/").st_dev
    major, minor = os.major(root_device), os.minor(root_device)
    succeeds(pods, "mkdir -p /tmp/target")
    for attack in (
        "mount --bind / /tmp/target",
        "mount -t tmpfs none /tmp/target",
        "mount -t proc proc /tmp/target",
        "mount -t sysfs sysfs /tmp/target",
        "mount -t cgroup -o memory cgroup /tmp/target",
        f"mknod /tmp/disk b {major} {minor}",
        "mknod /tmp/mem c 1 1",
        "unshare --user --map-root-user --mount true",
    ):
        fails(pods, attack)
    assert succeeds(pods, "ls -A /tmp/target") == ""
    assert fails(pods, "ls /dev/vda /dev/sda /dev/mem /dev/kmsg 2>&1 | grep -v 'No such file'; false") == ""


SYSCALLS_X86_64 = {
    "open_by_handle_at": 304,
    "kexec_load": 246,
    "init_module": 175,
    "finit_module": 313,
    "delete_module": 176,
    "bpf": 321,
    "keyctl": 250,
    "unshare": 272,
    "setns": 308,
    "mount": 165,
    "open_tree": 428,
    "fsopen": 430,
    "pivot_root": 155,
    "reboot": 169,
    "swapon": 167,
    "perf_event_open": 298,
    "clock_settime": 227,
}
PROBE = """
import ctypes, json, os
libc = ctypes.CDLL(None, use_errno=True)
results = {}
for name, number in NUMBERS.items():
    result = libc.syscall(number, 0, 0, 0, 0, 0)
    results[name] = (result, ctypes.get_errno())
# open_by_handle_at with a real handle of this pod's /root (the "shocker" escape walks from there)
handle = ctypes.create_string_buffer(8 + 128)
ctypes.c_uint.from_buffer(handle).value = 128
mount_id = ctypes.c_int()
named = libc.name_to_handle_at(-100, b"/root", handle, ctypes.byref(mount_id), 0)
fd = os.open("/root", os.O_RDONLY)
results["open_by_handle_at(/root)"] = (named, libc.open_by_handle_at(fd, handle, os.O_RDONLY), ctypes.get_errno())
# ptrace and signals reach no host process: the emulator's pid names nothing (or a pod process) here
results["ptrace"] = (libc.ptrace(16, EMULATOR_PID, 0, 0), ctypes.get_errno())
print(json.dumps(results))
"""


def test_escape_syscalls_are_refused(pods: Pods) -> None:
    assert platform.machine() == "x86_64", "the syscall numbers below are x86_64's"
    code = PROBE.replace("NUMBERS", repr(SYSCALLS_X86_64)).replace(
        "EMULATOR_PID", str(pods.emulator.process.pid)
    )
    results = json.loads(python_in_pod(pods, code))
    for name in SYSCALLS_X86_64:
        assert results[name] == [-1, 1], f"{name}: {results[name]} (expected EPERM)"
    named, opened, error = results["open_by_handle_at(/root)"]
    assert named == 0 and (opened, error) == (-1, 1), results
    assert results["ptrace"][0] == -1


HOST_KNOBS = (
    # (file, what an attacker writes): usermode helpers run as host root, kernel and network settings
    ("/proc/sys/kernel/core_pattern", "|/tmp/evil"),
    ("/proc/sys/kernel/poweroff_cmd", "/tmp/evil"),
    ("/proc/sys/kernel/pid_max", "4096"),
    ("/proc/sys/vm/overcommit_memory", "2"),
    ("/proc/sys/net/ipv4/ip_forward", "1"),
    ("/proc/sys/net/ipv4/ip_unprivileged_port_start", "1024"),
    ("/sys/kernel/mm/transparent_hugepage/enabled", "always"),
    ("/sys/power/state", "mem"),
    ("/sys/class/net/lo/mtu", "1280"),
)


def test_proc_sys_and_sys_cannot_be_written(pods: Pods) -> None:
    before = {path: Path(path).read_text() for path, _ in HOST_KNOBS if not path.startswith("/proc/sys/net")}
    for path, value in HOST_KNOBS:
        succeeds(pods, f"test -e {path}")
        fails(pods, f"echo {shlex.quote(value)} > {path}")
    for own_limit in ("memory.limit_in_bytes", "memory.max", "cgroup.procs"):
        fails(pods, f"echo 1 > /sys/fs/cgroup/memory/{own_limit} || echo 1 > /sys/fs/cgroup/{own_limit}")
    assert {path: Path(path).read_text() for path in before} == before


def test_other_pods_the_state_dir_and_host_homes_are_out_of_reach(pods: Pods) -> None:
    hidden = [
        pods.state_dir,
        pods.victim_volume_dir,
        pods.state_dir / "pods" / pods.victim_row["id"],
        Path(__file__).resolve().parents[2],  # this source tree
    ]
    for path in hidden:
        fails(pods, f"ls -d {shlex.quote(str(path))}")
    # The host's /etc is the image's, minus what the host keeps from other users (password backups,
    # TLS keys, database configs...); the files the pod gets its own copy of are the pod's.
    replaced = {"/etc/shadow", "/etc/gshadow", "/etc/ssh/ssh_host_ed25519_key", "/etc/ssh/ssh_host_ecdsa_key"}
    private = [
        path
        for path in host_private_paths(Path("/etc"))
        if path not in replaced
        and (os.path.isdir(path) or os.path.getsize(path) > 0)  # empty: nothing to leak
    ]
    assert private  # this host has some (e.g. /etc/shadow-), else nothing is tested here
    for path in private:  # gone, or (a backup useradd made in the pod) the pod's own
        host_view = sorted(os.listdir(path)) if os.path.isdir(path) else Path(path).read_bytes().decode()
        status, pod_view = run(pods, f"ls -A {shlex.quote(path)}" if os.path.isdir(path) else f"cat {path}")
        assert status != 0 or (pod_view.split() if os.path.isdir(path) else pod_view) != host_view, path
    assert "$" not in succeeds(pods, "cat /etc/shadow")  # no password hash of the host's
    # The pod's /root is its own volume: the host user's keys are not there under any name. (The user's
    # real home from the password database: the suite gives every test process a private HOME.)
    host_ssh = Path(pwd.getpwuid(os.getuid()).pw_dir) / ".ssh"
    for name in sorted(p.name for p in host_ssh.iterdir()) if host_ssh.is_dir() else []:
        if name != "authorized_keys":
            fails(pods, f"ls {shlex.quote(str(host_ssh / name))}")
    assert succeeds(pods, "ls -A /mnt") == ""
    assert succeeds(pods, "ls -A /root/.ssh").split() == ["authorized_keys"]
    fails(pods, f"grep -rs {SECRET} /root /mnt /tmp /var /home /opt /workspace /run /etc")
    # Its own PID namespace: no process of the host or of the victim is visible.
    commands = succeeds(pods, "cat /proc/[0-9]*/cmdline | tr '\\0' ' '")
    assert "lium_emulator" not in commands and "pytest" not in commands
    fails(
        pods,
        f"kill -0 {pods.emulator.process.pid} && grep -q lium_emulator /proc/{pods.emulator.process.pid}/cmdline",
    )


def admin_calls_from_pod(
    pods: Pods, port: int, headers: dict[str, str] | None = None
) -> list[tuple[int, Any]]:
    """From the attacker pod to ``127.0.0.1:<port>``: admin routes with the real and the old default
    key, then the Lium API's version; each as (status, body). ``headers`` go along with every call."""
    request = (
        (
            "import json, sys, urllib.request\n"
            "def call(method, path, key):\n"
            "    req = urllib.request.Request(f'http://127.0.0.1:{PORT}{path}', method=method,\n"
            '        data=b\'{"rules": [{"kind": "status", "status": 503}]}\' if method == \'PUT\' else None,\n'
            "        headers={'X-Emulator-Admin': key, 'Content-Type': 'application/json', **HEADERS})\n"
            "    try:\n"
            "        with urllib.request.urlopen(req, timeout=10) as r: return r.status, json.load(r)\n"
            "    except urllib.error.HTTPError as e: return e.code, json.load(e)\n"
            "print(json.dumps([call('PUT', '/_emulator/faults', KEY), call('GET', '/_emulator/resources', KEY),\n"
            "    call('PUT', '/_emulator/faults', 'lium-emulator-admin'), call('GET', '/api/version', '')]))\n"
        )
        .replace("PORT", str(port))
        .replace("KEY", repr(pods.emulator.admin_key))
        .replace("HEADERS", repr(headers or {}))
    )
    calls: list[tuple[int, Any]] = json.loads(python_in_pod(pods, request))
    return calls


def test_admin_routes_refuse_pods_even_with_the_key(pods: Pods) -> None:
    port = httpx.URL(pods.emulator.root_url).port
    assert port is not None
    put, get, default_key, version = admin_calls_from_pod(pods, port)
    for status, body in (put, get, default_key):
        assert (status, body["error"]["code"]) == (403, "admin_forbidden_from_pod"), body
    assert version[0] == 200  # the Lium API itself stays reachable from pods, as on Lium
    with http.client(base_url=pods.emulator.root_url, headers=pods.emulator.admin_headers) as admin:
        faults = admin.get("/_emulator/faults")
        assert faults.status_code == 200 and faults.json()["rules"] == []


def test_admin_routes_refuse_pods_that_claim_another_client_address(pods: Pods) -> None:
    # Proxy headers name a client only a trusted proxy may vouch for; a pod's request arrives from
    # 127.0.0.1 like the host's, so honouring them would let the pod pass for any address.
    port = httpx.URL(pods.emulator.root_url).port
    assert port is not None
    claims = {"X-Forwarded-For": "203.0.113.9", "X-Forwarded-Proto": "https", "Forwarded": "for=203.0.113.9"}
    put, get, default_key, version = admin_calls_from_pod(pods, port, claims)
    for status, body in (put, get, default_key):
        assert (status, body["error"]["code"]) == (403, "admin_forbidden_from_pod"), body
    assert version[0] == 200
    with http.client(base_url=pods.emulator.root_url, headers=pods.emulator.admin_headers) as admin:
        faults = admin.get("/_emulator/faults")
        assert faults.status_code == 200 and faults.json()["rules"] == []


# What a client inside the attacker pod gets from host:port: the first line the server sends, "closed"
# when the connection ends without one, or the error's name.
CONNECT = """
import socket, sys
try:
    with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5) as s:
        s.settimeout(5)
        print(s.recv(256).decode(errors="replace").strip() or "closed")
except OSError as e:
    print(type(e).__name__)
"""
# A server in a pod: every connection to 0.0.0.0:<argv[1]> gets the line argv[2], then is closed.
SERVE = """
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1])))
s.listen()
while True:
    c, _ = s.accept()
    c.sendall(sys.argv[2].encode() + b"\\n")
    c.close()
"""
UNPUBLISHED_PORT = 7777


def connect_from_pod(pods: Pods, host: str, port: int) -> str:
    return succeeds(pods, f"python3 -c {shlex.quote(CONNECT)} {host} {port}").strip()


@pytest.fixture(scope="module")
def foreign(pods: Pods) -> Iterator[dict[str, Any]]:
    """Another account's pod, publishing 22, 10022 and the emulator's own port (which, in a pod, is its
    way to the emulator): a server answers on 10022 (published) and on an unpublished port."""
    emulator_port = httpx.URL(pods.emulator.root_url).port
    key = SshKey()
    _, client = new_account(pods.emulator)
    with client:
        template = create_template(client, internal_ports=[22, 10022, emulator_port])
        node = splittable_node(client, "RTX 4090")
        row = wait_ssh_ready(client, rent_pod(client, node["id"], rent_body(template["id"], key.public)))
        with root_shell(row, key) as shell:
            for port, line in ((10022, "published-port"), (UNPUBLISHED_PORT, "unpublished-port")):
                command = f"python3 -c {shlex.quote(SERVE)} {port} {line}"
                assert run_as_root(shell, f"(nohup {command} > /dev/null 2>&1 < /dev/null &)")[0] == 0
            listening = f"ss -ltn | grep -c -E ':(10022|{UNPUBLISHED_PORT}) '"
            poll(lambda: run_as_root(shell, listening)[1].strip() == "2", 10, "the foreign pod's servers")
            yield row


def test_a_pod_cannot_reach_services_on_the_hosts_loopback(pods: Pods) -> None:
    with socket.socket() as service:
        service.bind(("127.0.0.1", 0))
        service.listen()
        service.setblocking(False)
        port = service.getsockname()[1]
        # The pod's relay for advertised addresses takes the connection, finds no pod there, and closes.
        assert connect_from_pod(pods, "127.0.0.1", port) == "closed"
        with pytest.raises(BlockingIOError):
            service.accept()  # nothing ever arrived


def test_another_accounts_pod_is_reachable_only_on_its_published_ports(
    pods: Pods, foreign: dict[str, Any]
) -> None:
    mapping = {int(internal): host for internal, host in foreign["ports_mapping"].items()}
    assert UNPUBLISHED_PORT not in mapping.values()
    assert connect_from_pod(pods, "127.0.0.1", mapping[10022]) == "published-port"
    assert connect_from_pod(pods, "127.0.0.1", mapping[22]).startswith("SSH-2.0-")
    assert connect_from_pod(pods, "127.0.0.1", UNPUBLISHED_PORT) == "ConnectionRefusedError"


def test_admin_routes_refuse_pods_through_another_pods_relay(pods: Pods, foreign: dict[str, Any]) -> None:
    emulator_port = httpx.URL(pods.emulator.root_url).port
    relayed = foreign["ports_mapping"][str(emulator_port)]
    put, get, default_key, version = admin_calls_from_pod(pods, relayed)
    for status, body in (put, get, default_key):
        assert (status, body["error"]["code"]) == (403, "admin_forbidden_from_pod"), body
    assert version[0] == 200  # the way through the other pod does reach the emulator


def test_the_offers_limits_are_in_force_and_visible_in_the_pod(pods: Pods) -> None:
    report = resources(pods.emulator)
    limits = report["pod_limits"]
    host_cgroups = Path("/proc/self/mountinfo").read_text()
    for controller in ("memory", "cpu", "pids"):
        has_controller = any(
            line.split(" - ")[1].startswith("cgroup")
            and controller in line.split(" - ")[1].split()[-1].split(",")
            for line in host_cgroups.splitlines()
            if " - cgroup" in line
        )
        assert limits[controller]["enforced"] is True or not has_controller, limits
        assert limits[controller].get("how") or limits[controller].get("why_not")
    (row,) = [
        pod
        for account in report["accounts"]
        for pod in account["pods"]
        if pod["id"] == pods.attacker_row["id"]
    ]
    assert row["memory_gib"] == pods.attacker_row["ram_total"] > 0 and row["cpu_count"] > 0
    if limits["memory"]["enforced"]:
        memory = succeeds(
            pods,
            "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes",
        )
        assert int(memory) == min(row["memory_gib"], limits["memory"]["at_most_gib"]) << 30
    if limits["cpu"]["enforced"]:
        cpu = succeeds(
            pods,
            "cat /sys/fs/cgroup/cpu.max 2>/dev/null || "
            "echo $(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us)",
        )
        assert cpu.split() == [str(min(row["cpu_count"], limits["cpu"]["at_most"]) * 100_000), "100000"]
    if limits["pids"]["enforced"]:
        pids = succeeds(pods, "cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max")
        assert int(pids) == limits["pids"]["at_most"] > 0
    # A cgroup namespace: the pod sees its own group as the root, as in a container.
    assert all(line.endswith(":/") for line in succeeds(pods, "cat /proc/self/cgroup").splitlines())


def test_memory_beyond_the_limit_is_refused(tmp_path: Path) -> None:
    key = make_client_key()
    with manager_at(tmp_path / "root", 0) as manager:
        if not manager.limits_report()["memory"]["enforced"]:
            assert manager.limits_report()["memory"]["why_not"]
            return
        spec = dataclasses.replace(pod_spec(tmp_path, "memory-limit", key), memory_gib=1)
        ports = manager.start(spec)
        with ssh(ports[22], key) as client:
            # The OOM killer, inside the pod's group only: the shell that ran it lives on to report.
            status, output = run_as_root(client, "python3 -c \"x = b'a' * (1536 << 20)\"; echo status $?")
            assert status == 0 and f"status {128 + signal.SIGKILL}" in output.splitlines(), output
            assert run_as_root(client, "python3 -c \"x = b'a' * (256 << 20); print(len(x))\"") == (
                0,
                f"{256 << 20}\n",
            )


def test_without_admin_key_each_start_generates_one_written_0600(tmp_path: Path) -> None:
    keys = []
    for _ in range(2):
        process = subprocess.Popen(
            [str(CONSOLE_SCRIPT), "serve", "--port", "0", "--state-dir", str(tmp_path)],
            stdout=subprocess.PIPE,
            text=True,
        )
        watchdog = threading.Timer(20, process.kill)
        watchdog.start()
        try:
            assert process.stdout is not None
            lines = [process.stdout.readline().strip() for _ in range(4)]
            root_url = lines[0].removeprefix("listening on ").removesuffix("/api")
            assert lines[2].startswith("admin key: ") and lines[3].startswith("pod limits: "), lines
            key = lines[2].removeprefix("admin key: ")
            key_file = tmp_path / "admin-key"
            assert key_file.read_text().strip() == key and key_file.stat().st_mode & 0o777 == 0o600
            with http.client(base_url=root_url) as client:
                assert (
                    client.get("/_emulator/resources", headers={"X-Emulator-Admin": key}).status_code == 200
                )
                default = client.get(
                    "/_emulator/resources", headers={"X-Emulator-Admin": "lium-emulator-admin"}
                )
                assert default.status_code == 401
            keys.append(key)
        finally:
            watchdog.cancel()
            process.send_signal(signal.SIGTERM)
            assert process.wait(30) == 0
    assert len(set(keys)) == 2 and all(len(key) >= 32 for key in keys)


# Inside a pod: GET (with the admin key) http://127.0.0.1:PORT<path> for each path of argv; prints
# [status, first bytes of the answer] each, or the error's name.
GET_IN_POD = """
import json, sys, urllib.request
answers = []
for path in sys.argv[2:]:
    request = urllib.request.Request(f"http://127.0.0.1:{sys.argv[1]}{path}", headers={"X-Emulator-Admin": KEY})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            answers.append([answer.status, answer.read(4000).decode(errors="replace")])
    except urllib.error.HTTPError as e:
        answers.append([e.code, e.read(4000).decode(errors="replace")])
    except OSError as e:
        answers.append([0, type(e).__name__])
print(json.dumps(answers))
"""


@pytest.mark.parametrize("host", ["127.0.0.2", "::1"])
def test_a_pods_way_to_the_emulator_leads_to_it_whatever_address_it_listens_on(host: str) -> None:
    # Pods reach the emulator at 127.0.0.1:<its port>. When it listens on another address (--host),
    # the host's own 127.0.0.1:<that port> is some other service, which a pod must not reach.
    key = SshKey()
    emulator = launch([*FAST_TIMINGS, "--host", host])
    try:
        port = httpx.URL(emulator.root_url).port
        assert port is not None
        with socket.socket() as service:
            service.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            service.bind(("127.0.0.1", port))
            service.listen()
            service.setblocking(False)
            _, client = new_account(emulator)
            with client:
                template = create_template(client)
                node = splittable_node(client, "RTX 4090")
                row = wait_ssh_ready(
                    client, rent_pod(client, node["id"], rent_body(template["id"], key.public))
                )
                code = GET_IN_POD.replace("KEY", repr(emulator.admin_key))
                with root_shell(row, key) as shell:
                    status, output = run_as_root(
                        shell, f"python3 -c {shlex.quote(code)} {port} /_emulator/health /_emulator/resources"
                    )
            assert status == 0, output
            (health_status, health), (admin_status, admin) = json.loads(output)
            assert (health_status, json.loads(health)["status"]) == (200, "ok"), health
            assert (admin_status, json.loads(admin)["error"]["code"]) == (403, "admin_forbidden_from_pod")
            with pytest.raises(BlockingIOError):
                service.accept()  # the host's service never saw a connection
    finally:
        assert emulator.stop() == 0
