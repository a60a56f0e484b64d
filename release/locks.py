"""The examples' committed ``.terraform.lock.hcl`` files: the released archives' hashes, as Terraform writes them.

HashiCorp's advice is to commit the dependency lock file, so every directory of ``examples/`` holding a
Terraform configuration (a ``*.tf`` file: the HCL example, the GitOps stack, the Registry snippets)
commits one. It is what ``terraform providers lock -platform=<os>_<arch>`` (or an install from the
registry protocol) writes for the release: the version, and for each archive of ``dist/`` its ``h1:``
(the contents) and ``zh:`` (the zip, its line of ``SHA256SUMS``) hash. None of the examples constrains
the version, so no ``constraints`` line. Any of the three installation methods verifies the package
against it unchanged.

The archive changes whenever the provider's sources do, so the lock files are rewritten from a built
``dist/`` by ``python -m release.locks [--dist DIR]`` (``make locks``), and
``tests/release/test_example_locks.py`` fails while they name another build. The cdktf examples have no
lock here: cdktf keeps it in the synthesized stack's directory (``cdktf.out/stacks/<stack>``), which
is generated.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from release import layout
from release.archive import h1_hash, zip_hash

LOCK_FILE = ".terraform.lock.hcl"
EXAMPLES = layout.REPO / "examples"
# Terraform's address for a source without a hostname, which is how every example names the provider.
PROVIDER_ADDRESS = f"{layout.HOSTNAMES[0]}/{layout.PROVIDER_NAMESPACE}/{layout.PROVIDER_TYPE}"
# Directories in examples/ that Terraform or cdktf write, not configurations.
_GENERATED = {".terraform", "cdktf.out"}


def example_configurations() -> list[Path]:
    """Every directory of ``examples/`` holding a Terraform configuration: each commits a lock file."""
    return sorted(
        {
            path.parent
            for path in EXAMPLES.rglob("*.tf")
            if not _GENERATED.intersection(path.relative_to(EXAMPLES).parts)
        }
    )


def release_archives(dist: Path) -> list[Path]:
    """The provider archives of a built ``dist/`` (one per platform built)."""
    archives = sorted(dist.glob(f"{layout.PREFIX}_*_*.zip"))
    if not archives:
        raise FileNotFoundError(f"no {layout.PREFIX}_<os>_<arch>.zip in {dist}: run `make release` first")
    return archives


def render_lock(archives: list[Path]) -> str:
    """The lock file Terraform writes for this version of the provider from ``archives``."""
    hashes = sorted({h for archive in archives for h in (h1_hash(archive), zip_hash(archive))})
    lines = "".join(f'    "{h}",\n' for h in hashes)
    return (
        '# This file is maintained automatically by "terraform init".\n'
        "# Manual edits may be lost in future updates.\n"
        "\n"
        f'provider "{PROVIDER_ADDRESS}" {{\n'
        f'  version = "{layout.VERSION}"\n'
        f"  hashes = [\n{lines}  ]\n"
        "}\n"
    )


def write_locks(dist: Path) -> list[Path]:
    """Each example configuration's lock file for the archives of ``dist``; returns the files written."""
    text = render_lock(release_archives(dist))
    written = []
    for directory in example_configurations():
        (directory / LOCK_FILE).write_text(text)
        written.append(directory / LOCK_FILE)
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dist", type=Path, default=layout.REPO / "dist", help="a built dist/ (default: dist)"
    )
    args = parser.parse_args()
    for path in write_locks(args.dist.absolute()):
        print(path.relative_to(layout.REPO))
    return 0


if __name__ == "__main__":
    sys.exit(main())
