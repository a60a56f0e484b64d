"""A backup or restore an emulator left unfinished when it stopped is failed by the next start: nothing
waits for it, and its partial copy is removed from the store."""

from pathlib import Path
from typing import cast

from lium_emulator.catalogs.nodes import Catalog
from lium_emulator.records.backups import BackupLog, RestoreLog
from lium_emulator.records.state import EmulatorState
from lium_emulator.records.store import Store
from lium_emulator.records.timeutil import utcnow
from lium_emulator.sandbox.manager import SandboxManager
from lium_emulator.services.backups import Backups


def test_copies_cut_short_by_a_stop_are_failed_at_the_next_start(tmp_path: Path) -> None:
    state = EmulatorState(Store(tmp_path / "state.sqlite3"), Catalog.load(None))
    now = utcnow()
    cut = BackupLog(
        id="b1",
        user_id="u",
        pod_id="p",
        backup_config_id=None,
        backup_path="/root",
        created_at=now,
        status="IN_PROGRESS",
    )
    done = BackupLog(
        id="b2",
        user_id="u",
        pod_id="p",
        backup_config_id=None,
        backup_path="/root",
        created_at=now,
        status="COMPLETED",
        total_bytes=3,
    )
    restoring = RestoreLog(
        id="r1", user_id="u", pod_id="p", backup_id="b2", restore_path="/x", created_at=now
    )
    for record in (cut, done, restoring):
        getattr(state, "restores" if isinstance(record, RestoreLog) else "backups")[record.id] = record
        state.save(record)
    store = tmp_path / "backups"
    store.mkdir()
    (store / "b1.tar").write_bytes(b"partial")
    (store / "b2.tar").write_bytes(b"whole")

    backups = Backups(state, cast(SandboxManager, None), store, 3600.0, 1024)
    backups.recover()

    reloaded = EmulatorState(Store(tmp_path / "state.sqlite3"), Catalog.load(None))
    assert reloaded.backups["b1"].status == "FAILED" and "stopped" in str(
        reloaded.backups["b1"].error_message
    )
    assert reloaded.restores["r1"].status == "FAILED"
    assert reloaded.backups["b2"].status == "COMPLETED", "a finished backup is kept as it was"
    assert not (store / "b1.tar").exists() and (store / "b2.tar").read_bytes() == b"whole"
