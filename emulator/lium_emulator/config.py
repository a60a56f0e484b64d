"""Settings of one emulator process (what ``lium-emulator serve`` accepts)."""

import secrets
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_API_KEY = "lium-emulator-key"
# Optional capabilities, advertised on ``GET /version``; ``--features`` replaces the list. Without
# ``multinode_clusters`` the server refuses cluster rentals, as Lium does with its switch off
# (``multinode_clusters_enabled`` in Lium's shared configuration).
DEFAULT_FEATURES = ("rent_idempotency", "multinode_clusters")
ADMIN_KEY_FILE = "admin-key"  # in the state directory, 0600, when the key was generated


def random_admin_key() -> str:
    """A fresh admin key: without ``--admin-key`` every start gets its own (pods run hostile code).

    Hex, so it never starts with ``-`` (a command line would take it for an option) and needs no quoting.
    """
    return secrets.token_hex(24)


@dataclass(frozen=True)
class EmulatorConfig:
    """Everything that shapes the emulator's behaviour; timings are in seconds."""

    host: str = "127.0.0.1"
    port: int = 8787
    api_keys: tuple[str, ...] = (DEFAULT_API_KEY,)
    admin_key: str = field(default_factory=random_admin_key)
    admin_key_generated: bool = False  # no --admin-key: announce it once and write ADMIN_KEY_FILE
    state_dir: Path | None = None
    nodes_file: Path | None = None
    faults_file: Path | None = None
    features: tuple[str, ...] = DEFAULT_FEATURES
    balance_usd: float = 1000.0  # starting balance of every account
    pending_seconds: float = 2.0  # rent → RUNNING; the sandbox starts during PENDING
    ssh_delay_seconds: float = 1.0  # RUNNING until ssh_connect_cmd is published (sshd starts at RUNNING)
    deleting_seconds: float = 1.0  # DELETING → DELETED; the sandbox is stopped meanwhile
    failed_row_seconds: float = 180.0  # how long a CREATION_FAILED row stays listed
    budget_tick_seconds: float = 1.0  # how often running pods are checked against their keys' budgets
    backup_hour_seconds: float = 3600.0  # how long one hour of a backup schedule lasts (a time scale)
    backup_max_mib: int = 256  # the largest backup the store takes; a workspace's backups hold 4 times that
    pod_open_files_limit: int | None = None  # None: a share of the host's file table (sandbox/file_guard.py)

    @property
    def idempotency_enabled(self) -> bool:
        """Whether ``Idempotency-Key`` is honoured (feature ``rent_idempotency``)."""
        return "rent_idempotency" in self.features

    @property
    def multinode_clusters_enabled(self) -> bool:
        """Whether multi-node clusters are rented (feature ``multinode_clusters``)."""
        return "multinode_clusters" in self.features
