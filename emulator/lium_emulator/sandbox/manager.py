"""Pods as real Linux sandboxes: own user, PID, mount, UTS, IPC, network and cgroup namespaces, a real
OpenSSH sshd, the offer's limits, and no way back to the host (docs/emulator.md, "Threat model").

What a pod is (see ``pod_init.py`` for the filesystem it gets): ``unshare`` starts the init
program as PID 1 of a new PID namespace; it joins the pod's cgroups (``cgroups.py``), builds a tmpfs
root with copy-on-write layers over the host's ``/usr`` and ``/etc``, the template's local volume
(``local_volume_dir`` at ``local_volume_path``) and the ``/mnt`` volume, ``pivot_root``s, becomes
root of the pod's own user namespace (an unprivileged host id range per pod, ``idmap.py``), confines
itself (``confinement.py``) and ``execve``s the image entrypoint with the image environment and
WORKDIR, like ``docker run``. ``ssh_delay_seconds`` after the spec was made (at the latest when
:meth:`SandboxManager.start` returns),
``/usr/sbin/sshd -D`` is started in the pod by ``nsenter --pid`` and the same init script's ``--enter``
mode, entered and confined like PID 1 (a fresh host key per pod; root logins with the spec's keys only). The template's
internal ports are published on free host loopback ports (reachable at the same addresses from
every pod), ``127.0.0.1:<emulator_port>`` inside the pod reaches the emulator (see ``portforward.py``;
:meth:`SandboxManager.comes_from_a_pod` tells those connections apart), and a spec's ``overlay`` puts
the pod on its cluster's private network (``overlay.py``), all before the entrypoint starts.
``memory_gib`` and ``cpu_count`` are cgroup limits where the host allows, scaled down to what the host
can give, with a process limit beside them (``cgroups.py``, :meth:`SandboxManager.limits_report`); the
RAM-backed disk is capped at ``min(disk_quota_gb, 4)`` GiB.

Root only: namespaces, mounts, idmapped layers and ``setns`` into a pod's network namespace need
real root. Without it :meth:`SandboxManager.start` raises :class:`SandboxError` saying so. The pod
itself never has host root: the emulator keeps it only to build and enter pods.

Teardown SIGKILLs the pod's PID 1, which makes the kernel kill everything in its PID namespace;
all mounts lived only in the pod's mount namespace, so nothing is left on the host. Pods must not
die with the (worker) thread that started them, so no PDEATHSIG is tied to the caller; instead
every pod records its pids under ``root_dir`` and :meth:`SandboxManager.cleanup_stale` kills what a
crashed emulator left behind.

Layout: ``<root_dir>/pods/<pod_id>/`` holds the plan (``plan.PLAN_FILE``, 0600: includes the pod's host keys),
``pids.json``, ``console.log`` (PID 1's stdout/stderr), ``unshare.log`` (the launcher's own messages),
``sshd.log`` and the empty mount points.
"""

from __future__ import annotations

import contextlib
import json
import logging
import marshal
import os
import re
import select
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519

from lium_emulator.catalogs.images import ImageConfig
from lium_emulator.sandbox import idmap, pod_init, volume_image
from lium_emulator.sandbox.advertised import SOURCE_BLOCK_BITS
from lium_emulator.sandbox.cgroups import CgroupLimits, PodCgroups
from lium_emulator.sandbox.confinement import KEPT_CAPABILITIES, SeccompUnavailable, seccomp_program
from lium_emulator.sandbox.console import ConsoleLogs
from lium_emulator.sandbox.file_guard import FileTableGuard
from lium_emulator.sandbox.netns_socket import open_netns
from lium_emulator.sandbox.overlay import OverlayError, OverlayMember, OverlayNetworks, check_member
from lium_emulator.sandbox.plan import PLAN_FILE, DirSpec, FileSpec, Plan
from lium_emulator.sandbox.portforward import PortForwarder

logger = logging.getLogger(__name__)
SSHD = "/usr/sbin/sshd"
HOST_PYTHON = "/usr/bin/python3"
DEFAULT_PATH = pod_init.DEFAULT_PATH
_INIT_SCRIPT = Path(pod_init.__file__).resolve()
_START_TIMEOUT_SECONDS = 20.0
_REAPING_PARENTS = ("unshare", "nsenter")  # host processes waiting on a pod's processes
_EXIT_TIMEOUT_SECONDS = 10.0
_MAX_ROOTFS_GIB = 4
_POD_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
CONSOLE_LOG = "console.log"  # PID 1's stdout and stderr, in the pod's directory
LAUNCHER_LOG = "unshare.log"  # what the unshare that starts PID 1 says, in the pod's directory
# Children get no part of the emulator's environment (it may hold API keys).
_CLEAN_ENV = {"PATH": DEFAULT_PATH, "LANG": "C.UTF-8"}
# A volume over these would hide what the pod needs to boot and run sshd.
_RESERVED_TOP_LEVEL = frozenset(
    {"usr", "etc", "proc", "sys", "dev", "run", "bin", "sbin", "lib", "lib32", "lib64", "libx32"}
)
_SHADOW_FIELDS = "19000:0:99999:7:::"
_SSHD_CONFIG = """\
# sshd of a lium-emulator pod
Port 22
HostKey /etc/ssh/ssh_host_ed25519_key
HostKey /etc/ssh/ssh_host_ecdsa_key
PermitRootLogin prohibit-password
PubkeyAuthentication yes
AuthorizedKeysFile .ssh/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
AllowTcpForwarding yes
X11Forwarding no
PrintMotd no
AcceptEnv LANG LC_*
Subsystem sftp internal-sftp
PidFile /run/sshd.pid
"""
# Unauthenticated connections sshd keeps at once, per block of source addresses and in all: the host's
# SSH (from 127.0.0.1), the other pods' (from POD_SOURCE_ADDRESS) and cluster members' (10.0.0.0/9)
# each have their own block, and the three blocks together stay under the total, so idle connections
# from pods never lock the host out of a pod.
_SSHD_STARTUPS = f"PerSourceNetBlockSize {SOURCE_BLOCK_BITS}:128\nPerSourceMaxStartups 30\nMaxStartups 100\n"


