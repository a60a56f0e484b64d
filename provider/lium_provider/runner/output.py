"""What a job prints, on its way to a person: secret values redacted, line by line, each line named by
the node that printed it.

A runner's ``environment`` is sensitive (its values are often tokens), and a job can print it: its
smoke test's output is kept in the state, and ``lium-tf run`` and ``lium-tf logs`` show a job's output.
Every one of those passes through :func:`redacted` first, with the values of every runner's
environment (and a run's secrets), as the provider's own diagnostics do (:mod:`tfbridge.logs`).
Redaction works on whole lines, so a value is never split between two pieces of output.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

from tfbridge.logs import Redactor

MAX_LINE_BYTES = 65536


def redactor(secrets: Iterable[str]) -> Redactor:
    """A redactor of ``secrets`` (values too short to be secrets are left alone, as everywhere)."""
    found = Redactor()
    for secret in secrets:
        found.register(secret)
    return found


def redacted(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every value of ``secrets`` replaced by ``<redacted>``."""
    return redactor(secrets).redact(text)


class LineWriter:
    """Turns one node's pieces of output into whole lines, redacted and prefixed, written with ``write``
    (shared by every node: a lock keeps lines whole)."""

    def __init__(
        self, prefix: str, secrets: Redactor, write: Callable[[str], None], lock: threading.Lock
    ) -> None:
        self._prefix = prefix
        self._secrets = secrets
        self._write = write
        self._lock = lock
        self._pending = b""

    def feed(self, piece: bytes) -> None:
        lines = (self._pending + piece).replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        self._pending = lines.pop()
        if len(self._pending) > MAX_LINE_BYTES:  # a line that never ends is shown in parts
            lines.append(self._pending)
            self._pending = b""
        self._emit(lines)

    def close(self) -> None:
        """Write what is left of a last line that had no line break."""
        if self._pending:
            self._emit([self._pending])
            self._pending = b""

    def _emit(self, lines: list[bytes]) -> None:
        if not lines:
            return
        text = "".join(
            f"{self._prefix}{self._secrets.redact(line.decode('utf-8', 'replace'))}\n" for line in lines
        )
        with self._lock:
            self._write(text)
