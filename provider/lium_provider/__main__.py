"""``python -m lium_provider``: what Terraform executes (through the launcher ``lium-tf install`` writes).

``python -m lium_provider --tfbridge-zygote SOCKET IDLE`` runs the warm zygote the launcher starts
(see :mod:`tfbridge.serving.zygote`); ``--tfbridge-command plan-summary`` the summary of ``lium-tf
gitops plan`` (:mod:`lium_provider.plan_summary.warm_summary`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def _provider_server() -> Any:
    # Runs in the background after the handshake line is out: the heavy imports live here.
    from lium_provider.provider import LiumProvider
    from tfbridge.protocol.server import ProviderServer

    return ProviderServer(LiumProvider())


def _preload() -> None:
    """What the zygote imports once so that its forks answer at once: the imports of _provider_server,
    and what is imported only when first used, which every fork would otherwise import again
    (gpuhunt ~90 ms, for a pod's offers; paramiko ~120 ms, for SSH; httpcore, which httpx imports
    when the provider's API client is made at configure, ~15 ms), and the TLS settings every API
    client shares (the CA bundle, ~40 ms). A server made here derives every schema from its model
    once (cached per process, and each fork's server would otherwise derive them again)."""
    import httpcore  # noqa: F401
    import paramiko  # noqa: F401

    import lium_provider.domain.offers
    import lium_provider.plan_summary.summary  # noqa: F401
    from lium_provider.api.transport import tls_context

    tls_context()
    _provider_server()


def _plan_summary(args: Sequence[str]) -> int:
    from lium_provider.plan_summary.warm_summary import command

    return command(args)


def main() -> None:
    from lium_provider import PLAN_SUMMARY_COMMAND
    from tfbridge.plugin import main as provider_main

    provider_main(
        _provider_server,
        preload=_preload,
        commands={PLAN_SUMMARY_COMMAND: _plan_summary},
    )


if __name__ == "__main__":
    main()
