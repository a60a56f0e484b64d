"""The zygote's preload covers what every fork does on its way to the handshake line.

A module first imported in a fork is imported again in every fork (10-60 ms each for ``grpc._server``,
which ``grpc.server()`` imports lazily), so a fork must find everything it needs already imported.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Runs in a fresh interpreter: the test process itself may have imported any of these already.
_PROBE = """
import json, sys
from tfbridge.serving import zygote
zygote._preload_bridge()
before = set(sys.modules)
from concurrent import futures
import grpc
server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
server.stop(None)
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def test_a_fork_imports_nothing_to_build_its_grpc_server() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _PROBE], cwd=REPO, capture_output=True, text=True, timeout=120, check=True
    )
    assert json.loads(result.stdout.splitlines()[-1]) == []
