"""The registry of this user's emulators on the host: which work directories live ones use, and what
dead ones left (read by the watchdog, ``watchdog.py``, and by the volume images' disk accounting)."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

INSTANCES_ENV = "LIUM_EMULATOR_INSTANCES_DIR"


def instances_dir() -> Path:
    """Where this user's emulators register (``LIUM_EMULATOR_INSTANCES_DIR``, else the temp dir)."""
    configured = os.environ.get(INSTANCES_ENV)
    return Path(configured) if configured else Path(tempfile.gettempdir()) / f"lium-emulator-{os.getuid()}"


@dataclass(frozen=True)
class Registration:
    """One emulator, as its registry file records it."""

    pid: int
    start: int
    work_dir: Path
    temporary: bool

    @property
    def sandbox_root(self) -> Path:
        return self.work_dir / "sandboxes"

    def to_json(self) -> str:
        return json.dumps(
            {
                "pid": self.pid,
                "start": self.start,
                "work_dir": str(self.work_dir),
                "temporary": self.temporary,
            }
        )

    @classmethod
    def read(cls, path: Path) -> Registration | None:
        try:
            data = json.loads(path.read_text())
            return cls(int(data["pid"]), int(data["start"]), Path(data["work_dir"]), bool(data["temporary"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None


def unregister(registration_file: Path) -> None:
    """Remove a registration, and the registry with its last one (nothing of a run is left in TMPDIR)."""
    registration_file.unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # another emulator's registration is still there
        registration_file.parent.rmdir()


def registrations() -> Iterator[tuple[Path, Registration | None]]:
    """Every registration file of this user's emulators, with its record (None: unreadable)."""
    for path in sorted(instances_dir().glob("*.json")):
        yield path, Registration.read(path)
