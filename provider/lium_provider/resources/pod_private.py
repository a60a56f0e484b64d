"""What a ``lium_pod`` keeps in its private state (never shown): its rented offer's facts, its import.

The pod's state and Lium's pod rows carry its GPU count, price and region but not its RAM, disk, VRAM
or tier; these are what the offer-filter rules need when a filter changes on a running pod. They are
recorded at create from the offer rented, and at import from the executor's offer in the feed, if listed.
``imported`` marks a state that ``terraform import`` made and no apply has written yet: its first plan
takes in place what the import could not know (:mod:`lium_provider.resources.pod_import`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:
    from lium_provider.domain.offers import Offer


class PodPrivate(BaseModel):
    """The pod's private record; every field None (not known) for an older pod. Other keys (what
    :mod:`lium_provider.resources.ownership` notes in every resource's record) are kept as they are."""

    model_config = ConfigDict(extra="allow")

    gpu_model: str | None = None
    gpu_memory_gib: float | None = None
    memory_gib: float | None = None
    disk_gb: float | None = None
    spot: bool | None = None
    imported: bool | None = None

    @classmethod
    def of(cls, offer: Offer) -> PodPrivate:
        """The facts of the ``offer`` a pod rents."""
        return cls(
            gpu_model=offer.gpu_model,
            gpu_memory_gib=offer.gpu_memory_gib,
            memory_gib=offer.memory_gib,
            disk_gb=offer.disk_gb,
            spot=offer.spot,
        )

    def to_private(self) -> bytes:
        return self.model_dump_json(exclude_none=True).encode()

    @classmethod
    def from_private(cls, private: bytes) -> PodPrivate:
        """The record in ``private``; empty (every fact unknown) for an older pod or an unreadable record."""
        try:
            return cls.model_validate_json(private) if private else cls()
        except ValueError:
            return cls()
