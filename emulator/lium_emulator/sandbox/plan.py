"""The shape of one pod's plan: what ``manager.py`` decides on the host and ``pod_init.py`` carries
out inside the pod's namespaces.

Its own module because the init script may not import anything at run time but built-in and small
stdlib modules (see its docstring); it names these types for the type checker only.
"""

from __future__ import annotations

from typing import TypedDict

# The plan's file in the pod's directory, written with ``marshal`` by the host, read by the init.
PLAN_FILE = "plan.marshal"


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
    """What ``manager.py`` decided for one pod; paths in ``dirs``/``files``/… are inside the pod."""

    ready_fifo: str
    network_fifo: str  # the host writes one byte to it once the pod's network is wired
    rootfs: str
    scratch: str
    tmpfs_size_mib: int
    hostname: str
    argv: list[str]
    env: dict[str, str]
    workdir: str
    user: UserSpec
    local_volume_source: str  # a host directory, or the pod's volume image when local_volume_image
    local_volume_target: str
    local_volume_image: bool
    mount_program: str  # util-linux mount, which sets up the image's loop device
    mnt_source: str | None
    dirs: list[DirSpec]
    files: list[FileSpec]
    symlinks: dict[str, str]
    remove: list[str]
    authorized_keys: list[str]
    id_base: int  # host uid and gid of the pod's root
    id_count: int
    cgroup_procs: list[str]  # host cgroup.procs files the pod's processes join
    cgroup_mounts: dict[str, str]  # under the pod's /sys/fs/cgroup ("" = itself) -> host cgroup dir
    keep_capabilities: list[int]
    seccomp_bpf: str  # hex of the classic-BPF filter program
