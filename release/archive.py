"""The provider's zip archive: written reproducibly, and the two hashes Terraform records for it.

The archive holds regular files only (no directory entries, no symlinks), sorted, each with its mode
and one timestamp, so the same bundle gives the same bytes on any machine.

The hashes are those of ``.terraform.lock.hcl``, ``zh:`` and ``h1:``.

``zh:`` is the SHA-256 of the zip archive itself (what a registry's SHA256SUMS lists). ``h1:`` is Go's
``dirhash.Hash1`` of the archive's contents, the same whether Terraform got the zip or an unpacked
directory: the SHA-256 of the lines ``"<sha256 hex>  <name>\\n"`` for every file, sorted by name,
base64-encoded. A lock file holding both lets any of the three installation methods verify the package.
"""

from __future__ import annotations

import base64
import hashlib
import os
import time
import zipfile
from pathlib import Path

# 1980-01-01 00:00:00 UTC, the earliest date a zip entry can hold.
ZIP_EPOCH = 315532800


def write_zip(directory: Path, archive: Path, timestamp: int) -> Path:
    """Zip the files under ``directory`` (paths relative to it) into ``archive``, dated ``timestamp``."""
    date_time = _zip_date(max(timestamp, ZIP_EPOCH))
    partial = archive.with_suffix(".partial")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as package:
        for path in sorted(p for p in directory.rglob("*") if p.is_file()):
            entry = zipfile.ZipInfo(path.relative_to(directory).as_posix(), date_time)
            entry.external_attr = (os.stat(path).st_mode & 0xFFFF) << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            entry.create_system = 3  # Unix: the mode bits above are honoured on extraction
            package.writestr(entry, path.read_bytes())
    partial.replace(archive)
    return archive


def _zip_date(timestamp: int) -> tuple[int, int, int, int, int, int]:
    moment = time.gmtime(timestamp)
    return (moment.tm_year, moment.tm_mon, moment.tm_mday, moment.tm_hour, moment.tm_min, moment.tm_sec)


def zip_hash(archive: Path) -> str:
    return "zh:" + hashlib.sha256(archive.read_bytes()).hexdigest()


def h1_hash(archive: Path) -> str:
    with zipfile.ZipFile(archive) as package:
        lines = [
            f"{hashlib.sha256(package.read(name)).hexdigest()}  {name}\n"
            for name in sorted(package.namelist())
        ]
    return "h1:" + base64.b64encode(hashlib.sha256("".join(lines).encode()).digest()).decode()
