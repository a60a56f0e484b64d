"""Builds one pod's filesystem inside its fresh namespaces, then becomes the image's PID 1.

``sandbox.py`` runs this file as a script (stdlib only, ``python -I -S``, so it starts in ~20 ms) as
``unshare --pid --mount --uts --ipc --net --fork --propagation private --kill-child=SIGKILL``'s child,
i.e. as PID 1 of a new PID namespace with private mounts. It

1. mounts a tmpfs root and, under it, the host's ``/usr`` read-only (``/bin``, ``/lib``… as on the
   host), a private writable ``/usr/local``, an overlay of the host's ``/etc`` (writes stay in the pod),
   a minimal ``/dev`` (host null/zero/full/random/urandom/tty, its own devpts and shm), a read-only
   sysfs, the local volume and the ``/mnt`` volume;
2. ``pivot_root``s into it, detaches the host tree and mounts the pod's ``/proc``;
3. applies the plan's file edits (passwd/shadow with the image user, the pod's sshd config and
   host keys, root's authorized_keys, python links);
4. brings ``lo`` up, sets the hostname, enters the image WORKDIR, drops to the image USER and
   ``execve``s the entrypoint with exactly the image environment — so ``/proc/1/environ`` and
   ``/proc/1/cwd`` are what ``docker run`` gives.

Progress goes to the host through a FIFO: ``PID <host pid>``, then ``READY`` or ``ERR <reason>``.
The FIFO is close-on-exec, so the host sees end-of-file once the entrypoint runs.
Every module is imported up front: after ``pivot_root`` the interpreter's own files are gone.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import platform
import signal
import socket
import struct
import sys
from typing import NoReturn, TypedDict

MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MNT_DETACH = 0x2
PR_SET_PDEATHSIG = 1
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
HOST_TOP_LEVEL = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
TTY_GID = 5

_libc = ctypes.CDLL(None, use_errno=True)


class FileSpec(TypedDict):
    path: str
    content: str
    mode: int


class DirSpec(TypedDict):
    path: str
    mode: int
    uid: int
    gid: int


class UserSpec(TypedDict):
    name: str
    uid: int
    gid: int


class Plan(TypedDict):
    """What ``sandbox.py`` decided for one pod; paths in ``dirs``/``files``/… are inside the pod."""

    ready_fifo: str
    rootfs: str
    scratch: str
    tmpfs_size_mib: int
    hostname: str
    argv: list[str]
    env: dict[str, str]
    workdir: str
    user: UserSpec
    local_volume_source: str
    local_volume_target: str
    mnt_source: str | None
    dirs: list[DirSpec]
    files: list[FileSpec]
    symlinks: dict[str, str]
    remove: list[str]
    authorized_keys: list[str]


class SetupError(Exception):
    """A reason the pod cannot start, worded for the pod's owner."""


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise SetupError(f"{what}: {os.strerror(errno)}")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(
        _libc.mount(
            source.encode() if source else None,
            target.encode(),
            fstype.encode() if fstype else None,
            ctypes.c_ulong(flags),
            data.encode() if data else None,
        ),
        f"mount {fstype or 'bind'} on {target}",
    )


def bind(source: str, target: str, *, read_only: bool = False) -> None:
    mount(source, target, None, MS_BIND | MS_REC)
    if read_only:
        # Keep the source's nosuid/nodev/noexec (locked flags must be repeated on remount).
        kept = os.statvfs(source).f_flag & (MS_NOSUID | MS_NODEV | MS_NOEXEC)
        mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | kept)


