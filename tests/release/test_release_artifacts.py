"""What ``make release`` writes, checked without Terraform: signatures, checksums, the archive's contents."""

from __future__ import annotations

import hashlib
import subprocess
import tempfile
import zipfile
from pathlib import Path

import pytest

from release import layout
from tests.release.conftest import CACHE
from tests.support.terraform import REPO
from tfbridge.serving.install import executable_name

pytestmark = pytest.mark.release

UNCHECKED_HASH_PYC = 0b01  # PEP 552 flags: hash-based, source not checked


def verify_signature(release_dist: Path, sums: str) -> str:
    """``gpg --verify`` of ``<sums>.sig`` with only the published public key in the keyring."""
    # A short keyring path: gpg-agent's socket lives in it, and socket paths have a length limit.
    with tempfile.TemporaryDirectory(prefix="lium-gpg-") as home:
        gpg = ["gpg", "--batch", "--homedir", home]
        try:
            subprocess.run(
                [*gpg, "--import", str(release_dist / layout.SIGNING_KEY)], check=True, capture_output=True
            )
            signature = release_dist / (sums + layout.SIGNATURE_SUFFIX)
            result = subprocess.run(
                [*gpg, "--verify", str(signature), str(release_dist / sums)], capture_output=True, text=True
            )
        finally:
            subprocess.run(["gpgconf", "--homedir", home, "--kill", "gpg-agent"], check=False)
    assert result.returncode == 0, result.stderr
    return result.stderr


def test_checksum_files_are_signed_and_match_the_artifacts(release_dist: Path) -> None:
    for sums in (layout.SHA256SUMS, layout.PROVIDER_SHA256SUMS):
        assert "Good signature" in verify_signature(release_dist, sums)
    listed = {}
    for line in (release_dist / layout.SHA256SUMS).read_text().splitlines():
        digest, name = line.split("  ")
        listed[name] = digest
        assert hashlib.sha256((release_dist / name).read_bytes()).hexdigest() == digest
    assert {p.name for p in release_dist.glob("lium_stacks-*")} | {layout.MANIFEST} <= set(listed)
    # The registry's file lists archives only: each of its lines becomes a zh: hash in users' lock files.
    provider_lines = (release_dist / layout.PROVIDER_SHA256SUMS).read_text().splitlines()
    assert [line.split("  ")[1] for line in provider_lines] == [layout.archive_name(*layout.build_platform())]


def test_signature_of_changed_sums_is_refused(release_dist: Path, tmp_path: Path) -> None:
    copy = tmp_path / "dist"
    copy.mkdir()
    for name in (layout.SIGNING_KEY, layout.SHA256SUMS, layout.SHA256SUMS + layout.SIGNATURE_SUFFIX):
        (copy / name).write_bytes((release_dist / name).read_bytes())
    (copy / layout.SHA256SUMS).write_text((copy / layout.SHA256SUMS).read_text().replace("a", "b", 1))
    with pytest.raises(AssertionError, match="BAD signature"):
        verify_signature(copy, layout.SHA256SUMS)


def test_archive_is_relocatable_and_never_rewritten(release_dist: Path) -> None:
    """No path of the build machine inside (so it runs anywhere and rebuilds to the same bytes), and
    every .pyc valid whatever the files' mtimes after Terraform unpacks them."""
    archive = release_dist / layout.archive_name(*layout.build_platform())
    build_paths = [str(REPO).encode(), str(CACHE).encode()]
    with zipfile.ZipFile(archive) as package:
        entries = package.infolist()
        launcher = package.read(executable_name(layout.PROVIDER_TYPE, layout.VERSION)).decode()
        assert not [e.filename for e in entries if e.is_dir()]
        assert len({e.date_time for e in entries}) == 1
        leaking = [e.filename for e in entries if any(p in package.read(e) for p in build_paths)]
        stale = [
            e.filename
            for e in entries
            if e.filename.endswith(".pyc")
            and int.from_bytes(package.read(e)[4:8], "little") != UNCHECKED_HASH_PYC
        ]
    assert leaking == []
    assert stale == []
    assert launcher.startswith("#!/bin/sh\n") and " -I -S -B " in launcher
