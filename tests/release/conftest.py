"""Fixtures of the release tests: the release artifacts (built once per source hash) and the emulator."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.provider.conftest import emulator  # noqa: F401  (the provider tests' emulator fixture)
from tests.support.terraform import REPO

CACHE = REPO / "build" / "release-cache"
# What the artifacts are made of: a change to any of these means a new build.
RELEASE_INPUTS = (
    "provider",
    "release",
    "pyproject.toml",
    "requirements.lock",
    "MANIFEST.in",
    "LICENSE",
    "CHANGELOG.md",
    "README.md",
    "terraform-registry-manifest.json",
    "constructs",
    "emulator",
)


def source_hash() -> str:
    digest = hashlib.sha256()
    for name in RELEASE_INPUTS:
        root = REPO / name
        files = (
            [root]
            if root.is_file()
            else sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        )
        for path in files:
            digest.update(path.relative_to(REPO).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


@contextlib.contextmanager
def cache_lock() -> Iterator[Path]:
    """The release cache of the current sources (build/release-cache/<source hash>), held under an
    exclusive lock: whichever xdist worker comes first builds, the others wait and reuse."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield CACHE / source_hash()


# Builds of other sources kept besides the current one: a run of the suite on other sources in this
# checkout (edits made while it runs) may still be using them.
KEPT_BUILDS = 2


def builds_to_prune(target: Path) -> list[Path]:
    """The cached builds other than ``target``, except the :data:`KEPT_BUILDS` most recently used."""
    others = [p for p in CACHE.iterdir() if p.is_dir() and p != target]
    others.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    return others[KEPT_BUILDS:]


@pytest.fixture(scope="session")
def release_dist() -> Iterator[Path]:
    """``dist/`` of ``python -m release`` for the current sources, cached under build/release-cache.

    The build takes about half a minute; it runs once per source hash (under a lock, for parallel
    workers), and all but the newest older builds are removed.
    """
    with cache_lock() as target:
        if not (target / "complete").exists():
            for old in builds_to_prune(target):
                shutil.rmtree(old, ignore_errors=True)
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "release",
                    "--dist",
                    str(target / "dist"),
                    "--build",
                    str(target / "build"),
                ],
                cwd=REPO,
                check=True,
                stdout=subprocess.DEVNULL,
            )
            (target / "complete").touch()
        os.utime(target)  # used now: the newest builds are the ones kept
    yield target / "dist"


@pytest.fixture(scope="session")
def wheel_venv(release_dist: Path) -> Path:
    """A fresh venv with the wheel and its ``cdktf`` extra installed (as a user's ``pip install``): made
    once per build, beside it, and shared by the workers; the tests only read it."""
    (wheel,) = release_dist.glob("lium_stacks-*.whl")
    with cache_lock() as target:
        root = target / "wheel-venv"
        if not (root / "complete").exists():
            shutil.rmtree(root, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
            subprocess.run(
                [
                    str(root / "bin" / "python"),
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                    f"{wheel}[cdktf]",
                ],
                check=True,
                stderr=subprocess.DEVNULL,
            )
            (root / "complete").touch()
    return root
