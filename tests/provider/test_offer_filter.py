"""The offer filter's rules (one per field), its single declaration, and the pod's re-rent decision."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lium_provider.domain.offer_filter import (
    MAX_GPUS_PER_NODE,
    OfferFilter,
    PodFacts,
    region_matches,
    same_gpu,
    same_gpu_name,
)
from lium_provider.resources.data_sources import OffersDataSource, OffersModel
from lium_provider.resources.pod import (
    FILTER_PLAN_RULES,
    PodModel,
    PodResource,
    pod_facts,
    refilter_replacements,
)
from lium_provider.resources.pod_private import PodPrivate
from tfbridge.schema import block_schema

POD_4090 = PodFacts(
    gpu="NVIDIA GeForce RTX 4090",
    gpu_memory_gib=24.0,
    gpu_count=1,
    price_per_hour=0.39,
    region="us-tx",
    memory_gib=62.0,
    disk_gb=680.0,
    spot=False,
)


def test_the_fields_are_declared_once_and_inherited() -> None:
    for model in (PodModel, OffersModel):
        for name in OfferFilter.fields():
            assert repr(model.model_fields[name]) == repr(OfferFilter.model_fields[name]), (
                model.__name__,
                name,
            )
            assert (
                block_schema(model).attributes[name].spec == block_schema(OfferFilter).attributes[name].spec
            )
    assert block_schema(PodModel).attributes["gpu_count"].spec.default == 1
    # Plan rules belong to the resource: the pod's schema adds them, the data source has none.
    pod, offers = PodResource.schema().block.attributes, OffersDataSource.schema().block.attributes
    for name in OfferFilter.fields():
        assert pod[name].spec.plan == FILTER_PLAN_RULES.get(name, ()), name
        assert offers[name].spec.plan == (), name
    assert OfferFilter().with_defaults().gpu_count == 1
    assert OfferFilter(gpu_count=3).with_defaults().gpu_count == 3
    assert OfferFilter.search_fields() == (
        "gpu",
        "max_price_per_hour",
        "regions",
        "min_memory_gib",
        "min_disk_gb",
        "spot",
    )


@pytest.mark.parametrize(
    ("values", "attribute"),
    [
        ({"gpu_count": 0}, "gpu_count"),
        ({"gpu_count": MAX_GPUS_PER_NODE + 1}, "gpu_count"),
        ({"max_price_per_hour": 0}, "max_price_per_hour"),
        ({"min_memory_gib": -1}, "min_memory_gib"),
        ({"min_disk_gb": -0.5}, "min_disk_gb"),
        ({"gpu": "  "}, "gpu"),
    ],
)
def test_bounds_reject_bad_values_naming_the_attribute(values: dict[str, object], attribute: str) -> None:
    with pytest.raises(ValueError, match=attribute):
        OfferFilter.of(values)


def test_each_rule_names_the_field_it_breaks() -> None:
    assert OfferFilter().unmet_by(POD_4090) == []
    assert OfferFilter(gpu="rtx4090", max_price_per_hour=0.39, regions=["US"]).unmet_by(POD_4090) == []
    cases = {
        "gpu": OfferFilter(gpu="RTX 3090"),
        "gpu_count": OfferFilter(gpu_count=2),
        "max_price_per_hour": OfferFilter(max_price_per_hour=0.38),
        "regions": OfferFilter(regions=["ca", "us-ca"]),
        "min_memory_gib": OfferFilter(min_memory_gib=62.5),
        "min_disk_gb": OfferFilter(min_disk_gb=681),
        "spot": OfferFilter(spot=True),
    }
    for name, flt in cases.items():
        assert flt.unmet_by(POD_4090) == [name]
    everything = OfferFilter(
        gpu="H100", gpu_count=8, max_price_per_hour=0.1, regions=["de"], min_memory_gib=1e6, spot=True
    )
    assert everything.unmet_by(POD_4090) == [
        "gpu",
        "gpu_count",
        "max_price_per_hour",
        "regions",
        "min_memory_gib",
        "spot",
    ]


def test_unknown_facts_break_nothing() -> None:
    strict = OfferFilter(
        gpu="H100", max_price_per_hour=0.1, regions=["de"], min_memory_gib=1e6, min_disk_gb=1e6, spot=True
    )
    assert strict.unmet_by(PodFacts(gpu_count=1)) == []
    assert OfferFilter(gpu_count=2).unmet_by(PodFacts()) == []


def test_gpu_names_compare_whole_after_normalisation() -> None:
    assert same_gpu("RTX 3090", "NVIDIA GeForce RTX 3090")
    assert same_gpu("rtx3090", "RTX3090")
    assert same_gpu("A100", "A100-SXM4-80GB", 80.0)
    assert same_gpu("A100 80GB", "A100-SXM4-80GB", 80.0)
    assert not same_gpu("A100 40GB", "A100-SXM4-80GB", 80.0)
    assert same_gpu("H200 140GB", "H200", 141.0), "within 5 %: gpuhunt corrects VRAM to the datasheet"
    assert not same_gpu("A10", "A100")
    assert same_gpu_name("RTX 3090", "NVIDIA GeForce RTX 3090")
    assert same_gpu_name("A100 80GB", "A100-SXM4-80GB")
    assert not same_gpu_name("A100", "A100-SXM4-80GB"), "a memory size is part of the name's meaning"
    assert not same_gpu_name("RTX 3090", "RTX 4090")


def test_regions_match_exactly_or_by_whole_country_case_insensitively() -> None:
    assert region_matches("us-ca", ["US"])
    assert region_matches("us-ca", [" us-CA "])
    assert region_matches("de", ["de"])
    assert not region_matches("us-ca", ["u", "us-c", "usa"])
    assert not region_matches("us-ca", [])


@settings(derandomize=True, max_examples=300)
@given(
    price=st.floats(0.01, 10, allow_nan=False),
    bound=st.floats(0.01, 10, allow_nan=False),
    memory=st.floats(0, 4096, allow_nan=False),
    floor=st.floats(0, 4096, allow_nan=False),
)
def test_bounds_hold_exactly_at_the_limit(price: float, bound: float, memory: float, floor: float) -> None:
    facts = PodFacts(price_per_hour=price, memory_gib=memory, disk_gb=memory)
    assert ("max_price_per_hour" in OfferFilter(max_price_per_hour=bound).unmet_by(facts)) == (price > bound)
    assert ("min_memory_gib" in OfferFilter(min_memory_gib=floor).unmet_by(facts)) == (memory < floor)
    assert ("min_disk_gb" in OfferFilter(min_disk_gb=floor).unmet_by(facts)) == (memory < floor)


_filters = st.builds(
    OfferFilter,
    gpu=st.sampled_from([None, "RTX 4090", "rtx4090", "RTX 3090"]),
    gpu_count=st.sampled_from([None, 1, 2]),
    max_price_per_hour=st.sampled_from([None, 0.3, 0.39, 0.8]),
    regions=st.sampled_from([None, ["us"], ["ca"], ["us-tx", "de"]]),
    min_memory_gib=st.sampled_from([None, 0.0, 62.0, 100.0]),
    min_disk_gb=st.sampled_from([None, 10.0, 1000.0]),
    spot=st.sampled_from([None, True, False]),
)


@settings(derandomize=True, max_examples=300)
@given(wanted=_filters, prior=_filters)
def test_a_pod_is_re_rented_only_for_changed_fields_it_no_longer_satisfies(
    wanted: OfferFilter, prior: OfferFilter
) -> None:
    replace = refilter_replacements(wanted, prior, POD_4090)
    for name in replace:
        assert getattr(wanted, name) != getattr(prior, name)
        assert name in wanted.unmet_by(POD_4090)
    changed_and_unmet = [n for n in wanted.unmet_by(POD_4090) if getattr(wanted, n) != getattr(prior, n)]
    assert replace == changed_and_unmet
    assert refilter_replacements(wanted, wanted, POD_4090) == []


def test_pod_facts_come_from_state_and_the_rented_offer() -> None:
    rented = PodPrivate(gpu_model="RTX 4090", gpu_memory_gib=24.0, memory_gib=62.0, disk_gb=680.0, spot=False)
    private = rented.to_private()
    state = PodModel.model_construct(gpu="RTX 4090", gpu_count=1, price_per_hour=0.39, region="us-tx")
    facts = pod_facts(state, PodPrivate.from_private(private))
    assert facts == dataclasses.replace(POD_4090, gpu="RTX 4090")
    # An imported pod (no private state) or an unreadable one: only what its state says is known.
    for private in (b"", b"not json", b'{"memory_gib": "lots"}'):
        assert pod_facts(state, PodPrivate.from_private(private)).memory_gib is None
