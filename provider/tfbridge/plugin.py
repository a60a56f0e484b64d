"""The provider program's entry point: serve one Terraform start, or run as the warm zygote.

A provider's ``__main__`` calls :func:`main`. Terraform's starts go through the launcher
(:mod:`tfbridge.serving.launch`), which either hands the start to a zygote or execs the provider program, which
then serves it itself (:func:`tfbridge.serving.handshake.serve`); the launcher also starts the zygote, as this
program with :data:`~tfbridge.serving.constants.ZYGOTE_FLAG` (:mod:`tfbridge.serving.zygote`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, NoReturn

from tfbridge.serving.constants import COMMAND_FLAG, ZYGOTE_FLAG
from tfbridge.serving.handshake import serve

if TYPE_CHECKING:
    from tfbridge.proto import tfplugin6_pb2_grpc
    from tfbridge.serving.commands import Command


def main(
    servicer_factory: Callable[[], tfplugin6_pb2_grpc.ProviderServicer],
    *,
    preload: Callable[[], None],
    commands: Mapping[str, Command] | None = None,
) -> NoReturn:
    """The provider program Terraform runs: serve once, or (``--tfbridge-zygote SOCKET IDLE``, how
    :mod:`tfbridge.serving.launch` starts it) run the warm zygote of :mod:`tfbridge.serving.zygote`, or
    (``--tfbridge-command NAME ARGS...``) run one of ``commands`` (:mod:`tfbridge.serving.commands`).

    ``preload`` imports what ``servicer_factory`` and the commands need; the zygote watches every source
    file imported by then for changes.
    """
    commands = commands or {}
    if sys.argv[1:2] == [ZYGOTE_FLAG]:
        # Imported only here: a cold start, on its way to the handshake line, must not pay for it.
        from tfbridge.serving.zygote import run_zygote

        run_zygote(sys.argv[2:], servicer_factory, preload=preload, commands=commands)
    if sys.argv[1:2] == [COMMAND_FLAG]:
        from tfbridge.serving.commands import run_command
        from tfbridge.serving.hosts import TerraformParent, launcher_of_this_process

        host = launcher_of_this_process() or TerraformParent()
        exit_code = run_command(commands, sys.argv[2:], host)
        host.exited(exit_code)
        sys.exit(exit_code)
    serve(servicer_factory)
