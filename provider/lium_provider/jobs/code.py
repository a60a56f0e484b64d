"""A job's code: the caller's working directory as a tar, as dstack's server uploads a local repo.

Files a ``.gitignore`` (of the directory or any below it) leaves out are left out, as ``git`` would, and
so are what never belongs in a job's code: ``.git``, Terraform's working files (``.terraform``) and its
state files, which hold every secret of a stack. The archive is bounded: a directory larger than the
bound is refused before anything is sent, naming its size, the bound, and its largest files.
"""

from __future__ import annotations

import contextlib
import io
import os
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pathspec

NEVER_UPLOADED = pathspec.GitIgnoreSpec.from_lines(
    [".git/", ".terraform/", "*.tfstate", "*.tfstate.*", ".terraform.tfstate.lock.info", "cdktf.out/"]
)
"""Left out whatever the ``.gitignore`` files say: git's own files, and Terraform's (states hold secrets)."""


class CodeTooLarge(Exception):
    """The directory is larger than the bound."""


@dataclass(frozen=True)
class CodeFile:
    path: Path
    name: str
    """Its name in the archive: the path from the directory, with ``/``."""
    size: int


def code_files(root: Path) -> Iterator[CodeFile]:
    """The files (and symbolic links) of ``root`` a job's code holds, in a stable order."""
    specs: list[tuple[str, pathspec.GitIgnoreSpec]] = [("", NEVER_UPLOADED)]
    for directory, dirnames, filenames in os.walk(root):
        relative = Path(directory).relative_to(root).as_posix()
        base = "" if relative == "." else relative + "/"
        specs = [(b, s) for b, s in specs if base.startswith(b)]  # only this directory's ancestors
        ignore_file = Path(directory) / ".gitignore"
        if ignore_file.is_file():
            lines = ignore_file.read_text(encoding="utf-8", errors="replace").splitlines()
            specs.append((base, pathspec.GitIgnoreSpec.from_lines(lines)))
        dirnames[:] = sorted(d for d in dirnames if not _ignored(specs, base + d + "/"))
        for name in sorted(filenames):
            path = Path(directory) / name
            if _ignored(specs, base + name):
                continue
            try:
                size = path.lstat().st_size
            except FileNotFoundError:
                continue  # gone since the directory was listed (another process's temporary file)
            yield CodeFile(path, base + name, size)


def _ignored(specs: list[tuple[str, pathspec.GitIgnoreSpec]], name: str) -> bool:
    """What the deepest ``.gitignore`` that says anything of ``name`` says (git's precedence); the
    files Terraform and git keep are left out whatever a ``.gitignore`` says."""
    if NEVER_UPLOADED.match_file(name):
        return True
    verdict = False
    for base, spec in specs[1:]:
        result = spec.check_file(name[len(base) :])
        if result.include is not None:
            verdict = result.include
    return verdict


def pack_code(root: Path, limit_bytes: int) -> bytes:
    """The tar of ``root``'s code; :class:`CodeTooLarge` when its files add up to more than
    ``limit_bytes``."""
    files = list(code_files(root))
    total = sum(f.size for f in files)
    if total > limit_bytes:
        largest = sorted(files, key=lambda f: f.size, reverse=True)[:5]
        named = ", ".join(f"{f.name} ({_mib(f.size)})" for f in largest)
        raise CodeTooLarge(
            f"the code in {root} is {_mib(total)}, over the bound of {_mib(limit_bytes)} (largest: {named}). "
            "Leave data out with a .gitignore (or put it on a lium_volume), run from a smaller directory, "
            "raise the bound with --code-limit-mib, or send no code with --no-code."
        )
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for file in files:
            with contextlib.suppress(FileNotFoundError):  # gone since it was listed
                tar.add(file.path, arcname=file.name, recursive=False)
    return buffer.getvalue()


def _mib(size: int) -> str:
    return f"{size / 1024 / 1024:.1f} MiB"
