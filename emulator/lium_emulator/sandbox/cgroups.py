"""The offer's memory and CPU limits on pods, and a process limit, through the host's cgroups (v2
where it has the controller, v1 otherwise), and what the emulator can enforce on this host.

Lium's pods get ``memory.max`` = the offer's memory and ``cpu.max`` = its CPUs (measured in real
pods). Each pod here gets, per controller, a group ``lium-emulator/<pod>-<tag>`` (``tag`` tells
emulators sharing a host apart): v2 ``memory.max``, ``cpu.max`` and ``pids.max``, or v1
``memory.limit_in_bytes``, ``cpu.cfs_quota_us``/``cpu.cfs_period_us`` and ``pids.max``. The pod sees
its own groups read-only at ``/sys/fs/cgroup`` (v2: the group itself; v1: ``memory/``, ``cpu/`` and
``pids/``), inside a cgroup namespace rooted there. Where the host has no writable controller, the
limit is not enforced and :meth:`CgroupLimits.report` says why.

The emulator runs on shared hosts that are much smaller than the nodes it emulates, so one pod must
not be able to take the host: an offer's memory is scaled down to :data:`HOST_MEMORY_SHARE` of the
host's, its CPUs to the host's, and every pod may run at most :data:`PIDS_PER_POD` processes (a fork
bomb stops there). The parent group every emulator's pods share holds the same memory ceiling for all
of them together, and half the host's pid space: two pods cannot take the host between them either.
The report says so.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

GROUP = "lium-emulator"
CONTROLLERS = ("memory", "cpu", "pids")
CPU_PERIOD_US = 100_000
# At most this many processes (and threads) per pod: far above what a training job starts, far below
# what would starve the host's pid space.
PIDS_PER_POD = 4096
# One pod gets at most this share of the host's memory, whatever its offer says.
HOST_MEMORY_SHARE = 0.75
_RMDIR_TIMEOUT_SECONDS = 5.0


@dataclass(frozen=True)
class Hierarchy:
    """Where one controller is mounted, and whether that mount is cgroup v2."""

    mount_point: Path
    v2: bool


@dataclass(frozen=True)
class PodCgroups:
    """One pod's groups: the ``cgroup.procs`` files its processes join and what it sees of them."""

    directories: tuple[Path, ...]
    mounts: dict[str, str]  # name under the pod's /sys/fs/cgroup ("" = itself) -> host directory

    @property
    def procs_files(self) -> list[str]:
        """The groups' ``cgroup.procs`` files (a process writing 0 there joins that group)."""
        return [str(directory / "cgroup.procs") for directory in self.directories]


def _mounts() -> list[tuple[Path, str, set[str]]]:
    """(mount point, fstype, super options) of every cgroup mount of this process."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        separator = fields.index("-")
        fstype, super_options = fields[separator + 1], fields[separator + 3]
        if fstype in ("cgroup", "cgroup2"):
            mount_point = Path(fields[4].encode().decode("unicode_escape"))
            found.append((mount_point, fstype, set(super_options.split(","))))
    return found


def host_memory_gib() -> int:
    """The host's memory in whole GiB (``MemTotal`` of ``/proc/meminfo``)."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) >> 20
    raise OSError("/proc/meminfo has no MemTotal")


def host_pid_max() -> int:
    """How many pids the host has (``kernel.pid_max``)."""
    return int(Path("/proc/sys/kernel/pid_max").read_text())


def host_cpus() -> int:
    """The CPUs this process may run on."""
    return len(os.sched_getaffinity(0))


@dataclass(frozen=True)
class HostCaps:
    """What one pod may get on this host, at most: the scaled ceilings of the offer's limits."""

    memory_gib: int
    cpu_count: int

    @classmethod
    def of_this_host(cls) -> HostCaps:
        return cls(max(1, int(host_memory_gib() * HOST_MEMORY_SHARE)), host_cpus())


def _find(controller: str) -> tuple[Hierarchy | None, str]:
    """The hierarchy to use for ``controller`` (v2 preferred), or None and the reason."""
    v1 = None
    for mount_point, fstype, options in _mounts():
        if fstype == "cgroup2":
            with contextlib.suppress(OSError):
                if controller in (mount_point / "cgroup.controllers").read_text().split():
                    return Hierarchy(mount_point, True), ""
        elif controller in options:
            v1 = v1 or Hierarchy(mount_point, False)
    if v1 is not None:
        return v1, ""
    return None, f"the host mounts no cgroup {controller} controller (neither v2 nor v1)"


