"""Run ``terraform`` where no Python, no checkout and no venv can be reached: a private mount namespace.

:func:`clean_room` writes a ``terraform`` wrapper into a directory to put first on ``PATH``; each run
of it enters a new mount namespace (``unshare -m``, root only), mounts an empty tmpfs over every
directory that holds a Python, the checkout or caches (``/work``, ``/root``, ``/opt``, the interpreter's
prefixes, ``/usr/lib/python3*``) and binds ``/dev/null`` over every ``python*`` on ``PATH``, checks that
no ``python3`` runs any more, and only then execs the real terraform. Networking is untouched, so
servers the test runs outside (an HTTPS registry, the emulator) stay reachable on 127.0.0.1; so are
``/tmp`` and the test's own directories.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from tests.support.terraform import REPO

NO_PYTHON_EXIT = 97  # the clean room's exit code when a Python can still be run inside it


def hidden_directories() -> list[Path]:
    """Everything a Python or our sources could be found in on this machine."""
    candidates = {
        Path("/work"),
        Path("/root"),
        Path("/opt"),
        REPO,
        Path(sys.prefix),
        Path(sys.base_prefix),
        *Path("/usr/lib").glob("python3*"),
        *Path("/usr/local/lib").glob("python3*"),
    }
    existing = sorted(p for p in candidates if p.is_dir())
    # Hiding a parent hides its children; a child mounted after its parent would be invisible anyway.
    return [p for p in existing if not any(p != q and p.is_relative_to(q) for q in existing)]


def python_executables() -> list[Path]:
    hidden = hidden_directories()
    found = set()
    for directory in [*os.environ.get("PATH", "").split(os.pathsep), "/usr/bin", "/usr/local/bin", "/bin"]:
        for path in Path(directory or ".").glob("python*"):
            if path.is_file() and not any(
                p.is_relative_to(h) for h in hidden for p in (path, path.resolve())
            ):
                found.add(path.resolve())
    return sorted(found)


def clean_room(bin_dir: Path) -> Path:
    """Write the ``terraform`` wrapper into ``bin_dir``; returns ``bin_dir`` (put it first on PATH)."""
    terraform = shutil.which("terraform")
    assert terraform is not None, "terraform is not on PATH"
    bin_dir.mkdir(parents=True, exist_ok=True)
    mounts = [f"mount -t tmpfs -o size=1m,mode=0755 lium-clean-room {d}" for d in hidden_directories()]
    mounts += [f"mount --bind /dev/null {p}" for p in python_executables()]
    script = bin_dir / "enter-clean-room.sh"
    script.write_text(
        "set -e\n"
        + "\n".join(mounts)
        + "\nfor python in python3 python python3.11; do\n"
        + f'  if "$python" -c "" >/dev/null 2>&1; then echo "clean room: $python still runs" >&2; exit {NO_PYTHON_EXIT}; fi\n'
        + "done\n"
        + 'exec "$@"\n'
    )
    wrapper = bin_dir / "terraform"
    wrapper.write_text(f'#!/bin/sh\nexec unshare --mount /bin/sh {script} {terraform} "$@"\n')
    wrapper.chmod(0o755)
    return bin_dir
