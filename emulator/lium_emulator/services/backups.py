"""Lium's pod backups, for real (docs/lium-api.md#backups, docs/emulator.md#backups): a pod's schedule
copies a directory of the pod into a store the emulator owns, and a restore writes a copy into a pod.

Pods are hostile, so nothing of a pod's paths is ever read or written on the host side: the copy is
``tar`` run *inside* the pod (entered and confined as pod code, :meth:`SandboxManager.start_inside`),
streamed out through a pipe into the store, and a restore streams the archive into ``tar -x`` run inside
the target pod, so it can write only what that pod could write itself. The store caps every copy
(``--backup-max-mib``) and every workspace's copies together (:data:`WORKSPACE_BACKUPS` times that): a
copy over either fails, and what it wrote is removed.

Schedules run on the emulator's clock scaled by ``--backup-hour-seconds`` (how long one of a schedule's
hours lasts), checked by a tick; ``POST /_emulator/backups/run-due`` runs what is due at once, for tests.
A pod's schedule stops with the pod; its copies stay until they expire (``retention_days``, on the same
scale) or are deleted, with the schedule or one by one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import uuid
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from pathlib import Path

from lium_emulator.records.backups import FINISHED, BackupConfig, BackupLog, RestoreLog
from lium_emulator.records.entities import Pod
from lium_emulator.records.state import EmulatorState
from lium_emulator.records.timeutil import utcnow
from lium_emulator.sandbox.inside import InsideProcess
from lium_emulator.sandbox.manager import SandboxError, SandboxManager

logger = logging.getLogger(__name__)

WORKSPACE_BACKUPS = 4
"""A workspace's copies may hold this many times the largest copy together."""
DEFAULT_FREQUENCY_HOURS, DEFAULT_RETENTION_DAYS = 24, 7
"""The schedule a pod rented with ``enable_backups`` gets (of its local volume): [I], docs/lium-api.md#backups."""
_MIB = 1024 * 1024
_CHUNK = _MIB
_EXIT_SECONDS = 10.0  # how long a copy may take to exit once its pipe is done
COPY_SECONDS = 600.0
"""The longest a backup's or restore's copy may take: a pod whose copy never ends (its ``tar`` replaced,
a FIFO in the path) is stopped there, and the copy fails."""
_NO_DIRECTORY = 66  # the copy's exit code for a path that is no directory in the pod
_COPY_OUT = f'[ -d "$1" ] || exit {_NO_DIRECTORY}; cd -- "$1" && exec tar -cf - .'
# A restore writes into a new or empty directory only; --no-same-owner: files belong to the pod's root.
_COPY_IN = 'mkdir -p -- "$1" && cd -- "$1" && [ -z "$(ls -A)" ] && exec tar -xf - --no-same-owner'


def _cancelled(record: BackupLog | RestoreLog) -> bool:
    return record.status == "CANCELLED"


class BackupRefused(Exception):
    """A backup or restore that cannot be made, said to the caller."""