@dataclass
class PodSpec:
    """Everything the sandbox needs to run one pod; the API layer builds it from template and rent."""

    pod_id: str
    hostname: str
    image: ImageConfig
    entrypoint: str | None
    startup_commands: str
    environment: dict[str, str]
    authorized_keys: list[str]
    internal_ports: list[int]
    local_volume_path: str
    local_volume_dir: Path
    """The host directory of the local volume, used when there is no ``local_volume_image``."""
    volume_dir: Path | None
    ssh_delay_seconds: float  # sshd starts this long after the spec was made (``made_at``)
    cpu_count: int
    memory_gib: int
    disk_quota_gb: int
    # When the pod was asked for (monotonic): sshd keeps to the pod's schedule however long the
    # sandbox took to start or waited for a free start thread (50 starts at once take seconds).
    made_at: float = field(default_factory=time.monotonic)
    local_volume_image: Path | None = None
    """The local volume as a size-bounded image (``volume_image.py``), mounted instead of the directory;
    made at the pod's first start, of ``local_volume_gb`` scaled to the host."""
    local_volume_gb: int = 0
    host_keys_file: Path | None = None
    """Where the pod's sshd host keys are kept (0600): a pod started again keeps its keys, as a Lium pod
    does across its host's reboot. None: fresh keys each start."""
    preferred_ports: dict[int, int] = field(default_factory=dict)
    """Host ports to publish internal ports on again (after a restart), where they are free."""
    overlay: OverlayMember | None = None
    """The pod's place on its cluster's private network; None for a pod outside any cluster."""


class SandboxError(Exception):
    """The pod cannot run; ``str(e)`` is meant for the pod's owner (shown in CREATION_FAILED)."""


@dataclass
class _Pod:
    spec: PodSpec
    pod_dir: Path
    unshare: subprocess.Popen[bytes]
    pid1: int
    pid1_start: int
    ports: dict[int, int]
    ids: idmap.IdRange
    sshd_timer: threading.Timer | None = None
    sshd: subprocess.Popen[bytes] | None = None
    # Processes the emulator started in the pod besides sshd (a notebook server, a backup's copy):
    # their waiting nsenter parents are reaped at teardown.
    inside: list[subprocess.Popen[bytes]] = field(default_factory=list)


def _tool(name: str) -> str:
    path = shutil.which(name, path=DEFAULT_PATH)
    if path is None:
        raise SandboxError(f"the host has no {name} (util-linux): pods cannot be started")
    return path


def _require_host_support() -> tuple[str, str]:
    """``unshare`` and ``nsenter`` paths, or a SandboxError explaining what the host lacks."""
    if os.geteuid() != 0:
        raise SandboxError("pod sandboxes need root (namespaces, mounts, setns): run the emulator as root")
    if not os.access(SSHD, os.X_OK):
        raise SandboxError(f"the host has no {SSHD}: install openssh-server (apt-get install openssh-server)")
    return _tool("unshare"), _tool("nsenter")


def process_start_ticks(pid: int) -> int | None:
    """Start time of ``pid`` (clock ticks since boot), None if it does not exist; tells reused pids apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def process_is_running(pid: int, start_ticks: int) -> bool:
    """True while that very process exists and is not a zombie (an unreaped orphan looks alive to kill(0))."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    fields = stat.rsplit(")", 1)[1].split()
    return fields[0] not in ("Z", "X") and int(fields[19]) == start_ticks


def processes_mentioning(text: str) -> list[tuple[int, int, str]]:
    """Other live processes whose command line contains ``text``: (pid, start ticks, program name)."""
    found = []
    for cmdline_path in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            cmdline = cmdline_path.read_bytes()
        except OSError:
            continue
        if text.encode() in cmdline:
            pid = int(cmdline_path.parent.name)
            start = process_start_ticks(pid)
            if start is not None and pid != os.getpid():
                program = cmdline.split(b"\0", 1)[0].decode(errors="replace")
                found.append((pid, start, os.path.basename(program)))
    return found


def _kill_if_same(pid: int, start_ticks: int) -> None:
    if process_is_running(pid, start_ticks):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def mounts_under(path: Path) -> list[str]:
    """Mount points at or below ``path`` in this process's mount namespace."""
    prefix = str(path).rstrip("/")
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        mount_point = line.split()[4].encode().decode("unicode_escape")
        if mount_point == prefix or mount_point.startswith(prefix + "/"):
            found.append(mount_point)
    return found


