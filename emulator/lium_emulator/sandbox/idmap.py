"""Host id ranges of pods' user namespaces, and the ownership of the directories pods write.

Each running pod maps its uids and gids 0..65535 onto a host range of its own, ``ID_BASE + slot *
ID_COUNT``, far above the ranges ``/etc/subuid`` hands out (from 100000): the pod's root is an
unprivileged, otherwise unused host id, and no two running pods share one. A slot is taken by
holding an exclusive ``flock`` on ``SLOT_DIR/<slot>`` for the pod's life, so emulators sharing a
host never collide, and a crashed emulator's slots free themselves. The first slot tried is derived
from the pod id, so a pod restarted on the same host usually gets its old range back.

Directories a pod writes and the emulator keeps (network volumes, and the local volume of a pod from
before volume images) hold files owned by the range of whichever pod last used them;
:func:`shift_ownership` moves them into the next pod's range (same ids inside the pod) before it
starts. A local volume image needs no move: it is mounted idmapped (``volume_image.py``).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

ID_BASE = 1 << 28
ID_COUNT = 1 << 16  # ids 0..65535 inside a pod, as in a container image
SLOTS = 1 << 14  # ID_BASE + SLOTS * ID_COUNT stays below 2**32 - 1 (the invalid id)
SLOT_DIR = Path("/run/lium-emulator/idmap")
NOBODY = 65534


class IdRangeError(Exception):
    """No host id range is free (every slot held by a running pod)."""


@dataclass
class IdRange:
    """A held host id range; ``base`` is the pod's root on the host. ``release`` frees it."""

    base: int
    slot: int
    _lock_fd: int

    def release(self) -> None:
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # drops the flock
            self._lock_fd = -1


def acquire(pod_id: str) -> IdRange:
    """Hold a free range, trying the one derived from ``pod_id`` first."""
    SLOT_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    first = int.from_bytes(hashlib.sha256(pod_id.encode()).digest()[:4], "big") % SLOTS
    for offset in range(SLOTS):
        slot = (first + offset) % SLOTS
        fd = os.open(SLOT_DIR / str(slot), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                continue
            raise
        return IdRange(ID_BASE + slot * ID_COUNT, slot, fd)
    raise IdRangeError("every host id range for pods is in use")


def inner_id(host_id: int) -> int:
    """The id a pod sees for a file owned by ``host_id`` on the host, whichever pod wrote it."""
    if ID_BASE <= host_id < ID_BASE + SLOTS * ID_COUNT:
        return (host_id - ID_BASE) % ID_COUNT
    return host_id if host_id < ID_COUNT else NOBODY  # the emulator's own files are the pod root's


def shift_ownership(directory: Path, base: int) -> None:
    """Make every file under ``directory`` owned by the pod range ``base`` (ids inside unchanged).

    Symlinks are never followed; a file that vanishes meanwhile is skipped.
    """
    _shift(str(directory), base)
    for parent, dirs, files in os.walk(directory):  # does not descend into symlinked directories
        for name in (*dirs, *files):
            _shift(os.path.join(parent, name), base)


def _shift(path: str, base: int) -> None:
    with contextlib.suppress(FileNotFoundError):
        info = os.lstat(path)
        uid, gid = base + inner_id(info.st_uid), base + inner_id(info.st_gid)
        if (info.st_uid, info.st_gid) != (uid, gid):
            os.lchown(path, uid, gid)
