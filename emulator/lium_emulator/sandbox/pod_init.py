"""Builds one pod's filesystem inside its fresh namespaces, then becomes the image's PID 1, confined.

``manager.py`` runs this file as a script (``python -I -S``, importing only built-in and small stdlib
modules, so it starts in ~40 ms of CPU instead of ~85 with json, typing, socket and friends) as
``unshare --pid --mount --uts --ipc --net --fork --propagation private --kill-child=SIGKILL``'s child
(with the write end of the pod's console pipe as its second argument: it becomes stdout and stderr),
i.e. as PID 1 of a new PID namespace with private mounts, still real root. It

1. joins the pod's cgroups (the offer's memory and CPU limits) and takes a cgroup namespace;
2. creates the pod's **user namespace**: pod uid/gid 0..65535 are host ids ``id_base``.. (unprivileged,
   a range of its own per pod, see ``idmap.py``);
3. builds the tree as real root, so every mount belongs to the host's user namespace and the pod
   can neither unmount nor remount any of it: a tmpfs (the pod's disk) holding the root and the
   upper layers of overlays over the host's ``/usr`` and ``/etc`` (lower layers are read-only
   *idmapped* clones, so host root's files look root-owned inside and writes go to the pod's
   upper layer, never to the host), a minimal ``/dev``, a read-only sysfs, the pod's own cgroups
   read-only at ``/sys/fs/cgroup``, the local volume and the ``/mnt`` volume;
4. ``pivot_root``s into it, detaches the host tree and mounts the pod's ``/proc``;
5. enters the user namespace (root there, nobody on the host) and applies the plan's file edits
   as the pod's root (passwd/shadow with the image user, sshd config and host keys, root's
   authorized_keys, python links);
6. confines itself: a reduced capability bounding set, ``no_new_privs`` and the seccomp filter
   (``confinement.py``); enters the image WORKDIR, drops to the image USER and ``execve``s the
   entrypoint with exactly the image environment — as ``docker run`` does.

``--enter <pid> <plan> -- <argv>`` execs ``argv`` (the pod's sshd) the same way in an existing pod
whose PID namespace ``nsenter --pid`` already put it in: the pod's other namespaces and cgroups, its
root, the user namespace last, the same confinement. (``nsenter`` stays as its waiting parent on the
host, outside the pod's reach; no Python process lingers.)

Progress goes to the host through a FIFO: ``PID <host pid>``, ``NETWORK`` once the pod's loopback is
up, then ``READY`` or ``ERR <reason>``. The FIFO is close-on-exec, so the host sees end-of-file once
the entrypoint runs. On ``NETWORK`` the host wires the pod's network (the emulator's port, published
ports, advertised addresses, the cluster overlay) while this script goes on building the pod, and
then writes a byte to a second FIFO: the entrypoint is not started before that byte, so it starts
with its network complete, as a container does.
Every module is imported up front: after ``pivot_root`` the interpreter's own files are gone.
"""

from __future__ import annotations

import _socket
import ctypes
import fcntl
import marshal
import os
import struct
import sys

# The plan's types live where the host side builds plans; this script never imports them (it runs
# outside the package, and typing alone would double its start-up).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn

    from lium_emulator.sandbox.plan import Plan, UserSpec

MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MNT_DETACH = 0x2
CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
AT_FDCWD = -100
AT_EMPTY_PATH = 0x1000
AT_RECURSIVE = 0x8000
OPEN_TREE_CLONE = 0x1
MOVE_MOUNT_F_EMPTY_PATH = 0x4
MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_IDMAP = 0x00100000
PR_SET_PDEATHSIG = 1
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SIGKILL = 9
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1
# The new mount API has one numbering on every architecture; pivot_root does not.
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
SYS_OPEN_TREE = 428
SYS_MOVE_MOUNT = 429
SYS_MOUNT_SETATTR = 442
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
HOST_TOP_LEVEL = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
# Host directories the pod gets as copy-on-write layers (the image's filesystem).
LAYERS = ("usr", "etc")
USR_LOCAL_DIRS = ("bin", "sbin", "lib", "share", "include", "etc", "src")
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
TTY_GID = 5
# Namespaces ``--enter`` joins before the user namespace (which must come last: it ends host privilege).
ENTERED_NAMESPACES = (
    ("cgroup", CLONE_NEWCGROUP),
    ("ipc", CLONE_NEWIPC),
    ("uts", CLONE_NEWUTS),
    ("net", CLONE_NEWNET),
    ("mnt", CLONE_NEWNS),
)