def _remove_pod_dir(pod_dir: Path) -> None:
    """Delete a pod's directory, never through a mount (one could reach into a volume).

    Pods mount only inside their own mount namespace, so the host never sees a mount here; the
    check guards the volumes should that ever change.
    """
    if mounts_under(pod_dir):
        raise SandboxError(f"{pod_dir} has mounts in the emulator's namespace; not deleting it")
    shutil.rmtree(pod_dir, ignore_errors=True)


def _host_keys() -> dict[str, tuple[str, str]]:
    """A fresh sshd host key pair per type: file name -> (OpenSSH private key, public key line)."""
    keys: dict[str, ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey] = {
        "ssh_host_ed25519_key": ed25519.Ed25519PrivateKey.generate(),
        "ssh_host_ecdsa_key": ec.generate_private_key(ec.SECP256R1()),
    }
    return {
        name: (
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
            ).decode(),
            key.public_key()
            .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
            .decode()
            + "\n",
        )
        for name, key in keys.items()
    }


def pod_host_keys(keys_file: Path | None) -> dict[str, tuple[str, str]]:
    """The pod's host keys from ``keys_file``, or fresh ones (written there, 0600, when given)."""
    if keys_file is not None:
        with contextlib.suppress(OSError, ValueError, TypeError):
            kept = json.loads(keys_file.read_text())
            return {name: (private, public) for name, (private, public) in kept.items()}
    keys = _host_keys()
    if keys_file is not None:
        keys_file.parent.mkdir(parents=True, exist_ok=True)
        _write_private(keys_file, json.dumps(keys).encode())
    return keys


def pod_command(spec: PodSpec) -> list[str]:
    """PID 1's argv as ``docker run --entrypoint <entrypoint> <image> <startup args>`` would make it."""
    try:
        entrypoint = shlex.split(spec.entrypoint) if spec.entrypoint and spec.entrypoint.strip() else []
        args = shlex.split(spec.startup_commands) if spec.startup_commands.strip() else []
    except ValueError as e:
        raise SandboxError(f"cannot parse the template's entrypoint or startup commands: {e}") from e
    if not entrypoint:
        entrypoint = list(spec.image.entrypoint)
        args = args or list(spec.image.cmd)  # an explicit --entrypoint drops the image CMD
    command = entrypoint + args
    if not command:
        raise SandboxError("nothing to run: the image has no ENTRYPOINT or CMD and the template sets none")
    return command


def pod_environment(spec: PodSpec) -> dict[str, str]:
    """PID 1's environment: image ENV, then what docker adds (HOSTNAME, HOME), then the template's."""
    env = {"PATH": DEFAULT_PATH, **spec.image.env, "HOSTNAME": spec.hostname}
    env.setdefault("HOME", spec.image.user_home)
    env.update(spec.environment)
    return env


# A PATH that can go into sshd_config and a shell script verbatim (no quote, space or newline).
_PLAIN_PATH = re.compile(r"[\w./:+@-]+")


def login_path_files(env: dict[str, str]) -> tuple[str, list[FileSpec]]:
    """What gives SSH sessions the pod's PATH, as ``docker exec`` has it: an sshd ``SetEnv`` line (sshd
    otherwise sets its compiled-in PATH) and ``/etc/profile.d/lium-image-path.sh`` (login shells: Debian's
    ``/etc/profile`` resets PATH, then sources ``profile.d``). Nothing for a PATH that is not plain."""
    path = env.get("PATH", DEFAULT_PATH)
    if not _PLAIN_PATH.fullmatch(path):
        return "", []
    script = f"# The image's PATH (ENV PATH), which /etc/profile replaced.\nexport PATH={path}\n"
    return f"SetEnv PATH={path}\n", [
        {"path": "/etc/profile.d/lium-image-path.sh", "content": script, "mode": 0o644}
    ]


def _accounts(image: ImageConfig, etc: Path) -> dict[str, str]:
    """/etc/passwd, group, shadow and gshadow: the host's accounts plus the image user, no password hashes.

    Every account gets ``*`` (no password, not locked), which sshd needs to accept keys for it.
    """
    passwd = [line.split(":") for line in (etc / "passwd").read_text().splitlines() if line.count(":") == 6]
    groups = [line.split(":") for line in (etc / "group").read_text().splitlines() if line.count(":") == 3]
    if image.user_uid != 0:
        uid, gid = str(image.user_uid), str(image.user_gid)
        passwd = [p for p in passwd if p[0] != image.user and p[2] != uid]
        groups = [g for g in groups if g[0] != image.user and g[2] != gid]
        passwd.append([image.user, "x", uid, gid, "", image.user_home, "/bin/sh"])
        groups.append([image.user, "x", gid, ""])
    return {
        "/etc/passwd": "".join(":".join(p) + "\n" for p in passwd),
        "/etc/group": "".join(":".join(g) + "\n" for g in groups),
        "/etc/shadow": "".join(f"{p[0]}:*:{_SHADOW_FIELDS}\n" for p in passwd),
        "/etc/gshadow": "".join(f"{g[0]}:*::\n" for g in groups),
    }


