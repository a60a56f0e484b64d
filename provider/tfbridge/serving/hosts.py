"""Who stands for Terraform to a serving process, and how the process learns that it is gone.

Terraform starts the provider executable and watches that process; the server may be another process:

* :class:`TerraformParent`: the server is the process Terraform started (no launcher in between, as when
  a provider is run by hand or by another plugin host); Terraform is gone when the parent changes;
* :class:`LauncherLink`: the server was forked by the zygote (:mod:`tfbridge.serving.zygote`) or
  started cold by the launcher (:mod:`tfbridge.serving.launch`), in a session of its own, and the
  launcher is the process Terraform knows. The launcher tells the server when Terraform dies (``O``);
  if the launcher itself dies (SIGKILLed, alone or with its whole process group), its end of the socket
  closes. Either way the server abandons every operation, and in-flight creates undo what they made
  before it exits (:func:`tfbridge.serving.handshake.serve`): the server outlives its launcher only for
  that.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from typing import Protocol

from tfbridge.serving.constants import EXITED, LAUNCHER_FD_ENV, ORPHANED

PARENT_POLL_SECONDS = 1.0


class Host(Protocol):
    """The process Terraform started and watches: how the server learns it is gone, and tells it the end."""

    def wait_gone(self) -> None:
        """Block until Terraform (or whatever stands in for it) can no longer receive answers."""

    def exited(self, exit_code: int) -> None:
        """Called just before the serving process exits with ``exit_code``."""


class TerraformParent:
    """The usual host: Terraform is this process's parent, and is gone when the parent changes."""

    def __init__(self) -> None:
        self._pid = os.getppid()

    def wait_gone(self) -> None:
        while os.getppid() == self._pid:
            time.sleep(PARENT_POLL_SECONDS)

    def exited(self, exit_code: int) -> None:
        pass


class LauncherLink:
    """The host of a server the launcher stands for (forked by the zygote, or started cold): the
    launcher process Terraform started, at the end of a socket."""

    def __init__(self, connection: socket.socket) -> None:
        self._connection = connection

    def wait_gone(self) -> None:
        """Returns when the launcher says Terraform died (:data:`~tfbridge.serving.constants.ORPHANED`), or when
        the launcher itself is gone (its socket closed).

        To Terraform the launcher is the provider process: if it was killed, this process must not
        go on serving (or finish a create) as if it had not been; it gets the same bounded time to undo
        in-flight work as after Terraform's death, then exits (:func:`tfbridge.serving.handshake.serve`).
        """
        while True:
            try:
                data = self._connection.recv(64)
            except OSError:
                data = b""
            if not data or ORPHANED.encode() in data:
                return

    def exited(self, exit_code: int) -> None:
        with contextlib.suppress(OSError):
            self._connection.sendall(message(EXITED, exit_code))


def message(letter: str, number: int | None = None) -> bytes:
    """A message to the launcher (:mod:`tfbridge.serving.launch`): its letter, maybe a number, a newline."""
    return f"{letter}{'' if number is None else number}\n".encode()


def launcher_of_this_process() -> LauncherLink | None:
    """The link to the launcher that started this process cold (its socket's descriptor is in
    ``TFBRIDGE_LAUNCHER_FD``, which is removed from the environment), or None."""
    fd = os.environ.pop(LAUNCHER_FD_ENV, "")
    if not fd.isdigit():
        return None
    with contextlib.suppress(OSError):
        connection = socket.socket(fileno=int(fd))
        os.set_inheritable(connection.fileno(), False)  # nothing this process starts may hold it open
        return LauncherLink(connection)
    return None
