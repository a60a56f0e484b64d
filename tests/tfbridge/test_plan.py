"""The plan engine and the typed views resources get: defaults applied, unknowns read as None and queried."""

from __future__ import annotations

from typing import Any

import pytest

from tests.tfbridge.bridgetest_provider import Label, Thing
from tfbridge.plan import plan_change
from tfbridge.protocol import cty
from tfbridge.schema import block_schema
from tfbridge.timeouts import Timeouts
from tfbridge.values import ConfigView, from_model, to_model

THING = block_schema(Thing)
LABEL = block_schema(Label)


def thing(**values: Any) -> dict[str, Any]:
    base: dict[str, Any] = {name: None for name in Thing.model_fields}
    base.update(values)
    return base


def label(**values: Any) -> dict[str, Any]:
    base: dict[str, Any] = {name: None for name in Label.model_fields}
    base.update(values)
    return base


def test_a_model_reads_the_terraform_default_for_a_null_attribute() -> None:
    assert to_model(Thing, thing(name="n")).size == 1
    assert to_model(Thing, thing(name="n", size=7)).size == 7
    assert to_model(Thing, {"id": "only-the-id"}).size == 1, "state after an import lacks the attribute"
    assert to_model(Thing, thing(name="n", size=cty.UNKNOWN)).size is None, "unknown is not null"


def test_a_value_holding_an_unknown_reads_as_none_not_as_a_half_known_value() -> None:
    model = to_model(Thing, thing(name="n", ports=[22, cty.UNKNOWN], tags={"a": cty.UNKNOWN}))
    assert model.ports is None and model.tags is None
    known = to_model(Thing, thing(name="n", ports=[22, 80], tags={"a": "b"}))
    assert known.ports == [22, 80] and known.tags == {"a": "b"}


def test_a_config_view_answers_unknown_and_null_beside_the_model() -> None:
    view = ConfigView(Thing, thing(name=cty.UNKNOWN, ports=[1, cty.UNKNOWN], zone="eu"))
    assert view.model.name is None and view.is_unknown("name") and not view.is_null("name")
    assert view.is_unknown("ports") and view.model.ports is None
    assert view.is_null("size") and view.model.size == 1, "null in the configuration, default in the model"
    assert not view.is_unknown("zone") and view.model.zone == "eu"
    with pytest.raises(KeyError, match="Thing has no attribute 'nmae'"):
        view.is_unknown("nmae")


def test_create_typed_change_sees_defaults_and_can_query_unknowns() -> None:
    config = label(name="solo")
    change = plan_change(LABEL, config, None, config)
    assert change.creating and change.prior is None
    assert change.config.copies == 1 and change.planned.copies == 1, "the default, in both models"
    assert change.is_unknown("id") and change.planned.id is None, "computed: known after apply"
    assert change.is_unknown("label") and not change.is_unknown("name")
    assert not change.config_is_unknown("name") and change.config_is_null("copies")
    assert change.requires_replace == ()


def test_unknown_config_values_read_as_none_without_validation() -> None:
    # name has min_length=1: an unknown must not be checked as if it were a value.
    config = label(name=cty.UNKNOWN)
    change = plan_change(LABEL, config, None, config)
    assert change.config.name is None and change.config_is_unknown("name")
    assert change.planned.name is None and change.is_unknown("name")


def test_set_planned_and_set_unknown_keep_the_model_and_the_planned_value_in_step() -> None:
    config = label(name="a", copies=2)
    change = plan_change(LABEL, config, None, config)
    planned = change.planned
    change.set_planned("label", "a-a")
    assert planned.label == "a-a" and change.planned_value["label"] == "a-a"
    assert not change.is_unknown("label")
    change.set_unknown("copies")
    assert planned.copies is None and change.is_unknown("copies")
    assert change.planned_value["copies"] is cty.UNKNOWN
    with pytest.raises(KeyError, match="Label has no attribute 'lable'"):
        change.set_planned("lable", "x")


def test_set_planned_before_the_model_is_built_is_seen_by_it() -> None:
    config = thing(name="n")
    change = plan_change(THING, config, None, config)
    change.set_planned("tags", {"k": "v"})
    change.set_planned("timeouts", Timeouts(create="5m"))
    assert change.planned.tags == {"k": "v"}
    assert change.planned_value["timeouts"] == from_model(Timeouts(create="5m"))
    assert isinstance(change.planned.timeouts, Timeouts) and change.planned.timeouts.create == "5m"


def test_update_rules_then_typed_prior_and_require_replace() -> None:
    prior = thing(id="a", name="n", size=1, revision=3, created_at="t0", zone="eu")
    config = thing(name="m", zone="us")
    change = plan_change(THING, config, prior, dict(prior, name="m", zone="us"))
    assert change.prior is not None and change.prior.revision == 3 and not change.creating
    assert change.is_unknown("revision"), "changed: computed without a keep rule is known after apply"
    assert change.planned.created_at == "t0" and change.planned.id == "a", "use-state-for-unknown"
    assert change.requires_replace == (("zone",),), "a move between two real zones"
    change.require_replace("name")
    change.require_replace("name")
    assert change.requires_replace == (("zone",), ("name",))


def test_write_only_is_planned_null_and_a_default_fills_a_null_computed_attribute() -> None:
    config = thing(name="n", secret_wo="hidden")
    change = plan_change(THING, config, None, config)
    assert change.planned_value["secret_wo"] is None and change.planned.secret_wo is None
    assert change.config.secret_wo == "hidden", "write-only values are read from the configuration"
    assert change.planned_value["size"] == 1
