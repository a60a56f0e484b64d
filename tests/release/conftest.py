"""Fixtures of the release tests: the release artifacts (built once per source hash) and the emulator."""

from __future__ import annotations

import fcntl
import hashlib
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


@pytest.fixture(scope="session")
def release_dist() -> Iterator[Path]:
    """``dist/`` of ``python -m release`` for the current sources, cached under build/release-cache.

    The build takes a few minutes; it runs once per source hash (under a lock, for parallel workers),
    and older builds are removed.
    """
    CACHE.mkdir(parents=True, exist_ok=True)
    key = source_hash()
    target = CACHE / key
    with (CACHE / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / "complete").exists():
            for old in CACHE.iterdir():
                if old.is_dir():
                    shutil.rmtree(old)
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
    yield target / "dist"


@pytest.fixture(scope="session")
def wheel_venv(release_dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel and its ``cdktf`` extra installed."""
    (wheel,) = release_dist.glob("lium_stacks-*.whl")
    root = tmp_path_factory.mktemp("wheel-venv") / "venv"
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
    return root