_libc = ctypes.CDLL(None, use_errno=True)


class SetupError(Exception):
    """A reason the pod cannot start, worded for the pod's owner."""


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _check(result: int, what: str) -> None:
    if result < 0:
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


def idmapped_clone(source: str, userns: int, target: str, *, read_only: bool = True) -> None:
    """Attach a copy of the tree ``source`` at ``target``, ids shifted into ``userns``: stored uid 0
    appears as the pod's root through it. Read-only unless asked (a host tree must never be written
    through it; the pod's own volume image is written)."""
    tree = _libc.syscall(
        SYS_OPEN_TREE, AT_FDCWD, source.encode(), OPEN_TREE_CLONE | os.O_CLOEXEC | AT_RECURSIVE
    )
    _check(tree, "open_tree")
    try:
        attr = _MountAttr(MOUNT_ATTR_IDMAP | (MOUNT_ATTR_RDONLY if read_only else 0), 0, 0, userns)
        _check(
            _libc.syscall(
                SYS_MOUNT_SETATTR,
                tree,
                b"",
                AT_EMPTY_PATH | AT_RECURSIVE,
                ctypes.byref(attr),
                ctypes.sizeof(attr),
            ),
            f"idmap {source}",
        )
        _check(
            _libc.syscall(SYS_MOVE_MOUNT, tree, b"", AT_FDCWD, target.encode(), MOVE_MOUNT_F_EMPTY_PATH),
            f"attach {source}",
        )
    finally:
        os.close(tree)


def host_pid() -> int:
    """Our pid in the host's PID namespace (``/proc`` is still the host's here)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("NSpid:"):
                return int(line.split()[1])
    raise SetupError("no NSpid in /proc/self/status")


def join_cgroups(procs_files: list[str]) -> None:
    """Move this process (and so everything it starts) into the pod's cgroups."""
    for procs in procs_files:
        with open(procs, "w") as out:
            out.write("0\n")  # 0: the writing process, whatever its PID namespace