def host_private_paths(top: Path) -> list[str]:
    """Entries under ``top`` that others may not read (directories whole, not descended into).

    One ``lstat`` per entry, symlinks told apart by the directory listing's type: a pod start walks
    /etc with this (~6 ms, where ``os.walk`` plus a stat and an islink per entry took ~24). Each
    directory is opened without following a symlink, so one swapped for a link or a file since its
    parent was listed is judged as what it now is; one that cannot be opened is hidden whole.
    """
    found: list[str] = []
    pending = [str(top)]
    while pending:
        directory = pending.pop()
        try:
            fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            continue  # removed since its parent was listed
        except OSError:
            with contextlib.suppress(FileNotFoundError):
                mode = os.lstat(directory).st_mode
                if not stat.S_ISLNK(mode) and (stat.S_ISDIR(mode) or not mode & stat.S_IROTH):
                    found.append(directory)  # a directory that cannot be looked into, or now private
            continue
        try:
            for entry in os.scandir(fd):
                path = os.path.join(directory, entry.name)
                try:
                    if entry.is_symlink():
                        continue
                    mode = entry.stat(follow_symlinks=False).st_mode
                except FileNotFoundError:
                    continue
                if not mode & stat.S_IROTH:
                    found.append(path)
                elif stat.S_ISDIR(mode):
                    pending.append(path)
        finally:
            os.close(fd)
    return found


def _volume_target(local_volume_path: str) -> str:
    path = PurePosixPath(local_volume_path or "/root")
    parts = path.parts
    if not path.is_absolute() or ".." in parts or len(parts) < 2 or parts[1] in _RESERVED_TOP_LEVEL:
        raise SandboxError(f"the template's volume path {local_volume_path!r} cannot be mounted")
    return str(path)


def build_plan(
    spec: PodSpec,
    pod_dir: Path,
    host_keys: dict[str, tuple[str, str]],
    *,
    id_base: int = idmap.ID_BASE,
    cgroups: PodCgroups | None = None,
    private_etc: frozenset[str] | None = None,
) -> Plan:
    """Everything ``pod_init.py`` does for this pod, decided on the host side (``id_base`` and
    ``cgroups`` default to placeholders for checking a spec before anything is allocated).

    ``private_etc`` is :func:`host_private_paths` of /etc when the caller walked it already for this
    start (a walk takes ~20 ms); it is never reused across starts, since the pod's /etc is the live
    host tree and only what is hidden at its start stays hidden from it.
    """
    cgroups = cgroups or PodCgroups((), {})
    try:
        seccomp_bpf = seccomp_program().hex()
    except SeccompUnavailable as e:
        raise SandboxError(f"pods cannot be confined: {e}") from e
    image = spec.image
    files: list[FileSpec] = [
        {"path": path, "content": content, "mode": 0o640 if "shadow" in path else 0o644}
        for path, content in _accounts(image, Path("/etc")).items()
    ]
    files += [
        {"path": "/etc/hostname", "content": spec.hostname + "\n", "mode": 0o644},
        {
            "path": "/etc/hosts",
            "content": f"127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t{spec.hostname}\n",
            "mode": 0o644,
        },
    ]
    set_env, path_files = login_path_files(pod_environment(spec))
    files += [
        {"path": "/etc/ssh/sshd_config", "content": _SSHD_CONFIG + _SSHD_STARTUPS + set_env, "mode": 0o644},
        *path_files,
    ]
    for name, (private, public) in host_keys.items():
        files.append({"path": f"/etc/ssh/{name}", "content": private, "mode": 0o600})
        files.append({"path": f"/etc/ssh/{name}.pub", "content": public, "mode": 0o644})
    # The host's own host keys, and whatever in its /etc it keeps from other users (password
    # backups, TLS keys, database configs), must not be readable in pods.
    written = {file["path"] for file in files}
    hidden = {
        f"/etc/ssh/{p.name}"
        for p in Path("/etc/ssh").glob("ssh_host_*")
        if p.name.split(".")[0] not in host_keys
    }
    if private_etc is None:
        private_etc = frozenset(host_private_paths(Path("/etc")))
    hidden |= private_etc - written
    dirs: list[DirSpec] = []
    if image.user_uid != 0:
        dirs.append({"path": image.user_home, "mode": 0o755, "uid": image.user_uid, "gid": image.user_gid})
    symlinks = {}
    if os.path.exists(HOST_PYTHON):
        for bin_dir in image.python_bin_dirs:
            symlinks[f"{bin_dir}/python3"] = HOST_PYTHON
            symlinks[f"{bin_dir}/python"] = HOST_PYTHON
    return {
        "ready_fifo": str(pod_dir / "ready"),
        "network_fifo": str(pod_dir / "network"),
        "rootfs": str(pod_dir / "rootfs"),
        "scratch": str(pod_dir / "scratch"),
        "tmpfs_size_mib": 1024 * max(1, min(spec.disk_quota_gb, _MAX_ROOTFS_GIB)),
        "hostname": spec.hostname,
        "argv": pod_command(spec),
        "env": pod_environment(spec),
        "workdir": image.workdir or "/",
        "user": {"name": image.user, "uid": image.user_uid, "gid": image.user_gid},
        "local_volume_source": str((spec.local_volume_image or spec.local_volume_dir).resolve()),
        "local_volume_target": _volume_target(spec.local_volume_path),
        "local_volume_image": spec.local_volume_image is not None,
        "mount_program": _tool("mount"),
        "mnt_source": str(spec.volume_dir.resolve()) if spec.volume_dir is not None else None,
        "dirs": dirs,
        "files": files,
        "symlinks": symlinks,
        "remove": sorted(hidden),
        "authorized_keys": [key.strip() for key in spec.authorized_keys if key.strip()],
        "id_base": id_base,
        "id_count": idmap.ID_COUNT,
        "cgroup_procs": cgroups.procs_files,
        "cgroup_mounts": cgroups.mounts,
        "keep_capabilities": sorted(KEPT_CAPABILITIES.values()),
        "seccomp_bpf": seccomp_bpf,
    }