class CgroupLimits:
    """Creates and removes pods' groups; ``tag`` keeps this emulator's groups apart from others'."""

    def __init__(self, tag: str) -> None:
        self._tag = hashlib.sha256(tag.encode()).hexdigest()[:10]
        self.caps = HostCaps.of_this_host()
        self._hierarchies: dict[str, Hierarchy] = {}
        self._missing: dict[str, str] = {}
        for controller in CONTROLLERS:
            hierarchy, reason = _find(controller)
            if hierarchy is not None:
                try:
                    self._prepare(hierarchy, controller)
                except OSError as e:
                    reason = f"cannot create a cgroup under {hierarchy.mount_point}: {e.strerror}"
                    hierarchy = None
            if hierarchy is None:
                self._missing[controller] = reason
            else:
                self._hierarchies[controller] = hierarchy

    def report(self) -> dict[str, dict[str, object]]:
        """Per limit: ``enforced``, and ``how`` or ``why_not`` (for ``/_emulator/resources`` and the start)."""
        limits: dict[str, dict[str, object]] = {}
        for controller in CONTROLLERS:
            hierarchy = self._hierarchies.get(controller)
            if hierarchy is None:
                limits[controller] = {"enforced": False, "why_not": self._missing[controller]}
            else:
                version = "v2" if hierarchy.v2 else "v1"
                limits[controller] = {"enforced": True, "how": f"cgroup {version} {controller} controller"}
        limits["memory"]["at_most_gib"] = self.caps.memory_gib
        limits["memory"]["scaled"] = (
            f"an offer's memory is cut to {self.caps.memory_gib} GiB, {HOST_MEMORY_SHARE:.0%} of this host's, "
            "and all pods together get no more"
        )
        limits["cpu"]["at_most"] = self.caps.cpu_count
        limits["cpu"]["scaled"] = f"an offer's CPUs are cut to this host's {self.caps.cpu_count}"
        limits["pids"]["at_most"] = PIDS_PER_POD
        limits["disk"] = {
            "enforced": True,
            "how": "size of the tmpfs holding the pod's writable layers, and of the ext4 image holding "
            "its local volume",
            "scaled": "a local volume gets the offer's size, cut to a quarter of the disk space free "
            "when it is made",
        }
        return limits

    def create(self, pod_id: str, memory_gib: int, cpu_count: int) -> PodCgroups:
        """The pod's groups with its limits set, scaled to this host (:class:`HostCaps`; a limit of 0
        means the host's ceiling), and the process limit."""
        memory_gib = min(memory_gib, self.caps.memory_gib) if memory_gib > 0 else self.caps.memory_gib
        cpu_count = min(cpu_count, self.caps.cpu_count) if cpu_count > 0 else self.caps.cpu_count
        directories: dict[Path, None] = {}
        mounts: dict[str, str] = {}
        for controller, hierarchy in self._hierarchies.items():
            directory = hierarchy.mount_point / GROUP / self._name(pod_id)
            if directory not in directories:
                self._remove_dir(directory)
                directory.mkdir()
                directories[directory] = None
            mounts["" if hierarchy.v2 else controller] = str(directory)
            if controller == "memory" and memory_gib > 0:
                limit = str(memory_gib << 30)
                (directory / ("memory.max" if hierarchy.v2 else "memory.limit_in_bytes")).write_text(limit)
            elif controller == "cpu" and cpu_count > 0:
                quota = cpu_count * CPU_PERIOD_US
                if hierarchy.v2:
                    (directory / "cpu.max").write_text(f"{quota} {CPU_PERIOD_US}")
                else:
                    (directory / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
                    (directory / "cpu.cfs_quota_us").write_text(str(quota))
            elif controller == "pids":
                (directory / "pids.max").write_text(str(PIDS_PER_POD))
        return PodCgroups(tuple(directories), mounts)

    def remove(self, pod_id: str) -> None:
        """Delete the pod's groups once their last process has exited."""
        for hierarchy in self._hierarchies.values():
            self._remove_dir(hierarchy.mount_point / GROUP / self._name(pod_id))

    def _name(self, pod_id: str) -> str:
        return f"{pod_id}-{self._tag}"

    def _prepare(self, hierarchy: Hierarchy, controller: str) -> None:
        parent = hierarchy.mount_point / GROUP
        parent.mkdir(exist_ok=True)
        if hierarchy.v2:  # v2 groups get a controller only when every ancestor delegates it
            for directory in (hierarchy.mount_point, parent):
                (directory / "cgroup.subtree_control").write_text(f"+{controller}")
        ceiling = self._shared_ceiling(hierarchy, controller)
        if ceiling is not None:
            name, value = ceiling
            try:
                (parent / name).write_text(value)
            except OSError as e:  # pods already above it: the next start, with fewer of them, sets it
                logger.warning("cannot set %s of the emulators' cgroup: %s", name, e.strerror)

    def _shared_ceiling(self, hierarchy: Hierarchy, controller: str) -> tuple[str, str] | None:
        """The limit all pods of all emulators on the host share, as (file, value)."""
        if controller == "memory":
            return ("memory.max" if hierarchy.v2 else "memory.limit_in_bytes"), str(
                self.caps.memory_gib << 30
            )
        if controller == "pids":
            return "pids.max", str(max(PIDS_PER_POD, host_pid_max() // 2))
        return None

    @staticmethod
    def _remove_dir(directory: Path) -> None:
        # The pod's processes die with its PID 1 but may take a moment to leave the group.
        deadline = time.monotonic() + _RMDIR_TIMEOUT_SECONDS
        while True:
            try:
                os.rmdir(directory)
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