def host_pid() -> int:
    """Our pid in the host's PID namespace (``/proc`` is still the host's here)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("NSpid:"):
                return int(line.split()[1])
    raise SetupError("no NSpid in /proc/self/status")


def build_root(plan: Plan) -> None:
    """Mount the pod's whole filesystem tree under ``plan['rootfs']``."""
    root = plan["rootfs"]
    size = f"size={plan['tmpfs_size_mib']}m"
    mount("tmpfs", root, "tmpfs", 0, f"mode=755,{size}")
    for name in HOST_TOP_LEVEL:
        host_path = "/" + name
        if os.path.islink(host_path):
            os.symlink(os.readlink(host_path), f"{root}/{name}")
        elif os.path.isdir(host_path):
            os.mkdir(f"{root}/{name}", 0o755)
            bind(host_path, f"{root}/{name}", read_only=True)
    os.mkdir(f"{root}/usr", 0o755)
    bind("/usr", f"{root}/usr", read_only=True)
    mount("tmpfs", f"{root}/usr/local", "tmpfs", MS_NODEV, f"mode=755,{size}")
    for sub in ("bin", "sbin", "lib", "share", "include", "etc", "src"):
        os.mkdir(f"{root}/usr/local/{sub}", 0o755)

    # /etc: the host's, with the pod's changes in an overlay upper layer on a scratch tmpfs that
    # is left behind (still referenced by the overlay) when the host tree is detached.
    scratch = plan["scratch"]
    mount("tmpfs", scratch, "tmpfs", MS_NODEV, "mode=700")
    os.mkdir(f"{scratch}/upper", 0o755)
    os.mkdir(f"{scratch}/work", 0o755)
    os.mkdir(f"{root}/etc", 0o755)
    mount(
        "overlay",
        f"{root}/etc",
        "overlay",
        0,
        f"lowerdir=/etc,upperdir={scratch}/upper,workdir={scratch}/work",
    )

    build_dev(f"{root}/dev")
    for name, mode in (("proc", 0o555), ("sys", 0o555), ("run", 0o755), ("tmp", 0o1777), ("var", 0o755)):
        os.mkdir(f"{root}/{name}", mode)
    mount("sysfs", f"{root}/sys", "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for name, mode in (
        ("root", 0o700),
        ("home", 0o755),
        ("mnt", 0o755),
        ("opt", 0o755),
        ("workspace", 0o755),
    ):
        os.mkdir(f"{root}/{name}", mode)
    for name, mode in (("tmp", 0o1777), ("log", 0o755), ("lib", 0o755), ("cache", 0o755), ("empty", 0o755)):
        os.mkdir(f"{root}/var/{name}", mode)
    os.symlink("../run", f"{root}/var/run")
    for name, mode in (("sshd", 0o755), ("lock", 0o1777)):
        os.mkdir(f"{root}/run/{name}", mode)

    target = root + plan["local_volume_target"]
    os.makedirs(target, 0o755, exist_ok=True)
    bind(plan["local_volume_source"], target)
    if plan["local_volume_target"] == "/root":
        os.chmod(target, 0o700)  # sshd's StrictModes refuses keys under a group/world-writable home
    mnt_source = plan["mnt_source"]
    if mnt_source is not None:
        bind(mnt_source, f"{root}/mnt")


def build_dev(dev: str) -> None:
    os.mkdir(dev, 0o755)
    mount("tmpfs", dev, "tmpfs", MS_NOSUID, "mode=755,size=64k")
    for name in DEVICES:
        os.close(os.open(f"{dev}/{name}", os.O_CREAT | os.O_WRONLY, 0o666))
        bind(f"/dev/{name}", f"{dev}/{name}")
    os.mkdir(f"{dev}/pts", 0o755)
    mount(
        "devpts",
        f"{dev}/pts",
        "devpts",
        MS_NOSUID | MS_NOEXEC,
        f"newinstance,ptmxmode=0666,mode=0620,gid={TTY_GID}",
    )
    os.symlink("pts/ptmx", f"{dev}/ptmx")
    os.mkdir(f"{dev}/shm", 0o1777)
    mount("tmpfs", f"{dev}/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m")
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
    ):
        os.symlink(target, f"{dev}/{name}")
    os.symlink("/proc/self/fd/2", f"{dev}/stderr")


