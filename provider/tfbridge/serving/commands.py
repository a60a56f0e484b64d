"""A provider program's side commands: work that needs the provider's code, run warm from its zygote.

A program may declare commands besides serving Terraform (:func:`tfbridge.plugin.main`). Started as
``<provider executable> --tfbridge-command NAME ARGS...``, it goes through the launcher like any start:
the zygote forks, and the child runs the command with the starter's standard streams, environment and
working directory, its imports already made; without a zygote the program runs it cold. The launcher
stands for the child as for a server: its exit code is the command's, and the command stops when the
process that started the launcher dies, or the launcher does (:class:`~tfbridge.serving.hosts.Host`).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Mapping, Sequence

from tfbridge.serving.hosts import Host

Command = Callable[[Sequence[str]], int]
"""A side command: its arguments in, its exit code out. It reads and writes the standard streams."""

UNKNOWN_COMMAND_EXIT_CODE = 2


def run_command(commands: Mapping[str, Command], args: Sequence[str], host: Host) -> int:
    """Run the command ``args[0]`` with ``args[1:]``; the process exits at once if ``host`` goes first."""
    command = commands.get(args[0]) if args else None
    if command is None:
        sys.stderr.write(f"tfbridge: no command {args[0] if args else ''!r} in this provider\n")
        return UNKNOWN_COMMAND_EXIT_CODE
    threading.Thread(target=_exit_when_gone, args=(host,), name="tfbridge-command-host", daemon=True).start()
    return command(args[1:])


def _exit_when_gone(host: Host) -> None:
    # A command holds nothing that must be undone, unlike a server's in-flight creates.
    host.wait_gone()
    os._exit(1)