class Backups:
    """Schedules, copies and restores; every record change happens on the event loop."""

    def __init__(
        self,
        state: EmulatorState,
        sandboxes: SandboxManager,
        store_dir: Path,
        hour_seconds: float,
        max_bytes: int,
    ) -> None:
        self._state = state
        self._max_bytes = max_bytes  # of one copy
        self._sandboxes = sandboxes
        self._store = store_dir
        self._hour_seconds = hour_seconds
        self._running: dict[str, asyncio.Task[None]] = {}
        self._copies: dict[str, InsideProcess] = {}  # by backup or restore id, while its process runs
        self._busy_pods: set[str] = set()  # a pod copies one backup or restore at a time
        self._inflight: dict[str, int] = {}  # bytes being copied, by workspace, against its cap

    def recover(self) -> None:
        """Copies a previous run of the emulator left unfinished (it stopped meanwhile) failed: their
        partial archives are removed, and nothing waits for them."""
        now = utcnow()
        runs: list[BackupLog | RestoreLog] = [*self._state.backups.values(), *self._state.restores.values()]
        for run in runs:
            if run.status in FINISHED:
                continue
            run.status, run.completed_at = "FAILED", now
            run.error_message = "the emulator stopped during the copy"
            if isinstance(run, BackupLog):
                self.archive(run.id).unlink(missing_ok=True)
            self._state.save(run)

    def hours(self, count: float) -> timedelta:
        """``count`` of a schedule's hours on the emulator's clock."""
        return timedelta(seconds=count * self._hour_seconds)

    def archive(self, backup_id: str) -> Path:
        return self._store / f"{backup_id}.tar"

    # --- schedules -----------------------------------------------------------------------------------

    def configure(
        self,
        pod: Pod,
        path: str,
        frequency_hours: int,
        retention_days: int,
        config: BackupConfig | None = None,
    ) -> BackupConfig:
        """The pod's schedule, created or changed in place (one per pod); the next backup is one period away."""
        now = utcnow()
        if config is None:
            config = next((c for c in self._state.backup_configs.values() if c.pod_id == pod.id), None)
        if config is None:
            config = BackupConfig(
                id=str(uuid.uuid4()),
                user_id=pod.user_id,
                pod_id=pod.id,
                backup_path=path,
                backup_frequency_hours=frequency_hours,
                retention_days=retention_days,
                created_at=now,
                updated_at=now,
                next_backup_at=now + self.hours(frequency_hours),
            )
        else:
            config.backup_path, config.backup_frequency_hours = path, frequency_hours
            config.retention_days, config.updated_at = retention_days, now
            config.next_backup_at = now + self.hours(frequency_hours)
        self._state.backup_configs[config.id] = config
        self._state.save(config)
        return config

    def delete_config(self, config: BackupConfig) -> None:
        """The schedule and the data of every backup it made (Lium's rule: they go with it)."""
        for backup in [b for b in self._state.backups.values() if b.backup_config_id == config.id]:
            self.delete_data(backup)
        self._state.backup_configs.pop(config.id, None)
        self._state.forget(config)

    def pod_gone(self, pod: Pod) -> None:
        """A deleted pod's schedule stops; its copies stay until they expire."""
        for config in self._state.backup_configs.values():
            if config.pod_id == pod.id and config.is_active:
                config.is_active = False
                self._state.save(config)

    # --- backups -------------------------------------------------------------------------------------

    def start_backup(
        self, pod: Pod, config: BackupConfig, name: str | None = None, description: str | None = None
    ) -> BackupLog:
        """A backup of the pod's configured path, made in the background; its row says how it goes.
        BackupRefused while the pod copies another backup or restore."""
        self._claim(pod.id)
        backup = BackupLog(
            id=str(uuid.uuid4()),
            user_id=pod.user_id,
            pod_id=pod.id,
            backup_config_id=config.id,
            backup_path=config.backup_path,
            name=name,
            description=description,
            created_at=utcnow(),
        )
        self._state.backups[backup.id] = backup
        self._state.save(backup)
        self._running[backup.id] = asyncio.get_running_loop().create_task(self._backup(backup))
        return backup

    async def _backup(self, backup: BackupLog) -> None:
        try:
            backup.status, backup.started_at = "IN_PROGRESS", utcnow()
            self._state.save(backup)
            size, error = await self._copy_out(backup)
            if _cancelled(backup):  # while it copied
                self.archive(backup.id).unlink(missing_ok=True)
                return
            backup.completed_at = utcnow()
            if error is None:
                backup.status, backup.total_bytes = "COMPLETED", size
            else:
                backup.status, backup.error_message = "FAILED", error
            self._state.save(backup)
        finally:
            self._running.pop(backup.id, None)
            self._busy_pods.discard(backup.pod_id)

    def _claim(self, pod_id: str) -> None:
        if pod_id in self._busy_pods:
            raise BackupRefused("A backup or restore of this pod is in progress: one at a time.")
        self._busy_pods.add(pod_id)

    def _stored(self, user_id: str) -> int:
        return sum(
            b.total_bytes or 0
            for b in self._state.backups.values()
            if b.user_id == user_id and b.deletion_state is None
        )

    async def _copy_out(self, backup: BackupLog) -> tuple[int, str | None]:
        """``tar`` of the backup's path made inside its pod, into its archive: at most the store's cap of one
        backup, and of what the workspace's backups hold together, copies in flight included."""
        path, archive, user = backup.backup_path, self.archive(backup.id), backup.user_id
        try:
            process = self._sandboxes.start_inside(backup.pod_id, ["/bin/sh", "-c", _COPY_OUT, "sh", path])
        except (SandboxError, OSError) as exc:
            return 0, f"the pod cannot be backed up now: {exc}"
        assert process.stdin is not None
        process.stdin.close()
        copy = self._copies[backup.id] = InsideProcess(process)
        self._store.mkdir(mode=0o700, parents=True, exist_ok=True)
        room = WORKSPACE_BACKUPS * self._max_bytes
        size, over, timed_out = 0, "", False
        reader, transport = await copy.stdout_reader(_CHUNK)
        try:
            async with asyncio.timeout(COPY_SECONDS):
                with open(os.open(archive, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as out:
                    while chunk := await reader.read(_CHUNK):
                        size += len(chunk)
                        self._inflight[user] = self._inflight.get(user, 0) + len(chunk)
                        if size > self._max_bytes:
                            over = f"the {self._max_bytes // _MIB} MiB one backup may hold"
                        elif self._stored(user) + self._inflight[user] > room:
                            over = f"what is left of the {room // _MIB} MiB the workspace's backups may hold"
                        if over:
                            break
                        out.write(chunk)
        except TimeoutError:
            timed_out = True
        finally:
            transport.close()
            self._inflight[user] -= size
            self._copies.pop(backup.id, None)
        if over or timed_out:
            copy.kill()
        code = await copy.exit_code(_EXIT_SECONDS)
        if timed_out:
            archive.unlink(missing_ok=True)
            return 0, f"copying {path} took longer than {COPY_SECONDS:.0f} s"
        if over:
            archive.unlink(missing_ok=True)
            return 0, f"the backup is larger than {over}"
        if code != 0:
            archive.unlink(missing_ok=True)
            if code == _NO_DIRECTORY:
                return 0, f"{path} is not a directory in the pod (does it exist?)"
            return 0, f"{path} could not be read in the pod (tar exited {code})"
        return size, None

    def cancel(self, backup: BackupLog) -> None:
        """An unfinished backup is cancelled (its copy, if any, discarded); a finished one is refused."""
        if backup.status in FINISHED:
            raise BackupRefused(f"The backup is {backup.status} already.")
        backup.status, backup.completed_at = "CANCELLED", utcnow()
        self._state.save(backup)
        if (copy := self._copies.get(backup.id)) is not None:
            copy.kill()

    def delete_data(self, backup: BackupLog) -> None:
        """The backup's copy is deleted; its row stays, saying so."""
        if backup.id in self._running:
            backup.status = "CANCELLED"
            if (copy := self._copies.get(backup.id)) is not None:
                copy.kill()
        self.archive(backup.id).unlink(missing_ok=True)
        backup.deletion_state = "deleted"
        self._state.save(backup)

    async def run_due(self, now: datetime | None = None) -> list[BackupLog]:
        """Start every scheduled backup that is due (of running pods) and expire old copies; the backups
        started, awaited until they finish."""
        now = now or utcnow()
        started = []
        for config in list(self._state.backup_configs.values()):
            pod = self._state.pods.get(config.pod_id)
            if not config.is_active or config.next_backup_at > now or pod is None or pod.status != "RUNNING":
                continue
            if pod.id in self._busy_pods:  # still copying: the schedule runs at its next tick
                continue
            config.next_backup_at = now + self.hours(config.backup_frequency_hours)
            self._state.save(config)
            started.append(self.start_backup(pod, config, name="scheduled"))
        self._expire(now)
        await asyncio.gather(*(t for b in started if (t := self._running.get(b.id)) is not None))
        return started

    def _expire(self, now: datetime) -> None:
        retention = {c.id: c.retention_days for c in self._state.backup_configs.values()}
        for backup in self._state.backups.values():
            days = retention.get(backup.backup_config_id or "")
            if backup.deletion_state is not None or backup.completed_at is None or days is None:
                continue
            if backup.completed_at + self.hours(24 * days) <= now:
                self.delete_data(backup)

    async def run(self) -> None:
        """The schedules' tick, for the emulator's lifetime."""
        tick = max(0.2, min(60.0, self._hour_seconds / 4))
        while True:
            await asyncio.sleep(tick)
            try:
                await self.run_due()
            except Exception:  # a tick must never end the loop
                logger.exception("backup tick failed")

    # --- restores ------------------------------------------------------------------------------------

    def restorable(self, user_id: str, backup_id: str, sees: Callable[[Pod], bool]) -> BackupLog:
        """The workspace's completed backup ``backup_id`` whose copy is kept, of a pod the caller ``sees``
        (under `own` visibility only the key's own pods'), else BackupRefused."""
        backup = self._state.backups.get(backup_id)
        pod = self._state.pods.get(backup.pod_id) if backup is not None else None
        if backup is None or backup.user_id != user_id or pod is None or not sees(pod):
            raise BackupRefused("Backup not found.")
        if backup.status != "COMPLETED" or backup.deletion_state is not None:
            raise BackupRefused(
                f"Backup {backup_id} cannot be restored: it is {backup.deletion_state or backup.status}."
            )
        return backup

    def start_restore(self, pod: Pod, backup: BackupLog, restore_path: str) -> RestoreLog:
        """The backup written into the pod in the background; BackupRefused while the pod copies another."""
        self._claim(pod.id)
        restore = RestoreLog(
            id=str(uuid.uuid4()),
            user_id=pod.user_id,
            pod_id=pod.id,
            backup_id=backup.id,
            restore_path=restore_path,
            created_at=utcnow(),
        )
        self._state.restores[restore.id] = restore
        self._state.save(restore)
        self._running[restore.id] = asyncio.get_running_loop().create_task(self._restore(restore))
        return restore

    async def _restore(self, restore: RestoreLog) -> None:
        try:
            restore.status, restore.started_at = "IN_PROGRESS", utcnow()
            self._state.save(restore)
            error = await self._copy_in(restore)
            if _cancelled(restore):  # while it copied
                return
            restore.completed_at = utcnow()
            restore.status, restore.error_message = (
                ("COMPLETED", None) if error is None else ("FAILED", error)
            )
            self._state.save(restore)
        finally:
            self._running.pop(restore.id, None)
            self._busy_pods.discard(restore.pod_id)

    async def _copy_in(self, restore: RestoreLog) -> str | None:
        """The backup's archive extracted inside the pod at the restore's path (new or empty); None when
        it worked."""
        path = restore.restore_path
        try:
            process = self._sandboxes.start_inside(restore.pod_id, ["/bin/sh", "-c", _COPY_IN, "sh", path])
        except (SandboxError, OSError) as exc:
            return f"the pod cannot be restored into now: {exc}"
        assert process.stdout is not None
        process.stdout.close()
        copy = self._copies[restore.id] = InsideProcess(process)
        timed_out = gone = False
        transport, writer = await copy.stdin_writer()
        try:
            async with asyncio.timeout(COPY_SECONDS):
                with self.archive(restore.backup_id).open("rb") as source:
                    while chunk := source.read(_CHUNK):
                        writer.write(chunk)
                        await writer.drain()
        except TimeoutError:
            timed_out = True
        except FileNotFoundError:
            gone = True
        except (BrokenPipeError, ConnectionResetError):
            pass  # tar stopped reading: its exit code says why
        finally:
            transport.close()
            self._copies.pop(restore.id, None)
        if timed_out or gone:
            copy.kill()
        code = await copy.exit_code(_EXIT_SECONDS)
        if gone:
            return "the backup's copy is gone"
        if timed_out or code is None:
            return f"restoring into {path} took longer than {COPY_SECONDS:.0f} s"
        return (
            None if code == 0 else f"{path} is not a new or empty directory the pod can write (exit {code})"
        )

    def cancel_restore(self, restore: RestoreLog) -> None:
        if restore.status in FINISHED:
            raise BackupRefused(f"The restore is {restore.status} already.")
        restore.status, restore.completed_at = "CANCELLED", utcnow()
        self._state.save(restore)
        if (copy := self._copies.get(restore.id)) is not None:
            copy.kill()

    def restore_at_rent(self, pod: Pod) -> None:
        """A pod rented with ``backup_log_id`` gets the backup once it runs."""
        if pod.restore_backup_id and pod.restore_path:
            backup = self._state.backups.get(pod.restore_backup_id)
            if backup is not None:
                with contextlib.suppress(BackupRefused):  # a new pod copies nothing else yet
                    self.start_restore(pod, backup, pod.restore_path)

    def backups_of(self, user_id: str, pod_id: str | None = None) -> Iterable[BackupLog]:
        """The workspace's backups (of one pod), newest first."""
        rows = [
            b
            for b in self._state.backups.values()
            if b.user_id == user_id and (pod_id is None or b.pod_id == pod_id)
        ]
        return sorted(rows, key=lambda b: b.created_at, reverse=True)
