"""Typed views of Lium's backup bodies (docs/lium-api.md#backups): a pod's backup configuration (what
``/backup-configs`` answers and takes) and its backups (``/backup-logs``), which a new pod's rent may
restore (``backup_log_id`` with ``restore_path``)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, field_validator, model_validator

from lium_provider.api.models import NonEmptyStr, RequestModel, ResponseModel, UtcDatetime

BACKUP_DONE = "COMPLETED"
"""A backup's status once its copy is whole, and so restorable; a restore's once it is written."""
FINISHED = frozenset({BACKUP_DONE, "FAILED", "CANCELLED"})
"""The statuses a backup or restore ends in."""
MIN_BACKUP_FREQUENCY_HOURS, MAX_BACKUP_FREQUENCY_HOURS = 1, 168
MIN_BACKUP_RETENTION_DAYS, MAX_BACKUP_RETENTION_DAYS = 1, 365
BackupFrequencyHours = Annotated[int, Field(ge=MIN_BACKUP_FREQUENCY_HOURS, le=MAX_BACKUP_FREQUENCY_HOURS)]
BackupRetentionDays = Annotated[int, Field(ge=MIN_BACKUP_RETENTION_DAYS, le=MAX_BACKUP_RETENTION_DAYS)]


class BackupSchedule(RequestModel):
    """The body of ``POST /backup-configs`` (with ``pod_id``) and ``PUT /backup-configs/{id}``."""

    backup_path: NonEmptyStr
    backup_frequency_hours: BackupFrequencyHours
    retention_days: BackupRetentionDays

    def to_body(self, pod_id: str | None = None) -> dict[str, Any]:
        return {**({"pod_id": pod_id} if pod_id else {}), **self.model_dump()}


class BackupConfigRow(ResponseModel):
    """A pod's backup configuration as Lium answers it (``pod_executor_id`` is the pod's id)."""

    id: NonEmptyStr
    pod_id: str | None = None
    backup_path: str = ""
    backup_frequency_hours: int = 0
    retention_days: int = 0
    is_active: bool = True

    @model_validator(mode="before")
    @classmethod
    def _pod(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("pod_id") is None and data.get("pod_executor_id"):
            return {**data, "pod_id": data["pod_executor_id"]}
        return data


class _Run(ResponseModel):
    """A backup's or a restore's row: its status, upper case whatever the server's spelling."""

    id: NonEmptyStr
    status: str = ""
    error_message: str | None = None

    @field_validator("status", mode="before")
    @classmethod
    def _status(cls, value: Any) -> Any:
        return value.strip().upper() if isinstance(value, str) else value


class RestoreLogRow(_Run):
    """One restore into a pod (a row of ``/pods/{id}/restore-logs``)."""

    backup_id: str | None = None
    restore_path: str | None = None
    created_at: UtcDatetime | None = None


class BackupLogRow(_Run):
    """One backup of a pod (a row of ``/backup-logs``): its status, and when it ran."""

    backup_config_id: str | None = None
    started_at: UtcDatetime | None = None
    completed_at: UtcDatetime | None = None
    total_bytes: int | None = None
    deletion_state: str | None = None  # set once its data is deleted: the row stays, and cannot be restored

    @property
    def restorable(self) -> bool:
        return self.status == BACKUP_DONE and not self.deletion_state
