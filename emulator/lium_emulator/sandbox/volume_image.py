"""A pod's local volume as a size-bounded filesystem: a sparse ext4 image the pod mounts (loop, idmapped).

A directory on the host's disk would let one pod fill the disk every other pod and the host share;
an image file bounds what the pod can write to its size, and being sparse costs only what is written.
Its size is the offer's ``local_volume_gb``, cut to :data:`HOST_DISK_SHARE` of the space free where the
emulator keeps its files when the image is made (so an offer of 244 GB on a host with 70 GB free gets
17 GB). Files in it are stored with the pod's own ids (0 is the pod's root) and mapped into the pod's
host id range by an idmapped mount, so nothing is re-owned when the pod next starts in another range.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

HOST_DISK_SHARE = 0.25
MKFS = "mkfs.ext4"


def mkfs_program() -> str | None:
    """The ``mkfs.ext4`` of this host (Debian's e2fsprogs), or None."""
    return shutil.which(MKFS) or next(
        (p for p in (f"/usr/sbin/{MKFS}", f"/sbin/{MKFS}") if os.access(p, os.X_OK)), None
    )


def size_gib(offered_gib: int, directory: Path) -> int:
    """The image's size: the offer's, cut to the host's share of the free space under ``directory``."""
    stats = os.statvfs(directory)
    free_gib = stats.f_bavail * stats.f_frsize >> 30
    return max(1, min(offered_gib if offered_gib > 0 else free_gib, int(free_gib * HOST_DISK_SHARE)))


def ensure_image(path: Path, offered_gib: int) -> Path:
    """The pod's volume image at ``path``, made (sparse, formatted, root-owned by the pod's root) when
    it does not exist yet; an existing one, with the files it holds, is kept as it is."""
    if path.is_file():
        return path
    program = mkfs_program()
    if program is None:
        raise OSError(f"{MKFS} is not installed (Debian: apt-get install e2fsprogs)")
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    with open(partial, "wb") as image:
        image.truncate(size_gib(offered_gib, path.parent) << 30)
    subprocess.run(
        [
            program, "-q", "-F", "-m", "0", "-O", "^has_journal",
            "-E", "lazy_itable_init=1,root_owner=0:0", str(partial),
        ],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    partial.rename(path)  # a half-made image is never mounted
    return path
