"""The offer filter: which Lium offers a pod may rent. Its fields, bounds, defaults and rules live here only.

:class:`OfferFilter` is a tfbridge schema model: ``lium_pod`` (:class:`~lium_provider.resources.pod.PodModel`)
and ``lium_offers`` (:class:`~lium_provider.resources.data_sources.OffersModel`) inherit its fields, the
plan summary builds one from a plan's values, and the constructs generator emits it as the typed
``OfferFilter`` that ``GpuStack`` takes. One declaration serves the resource and the data source:

* ``gpu`` is optional *and* computed: a pod records the GPU it rented when the configuration names
  none; a data source simply leaves it null.
* ``gpu_count``'s default (1) is Terraform's (``Attribute(default=...)``): tfbridge applies it to every
  value from Terraform, :meth:`OfferFilter.with_defaults` to a filter built in Python.
* Plan rules only mean something on a managed resource, so none is declared here: ``lium_pod``'s
  schema adds them (``gpu_count`` forces replacement, ``gpu`` keeps its state when unknown), and the pod
  re-rents for the other fields only when it no longer satisfies them (:meth:`OfferFilter.unmet_by`).

The rules compare a filter with the *facts* of a rental (:class:`RentalFacts`): an :class:`Offer
<lium_provider.domain.offers.Offer>` of the feed, or what a running pod is (:class:`PodFacts`). A fact that
is not known (None) never fails a rule. gpuhunt (~100 ms to import) is loaded only by the GPU-name rule.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Protocol, Self

from pydantic import BaseModel, ConfigDict, Field

from tfbridge import Attribute
from tfbridge.values import to_model

# gpuhunt makes one offer per rentable count, so this bound also stops a hostile feed's gpu_count loop.
MAX_GPUS_PER_NODE = 64
GPU_MEMORY_TOLERANCE = 0.05  # gpuhunt corrects reported VRAM to the datasheet (H200: 140 -> 141 GiB)
_MEMORY_IN_NAME = re.compile(r"(\d+)\s*GB", re.IGNORECASE)
# NVIDIA's consumer families, which gpuhunt glues to the model number (``RTX4090``).
_FAMILY_THEN_NUMBER = re.compile(r"^(RTX|GTX)(?=\d)")
_NOT_BLANK = r"\S"


class RentalFacts(Protocol):
    """What a rental is: an offer of the feed, or a running pod. None where it is not known."""

    @property
    def gpu(self) -> str | None: ...
    @property
    def gpu_memory_gib(self) -> float | None: ...
    @property
    def gpu_count(self) -> int | None: ...
    @property
    def price_per_hour(self) -> float | None: ...
    @property
    def region(self) -> str | None: ...
    @property
    def memory_gib(self) -> float | None: ...
    @property
    def disk_gb(self) -> float | None: ...
    @property
    def spot(self) -> bool | None: ...


@dataclass(frozen=True)
class PodFacts:
    """The facts of a running pod (see ``lium_pod``'s ``modify_plan`` for where each comes from)."""

    gpu: str | None = None
    gpu_memory_gib: float | None = None
    gpu_count: int | None = None
    price_per_hour: float | None = None
    region: str | None = None
    memory_gib: float | None = None
    disk_gb: float | None = None
    spot: bool | None = None


class OfferFilter(BaseModel):
    """Which offer to rent: the cheapest one that satisfies every field set. Unset fields match everything."""

    model_config = ConfigDict(extra="forbid")

    gpu: Annotated[
        str | None,
        Attribute(
            optional=True,
            computed=True,
            description='GPU model, e.g. `"RTX 4090"`, `"H100"`, `"A100 80GB"`: compared whole after '
            "gpuhunt's normalisation (`RTX 3090` = `NVIDIA GeForce RTX 3090`; `A10` is not `A100`); a "
            "memory size also requires that much VRAM per GPU (±5 %). Once rented, the GPU the pod (each "
            "node of a cluster) has.",
        ),
    ] = Field(default=None, pattern=_NOT_BLANK)
    gpu_count: Annotated[
        int | None,
        Attribute(optional=True, computed=True, default=1, description="GPUs per pod."),
    ] = Field(default=None, ge=1, le=MAX_GPUS_PER_NODE)
    max_price_per_hour: Annotated[
        float | None,
        Attribute(
            optional=True, description="Most USD per hour for the whole pod (for each node of a cluster)."
        ),
    ] = Field(default=None, gt=0)
    regions: Annotated[
        list[str] | None,
        Attribute(
            optional=True, description="Regions (`us-ca`) or whole countries (`us`), case-insensitive."
        ),
    ] = None
    min_memory_gib: Annotated[
        float | None,
        Attribute(optional=True, description="Least RAM for the pod (each node of a cluster), GiB."),
    ] = Field(default=None, ge=0)
    min_disk_gb: Annotated[
        float | None,
        Attribute(
            optional=True,
            description="Least container disk (each node's, for a cluster), GB. No default floor.",
        ),
    ] = Field(default=None, ge=0)
    spot: Annotated[
        bool | None, Attribute(optional=True, description="`true` spot only, `false` secure only.")
    ] = None

    @classmethod
    def fields(cls) -> tuple[str, ...]:
        """The filter's attribute names, in declaration order."""
        return tuple(OfferFilter.model_fields)

    @classmethod
    def search_fields(cls) -> tuple[str, ...]:
        """The fields that choose *which* offer; ``gpu_count`` is the order's size, also given with an executor."""
        return tuple(name for name in cls.fields() if name != "gpu_count")

    @classmethod
    def of(cls, values: Mapping[str, Any], *, validate: bool = True) -> OfferFilter:
        """The filter in ``values`` (a Terraform object or any mapping).

        Validated (ValueError if invalid) unless ``validate=False``: recorded state is taken as it is.
        """
        picked = {name: values.get(name) for name in cls.fields()}
        return OfferFilter.model_validate(picked) if validate else OfferFilter.model_construct(**picked)

    def with_defaults(self) -> Self:
        """This filter with Terraform's defaults (``gpu_count = 1``) in place of unset fields.

        Values from Terraform have them already (tfbridge applies them); a filter built in Python may not.
        """
        return to_model(type(self), dict(self))

    def unmet_by(self, facts: RentalFacts) -> list[str]:
        """The fields whose rule ``facts`` break, in declaration order; empty when the rental qualifies.

        One rule per field: the GPU by :func:`same_gpu`; exactly ``gpu_count`` GPUs; a price at most
        ``max_price_per_hour``; a region by :func:`region_matches`; at least ``min_memory_gib`` RAM and
        ``min_disk_gb`` disk; the ``spot`` tier. A fact that is None is not known and breaks nothing.
        """
        count = (self if self.gpu_count is not None else self.with_defaults()).gpu_count
        broken = {
            "gpu": self.gpu is not None
            and facts.gpu is not None
            and not same_gpu(self.gpu, facts.gpu, facts.gpu_memory_gib),
            "gpu_count": facts.gpu_count is not None and facts.gpu_count != count,
            "max_price_per_hour": _above(facts.price_per_hour, self.max_price_per_hour),
            "regions": self.regions is not None
            and facts.region is not None
            and not region_matches(facts.region, self.regions),
            "min_memory_gib": _above(self.min_memory_gib, facts.memory_gib),
            "min_disk_gb": _above(self.min_disk_gb, facts.disk_gb),
            "spot": self.spot is not None and facts.spot is not None and facts.spot != self.spot,
        }
        return [name for name in self.fields() if broken[name]]

    def describe(self) -> str:
        """A sentence saying what is searched for, for "no offer matched" errors."""
        flt = self.with_defaults()
        count = flt.gpu_count
        gpu = f"{flt.gpu!r} " if flt.gpu else ""
        parts = [f"{count} {gpu}GPU{'s' if count != 1 else ''} per pod"]
        if flt.max_price_per_hour is not None:
            parts.append(f"at most ${flt.max_price_per_hour:g}/h")
        if flt.regions is not None:
            parts.append(f"in {', '.join(flt.regions) if flt.regions else 'no region'}")
        if flt.min_memory_gib is not None:
            parts.append(f"with at least {flt.min_memory_gib:g} GiB RAM")
        if flt.min_disk_gb is not None:
            parts.append(f"with at least {flt.min_disk_gb:g} GB disk")
        if flt.spot is not None:
            parts.append("spot only" if flt.spot else "secure (non-spot) only")
        return ", ".join(parts)


def _above(value: float | None, bound: float | None) -> bool:
    """True when both are known and ``value`` exceeds ``bound`` (the price, memory and disk rules)."""
    return value is not None and bound is not None and value > bound


def normalise_gpu_name(name: str) -> str:
    """The comparison key of a GPU name: gpuhunt's canonical spelling, upper-cased."""
    from gpuhunt.providers.lium import get_dstack_gpu_name  # public; gpuhunt loads only when compared

    return str(get_dstack_gpu_name(name.strip().upper())).upper()


def same_gpu(wanted: str, gpu: str, gpu_memory_gib: float | None = None) -> bool:
    """True when GPU ``gpu`` (any spelling) is the ``wanted`` one, and has its memory size if it names one."""
    if normalise_gpu_name(gpu) != normalise_gpu_name(wanted):
        return False
    memory = _MEMORY_IN_NAME.search(wanted)
    if memory is None or gpu_memory_gib is None:
        return True
    gib = float(memory.group(1))
    return abs(gpu_memory_gib - gib) <= gib * GPU_MEMORY_TOLERANCE


def display_gpu_name(name: str) -> str:
    """A canonical GPU name as the docs write it: ``RTX4090`` → ``RTX 4090``
    (``A100``, ``H100``, ``L40S`` stay as they are); it matches as the canonical name does."""
    return _FAMILY_THEN_NUMBER.sub(r"\1 ", name)


def same_gpu_name(a: str, b: str) -> bool:
    """True when two names spell the same GPU: equal canonical names and the same memory size, if any."""
    sizes = [m.group(1) if (m := _MEMORY_IN_NAME.search(name)) else None for name in (a, b)]
    return sizes[0] == sizes[1] and normalise_gpu_name(a) == normalise_gpu_name(b)


def region_matches(region: str, wanted: list[str]) -> bool:
    """True when ``region`` (``us-ca``) is one of ``wanted`` or in one of its countries (``us``)."""
    region = region.strip().lower()
    country = region.split("-", 1)[0]
    return any(w.strip().lower() in (region, country) for w in wanted)
