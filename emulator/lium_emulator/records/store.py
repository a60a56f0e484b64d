"""Durable storage for ``--state-dir``: one SQLite table of JSON documents keyed by (kind, id).

The emulator keeps its working state in memory; every change is also written here when a state
directory is given, so a restarted emulator reloads accounts, templates, pods and the rest. Without
a state directory nothing is written (``Store(None)``).
"""

import json
import os
import sqlite3
from pathlib import Path
from typing import Any


class Store:
    """Write-through document store; a no-op when ``path`` is None."""

    def __init__(self, path: Path | None) -> None:
        self._db: sqlite3.Connection | None = None
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        # Only the emulator's user reads it (notebook URLs carry their tokens); SQLite gives its WAL and
        # shared-memory files the database file's mode.
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
        os.chmod(path, 0o600)
        # Used from the event loop thread and, at shutdown, from the main thread; never concurrently.
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS documents ("
            " kind TEXT NOT NULL, id TEXT NOT NULL, doc TEXT NOT NULL, PRIMARY KEY (kind, id))"
        )

    @property
    def durable(self) -> bool:
        """Whether writes survive a restart."""
        return self._db is not None

    def put(self, kind: str, doc_id: str, doc: dict[str, Any]) -> None:
        """Insert one document, or replace it in place (its position in ``load`` order is kept)."""
        if self._db is not None:
            self._db.execute(
                "INSERT INTO documents (kind, id, doc) VALUES (?, ?, ?)"
                " ON CONFLICT (kind, id) DO UPDATE SET doc = excluded.doc",
                (kind, doc_id, json.dumps(doc, separators=(",", ":"))),
            )

    def delete(self, kind: str, doc_id: str) -> None:
        """Remove one document (absent is fine)."""
        if self._db is not None:
            self._db.execute("DELETE FROM documents WHERE kind = ? AND id = ?", (kind, doc_id))

    def load(self, kind: str) -> list[dict[str, Any]]:
        """Every stored document of ``kind``, in insertion order."""
        if self._db is None:
            return []
        rows = self._db.execute("SELECT doc FROM documents WHERE kind = ? ORDER BY rowid", (kind,))
        return [json.loads(doc) for (doc,) in rows]

    def close(self) -> None:
        """Close the database."""
        if self._db is not None:
            self._db.close()
            self._db = None