def make_user_namespace(id_base: int, id_count: int) -> int:
    """An fd on a new user namespace mapping ids 0..id_count-1 to host ids id_base..; we stay outside.

    A helper child creates it and holds it until we have written its maps (multi-range maps need
    root in the parent namespace: us) and opened it.
    """
    ready_r, ready_w = os.pipe()
    hold_r, hold_w = os.pipe()
    child = os.fork()
    if child == 0:
        status = 1
        try:
            os.close(ready_r)
            os.close(hold_w)
            if _libc.unshare(CLONE_NEWUSER) == 0:
                os.write(ready_w, str(host_pid()).encode())
                os.read(hold_r, 1)
                status = 0
        finally:
            os._exit(status)
    os.close(ready_w)
    os.close(hold_r)
    try:
        helper = os.read(ready_r, 32).decode()
        if not helper:
            raise SetupError("cannot create the pod's user namespace")
        for name in ("uid_map", "gid_map"):
            with open(f"/proc/{helper}/{name}", "w") as id_map:
                id_map.write(f"0 {id_base} {id_count}\n")
        return os.open(f"/proc/{helper}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(hold_w)
        os.close(ready_r)
        os.waitpid(child, 0)


class Tree:
    """Creates the pod's directories owned by the pod's root (host ``owner``), as real root."""

    def __init__(self, owner: int) -> None:
        self.owner = owner

    def mkdir(self, path: str, mode: int) -> None:
        os.mkdir(path, mode)
        os.lchown(path, self.owner, self.owner)

    def makedirs(self, path: str, mode: int) -> None:
        parent = os.path.dirname(path)
        if not os.path.isdir(parent):
            self.makedirs(parent, mode)
        if not os.path.isdir(path):
            self.mkdir(path, mode)

    def symlink(self, target: str, path: str) -> None:
        os.symlink(target, path)
        os.lchown(path, self.owner, self.owner)


def build_root(plan: Plan, userns: int) -> None:
    """Mount the pod's whole filesystem tree under ``plan['rootfs']``."""
    root, scratch, owner = plan["rootfs"], plan["scratch"], plan["id_base"]
    tree = Tree(owner)
    # One tmpfs is the pod's disk: the root and every layer's upper directory count against it.
    mount("tmpfs", scratch, "tmpfs", MS_NODEV, f"mode=700,size={plan['tmpfs_size_mib']}m")
    tree.mkdir(f"{scratch}/root", 0o755)
    bind(f"{scratch}/root", root)
    os.mkdir(f"{scratch}/layers", 0o700)
    for name in HOST_TOP_LEVEL:
        host_path = "/" + name
        if os.path.islink(host_path):
            tree.symlink(os.readlink(host_path), f"{root}/{name}")
        elif os.path.isdir(host_path):
            layer(plan, userns, tree, name)
    for name in LAYERS:
        layer(plan, userns, tree, name)
    # A private /usr/local, as an image has: the host's is hidden (opaque directory in the upper layer).
    usr_local = f"{scratch}/layers/usr/upper/local"
    tree.mkdir(usr_local, 0o755)
    os.setxattr(usr_local, "trusted.overlay.opaque", b"y")
    for sub in USR_LOCAL_DIRS:
        tree.mkdir(f"{usr_local}/{sub}", 0o755)

    build_dev(tree, f"{root}/dev")
    for name, mode in (("proc", 0o555), ("sys", 0o555), ("run", 0o755), ("tmp", 0o1777), ("var", 0o755)):
        tree.mkdir(f"{root}/{name}", mode)
    mount("sysfs", f"{root}/sys", "sysfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
    mount_cgroups(plan, f"{root}/sys/fs/cgroup")
    for name, mode in (
        ("root", 0o700),
        ("home", 0o755),
        ("mnt", 0o755),
        ("opt", 0o755),
        ("workspace", 0o755),
    ):
        tree.mkdir(f"{root}/{name}", mode)
    for name, mode in (("tmp", 0o1777), ("log", 0o755), ("lib", 0o755), ("cache", 0o755), ("empty", 0o755)):
        tree.mkdir(f"{root}/var/{name}", mode)
    tree.symlink("../run", f"{root}/var/run")
    for name, mode in (("sshd", 0o755), ("lock", 0o1777)):
        tree.mkdir(f"{root}/run/{name}", mode)

    target = root + plan["local_volume_target"]
    tree.makedirs(target, 0o755)
    private_home = plan["local_volume_target"] == "/root"  # sshd's StrictModes: no group/world-writable home
    if plan["local_volume_image"]:
        mount_volume_image(plan, userns, target, 0o700 if private_home else 0o755)
    else:
        bind(plan["local_volume_source"], target)
        if private_home:
            os.chmod(target, 0o700)
    mnt_source = plan["mnt_source"]
    if mnt_source is not None:
        bind(mnt_source, f"{root}/mnt")


def mount_volume_image(plan: Plan, userns: int, target: str, mode: int) -> None:
    """The pod's local volume image (a bounded ext4, ``volume_image.py``) at ``target``: loop-mounted in
    the pod's mount namespace (the loop device goes when the pod's last mount of it does), then
    attached idmapped, so the ids it stores are the pod's own."""
    staging = f"{plan['scratch']}/volume-image"
    os.mkdir(staging, 0o700)
    mount_program = plan["mount_program"]
    argv = [mount_program, "-o", "loop,nosuid,nodev", plan["local_volume_source"], staging]
    status = os.waitpid(os.posix_spawn(mount_program, argv, {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}), 0)[1]
    if os.waitstatus_to_exitcode(status) != 0:
        raise OSError(f"mounting the local volume image failed ({argv})")
    os.chmod(staging, mode)
    idmapped_clone(staging, userns, target, read_only=False)
    _check(_libc.umount2(staging.encode(), MNT_DETACH), "detach the volume image's staging mount")


def layer(plan: Plan, userns: int, tree: Tree, name: str) -> None:
    """``/<name>`` as an overlay: the host's directory (idmapped, read-only) under the pod's writes."""
    host_path, layer_dir = "/" + name, f"{plan['scratch']}/layers/{name}"
    for directory in (layer_dir, f"{layer_dir}/lower", f"{layer_dir}/upper", f"{layer_dir}/work"):
        os.mkdir(directory, 0o700)
    idmapped_clone(host_path, userns, f"{layer_dir}/lower")
    host = os.stat(host_path)
    upper = f"{layer_dir}/upper"
    os.chown(upper, tree.owner + host.st_uid, tree.owner + host.st_gid)  # the layer's root as seen inside
    os.chmod(upper, host.st_mode & 0o7777)
    tree.mkdir(f"{plan['rootfs']}/{name}", 0o755)
    # Relative layer paths: the pod's mount table then shows no host path of the emulator's.
    os.chdir(layer_dir)
    mount(
        "overlay",
        f"{plan['rootfs']}/{name}",
        "overlay",
        MS_NODEV,
        "lowerdir=lower,upperdir=upper,workdir=work",
    )


def mount_cgroups(plan: Plan, target: str) -> None:
    """The pod's own cgroups, read-only, where a container sees its limits (``memory.max`` or v1 files)."""
    mounts = plan["cgroup_mounts"]
    if "" in mounts:
        bind(mounts[""], target, read_only=True)
        return
    if not mounts:
        return
    mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=755,size=16k")
    for name, host_dir in mounts.items():
        os.mkdir(f"{target}/{name}", 0o555)
        bind(host_dir, f"{target}/{name}", read_only=True)
    mount(None, target, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)


def build_dev(tree: Tree, dev: str) -> None:
    owner = tree.owner
    tree.mkdir(dev, 0o755)
    mount("tmpfs", dev, "tmpfs", MS_NOSUID, f"mode=755,size=64k,uid={owner},gid={owner}")
    for name in DEVICES:
        os.close(os.open(f"{dev}/{name}", os.O_CREAT | os.O_WRONLY, 0o666))
        bind(f"/dev/{name}", f"{dev}/{name}")
    tree.mkdir(f"{dev}/pts", 0o755)
    mount(
        "devpts",
        f"{dev}/pts",
        "devpts",
        MS_NOSUID | MS_NOEXEC,
        f"newinstance,ptmxmode=0666,mode=0620,gid={owner + TTY_GID}",
    )
    tree.symlink("pts/ptmx", f"{dev}/ptmx")
    tree.mkdir(f"{dev}/shm", 0o1777)
    mount("tmpfs", f"{dev}/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"mode=1777,size=64m,uid={owner},gid={owner}")
    for name, target in (
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ):
        tree.symlink(target, f"{dev}/{name}")


def pivot_into(root: str) -> None:
    """Make ``root`` the root and drop every view of the host's tree."""
    machine = os.uname().machine
    number = SYS_PIVOT_ROOT.get(machine)
    if number is None:
        raise SetupError(f"unsupported architecture {machine}")
    os.chdir(root)
    _check(_libc.syscall(number, b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", MNT_DETACH), "detach the host root")
    os.chdir("/")
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)


def enter_user_namespace(userns: int) -> None:
    """Become the pod's root: uid 0 inside the pod's user namespace, an unprivileged id on the host."""
    _check(_libc.setns(userns, CLONE_NEWUSER), "enter the pod's user namespace")
    os.close(userns)
    os.setgroups([])
    os.setresgid(0, 0, 0)
    os.setresuid(0, 0, 0)


def confine(plan: Plan) -> None:
    """What the pod may do from here on, for everything it will ever run (inherited, irreversible)."""
    keep = set(plan["keep_capabilities"])
    with open("/proc/sys/kernel/cap_last_cap") as last:
        last_cap = int(last.read())
    for cap in range(last_cap + 1):
        if cap not in keep:
            _check(_libc.prctl(PR_CAPBSET_DROP, ctypes.c_ulong(cap), 0, 0, 0), "drop capabilities")
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    program = bytes.fromhex(plan["seccomp_bpf"])
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    _check(
        _libc.prctl(PR_SET_SECCOMP, ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(fprog), 0, 0),
        "install the seccomp filter",
    )


def apply_plan(plan: Plan) -> None:
    """The plan's in-pod file edits (after ``pivot_root``, as the pod's root, so paths are the pod's)."""
    for path in plan["remove"]:
        # In /etc this leaves overlay whiteouts; the host's files are untouched.
        if os.path.isdir(path) and not os.path.islink(path):
            remove_tree(path)
        elif os.path.lexists(path):
            os.unlink(path)
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


def remove_tree(top: str) -> None:
    """``shutil.rmtree`` without importing shutil: symlinks are removed, never followed."""

    def fail(error: OSError) -> None:
        raise error

    for parent, dirs, files in os.walk(top, topdown=False, onerror=fail):
        for name in files:
            os.unlink(os.path.join(parent, name))
        for name in dirs:
            path = os.path.join(parent, name)
            if os.path.islink(path):
                os.unlink(path)
            else:
                os.rmdir(path)
    os.rmdir(top)


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
    sock = _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM)
    try:
        request = struct.pack("16sH22x", b"lo", 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(sock.fileno(), SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock.fileno(), SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", flags | IFF_UP))
    finally:
        sock.close()


def allow_low_ports() -> None:
    """Let the pod's root bind ports below 1024 (sshd's 22): the pod's network namespace belongs to the
    host's user namespace, so CAP_NET_BIND_SERVICE inside the pod does not count there."""
    with open("/proc/sys/net/ipv4/ip_unprivileged_port_start", "w") as sysctl:
        sysctl.write("0\n")


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
    _check(_libc.prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")


def await_network(gate: int) -> None:
    """Wait for the host's byte saying the pod's network is wired (end-of-file: the host is gone)."""
    if os.read(gate, 1) != b"1":
        raise SetupError("the emulator did not finish the pod's network")
    os.close(gate)


def load_plan(path: str) -> Plan:
    """The plan ``manager.py`` wrote in ``marshal`` form (built in, unlike json; same interpreter)."""
    with open(path, "rb") as plan_file:
        plan: Plan = marshal.load(plan_file)
    return plan


def main(plan_path: str, console: int) -> NoReturn:
    # The container's stdout and stderr are the console pipe; unshare's own are not the container's.
    for stream in (1, 2):
        os.dup2(console, stream)
    os.close(console)
    plan = load_plan(plan_path)
    fifo = os.open(plan["ready_fifo"], os.O_WRONLY | os.O_CLOEXEC)
    gate = os.open(plan["network_fifo"], os.O_RDONLY | os.O_CLOEXEC)  # the host holds it open: no wait

    def report(line: str) -> None:
        os.write(fifo, (line.replace("\n", " ") + "\n").encode())

    try:
        report(f"PID {host_pid()}")
        join_cgroups(plan["cgroup_procs"])
        _check(_libc.unshare(CLONE_NEWCGROUP), "unshare(CLONE_NEWCGROUP)")
        os.umask(0)
        _check(_libc.sethostname(plan["hostname"].encode(), len(plan["hostname"].encode())), "sethostname")
        loopback_up()
        allow_low_ports()
        report("NETWORK")
        userns = make_user_namespace(plan["id_base"], plan["id_count"])
        build_root(plan, userns)
        pivot_into(plan["rootfs"])
        enter_user_namespace(userns)
        apply_plan(plan)
        os.umask(0o022)
        executable = find_executable(plan["argv"][0], plan["env"])
        os.makedirs(plan["workdir"], 0o755, exist_ok=True)
        os.chdir(plan["workdir"])
        confine(plan)
        become(plan["user"])
        await_network(gate)
        report("READY")
        os.execve(executable, plan["argv"], plan["env"])
    except (OSError, SetupError) as e:
        report(f"ERR {e}")
        os._exit(1)


def enter(pid: int, plan_path: str, argv: list[str]) -> NoReturn:
    """Exec ``argv`` inside the running pod whose PID 1 is host pid ``pid``, confined like PID 1."""
    plan = load_plan(plan_path)
    join_cgroups(plan["cgroup_procs"])
    namespaces = [(os.open(f"/proc/{pid}/ns/{name}", os.O_RDONLY), kind) for name, kind in ENTERED_NAMESPACES]
    userns = os.open(f"/proc/{pid}/ns/user", os.O_RDONLY)
    root = os.open(f"/proc/{pid}/root", os.O_RDONLY | os.O_DIRECTORY)
    for fd, kind in namespaces:
        _check(_libc.setns(fd, kind), f"setns({kind:#x})")
        os.close(fd)
    os.fchdir(root)
    os.chroot(".")
    os.chdir("/")
    os.close(root)
    enter_user_namespace(userns)
    confine(plan)
    os.execve(argv[0], argv, dict(os.environ))


if __name__ == "__main__":
    if sys.argv[1] == "--enter":
        enter(int(sys.argv[2]), sys.argv[3], sys.argv[5:])
    main(sys.argv[1], int(sys.argv[2]))
