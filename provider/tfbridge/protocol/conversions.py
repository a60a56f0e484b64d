"""Conversions between tfplugin6 messages and tfbridge's types, both ways.

Values travel as ``DynamicValue`` (msgpack, or JSON in older states) of the schema's cty type; schemas,
diagnostics and attribute paths have messages of their own. Nothing here decides anything: the server
(:mod:`tfbridge.protocol.server`) calls these on its way in and out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tfbridge.diagnostics import AttributePath, Diagnostic, Severity
from tfbridge.logs import REDACTOR
from tfbridge.proto import tfplugin6_pb2 as pb
from tfbridge.protocol import cty
from tfbridge.schema import BlockSchema, Schema


def path_pb(path: AttributePath, root: cty.CtyType | None) -> pb.AttributePath:
    """Protocol path steps; walking the type tells a map key (``element_key_string``) from an attribute."""
    steps = []
    current = root
    for step in path:
        if isinstance(step, int):
            steps.append(pb.AttributePath.Step(element_key_int=step))
        elif isinstance(current, cty.MapType):
            steps.append(pb.AttributePath.Step(element_key_string=step))
        else:
            steps.append(pb.AttributePath.Step(attribute_name=step))
        current = _step_type(current, step)
    return pb.AttributePath(steps=steps)


def _step_type(t: cty.CtyType | None, step: str | int) -> cty.CtyType | None:
    if isinstance(t, cty.ObjectType) and isinstance(step, str):
        return t.attrs.get(step)
    if isinstance(t, cty.ListType | cty.SetType | cty.MapType):
        return t.element
    return None


def diagnostics_pb(diagnostics: list[Diagnostic], root: cty.CtyType | None = None) -> list[pb.Diagnostic]:
    result = []
    for d in diagnostics:
        message = pb.Diagnostic(
            severity=pb.Diagnostic.ERROR if d.severity is Severity.ERROR else pb.Diagnostic.WARNING,
            summary=REDACTOR.redact(d.summary),
            detail=REDACTOR.redact(d.detail),
        )
        if d.path:
            message.attribute.CopyFrom(path_pb(d.path, root))
        result.append(message)
    return result


def _block_pb(block: BlockSchema) -> pb.Schema.Block:
    message = pb.Schema.Block(description=block.description, description_kind=pb.MARKDOWN)
    for attr in block.attributes.values():
        spec = attr.spec
        message.attributes.append(
            pb.Schema.Attribute(
                name=attr.name,
                type=cty.type_to_json(attr.type),
                description=spec.description,
                description_kind=pb.MARKDOWN,
                required=spec.required,
                optional=spec.optional,
                computed=spec.computed,
                sensitive=spec.sensitive,
                deprecated=spec.deprecated,
                write_only=spec.write_only,
            )
        )
    for nested in block.blocks.values():
        message.block_types.append(
            pb.Schema.NestedBlock(
                type_name=nested.name,
                block=_block_pb(nested.block),
                nesting=pb.Schema.NestedBlock.SINGLE
                if nested.nesting == "single"
                else pb.Schema.NestedBlock.LIST,
                min_items=nested.spec.min_items,
                max_items=nested.spec.max_items if nested.nesting == "list" else 0,
            )
        )
    return message


def schema_pb(schema: Schema) -> pb.Schema:
    return pb.Schema(version=schema.version, block=_block_pb(schema.block))


def decode(value: pb.DynamicValue, t: cty.CtyType) -> Any:
    if value.msgpack:
        return cty.decode_msgpack(value.msgpack, t)
    if value.json:
        return cty.decode_json(value.json, t)
    return None


def encode(value: object, t: cty.CtyType) -> pb.DynamicValue:
    return pb.DynamicValue(msgpack=cty.encode_msgpack(value, t))


def normalize(block: BlockSchema, value: Mapping[str, Any]) -> dict[str, Any]:
    """An object with exactly the block's attributes: missing ones null, unknown names dropped, write-only null."""
    result: dict[str, Any] = {}
    for name, attr in block.attributes.items():
        result[name] = None if attr.spec.write_only else value.get(name)
    for name, nested in block.blocks.items():
        inner = value.get(name)
        if nested.nesting == "list":
            result[name] = [normalize(nested.block, v) for v in inner or [] if isinstance(v, Mapping)]
        else:
            result[name] = normalize(nested.block, inner) if isinstance(inner, Mapping) else None
    return result
