"""A pod's local volume as a size-bounded filesystem: a sparse ext4 image the pod mounts (loop, idmapped).

A directory on the host's disk would let one pod fill the disk every other pod and the host share;
an image file bounds what the pod can write to its size, and being sparse costs only what is written.
Its size is the offer's ``local_volume_gb``, cut to :data:`HOST_DISK_SHARE` of the space free where the
emulator keeps its files when the image is made (so an offer of 244 GB on a host with 70 GB free gets
17 GB), where "free" discounts what the host's earlier images may still write (sparse images promise
more than they hold), so each new image gets a share of what is not promised yet — but never less
than :data:`MIN_MIB`: a fleet of many pods on one host may together promise more than the disk has (a
real node's disks are its own; an emulator host's are shared). A pod does not start when the disk has
less than :data:`RESERVE_MIB` free ("not enough free disk"). Files in it are stored with the pod's own ids (0 is the pod's root) and mapped into the pod's
host id range by an idmapped mount, so nothing is re-owned when the pod next starts in another range.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import threading
from collections.abc import Iterable
from pathlib import Path

from lium_emulator.sandbox.registry import registrations

HOST_DISK_SHARE = 0.25
MIN_MIB = 256
RESERVE_MIB = 1024
MKFS = "mkfs.ext4"
IMAGE_GLOB = "pods/*/local-volume.img"  # under each emulator's work directory
# One image is sized and made at a time: two at once would both count the same free space.
_making = threading.Lock()


def mkfs_program() -> str | None:
    """The ``mkfs.ext4`` of this host (Debian's e2fsprogs), or None."""
    return shutil.which(MKFS) or next(
        (p for p in (f"/usr/sbin/{MKFS}", f"/sbin/{MKFS}") if os.access(p, os.X_OK)), None
    )


def promised_bytes(images: Iterable[Path]) -> int:
    """What sparse ``images`` may still write: their sizes less what they already hold."""
    total = 0
    for image in images:
        with contextlib.suppress(OSError):
            stat = image.stat()
            total += max(0, stat.st_size - stat.st_blocks * 512)
    return total


def size_mib(offered_gib: int, directory: Path, others: Iterable[Path] = ()) -> int:
    """The image's size: the offer's, cut to the host's share of the space free under ``directory`` that
    the ``others`` images have not promised, and at least MIN_MIB. ValueError when the disk has less
    than RESERVE_MIB free."""
    stats = os.statvfs(directory)
    free = stats.f_bavail * stats.f_frsize
    if free >> 20 < RESERVE_MIB:
        raise ValueError(
            f"not enough free disk for the pod's local volume: {free >> 20} MiB free under {directory}; a "
            f"pod starts only with {RESERVE_MIB} MiB free"
        )
    share = int(max(0, free - promised_bytes(others)) * HOST_DISK_SHARE) >> 20
    wanted = offered_gib << 10 if offered_gib > 0 else share
    return max(MIN_MIB, min(wanted, share))


def host_images() -> list[Path]:
    """The volume images of every registered emulator of this user on the host."""
    return sorted(
        image
        for _, record in registrations()
        if record is not None
        for image in record.work_dir.glob(IMAGE_GLOB)
    )


def ensure_image(path: Path, offered_gib: int, others: Iterable[Path] = ()) -> Path:
    """The pod's volume image at ``path``, made (sparse, formatted, root-owned by the pod's root) when
    it does not exist yet, sized by :func:`size_mib` against the ``others`` images; an existing one,
    with the files it holds, is kept as it is."""
    with _making:
        return _ensure(path, offered_gib, others)


def _ensure(path: Path, offered_gib: int, others: Iterable[Path]) -> Path:
    if path.is_file():
        return path
    program = mkfs_program()
    if program is None:
        raise OSError(f"{MKFS} is not installed (Debian: apt-get install e2fsprogs)")
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    # The pod's data: readable by the emulator's user only.
    with open(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as image:
        image.truncate(size_mib(offered_gib, path.parent, [o for o in others if o != path]) << 20)
    subprocess.run(
        [
            program, "-q", "-F", "-m", "0", "-O", "^has_journal",
            "-E", "lazy_itable_init=1,root_owner=0:0", str(partial),
        ],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    partial.rename(path)  # a half-made image is never mounted
    return path