def _validate(spec: PodSpec) -> None:
    if not _POD_ID.fullmatch(spec.pod_id):
        raise SandboxError(f"invalid pod id {spec.pod_id!r}")
    if not spec.hostname or len(spec.hostname.encode()) > 64 or "\n" in spec.hostname:
        raise SandboxError(f"invalid hostname {spec.hostname!r} (1 to 64 bytes)")
    if spec.local_volume_image is None and not spec.local_volume_dir.is_dir():
        raise SandboxError(f"the local volume directory {spec.local_volume_dir} does not exist")
    if spec.volume_dir is not None and not spec.volume_dir.is_dir():
        raise SandboxError(f"the volume directory {spec.volume_dir} does not exist")
    if any(not 0 < port < 65536 for port in spec.internal_ports):
        raise SandboxError(f"invalid internal ports {spec.internal_ports}")
    if spec.overlay is not None:
        try:
            check_member(spec.overlay)
        except OverlayError as e:
            raise SandboxError(str(e)) from e


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)


class SandboxManager:
    """Starts, watches and tears down the emulator's pod sandboxes under ``root_dir``."""

    def __init__(
        self,
        root_dir: Path,
        *,
        emulator_port: int,
        emulator_host: str = "127.0.0.1",
        pod_open_files_limit: int | None = None,
    ) -> None:
        """``pod_open_files_limit`` replaces the share of the host's file table a pod may hold
        (``file_guard.py``)."""
        self._root_dir = root_dir.resolve()
        # The overlay mount option string cannot carry these characters.
        if any(c in str(self._root_dir) for c in ",: \t\n"):
            raise SandboxError(f"sandbox root {self._root_dir} must not contain commas, colons or spaces")
        self._pods_dir = self._root_dir / "pods"
        self._emulator_port = emulator_port
        self._emulator_host = emulator_host  # where a pod's way to the emulator leads on the host
        self._forwarder = PortForwarder()
        self._overlays = OverlayNetworks()
        self._cgroups = CgroupLimits(str(self._root_dir))
        self._logs = ConsoleLogs()
        self._lock = threading.Lock()
        self._pods: dict[str, _Pod] = {}
        self._starting: dict[str, threading.Event] = {}
        self._file_guard = FileTableGuard(self._pid1s, self._kill, pod_limit=pod_open_files_limit)

    def start(self, spec: PodSpec) -> dict[int, int]:
        """Run the pod; returns its published ports (internal -> host loopback port). Blocking."""
        unshare, nsenter = _require_host_support()
        _validate(spec)
        with self._lock:
            if spec.pod_id in self._pods or spec.pod_id in self._starting:
                raise SandboxError(f"pod {spec.pod_id} is already running")
            self._starting[spec.pod_id] = threading.Event()
        try:
            pod = self._launch(spec, unshare)
            with self._lock:
                self._pods[spec.pod_id] = pod
                sshd_in = max(0.0, spec.made_at + spec.ssh_delay_seconds - time.monotonic())
                pod.sshd_timer = threading.Timer(sshd_in, self._start_sshd, (spec.pod_id, nsenter))
                pod.sshd_timer.daemon = True
                pod.sshd_timer.start()
        finally:
            with self._lock:
                self._starting.pop(spec.pod_id).set()
        return dict(pod.ports)

    def is_alive(self, pod_id: str) -> bool:
        """True while the pod's PID 1 runs (a pod whose entrypoint exited is dead, as in Docker)."""
        with self._lock:
            pod = self._pods.get(pod_id)
        return pod is not None and pod.unshare.poll() is None and process_is_running(pod.pid1, pod.pid1_start)

    def killed_because(self, pod_id: str) -> str | None:
        """Why the emulator killed the pod's PID 1 itself (it held too much of the host), or None."""
        return self._file_guard.verdict(pod_id)

    def _pid1s(self) -> dict[str, int]:
        with self._lock:
            return {pod_id: pod.pid1 for pod_id, pod in self._pods.items()}

    def _kill(self, pod_id: str) -> None:
        """SIGKILL the pod's PID 1 (and so everything in it), leaving its teardown to :meth:`stop`."""
        with self._lock:
            pod = self._pods.get(pod_id)
        if pod is not None:
            _kill_if_same(pod.pid1, pod.pid1_start)

    def exit_notice(self, pod_id: str) -> int | None:
        """A pidfd on the pod's PID 1, readable once it exits; None when it runs no more already.

        The caller owns (and closes) the fd. Waiting on it costs nothing, where polling
        :meth:`is_alive` for every pod twice a second cost a fleet's emulator seconds of CPU.
        """
        with self._lock:
            pod = self._pods.get(pod_id)
        if pod is None:
            return None
        try:
            notice = os.pidfd_open(pod.pid1)
        except ProcessLookupError:
            return None
        # Checked after opening: the fd is then known to be that very process, not a reused pid.
        if not self.is_alive(pod_id):
            os.close(notice)
            return None
        return notice

    def stop(self, pod_id: str) -> None:
        """Kill everything in the pod, free its ports, delete its files. Blocking; unknown ids are fine.

        A start of the same pod still in progress is waited for, then undone.
        """
        with self._lock:
            starting = self._starting.get(pod_id)
        if starting is not None:
            starting.wait()
        with self._lock:
            pod = self._pods.pop(pod_id, None)
        if pod is not None:
            self._teardown([pod])
        self._file_guard.forget(pod_id)

    def stop_all(self) -> None:
        """Stop every pod this manager runs, its forwarding thread and its file table guard."""
        with self._lock:
            pods = list(self._pods.values())
            self._pods.clear()
        self._teardown(pods)
        self._forwarder.close()
        self._file_guard.close()

    def console_log(self, pod_id: str) -> Path:
        """The file holding the pod's container output (PID 1's stdout and stderr); removed at stop."""
        return self._pods_dir / pod_id / CONSOLE_LOG

    def pod_pids(self, pod_id: str) -> tuple[int, int] | None:
        """Host pid and start ticks of the pod's PID 1 (for diagnostics and leak checks)."""
        with self._lock:
            pod = self._pods.get(pod_id)
        return None if pod is None else (pod.pid1, pod.pid1_start)

    def forwarded_connections(self) -> int:
        """Relayed sockets open for all pods (two per live connection); for leak checks."""
        return self._forwarder.connection_count()

    def overlay_members(self) -> dict[str, list[str]]:
        """The pods on each cluster's overlay network (network -> pod ids), for inspection and leak checks."""
        return self._overlays.members()

    def comes_from_a_pod(self, client: tuple[str, int]) -> bool:
        """True when a TCP client address of the emulator is a connection a pod opened (relayed out of
        its network namespace): such clients never get the admin routes."""
        return self._forwarder.is_reverse_connection(client)

    def limits_report(self) -> dict[str, dict[str, object]]:
        """Which of the offer's limits pods get on this host, how, or why not; and the open files a pod
        may hold."""
        return {**self._cgroups.report(), "open_files": self._file_guard.report()}

    @staticmethod
    def cleanup_stale(root_dir: Path) -> list[str]:
        """Kill the sandboxes a crashed emulator left under ``root_dir`` and delete their files.

        Pods whose recorded manager process is still alive (another emulator sharing ``root_dir``)
        are left alone. Returns the ids of the pods cleaned up.
        """
        pods_dir = root_dir.resolve() / "pods"
        if not pods_dir.is_dir():
            return []
        cleaned = []
        for pod_dir in sorted(p for p in pods_dir.iterdir() if p.is_dir()):
            record = _read_record(pod_dir)
            owner_pid, owner_start = record.get("manager_pid"), record.get("manager_start")
            if (
                owner_pid is not None
                and owner_pid != os.getpid()
                and owner_start is not None
                and process_is_running(owner_pid, owner_start)
            ):
                continue  # another live emulator's pod
            pids = [
                (record[pid], record[start])
                for pid, start in (("pid1", "pid1_start"), ("unshare_pid", "unshare_start"))
                if pid in record and start in record
            ]
            # A crash between starting the sandbox and recording its pids leaves processes only their
            # command line names (`unshare ... pod_init.py <pod_dir>/<PLAN_FILE>`, or plan.json
            # from an emulator of before the plan was marshalled).
            unrecorded = [p for p in processes_mentioning(f"{pod_dir}/plan.") if p[:2] not in pids]
            pids += [(pid, start) for pid, start, _ in unrecorded]
            # Only PID 1 (the kernel then kills its whole PID namespace): its unshare parent, and the
            # nsenter parent of the pod's sshd, must stay to reap their children (an orphaned zombie
            # would linger under an init that may never reap, holding the pod's PID 1 in its exit),
            # then exit by themselves. An unshare whose child was never recorded nor found is killed
            # itself (its --kill-child takes a child still starting along).
            inits = [(pid, start) for pid, start, program in unrecorded if program not in _REAPING_PARENTS]
            if "pid1" in record and "pid1_start" in record:
                inits.append((record["pid1"], record["pid1_start"]))
            for pid, start in inits or pids:
                _kill_if_same(pid, start)
            deadline = time.monotonic() + _EXIT_TIMEOUT_SECONDS
            while any(process_is_running(pid, start) for pid, start in pids) and time.monotonic() < deadline:
                time.sleep(0.01)
            _remove_pod_dir(pod_dir)
            _remove_cgroups(CgroupLimits(str(root_dir.resolve())), pod_dir.name)
            cleaned.append(pod_dir.name)
        return cleaned

    def _launch(self, spec: PodSpec, unshare: str) -> _Pod:
        pod_dir = self._pods_dir / spec.pod_id
        if spec.local_volume_image is not None:
            try:
                volume_image.ensure_image(
                    spec.local_volume_image, spec.local_volume_gb, volume_image.host_images()
                )
            except (OSError, ValueError, subprocess.CalledProcessError) as e:
                raise SandboxError(f"the pod's local volume could not be made: {e}") from e
        host_keys = pod_host_keys(spec.host_keys_file)
        private_etc = frozenset(host_private_paths(Path("/etc")))
        # May refuse the spec before anything is allocated.
        build_plan(spec, pod_dir, host_keys, private_etc=private_etc)
        if pod_dir.exists():
            _remove_pod_dir(pod_dir)
        record = {"manager_pid": os.getpid(), "manager_start": process_start_ticks(os.getpid()) or 0}
        process: subprocess.Popen[bytes] | None = None
        ready: int | None = None
        gate: int | None = None
        ports: dict[int, int] = {}

        def wire(netns: int) -> None:
            # The emulator's port first: an advertised address of another pod never takes its place.
            if self._emulator_port:
                self._forwarder.reverse(spec.pod_id, netns, self._emulator_port, self._emulator_host)
            ports.update(
                self._forwarder.publish(
                    spec.pod_id, netns, spec.internal_ports, preferred=spec.preferred_ports
                )
            )
            if spec.overlay is not None:
                self._overlays.join(spec.pod_id, netns, spec.overlay)

        try:
            ids = idmap.acquire(spec.pod_id)
        except (idmap.IdRangeError, OSError) as e:
            raise SandboxError(f"pod sandbox could not be set up: {e}") from e
        try:
            # An image stores the pod's own ids (mounted idmapped): only directories are re-owned.
            local = spec.local_volume_dir if spec.local_volume_image is None else None
            for directory in (local, spec.volume_dir):
                if directory is not None:
                    idmap.shift_ownership(directory, ids.base)
            cgroups = self._cgroups.create(spec.pod_id, spec.memory_gib, spec.cpu_count)
            plan = build_plan(
                spec, pod_dir, host_keys, id_base=ids.base, cgroups=cgroups, private_etc=private_etc
            )
            for directory in (pod_dir, pod_dir / "rootfs", pod_dir / "scratch"):
                directory.mkdir(mode=0o700, parents=True)
            _write_private(pod_dir / PLAN_FILE, marshal.dumps(dict(plan)))
            os.mkfifo(pod_dir / "ready", 0o600)
            ready = os.open(pod_dir / "ready", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            # Read and write: the init program's open for reading never waits, nor this one.
            os.mkfifo(pod_dir / "network", 0o600)
            gate = os.open(pod_dir / "network", os.O_RDWR | os.O_CLOEXEC)
            # Bounded pipes (console.py). PID 1 alone writes the console: what unshare itself says
            # (such as its complaint when PID 1 dies of SIGKILL) is no line of the container's.
            console = self._logs.pipe_to(pod_dir / CONSOLE_LOG)
            try:
                launcher_log = self._logs.pipe_to(pod_dir / LAUNCHER_LOG)
                try:
                    process = subprocess.Popen(
                        [
                            unshare, "--pid", "--mount", "--uts", "--ipc", "--net", "--fork",
                            "--propagation", "private", "--kill-child=SIGKILL",
                            sys.executable, "-I", "-S", str(_INIT_SCRIPT), str(pod_dir / PLAN_FILE), str(console),
                        ],
                        stdin=subprocess.DEVNULL, stdout=launcher_log, stderr=launcher_log, pass_fds=(console,),
                        env=_CLEAN_ENV, start_new_session=True,
                    )  # fmt: skip
                finally:
                    os.close(launcher_log)
            finally:
                os.close(console)
            record.update(unshare_pid=process.pid, unshare_start=process_start_ticks(process.pid) or 0)
            _write_private(pod_dir / "pids.json", json.dumps(record).encode())
            pid1 = _await_ready(ready, gate, process, record, pod_dir, wire)
            return _Pod(spec, pod_dir, process, pid1, record["pid1_start"], ports, ids)
        except BaseException as e:
            self._forwarder.release(spec.pod_id)
            self._overlays.leave([spec.pod_id])
            if process is not None:
                process.kill()  # --kill-child takes PID 1 (and with it the whole PID namespace) along
                process.wait(_EXIT_TIMEOUT_SECONDS)
            _remove_pod_dir(pod_dir)
            _remove_cgroups(self._cgroups, spec.pod_id)
            ids.release()
            if isinstance(e, OSError):
                raise SandboxError(f"pod sandbox could not be set up: {e}") from e
            if isinstance(e, OverlayError):
                raise SandboxError(f"the pod could not join its cluster's network: {e}") from e
            raise
        finally:
            for fifo in (ready, gate):
                if fifo is not None:
                    os.close(fifo)

    def _start_sshd(self, pod_id: str, nsenter: str) -> None:
        with self._lock:
            pod = self._pods.get(pod_id)
            if pod is None:
                return
            log = self._logs.pipe_to(pod.pod_dir / "sshd.log")
            try:
                # A child (-D), not a daemon: a daemonizing sshd exits 0 even when it cannot bind.
                pod.sshd = subprocess.Popen(
                    _entering(nsenter, pod, [SSHD, "-D", "-e"]),
                    stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=_CLEAN_ENV, start_new_session=True,
                )  # fmt: skip
            finally:
                os.close(log)

    def start_inside(self, pod_id: str, argv: list[str]) -> subprocess.Popen[bytes]:
        """Run ``argv`` in the running pod ``pod_id``, entered and confined as its PID 1 is (as the pod's
        root, with the pod's filesystem, network and limits): whatever it does, it can do no more than
        pod code. Its stdin and stdout are pipes to the caller, its stderr goes nowhere; it dies with
        the pod. SandboxError when the pod does not run."""
        _, nsenter = _require_host_support()
        with self._lock:
            pod = self._pods.get(pod_id)
            if pod is None or not process_is_running(pod.pid1, pod.pid1_start):
                raise SandboxError(f"pod {pod_id} is not running")
            process = subprocess.Popen(
                _entering(nsenter, pod, argv),
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                env=_CLEAN_ENV, start_new_session=True,
            )  # fmt: skip
            pod.inside = [p for p in pod.inside if p.poll() is None] + [process]
        return process

    def _teardown(self, pods: list[_Pod]) -> None:
        # Kill every pod first, then wait: tearing down many pods costs one wait, not one each.
        for pod in pods:
            if pod.sshd_timer is not None:
                pod.sshd_timer.cancel()
            self._forwarder.release(pod.spec.pod_id)
            _kill_if_same(pod.pid1, pod.pid1_start)
        self._overlays.leave(pod.spec.pod_id for pod in pods)
        for pod in pods:
            for process in (pod.unshare, pod.sshd, *pod.inside):
                if process is not None:
                    _reap(process)
            _remove_pod_dir(pod.pod_dir)
            _remove_cgroups(self._cgroups, pod.spec.pod_id)
            pod.ids.release()


def _entering(nsenter: str, pod: _Pod, argv: list[str]) -> list[str]:
    """The command that runs ``argv`` in ``pod``: in its PID namespace (``nsenter`` forks into it and
    waits, on the host, outside the pod's reach), then entered and confined like PID 1 (``pod_init.py
    --enter``)."""
    return [
        nsenter, "--target", str(pod.pid1), "--pid", "--",
        sys.executable, "-I", "-S", str(_INIT_SCRIPT), "--enter", str(pod.pid1), str(pod.pod_dir / PLAN_FILE),
        "--", *argv,
    ]  # fmt: skip


def _remove_cgroups(cgroups: CgroupLimits, pod_id: str) -> None:
    """Remove a dead pod's groups; one still busy is logged and left (it never blocks other pods)."""
    try:
        cgroups.remove(pod_id)
    except OSError as e:
        logger.warning("cannot remove the cgroups of pod %s: %s", pod_id, e)


def _reap(process: subprocess.Popen[bytes]) -> None:
    try:
        process.wait(_EXIT_TIMEOUT_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(_EXIT_TIMEOUT_SECONDS)


def _read_record(pod_dir: Path) -> dict[str, int]:
    try:
        record = json.loads((pod_dir / "pids.json").read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in record.items() if isinstance(v, int)} if isinstance(record, dict) else {}


def _await_ready(
    ready: int,
    gate: int,
    process: subprocess.Popen[bytes],
    record: dict[str, int],
    pod_dir: Path,
    wire: Callable[[int], None],
) -> int:
    """Follow the init program's reports until its entrypoint runs; returns PID 1's host pid.

    Once the pod's loopback is up (``NETWORK``), ``wire`` gets an fd on the pod's network namespace
    (opened at ``PID``, while the init program still sets up) and the ``gate`` opens: the entrypoint
    starts with its network complete, and an entrypoint that exits at once still had its ports
    published (as in Docker, where such a container starts, then exits).
    """
    deadline = time.monotonic() + _START_TIMEOUT_SECONDS
    buffer = b""
    lines: list[str] = []
    netns: int | None = None
    wired = False
    poller = select.poll()
    poller.register(ready, select.POLLIN)
    try:
        while True:
            if time.monotonic() > deadline:
                raise SandboxError("the pod sandbox did not start in time")
            if not poller.poll(50):
                if process.poll() is not None:
                    break  # unshare failed before the init program opened the FIFO
                continue
            chunk = os.read(ready, 4096)
            if not chunk:
                break  # the entrypoint was exec'd (close-on-exec) or init died
            *complete, buffer = (buffer + chunk).split(b"\n")
            for raw in complete:
                line = raw.decode(errors="replace")
                lines.append(line)
                if line.startswith("PID ") and netns is None:
                    pid1 = int(line.split()[1])
                    record.update(pid1=pid1, pid1_start=process_start_ticks(pid1) or 0)
                    _write_private(pod_dir / "pids.json", json.dumps(record).encode())
                    with contextlib.suppress(OSError):  # PID 1 already gone: its ERR line says why
                        netns = open_netns(pid1)
                if line == "NETWORK" and netns is not None and not wired:
                    wire(netns)
                    wired = True
                    os.write(gate, b"1")
        errors = [line[4:] for line in lines if line.startswith("ERR ")]
        if errors:
            raise SandboxError(f"pod failed to start: {errors[-1]}")
        if "READY" not in lines or not wired:
            raise SandboxError(f"the pod sandbox exited during setup (status {process.poll()})")
    finally:
        if netns is not None:
            os.close(netns)
    return record["pid1"]
