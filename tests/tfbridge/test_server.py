"""The servicer called directly with protocol messages: state upgrades, plan rules and error handling."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.tfbridge.bridgetest_provider import BridgeTestProvider, Label, Thing
from tfbridge.proto import tfplugin6_pb2 as pb
from tfbridge.protocol import cty
from tfbridge.protocol.server import ProviderServer
from tfbridge.schema import schema_of

THING_TYPE = schema_of(Thing).type


@pytest.fixture
def server(tmp_path: Path) -> ProviderServer:
    srv = ProviderServer(BridgeTestProvider())
    config = {"store_dir": str(tmp_path), "token": None}
    provider_type = BridgeTestProvider.schema().type
    response = srv.ConfigureProvider(
        pb.ConfigureProvider.Request(
            config=pb.DynamicValue(msgpack=cty.encode_msgpack(config, provider_type))
        ),
        None,  # type: ignore[arg-type]
    )
    assert not response.diagnostics
    return srv


def thing(**values: Any) -> dict[str, Any]:
    base: dict[str, Any] = {name: None for name in Thing.model_fields}
    base.update(values)
    return base


def dv(value: object) -> pb.DynamicValue:
    return pb.DynamicValue(msgpack=cty.encode_msgpack(value, THING_TYPE))


def plan_thing(server: ProviderServer, prior: object, proposed: object, config: object) -> Any:
    """The server's answer to planning a ``bridgetest_thing`` from ``prior`` to ``proposed``."""
    return server.PlanResourceChange(
        pb.PlanResourceChange.Request(
            type_name="bridgetest_thing",
            prior_state=dv(prior),
            proposed_new_state=dv(proposed),
            config=dv(config),
        ),
        None,  # type: ignore[arg-type]
    )


def test_schema_response_declares_capabilities_and_write_only(server: ProviderServer) -> None:
    response = server.GetProviderSchema(pb.GetProviderSchema.Request(), None)  # type: ignore[arg-type]
    assert response.server_capabilities.get_provider_schema_optional
    assert response.server_capabilities.plan_destroy
    block = response.resource_schemas["bridgetest_thing"].block
    attrs = {a.name: a for a in block.attributes}
    assert attrs["secret_wo"].write_only and attrs["secret_wo"].sensitive
    assert attrs["id"].computed and not attrs["id"].optional
    assert json.loads(attrs["tags"].type) == ["map", "string"]
    assert [b.type_name for b in block.block_types] == ["timeouts"]
    assert response.resource_schemas["bridgetest_thing"].version == 1


def test_upgrade_from_version_0_renames_and_normalizes(server: ProviderServer) -> None:
    old = {"id": "a1", "label": "old-name", "size": 2, "retired_attribute": True, "secret_wo": "x"}
    response = server.UpgradeResourceState(
        pb.UpgradeResourceState.Request(
            type_name="bridgetest_thing", version=0, raw_state=pb.RawState(json=json.dumps(old).encode())
        ),
        None,  # type: ignore[arg-type]
    )
    assert not response.diagnostics
    upgraded = cty.decode_msgpack(response.upgraded_state.msgpack, THING_TYPE)
    assert upgraded["name"] == "old-name" and upgraded["size"] == 2 and upgraded["id"] == "a1"
    assert "retired_attribute" not in upgraded and upgraded["secret_wo"] is None


def test_upgrade_from_a_newer_version_is_a_clear_error(server: ProviderServer) -> None:
    response = server.UpgradeResourceState(
        pb.UpgradeResourceState.Request(
            type_name="bridgetest_thing", version=9, raw_state=pb.RawState(json=b"{}")
        ),
        None,  # type: ignore[arg-type]
    )
    assert response.diagnostics[0].severity == pb.Diagnostic.ERROR
    assert "newer than this provider" in response.diagnostics[0].summary


def test_plan_create_marks_computed_unknown_applies_defaults_and_nulls_write_only(
    server: ProviderServer,
) -> None:
    config = thing(name="n", secret_wo="hidden-value")
    response = plan_thing(server, None, config, config)
    assert not response.diagnostics
    planned = cty.decode_msgpack(response.planned_state.msgpack, THING_TYPE)
    assert cty.is_unknown(planned["id"]) and cty.is_unknown(planned["revision"])
    assert planned["size"] == 1 and planned["secret_wo"] is None and planned["name"] == "n"


