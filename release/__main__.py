"""``python -m release [--dist DIR] [--build DIR]`` (``make release``): every release artifact into ``dist/``.

``dist/`` gets the ``lium-stacks`` wheel and sdist, ``terraform-provider-lium_<version>_<os>_<arch>.zip``
(the self-contained provider, :mod:`release.bundle`), the registry manifest, two signed checksum files
(``SHA256SUMS`` of everything, ``terraform-provider-lium_<version>_SHA256SUMS`` of the archives, for the
registry protocol) with the public key (:mod:`release.signing`), CHANGELOG.md, and the three trees of
:mod:`release.trees`. Scratch work (the bundle, the throwaway key) goes to ``build/release``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from release import layout
from release.archive import ZIP_EPOCH, write_zip
from release.bundle import build_bundle
from release.signing import sign, signing_key, write_sha256sums
from release.trees import Archive, write_filesystem_mirror, write_network_mirror, write_registry


def source_date_epoch() -> int:
    """``$SOURCE_DATE_EPOCH``, else 1980-01-01 (zip's first date): the archive's one timestamp.

    Not the last commit's time: the examples commit the archive's hashes (:mod:`release.locks`), so
    the same sources must give the same archive in whichever commit they are.
    """
    return int(os.environ.get("SOURCE_DATE_EPOCH", ZIP_EPOCH))


def build_python_distributions(dist: Path) -> Path:
    """The wheel and sdist into ``dist``; returns the wheel."""
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(dist), str(layout.REPO)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    (wheel,) = dist.glob("lium_stacks-*.whl")
    return wheel


def release(dist: Path, build: Path) -> list[Path]:
    """Build everything; returns the top-level files of ``dist``."""
    shutil.rmtree(dist, ignore_errors=True)
    dist.mkdir(parents=True)
    build.mkdir(parents=True, exist_ok=True)
    wheel = build_python_distributions(dist)
    os_name, arch = layout.build_platform()
    bundle = build_bundle(wheel, build / f"bundle_{os_name}_{arch}", layout.VERSION)
    archives = [
        Archive(
            os_name, arch, write_zip(bundle, dist / layout.archive_name(os_name, arch), source_date_epoch())
        )
    ]
    manifest = dist / layout.MANIFEST
    shutil.copyfile(layout.REGISTRY_MANIFEST, manifest)
    shutil.copyfile(layout.REPO / "CHANGELOG.md", dist / "CHANGELOG.md")
    provider_sums = write_sha256sums([a.path for a in archives], dist / layout.PROVIDER_SHA256SUMS)
    sums = write_sha256sums(
        [manifest, *(a.path for a in archives), *dist.glob("lium_stacks-*")], dist / layout.SHA256SUMS
    )
    with signing_key(build) as key:
        provider_signature = sign(key, provider_sums)
        sign(key, sums)
        public_key = key.public_key()
        (dist / layout.SIGNING_KEY).write_text(public_key)
        write_registry(dist / "registry", archives, provider_sums, provider_signature, public_key, key.key_id)
    write_network_mirror(dist / "mirror", archives)
    write_filesystem_mirror(dist / "fs-mirror", archives)
    return sorted(p for p in dist.iterdir() if p.is_file())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dist", type=Path, default=layout.REPO / "dist")
    parser.add_argument("--build", type=Path, default=layout.REPO / "build" / "release")
    args = parser.parse_args()
    for path in release(args.dist.absolute(), args.build.absolute()):
        print(f"{path.stat().st_size / 1e6:8.1f} MB  {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
