"""Pods' output (PID 1's stdout and stderr, sshd's log) into bounded files on the host.

A pod's processes never hold a host file: they write into a pipe, and one thread of the emulator
copies every pipe into its log file, keeping at most :data:`MAX_LOG_BYTES` (the newest output; the
older half goes when the file grows past it). A file descriptor is all a process can take from another
(``pidfd_getfd``), and a pipe's end cannot be ``fallocate``d or grown past what this thread keeps, so a
pod that prints for ever, or steals PID 1's descriptors, cannot fill the host's disk.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import threading
from pathlib import Path
from typing import BinaryIO

MAX_LOG_BYTES = 16 << 20
_READ_BYTES = 1 << 16


class ConsoleLogs:
    """The copying thread and its selector, alive while there are pipes to drain (no descriptor or
    thread is left between pods)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._selector: selectors.BaseSelector | None = None
        self._wake = (-1, -1)

    def pipe_to(self, path: Path) -> int:
        """A new pipe whose output is appended to ``path``: returns its write end, for the child's
        stdout/stderr (the caller closes its copy once the child has it)."""
        read_end, write_end = os.pipe()
        os.set_blocking(read_end, False)
        log = open(path, "ab")  # noqa: SIM115 - kept open until the pipe's writers are all gone
        with self._lock:
            if self._selector is None:  # the first pipe since the thread last ended: start one
                self._selector = selectors.DefaultSelector()
                self._wake = os.pipe()
                os.set_blocking(self._wake[0], False)
                self._selector.register(self._wake[0], selectors.EVENT_READ, None)
                threading.Thread(
                    target=self._copy, args=(self._selector,), name="console-logs", daemon=True
                ).start()
            self._selector.register(read_end, selectors.EVENT_READ, log)
            os.write(self._wake[1], b"x")  # the thread selects again, with the new pipe
        return write_end

    def _copy(self, selector: selectors.BaseSelector) -> None:
        """Until no pipe is left: then the thread ends and closes its selector."""
        while True:
            with self._lock:
                if len(selector.get_map()) == 1:  # only the wake-up pipe
                    selector.close()
                    for fd in self._wake:
                        os.close(fd)
                    self._selector, self._wake = None, (-1, -1)
                    return
                wake = self._wake[0]
            for key, _ in selector.select():
                if key.data is None:
                    with contextlib.suppress(BlockingIOError):
                        os.read(wake, _READ_BYTES)
                    continue
                self._drain(selector, key.fd, key.data)

    def _drain(self, selector: selectors.BaseSelector, fd: int, log: BinaryIO) -> None:
        try:
            data = os.read(fd, _READ_BYTES)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # every writer has exited
            with self._lock:
                selector.unregister(fd)
            os.close(fd)
            log.close()
            return
        log.write(data)
        log.flush()
        if log.tell() > MAX_LOG_BYTES:
            _keep_newest_half(log)


def _keep_newest_half(log: BinaryIO) -> None:
    """Cut the file to its newest ``MAX_LOG_BYTES / 2`` bytes, in place."""
    with open(log.name, "r+b") as whole:
        whole.seek(-(MAX_LOG_BYTES // 2), os.SEEK_END)
        newest = whole.read()
        whole.seek(0)
        whole.write(newest)
        whole.truncate()
    log.seek(0, os.SEEK_END)
