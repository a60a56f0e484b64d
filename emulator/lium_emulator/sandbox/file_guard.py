"""The host's file table, kept from a pod that would fill it.

Linux counts every open file of every process against one table for the whole host
(``fs.file-max``). A process may hold ``RLIMIT_NOFILE`` of them and a pod may run
:data:`~lium_emulator.sandbox.cgroups.PIDS_PER_POD` processes, so a pod's code could open files until no
process on the host (the other pods and their sshd, the emulator, the CI runner itself) can open
another, and no cgroup controller counts open files. So, as the kernel's OOM killer does for memory,
a pod holding more than :data:`POD_FILE_SHARE` of the host's table is killed (its PID 1, and with it
everything in its PID namespace), and says why (:meth:`FileTableGuard.verdict`).

The check is cheap while the host is far from that: the host's count (``/proc/sys/fs/file-nr``) is read
every :data:`CHECK_SECONDS`, and the pods' processes are counted only while the whole host holds more
than one pod may.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Mapping
from fractions import Fraction
from pathlib import Path

logger = logging.getLogger(__name__)

POD_FILE_SHARE = Fraction(1, 16)
"""At most this share of the host's file table per pod: far above what a training job opens (a few
thousand files), far below the whole table, so a few such pods at once still leave the host working."""
CHECK_SECONDS = 0.5
OPEN_FILES_EXHAUSTED = "open_files_exhausted"
"""The reason a pod killed by the guard gives."""


def host_file_table() -> tuple[int, int]:
    """``(files open on the host, the host's maximum)`` from ``/proc/sys/fs/file-nr``."""
    allocated, _unused, maximum = Path("/proc/sys/fs/file-nr").read_text().split()
    return int(allocated), int(maximum)


def _pid_namespace(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/pid").st_ino
    except OSError:  # gone, or not ours to look at
        return None


def open_files_by_namespace(namespaces: set[int]) -> dict[int, int]:
    """Descriptors open in each of these PID namespaces (by inode), summed over their processes."""
    counts = dict.fromkeys(namespaces, 0)
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        namespace = _pid_namespace(int(entry.name))
        if namespace in counts:
            with contextlib.suppress(OSError):  # the process ended meanwhile
                counts[namespace] += len(os.listdir(f"/proc/{entry.name}/fd"))
    return counts


class FileTableGuard:
    """A thread that kills the pods holding more than their share of the host's file table.

    ``pid1s`` gives the running pods' PID 1 (pod id -> host pid); ``kill`` kills one pod's PID 1.
    ``pod_limit`` replaces :data:`POD_FILE_SHARE` of the host's table (for tests).
    """

    def __init__(
        self,
        pid1s: Callable[[], Mapping[str, int]],
        kill: Callable[[str], None],
        *,
        pod_limit: int | None = None,
    ) -> None:
        self._pid1s = pid1s
        self._kill = kill
        self._pod_limit = pod_limit
        self._verdicts: dict[str, str] = {}
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="file-table-guard", daemon=True)
        self._thread.start()

    def limit(self) -> int:
        """The most descriptors a pod may hold."""
        return self._limit(host_file_table()[1])

    def _limit(self, host_maximum: int) -> int:
        return self._pod_limit if self._pod_limit is not None else int(host_maximum * POD_FILE_SHARE)

    def report(self) -> dict[str, object]:
        """The limit as the emulator's ``pod_limits`` lists it."""
        return {
            "enforced": True,
            "how": "a pod holding more open files is killed (its PID 1, and everything in its PID namespace)",
            "at_most": self.limit(),
        }

    def verdict(self, pod_id: str) -> str | None:
        """Why the guard killed this pod, or None when it did not."""
        with self._lock:
            return self._verdicts.get(pod_id)

    def forget(self, pod_id: str) -> None:
        """The pod is gone: a pod of the same id starts with a clean record."""
        with self._lock:
            self._verdicts.pop(pod_id, None)

    def close(self) -> None:
        self._stopped.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stopped.wait(CHECK_SECONDS):
            try:
                self.check()
            except Exception:  # the guard must outlive a surprise, or no pod is guarded any more
                logger.exception("checking the pods' open files failed")

    def check(self) -> None:
        """Kill every pod over its limit (at once when the host holds fewer files than one pod may)."""
        open_on_host, host_maximum = host_file_table()
        limit = self._limit(host_maximum)
        if open_on_host <= limit:
            return
        namespaces = {pod_id: _pid_namespace(pid) for pod_id, pid in self._pid1s().items()}
        counts = open_files_by_namespace({ns for ns in namespaces.values() if ns is not None})
        for pod_id, namespace in namespaces.items():
            held = counts.get(namespace, 0) if namespace is not None else 0
            if held <= limit:
                continue
            verdict = (
                f"the pod held {held} open files, more than the {limit} a pod may hold of this host's "
                "file table, and was killed"
            )
            logger.warning("pod %s: %s", pod_id, verdict)
            with self._lock:
                self._verdicts[pod_id] = verdict
            self._kill(pod_id)
