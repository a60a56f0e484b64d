"""A local journal of rent attempts, written before each rent is sent.

If the provider dies between Lium creating a pod and Terraform saving the state (SIGKILL, power loss),
the pod exists but no state names it. The journal keeps what is needed to find it again — the pod name,
executor, idempotency key, body and start time — so the next run (or ``lium-tf sweep``) can reconcile it
through the pod list and the account events, and adopt or delete it.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from lium_provider.api.rent import RentAttempt


class RentJournal:
    """Rent attempts in ``directory``, one file per pod name, written before the rent is sent."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _path(self, pod_name: str) -> Path:
        digest = hashlib.sha256(pod_name.encode()).hexdigest()[:16]
        return self.directory / f"{digest}.json"

    def write(self, attempt: RentAttempt) -> None:
        """Durably record ``attempt`` (fsync'd) before it is sent."""
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = self._path(attempt.pod_name)
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w") as handle:
            handle.write(attempt.to_json())
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)

    def forget(self, pod_name: str) -> None:
        self._path(pod_name).unlink(missing_ok=True)

    def find(self, pod_name: str) -> RentAttempt | None:
        """The journalled attempt of ``pod_name``, if one is recorded and readable."""
        return _read(self._path(pod_name))

    def pending(self) -> list[RentAttempt]:
        """Every journalled attempt that was never confirmed into Terraform's state."""
        attempts = (_read(path) for path in sorted(self.directory.glob("*.json")))
        return [attempt for attempt in attempts if attempt is not None]


def _read(path: Path) -> RentAttempt | None:
    """The attempt saved at ``path``; None when it is gone or unreadable (a torn or foreign file)."""
    try:
        return RentAttempt.from_json(path.read_text())
    except (OSError, ValueError):
        return None
