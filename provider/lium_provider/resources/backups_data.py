"""``data.lium_backups``: a pod's backups (``/backup-logs/pod/{id}``, docs/lium-api.md#backups), newest
first, for ``lium_pod.restore_backup_id``."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict

from lium_provider.api.backups import BACKUP_DONE, BackupLogRow
from lium_provider.domain.removal import rfc3339
from lium_provider.resources.common import api_errors
from lium_provider.resources.inputs import LIUM_ID
from lium_provider.session import session
from tfbridge import Attribute, Context, DataSource


class BackupModel(BaseModel):
    """One backup of the pod."""

    model_config = ConfigDict(extra="forbid")

    id: Annotated[str, Attribute(computed=True, description="Backup id: `lium_pod.restore_backup_id`.")]
    status: Annotated[
        str, Attribute(computed=True, description=f"Lium's status: `{BACKUP_DONE}` once whole.")
    ]
    restorable: Annotated[
        bool,
        Attribute(
            computed=True,
            description=f"`{BACKUP_DONE}` with its data kept (a deleted or expired backup's row stays, without it).",
        ),
    ]
    started_at: Annotated[
        str | None, Attribute(computed=True, description="When it started (RFC 3339, UTC).")
    ] = None
    completed_at: Annotated[
        str | None, Attribute(computed=True, description="When it completed (RFC 3339, UTC); null before.")
    ] = None
    error: Annotated[str | None, Attribute(computed=True, description="Why it failed, when it did.")] = None


class BackupsModel(BaseModel):
    """A pod's backups, newest first: `latest_completed_id` is what a restore usually wants."""

    model_config = ConfigDict(extra="forbid")

    pod_id: Annotated[str, Attribute(required=True, description="The backed-up pod's id."), LIUM_ID]
    backups: Annotated[
        list[BackupModel] | None, Attribute(computed=True, description="Its backups, newest first.")
    ] = None
    latest_completed_id: Annotated[
        str | None,
        Attribute(
            computed=True,
            description="The newest restorable backup's id; null when there is none (yet: a pod given it then "
            "restores nothing).",
        ),
    ] = None


def _backup(row: BackupLogRow) -> BackupModel:
    return BackupModel(
        id=row.id,
        status=row.status,
        restorable=row.restorable,
        started_at=rfc3339(row.started_at),
        completed_at=rfc3339(row.completed_at),
        error=row.error_message,
    )


class BackupsDataSource(DataSource[BackupsModel]):
    type_name = "lium_backups"
    model = BackupsModel
    description = BackupsModel.__doc__ or ""

    def read(self, ctx: Context, config: BackupsModel) -> BackupsModel:
        with api_errors("reading the pod's backups", path=("pod_id",)):
            rows = session(ctx).client.pod_backups(config.pod_id)
        newest = sorted(rows, key=lambda r: (r.started_at is not None, r.started_at), reverse=True)
        done = [r.id for r in newest if r.restorable]
        return config.model_copy(
            update={"backups": [_backup(r) for r in newest], "latest_completed_id": done[0] if done else None}
        )
