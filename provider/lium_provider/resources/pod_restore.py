"""A new ``lium_pod`` that starts from a backup (``restore_backup_id`` at ``restore_path``): Lium writes
the backup into the pod once it runs (docs/lium-api.md#backups), so its create waits until that restore
has finished, and fails naming Lium's reason when it did not: the apply ends with the data in place."""

from __future__ import annotations

import time

from lium_provider.api.backups import BACKUP_DONE, FINISHED, RestoreLogRow
from lium_provider.resources.common import api_errors
from lium_provider.resources.pod_model import PodModel
from lium_provider.session import LiumSession
from tfbridge import Context, TFError

RESTORE_POLL_SECONDS = 2.0  # a restore's log is read this often: within Lium's request rates
RESTORE_LOG_SECONDS = 120.0  # how long Lium may take to show the restore its rent asked for


def wait_for_restore(ctx: Context, s: LiumSession, state: PodModel) -> None:
    """Wait until the restore of ``state.restore_backup_id`` into the pod has finished."""
    pod_id = state.id or ""
    deadline = time.monotonic() + RESTORE_LOG_SECONDS
    while True:
        with api_errors("reading the pod's restore", path=("restore_backup_id",)):
            rows = [r for r in s.client.pod_restores(pod_id) if r.backup_id == state.restore_backup_id]
        done: RestoreLogRow | None = next((r for r in rows if r.status in FINISHED), None)
        if done is not None:
            if done.status != BACKUP_DONE:
                raise TFError(
                    f"Restoring backup {state.restore_backup_id} into pod {pod_id} failed",
                    f"Lium says {done.status}: {done.error_message or 'no reason given'}. The pod runs without "
                    f"it; {state.restore_path} holds what was written.",
                    path=("restore_backup_id",),
                )
            return
        if not rows and time.monotonic() > deadline:
            raise TFError(
                f"Lium shows no restore of backup {state.restore_backup_id} into pod {pod_id}",
                f"The rent asked for it, but no restore was listed within {RESTORE_LOG_SECONDS:.0f} s.",
                path=("restore_backup_id",),
            )
        ctx.cancel.sleep(RESTORE_POLL_SECONDS)
