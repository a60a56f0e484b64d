"""Serves the bridge test provider to Terraform, as its launcher; heavy imports wait for the handshake."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def build_provider() -> Any:
    sys.path.insert(0, str(REPO))
    from tests.tfbridge.bridgetest_provider import BridgeTestProvider
    from tfbridge.server import ProviderServer

    return ProviderServer(BridgeTestProvider())


if __name__ == "__main__":
    from tfbridge.plugin import serve

    serve(build_provider)
