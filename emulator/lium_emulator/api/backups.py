"""Backup routes (docs/lium-api.md#backups), as Lium's SDK calls them: a pod's schedule
(``/backup-configs``), its backups (``/backup-logs``, paged), backing up now, restoring into a running pod
and the restores' logs, cancels and deletions. The work itself is ``services/backups.py``'s."""

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, ConfigDict, Field

from lium_emulator.api.caller import Caller, CallerDep
from lium_emulator.api.deps import RuntimeDep
from lium_emulator.api.models import pod_path
from lium_emulator.api.pods import seen_pod
from lium_emulator.errors import ApiError
from lium_emulator.records.backups import BackupConfig, BackupLog, RestoreLog
from lium_emulator.records.entities import Pod
from lium_emulator.records.timeutil import iso
from lium_emulator.runtime import Runtime
from lium_emulator.services.backups import BackupRefused

router = APIRouter()
MAX_FREQUENCY_HOURS, MAX_RETENTION_DAYS = 168, 365


class BackupSchedule(BaseModel):
    model_config = ConfigDict(extra="ignore")

    backup_path: str = Field(min_length=1, max_length=4096)
    backup_frequency_hours: int = Field(default=6, ge=1, le=MAX_FREQUENCY_HOURS)
    retention_days: int = Field(default=7, ge=1, le=MAX_RETENTION_DAYS)


class NewBackupSchedule(BackupSchedule):
    pod_id: UUID


