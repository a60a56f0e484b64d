"""A cluster's private overlay network: the members of one cluster share a network that lives in a
network namespace of its own, made by the emulator for that cluster, never on the host's interfaces."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OverlayMember:
    """One pod's place on its cluster's overlay: ``network`` names the cluster (one namespace each),
    ``address`` is the pod's overlay IPv4 address (``10.42.0.<rank + 1>``; addresses repeat across
    clusters, as on Lium)."""

    network: str
    address: str