def pivot_into(root: str) -> None:
    """Make ``root`` the root and drop every view of the host's tree."""
    number = SYS_PIVOT_ROOT.get(platform.machine())
    if number is None:
        raise SetupError(f"unsupported architecture {platform.machine()}")
    os.chdir(root)
    _check(_libc.syscall(number, b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", MNT_DETACH), "detach the host root")
    os.chdir("/")
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)


def apply_plan(plan: Plan) -> None:
    """The plan's in-pod file edits (after ``pivot_root``, so paths are the pod's)."""
    for path in plan["remove"]:
        if os.path.lexists(path):
            os.unlink(path)  # in /etc this leaves an overlay whiteout; the host file is untouched
    for spec in plan["dirs"]:
        os.makedirs(spec["path"], 0o755, exist_ok=True)
        os.chmod(spec["path"], spec["mode"])
        os.chown(spec["path"], spec["uid"], spec["gid"])
    for file in plan["files"]:
        os.makedirs(os.path.dirname(file["path"]), 0o755, exist_ok=True)
        fd = os.open(file["path"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, file["mode"])
        with os.fdopen(fd, "w") as out:
            out.write(file["content"])
        os.chmod(file["path"], file["mode"])
    for link, target in plan["symlinks"].items():
        os.makedirs(os.path.dirname(link), 0o755, exist_ok=True)
        if not os.path.lexists(link):
            os.symlink(target, link)
    merge_authorized_keys("/root/.ssh", plan["authorized_keys"])


def merge_authorized_keys(ssh_dir: str, keys: list[str]) -> None:
    """Add the pod's keys to root's authorized_keys (the local volume may already hold some)."""
    os.makedirs(ssh_dir, 0o700, exist_ok=True)
    os.chmod(ssh_dir, 0o700)
    path = f"{ssh_dir}/authorized_keys"
    existing: list[str] = []
    if os.path.exists(path):
        with open(path) as current:
            existing = [line.rstrip("\n") for line in current]
    lines = existing + [key for key in keys if key not in existing]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write("".join(line + "\n" for line in lines))
    os.chmod(path, 0o600)
    os.chown(path, 0, 0)


def loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(sock.fileno(), SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock.fileno(), SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | IFF_UP))


def find_executable(name: str, env: dict[str, str]) -> str:
    if "/" in name:
        candidates = [name]
    else:
        candidates = [os.path.join(d or ".", name) for d in env.get("PATH", DEFAULT_PATH).split(":")]
    for candidate in candidates:
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise SetupError(f'exec: "{name}": executable file not found in $PATH')


def become(user: UserSpec) -> None:
    """Run as the image USER from here on; a credential change clears PDEATHSIG, so set it again."""
    if user["uid"] == 0:
        return
    os.setgroups([user["gid"]])
    os.setgid(user["gid"])
    os.setuid(user["uid"])
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")


def main(plan_path: str) -> NoReturn:
    with open(plan_path) as plan_file:
        plan: Plan = json.load(plan_file)
    fifo = os.open(plan["ready_fifo"], os.O_WRONLY | os.O_CLOEXEC)

    def report(line: str) -> None:
        os.write(fifo, (line.replace("\n", " ") + "\n").encode())

    try:
        report(f"PID {host_pid()}")
        os.umask(0)
        _check(_libc.sethostname(plan["hostname"].encode(), len(plan["hostname"].encode())), "sethostname")
        loopback_up()
        build_root(plan)
        pivot_into(plan["rootfs"])
        apply_plan(plan)
        os.umask(0o022)
        executable = find_executable(plan["argv"][0], plan["env"])
        os.makedirs(plan["workdir"], 0o755, exist_ok=True)
        os.chdir(plan["workdir"])
        become(plan["user"])
        report("READY")
        os.execve(executable, plan["argv"], plan["env"])
    except (OSError, SetupError) as e:
        report(f"ERR {e}")
        os._exit(1)


if __name__ == "__main__":
    main(sys.argv[1])