class BackupNow(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str | None = Field(default=None, max_length=255)
    description: str | None = Field(default=None, max_length=2000)


class RestoreOrder(BaseModel):
    model_config = ConfigDict(extra="ignore")

    backup_id: UUID
    restore_path: str = Field(min_length=1, max_length=4096)


def _config_row(config: BackupConfig) -> dict[str, Any]:
    return {
        "id": config.id,
        "pod_executor_id": config.pod_id,
        "pod_id": config.pod_id,
        "backup_path": config.backup_path,
        "backup_frequency_hours": config.backup_frequency_hours,
        "retention_days": config.retention_days,
        "is_active": config.is_active,
        "created_at": iso(config.created_at),
        "updated_at": iso(config.updated_at),
        "next_backup_at": iso(config.next_backup_at) if config.is_active else None,
    }


def _elapsed(start: datetime | None, end: datetime | None) -> int | None:
    return int((end - start).total_seconds()) if start and end else None


def _backup_row(backup: BackupLog) -> dict[str, Any]:
    done = backup.status == "COMPLETED"
    return {
        "id": backup.id,
        "backup_config_id": backup.backup_config_id,
        "pod_id": backup.pod_id,
        "name": backup.name,
        "description": backup.description,
        "backup_path": backup.backup_path,
        "status": backup.status,
        "stage": backup.status.lower(),
        "progress": 100.0 if done else 0.0,
        "created_at": iso(backup.created_at),
        "started_at": iso(backup.started_at),
        "completed_at": iso(backup.completed_at),
        "elapsed_seconds": _elapsed(backup.started_at, backup.completed_at),
        "error_message": backup.error_message,
        "total_bytes": backup.total_bytes,
        "processed_bytes": backup.total_bytes,
        "backup_volume_id": None,
        "deletion_state": backup.deletion_state,
    }


def _restore_row(restore: RestoreLog) -> dict[str, Any]:
    return {
        "id": restore.id,
        "backup_id": restore.backup_id,
        "pod_id": restore.pod_id,
        "status": restore.status,
        "stage": restore.status.lower(),
        "progress": 100.0 if restore.status == "COMPLETED" else 0.0,
        "created_at": iso(restore.created_at),
        "started_at": iso(restore.started_at),
        "completed_at": iso(restore.completed_at),
        "error_message": restore.error_message,
        "restore_path": restore.restore_path,
        "restore_mode": "new_directory",
        "backup_engine": "tar",
    }


@dataclass(frozen=True)
class Paging:
    """Which page of a listing, as the SDK asks (``page`` from 1, ``limit`` at most 100)."""

    page: int
    limit: int


def _paging(page: int = Query(1, ge=1), limit: int = Query(20, ge=1, le=100)) -> Paging:
    return Paging(page, limit)


PagingDep = Annotated[Paging, Depends(_paging)]


def _page(rows: list[dict[str, Any]], paging: Paging) -> dict[str, Any]:
    page, limit = paging.page, paging.limit
    start = (page - 1) * limit
    return {
        "items": rows[start : start + limit],
        "total": len(rows),
        "page": page,
        "limit": limit,
        "has_next": start + limit < len(rows),
    }


def _running(runtime: Runtime, caller: Caller, pod_id: UUID) -> Pod:
    pod = seen_pod(runtime, caller, pod_id)
    if pod.status != "RUNNING":
        raise ApiError(409, "pod_state_conflict", f"A {pod.status} pod cannot be backed up or restored into.")
    return pod


def _config(runtime: Runtime, caller: Caller, config_id: UUID) -> BackupConfig:
    config = runtime.state.backup_configs.get(str(config_id))
    if config is None or config.user_id != caller.workspace_id:
        raise ApiError(404, "backup_config_not_found", "Backup configuration not found.")
    seen_pod(runtime, caller, config.pod_id)  # under `own` visibility, only the key's pods'
    return config


def _backup(runtime: Runtime, caller: Caller, backup_id: UUID) -> BackupLog:
    backup = runtime.state.backups.get(str(backup_id))
    if backup is None or backup.user_id != caller.workspace_id:
        raise ApiError(404, "backup_not_found", "Backup not found.")
    seen_pod(runtime, caller, backup.pod_id)
    return backup


@router.post("/backup-configs")
async def create_backup_config(
    body: NewBackupSchedule, runtime: RuntimeDep, caller: CallerDep
) -> dict[str, Any]:
    """The pod's schedule, created, or replaced in place when it has one (one per pod)."""
    pod = _running(runtime, caller, body.pod_id)
    path = pod_path(body.backup_path, "backup_path")
    return _config_row(runtime.backups.configure(pod, path, body.backup_frequency_hours, body.retention_days))


@router.get("/backup-configs")
async def list_backup_configs(runtime: RuntimeDep, caller: CallerDep) -> list[dict[str, Any]]:
    configs = [c for c in runtime.state.backup_configs.values() if c.user_id == caller.workspace_id]
    pods = runtime.state.pods
    return [_config_row(c) for c in configs if c.pod_id in pods and caller.sees(pods[c.pod_id])]


@router.get("/backup-configs/pod/{pod_id}")
async def pod_backup_config(pod_id: UUID, runtime: RuntimeDep, caller: CallerDep) -> dict[str, Any]:
    pod = seen_pod(runtime, caller, pod_id)
    config = next((c for c in runtime.state.backup_configs.values() if c.pod_id == pod.id), None)
    if config is None:
        raise ApiError(404, "backup_config_not_found", "The pod has no backup configuration.")
    return _config_row(config)


@router.put("/backup-configs/{config_id}")
async def update_backup_config(
    config_id: UUID, body: BackupSchedule, runtime: RuntimeDep, caller: CallerDep
) -> dict[str, Any]:
    config = _config(runtime, caller, config_id)
    pod = seen_pod(runtime, caller, config.pod_id)
    path = pod_path(body.backup_path, "backup_path")
    return _config_row(
        runtime.backups.configure(pod, path, body.backup_frequency_hours, body.retention_days, config)
    )


@router.delete("/backup-configs/{config_id}")
async def delete_backup_config(config_id: UUID, runtime: RuntimeDep, caller: CallerDep) -> dict[str, Any]:
    """The schedule, and the data of every backup it made."""
    runtime.backups.delete_config(_config(runtime, caller, config_id))
    return {"success": True, "id": str(config_id)}


@router.post("/pods/{pod_id}/backup")
async def backup_now(
    pod_id: UUID, runtime: RuntimeDep, caller: CallerDep, body: BackupNow | None = None
) -> dict[str, Any]:
    """A backup of the pod's configured path, now."""
    pod = _running(runtime, caller, pod_id)
    config = next((c for c in runtime.state.backup_configs.values() if c.pod_id == pod.id), None)
    if config is None:
        raise ApiError(404, "backup_config_not_found", "The pod has no backup configuration.")
    given = body or BackupNow()
    try:
        backup = runtime.backups.start_backup(pod, config, given.name, given.description)
    except BackupRefused as refusal:
        raise ApiError(409, "backup_in_progress", str(refusal)) from None
    return {"success": True, "backup_log_id": backup.id, **_backup_row(backup)}


@router.get("/backup-logs/pod/{pod_id}")
async def pod_backups(
    pod_id: UUID,
    runtime: RuntimeDep,
    caller: CallerDep,
    paging: PagingDep,
) -> dict[str, Any]:
    pod = seen_pod(runtime, caller, pod_id)
    return _page([_backup_row(b) for b in runtime.backups.backups_of(caller.workspace_id, pod.id)], paging)


@router.get("/backup-logs/")
async def all_backups(runtime: RuntimeDep, caller: CallerDep, paging: PagingDep) -> dict[str, Any]:
    pods = runtime.state.pods
    rows = [
        _backup_row(b)
        for b in runtime.backups.backups_of(caller.workspace_id)
        if b.pod_id in pods and caller.sees(pods[b.pod_id])
    ]
    return _page(rows, paging)


@router.get("/backup-logs/{backup_id}")
async def one_backup(backup_id: UUID, runtime: RuntimeDep, caller: CallerDep) -> dict[str, Any]:
    return _backup_row(_backup(runtime, caller, backup_id))


@router.post("/backup-logs/{backup_id}/cancel")
async def cancel_backup(backup_id: UUID, runtime: RuntimeDep, caller: CallerDep) -> dict[str, Any]:
    backup = _backup(runtime, caller, backup_id)
    try:
        runtime.backups.cancel(backup)
    except BackupRefused as refusal:
        raise ApiError(409, "backup_not_cancellable", str(refusal)) from None
    return {"success": True, **_backup_row(backup)}


@router.delete("/backup-logs/{backup_id}")
async def delete_backup(backup_id: UUID, runtime: RuntimeDep, caller: CallerDep) -> dict[str, Any]:
    """The backup's copy is deleted; its row stays, saying so."""
    backup = _backup(runtime, caller, backup_id)
    runtime.backups.delete_data(backup)
    return {"success": True, **_backup_row(backup)}


@router.post("/pods/{pod_id}/restore")
async def restore(pod_id: UUID, body: RestoreOrder, runtime: RuntimeDep, caller: CallerDep) -> dict[str, Any]:
    """A backup of the workspace written into the running pod, at a new or empty directory."""
    pod = _running(runtime, caller, pod_id)
    path = pod_path(body.restore_path, "restore_path")
    try:
        backup = runtime.backups.restorable(caller.workspace_id, str(body.backup_id), caller.sees)
    except BackupRefused as refusal:
        raise ApiError(404, "backup_not_found", str(refusal)) from None
    try:
        restored = runtime.backups.start_restore(pod, backup, path)
    except BackupRefused as refusal:
        raise ApiError(409, "backup_in_progress", str(refusal)) from None
    return {"success": True, "restore_log_id": restored.id, **_restore_row(restored)}


@router.get("/pods/{pod_id}/restore-logs")
async def restore_logs(
    pod_id: UUID,
    runtime: RuntimeDep,
    caller: CallerDep,
    paging: PagingDep,
) -> dict[str, Any]:
    pod = seen_pod(runtime, caller, pod_id)
    rows = sorted(
        (r for r in runtime.state.restores.values() if r.pod_id == pod.id),
        key=lambda r: r.created_at,
        reverse=True,
    )
    return _page([_restore_row(r) for r in rows], paging)


@router.post("/restore-logs/{restore_id}/cancel")
async def cancel_restore(restore_id: UUID, runtime: RuntimeDep, caller: CallerDep) -> dict[str, Any]:
    restored = runtime.state.restores.get(str(restore_id))
    if restored is None or restored.user_id != caller.workspace_id:
        raise ApiError(404, "restore_not_found", "Restore not found.")
    seen_pod(runtime, caller, restored.pod_id)
    try:
        runtime.backups.cancel_restore(restored)
    except BackupRefused as refusal:
        raise ApiError(409, "restore_not_cancellable", str(refusal)) from None
    return {"success": True, **_restore_row(restored)}
