"""Structured logs on stderr in the go-hclog JSON form, so Terraform shows them under ``TF_LOG``.

go-plugin reads each JSON line a plugin writes to stderr and re-logs it through Terraform's own logger
at the line's ``@level``; ``TF_LOG_PROVIDER`` filters them there. Any other stderr output is dropped
unless Terraform logs at debug, so nothing else should be printed. Every message and field passes
through :data:`REDACTOR`, which knows every secret value the provider has seen (sensitive and
write-only attributes register theirs as they are decoded).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
from datetime import UTC, datetime
from typing import TextIO

_LEVELS = {"trace": 0, "debug": 1, "info": 2, "warn": 3, "error": 4}
REDACTED = "<redacted>"


class Redactor:
    """Replaces every registered secret with ``<redacted>`` in any text that leaves the process."""

    _MIN_SECRET_LENGTH = 4  # shorter values would redact ordinary words and leak nothing useful

    def __init__(self) -> None:
        self._secrets: set[str] = set()
        self._lock = threading.Lock()

    def register(self, secret: str | None) -> None:
        if secret and len(secret) >= self._MIN_SECRET_LENGTH:
            with self._lock:
                self._secrets.add(secret)
                # A PEM key or a multi-line secret may be logged line by line.
                self._secrets.update(line for line in secret.splitlines() if len(line) >= 16)

    def redact(self, text: str) -> str:
        with self._lock:
            secrets = sorted(self._secrets, key=len, reverse=True)
        for secret in secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text


REDACTOR = Redactor()


def _configured_level() -> int:
    name = (os.environ.get("TF_LOG_PROVIDER") or os.environ.get("TF_LOG") or "info").lower()
    if name in ("1", "json"):
        name = "trace"
    return _LEVELS.get(name, _LEVELS["info"])


class Logger:
    """A tiny hclog-compatible logger: ``log.info("message", key=value, ...)``."""

    def __init__(self, module: str, stream: TextIO | None = None) -> None:
        self._module = module
        self._stream = stream
        self._level = _configured_level()
        self._lock = threading.Lock()

    def _emit(self, level: str, message: str, fields: dict[str, object]) -> None:
        if _LEVELS[level] < self._level:
            return
        record: dict[str, object] = {
            "@level": level,
            "@message": REDACTOR.redact(message),
            "@module": self._module,
            "@timestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        }
        for key, value in fields.items():
            record[key] = REDACTOR.redact(str(value)) if not isinstance(value, int | float | bool) else value
        line = json.dumps(record, separators=(",", ":"))
        stream = self._stream or sys.stderr
        with self._lock, contextlib.suppress(OSError, ValueError):
            # Terraform reads stderr: once it is gone (SIGKILLed), a write fails with EPIPE. A log line
            # that nobody can read must never stop what the line is about (an undo in progress).
            stream.write(line + "\n")
            stream.flush()

    def trace(self, message: str, **fields: object) -> None:
        self._emit("trace", message, fields)

    def debug(self, message: str, **fields: object) -> None:
        self._emit("debug", message, fields)

    def info(self, message: str, **fields: object) -> None:
        self._emit("info", message, fields)

    def warn(self, message: str, **fields: object) -> None:
        self._emit("warn", message, fields)

    def error(self, message: str, **fields: object) -> None:
        self._emit("error", message, fields)
