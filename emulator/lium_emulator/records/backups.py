"""The records of Lium's pod backups (docs/lium-api.md#backups): one schedule per pod, its backups and the
restores made from them. The copies themselves are files of the emulator's own store (``services/backups.py``)."""

from datetime import datetime
from typing import Literal

from lium_emulator.records.entities import Record

BackupStatus = Literal["PENDING", "IN_PROGRESS", "COMPLETED", "FAILED", "CANCELLED"]
FINISHED: frozenset[str] = frozenset({"COMPLETED", "FAILED", "CANCELLED"})


class BackupConfig(Record):
    """A pod's backup schedule: ``backup_path`` every ``backup_frequency_hours``, each kept ``retention_days``."""

    id: str
    user_id: str  # the pod's workspace
    pod_id: str
    backup_path: str
    backup_frequency_hours: int
    retention_days: int
    is_active: bool = True  # False once its pod is gone: no more backups, the copies kept until they expire
    created_at: datetime
    updated_at: datetime
    next_backup_at: datetime


class BackupLog(Record):
    """One backup: its status, and the copy's size once made. ``deletion_state`` says when its data went."""

    id: str
    user_id: str
    pod_id: str
    backup_config_id: str | None
    backup_path: str
    name: str | None = None
    description: str | None = None
    status: BackupStatus = "PENDING"
    created_at: datetime
    started_at: datetime | None = None
    completed_at: datetime | None = None
    error_message: str | None = None
    total_bytes: int | None = None
    deletion_state: Literal["deleted"] | None = None


class RestoreLog(Record):
    """One restore of a backup into a pod, at ``restore_path``."""

    id: str
    user_id: str
    pod_id: str
    backup_id: str
    restore_path: str
    status: BackupStatus = "PENDING"
    created_at: datetime
    started_at: datetime | None = None
    completed_at: datetime | None = None
    error_message: str | None = None
