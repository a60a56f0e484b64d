"""Serves the bridge test provider to Terraform, as its launcher; heavy imports wait for the handshake.

Run through ``tfbridge/serving/launch.py`` like the Lium provider, so it gets the same warm zygote.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def preload() -> None:
    sys.path.insert(0, str(REPO))
    import tests.tfbridge.bridgetest_provider  # noqa: F401
    import tfbridge.protocol.server  # noqa: F401


def build_provider() -> Any:
    preload()
    from tests.tfbridge.bridgetest_provider import BridgeTestProvider
    from tfbridge.protocol.server import ProviderServer

    return ProviderServer(BridgeTestProvider())


if __name__ == "__main__":
    from tfbridge.plugin import main

    main(build_provider, preload=preload)
