"""Serves tests/tfbridge/empty_provider.py through tfbridge.plugin, the way Terraform execs a provider
(also as a warm zygote, when run through tfbridge/serving/launch.py).

Usage: serve_empty_provider.py [--start-gate FIFO | --fail-start | --tfbridge-command echo ARGS...]
  --start-gate FIFO  the servicer factory blocks until a writer opens FIFO (RPCs must wait for it)
  --fail-start       the servicer factory raises (RPCs must report the failed start)
  --tfbridge-command echo ARGS...
                     the side command ``echo`` (see :func:`echo`) instead of serving
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tfbridge.plugin import main

if TYPE_CHECKING:
    from tfbridge.proto.tfplugin6_pb2_grpc import ProviderServicer


def preload() -> None:
    import tests.tfbridge.empty_provider  # noqa: F401


def build_provider() -> ProviderServicer:
    # Imported here, not at the top: the factory runs after the handshake line is out.
    from tests.tfbridge.empty_provider import EmptyProvider

    if sys.argv[1:2] == ["--start-gate"]:
        with open(sys.argv[2], "rb"):  # opening a FIFO for reading blocks until a writer opens it
            pass
    if sys.argv[1:] == ["--fail-start"]:
        raise RuntimeError("refusing to start, as asked")
    return EmptyProvider()


def echo(args: Sequence[str]) -> int:
    """A side command: prints its arguments and its pid on one line, then each line of its input in
    capitals, as it comes; exits with the first argument if it is a number."""
    print(" ".join(args), os.getpid(), flush=True)
    for line in sys.stdin:
        print(line.strip().upper(), flush=True)
    return int(args[0]) if args and args[0].isdigit() else 0


if __name__ == "__main__":
    # Terraform runs this file as a script from its own working directory: make ``tests`` importable.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    main(build_provider, preload=preload, commands={"echo": echo})