def test_plan_update_keeps_use_state_values_and_flags_replacement(server: ProviderServer) -> None:
    prior = thing(id="a", name="n", size=1, revision=3, created_at="t0", secret_length=4)
    proposed = dict(prior, size=2)
    config = thing(name="n", size=2)
    response = plan_thing(server, prior, proposed, config)
    planned = cty.decode_msgpack(response.planned_state.msgpack, THING_TYPE)
    assert planned["id"] == "a" and planned["created_at"] == "t0"
    assert cty.is_unknown(planned["revision"])
    assert [[s.attribute_name for s in p.steps] for p in response.requires_replace] == [["size"]]


def test_plan_without_changes_keeps_every_computed_value(server: ProviderServer) -> None:
    prior = thing(id="a", name="n", size=1, revision=3, created_at="t0")
    config = thing(name="n")
    response = plan_thing(server, prior, prior, config)
    assert cty.decode_msgpack(response.planned_state.msgpack, THING_TYPE) == prior
    assert not response.requires_replace


def test_unknown_resource_type_is_a_diagnostic_not_a_crash(server: ProviderServer) -> None:
    response = server.ReadResource(
        pb.ReadResource.Request(type_name="bridgetest_nope", current_state=dv(thing())),
        None,  # type: ignore[arg-type]
    )
    assert "unknown resource type" in response.diagnostics[0].summary


def test_validation_skips_unknown_values(server: ProviderServer) -> None:
    config = thing(name=cty.UNKNOWN, size=cty.UNKNOWN)
    response = server.ValidateResourceConfig(
        pb.ValidateResourceConfig.Request(type_name="bridgetest_thing", config=dv(config)),
        None,  # type: ignore[arg-type]
    )
    assert list(response.diagnostics) == []
    bad = server.ValidateResourceConfig(
        pb.ValidateResourceConfig.Request(type_name="bridgetest_thing", config=dv(thing(name="x", size=0))),
        None,  # type: ignore[arg-type]
    )
    assert [[s.attribute_name for s in d.attribute.steps] for d in bad.diagnostics] == [["size"]]


LABEL_TYPE = schema_of(Label).type


def label_dv(**values: Any) -> pb.DynamicValue:
    value: dict[str, Any] = {name: None for name in Label.model_fields}
    value.update(values)
    return pb.DynamicValue(msgpack=cty.encode_msgpack(value, LABEL_TYPE))


def plan_label(server: ProviderServer, **config: Any) -> dict[str, Any]:
    response = server.PlanResourceChange(
        pb.PlanResourceChange.Request(
            type_name="bridgetest_label",
            prior_state=pb.DynamicValue(msgpack=cty.encode_msgpack(None, LABEL_TYPE)),
            proposed_new_state=label_dv(**config),
            config=label_dv(**config),
        ),
        None,  # type: ignore[arg-type]
    )
    assert not response.diagnostics, response.diagnostics
    planned: dict[str, Any] = cty.decode_msgpack(response.planned_state.msgpack, LABEL_TYPE)
    return planned


def test_a_typed_modify_plan_is_encoded_back_with_its_unknowns(server: ProviderServer) -> None:
    planned = plan_label(server, name="a", copies=3)
    assert planned["label"] == "a-a-a" and cty.is_unknown(planned["id"])
    defaulted = plan_label(server, name="b")
    assert defaulted["copies"] == 1 and defaulted["label"] == "b", "copies read its default in the model"
    unknown = plan_label(server, name=cty.UNKNOWN)
    assert cty.is_unknown(unknown["name"]) and cty.is_unknown(unknown["label"])


def test_a_typed_validate_config_skips_unknowns_and_names_the_attribute(server: ProviderServer) -> None:
    def validate(**config: Any) -> list[Any]:
        response = server.ValidateResourceConfig(
            pb.ValidateResourceConfig.Request(type_name="bridgetest_label", config=label_dv(**config)),
            None,  # type: ignore[arg-type]
        )
        return list(response.diagnostics)

    assert validate(name="x" * 40, copies=cty.UNKNOWN) == []
    (too_long,) = validate(name="x" * 40, copies=2)
    assert too_long.summary == "The label is too long"
    assert [s.attribute_name for s in too_long.attribute.steps] == ["copies"]


def test_rpcs_not_offered_answer_with_one_error_each(server: ProviderServer) -> None:
    moved = server.MoveResourceState(pb.MoveResourceState.Request(), None)  # type: ignore[arg-type]
    assert [d.summary for d in moved.diagnostics] == ["moving state between resource types is not supported"]
    ephemeral = server.OpenEphemeralResource(
        pb.OpenEphemeralResource.Request(type_name="bridgetest_key"),
        None,  # type: ignore[arg-type]
    )
    assert [d.summary for d in ephemeral.diagnostics] == ["unknown ephemeral resource bridgetest_key"]
