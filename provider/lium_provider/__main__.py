"""``python -m lium_provider``: what Terraform executes (through the launcher ``lium-tf install`` writes)."""

from __future__ import annotations

from typing import Any


def _provider_server() -> Any:
    # Runs in the background after the handshake line is out: the heavy imports live here.
    from lium_provider.provider import LiumProvider
    from tfbridge.server import ProviderServer

    return ProviderServer(LiumProvider())


def main() -> None:
    from tfbridge.plugin import serve

    serve(_provider_server)


if __name__ == "__main__":
    main()
