"""Schemas declared as pydantic models.

A resource, data source or provider configuration is one pydantic model. Each field is an attribute,
annotated with :class:`Attribute` (required/optional/computed, sensitive, write-only, description, plan
rules) or, for a nested block such as ``timeouts``, :class:`Block`. From the model we derive:

* the Terraform schema (cty types come from the Python annotations),
* config validation (pydantic validators; errors become diagnostics with attribute paths),
* typed values for CRUD (:mod:`tfbridge.values` turns decoded values into model instances and back),
* the Markdown docs (:mod:`tfbridge.docs`).
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache, cached_property
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from tfbridge import cty
from tfbridge.diagnostics import AttributePath, Diagnostic


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()
"""No static default: the attribute stays null (or unknown, when computed) when config omits it."""


# ----------------------------------------------------------------------------------------------
# Plan rules, declared per attribute and applied at PlanResourceChange by :mod:`tfbridge.plan`.


@dataclass(frozen=True)
class RequiresReplace:
    """A change of this attribute destroys and re-creates the object (Terraform shows ``# forces replacement``)."""


@dataclass(frozen=True)
class RequiresReplaceIf:
    """Replacement only when ``predicate(prior_value, planned_value)`` says so (a conditional rule)."""

    predicate: Callable[[object, object], bool]
    description: str = ""


@dataclass(frozen=True)
class UseStateForUnknown:
    """Keep the prior value of a computed attribute in the plan instead of showing ``(known after apply)``."""


PlanRule = RequiresReplace | RequiresReplaceIf | UseStateForUnknown


@dataclass(frozen=True)
class Attribute:
    """Metadata of one schema attribute, given in the field's ``Annotated[...]``."""

    description: str = ""
    required: bool = False
    optional: bool = False
    computed: bool = False
    sensitive: bool = False
    write_only: bool = False
    deprecated: bool = False
    default: Any = MISSING
    plan: tuple[PlanRule, ...] = ()
    cty_type: cty.CtyType | None = None

    def __post_init__(self) -> None:
        if self.required == (self.optional or self.computed):
            if self.required:
                raise ValueError("an attribute is either required, or optional and/or computed")
            raise ValueError("an attribute must be required, optional or computed")
        if self.default is not MISSING and not (self.optional and self.computed):
            raise ValueError("an attribute with a default must be optional and computed")
        if self.write_only and self.computed:
            raise ValueError("a write-only attribute cannot be computed")


@dataclass(frozen=True)
class Block:
    """A nested block (``timeouts { ... }``): the field's type is a model, or a list of models."""

    description: str = ""
    min_items: int = 0
    max_items: int = 0


# ----------------------------------------------------------------------------------------------
# The schema tree derived from a model.


@dataclass(frozen=True)
class AttributeSchema:
    name: str
    type: cty.CtyType
    annotation: Any
    spec: Attribute

    @property
    def requires_replace(self) -> bool:
        return any(isinstance(rule, RequiresReplace) for rule in self.spec.plan)


@dataclass(frozen=True)
class NestedBlockSchema:
    name: str
    nesting: Literal["single", "list"]
    block: BlockSchema
    spec: Block


@dataclass(frozen=True)
class BlockSchema:
    model: type[BaseModel]
    attributes: Mapping[str, AttributeSchema]
    blocks: Mapping[str, NestedBlockSchema]
    description: str = ""

    @cached_property  # every request decodes values with it: build it once
    def type(self) -> cty.CtyType:
        """The cty object type Terraform uses for values of this block."""
        attrs: dict[str, cty.CtyType] = {name: a.type for name, a in self.attributes.items()}
        for name, nested in self.blocks.items():
            attrs[name] = nested.block.type if nested.nesting == "single" else cty.List(nested.block.type)
        return cty.Object(attrs)

    def walk_attributes(
        self, prefix: AttributePath = ()
    ) -> typing.Iterator[tuple[AttributePath, AttributeSchema]]:
        """Every attribute with its path; list blocks contribute their element attributes at index ``0``."""
        for name, attr in self.attributes.items():
            yield (*prefix, name), attr
        for name, nested in self.blocks.items():
            yield from nested.block.walk_attributes((*prefix, name))


@dataclass(frozen=True)
class Schema:
    """A versioned schema: the root block plus the version used by state upgrades."""

    block: BlockSchema
    version: int = 0

    @property
    def type(self) -> cty.CtyType:
        return self.block.type


def unwrap_optional(annotation: Any) -> Any:
    """The one type inside ``Annotated[...]`` and ``X | None`` (a field's Terraform type is X's)."""
    if get_origin(annotation) is typing.Annotated:
        annotation = get_args(annotation)[0]
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        members = [a for a in get_args(annotation) if a is not type(None)]
        if len(members) != 1:
            raise TypeError(
                f"unsupported union type {annotation!r}: use exactly one type, optionally with None"
            )
        return unwrap_optional(members[0])
    return annotation


def cty_type_of(annotation: Any) -> cty.CtyType:
    """The cty type Terraform uses for a Python annotation (``str | None`` → string, ``list[int]`` → list of number)."""
    annotation = unwrap_optional(annotation)
    if annotation is str:
        return cty.STRING
    if annotation is bool:
        return cty.BOOL
    if annotation in (int, float):
        return cty.NUMBER
    if annotation is Any or annotation is object:
        return cty.DYNAMIC
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is list:
        return cty.List(cty_type_of(args[0]))
    if origin in (set, frozenset):
        return cty.Set(cty_type_of(args[0]))
    if origin is dict:
        if args[0] is not str:
            raise TypeError("map keys must be str")
        return cty.Map(cty_type_of(args[1]))
    if origin is Literal:
        return cty_type_of(type(args[0]))
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return cty.Object({name: cty_type_of(f.annotation) for name, f in annotation.model_fields.items()})
    raise TypeError(f"no Terraform type for {annotation!r}")


@cache
def block_schema(model: type[BaseModel], description: str = "") -> BlockSchema:
    """Derive the block schema of a model (cached: models are immutable classes)."""
    attributes: dict[str, AttributeSchema] = {}
    blocks: dict[str, NestedBlockSchema] = {}
    for name, info in model.model_fields.items():
        specs = [m for m in info.metadata if isinstance(m, Attribute | Block)]
        if len(specs) != 1:
            raise TypeError(
                f"{model.__name__}.{name}: annotate with exactly one Attribute(...) or Block(...)"
            )
        spec = specs[0]
        if isinstance(spec, Block):
            inner = unwrap_optional(info.annotation)
            nesting: Literal["single", "list"] = "single"
            if get_origin(inner) is list:
                nesting, inner = "list", get_args(inner)[0]
            if not (isinstance(inner, type) and issubclass(inner, BaseModel)):
                raise TypeError(f"{model.__name__}.{name}: a Block must be a model or a list of models")
            blocks[name] = NestedBlockSchema(name, nesting, block_schema(inner, spec.description), spec)
        else:
            ctype = spec.cty_type or cty_type_of(info.annotation)
            attributes[name] = AttributeSchema(name, ctype, info.annotation, spec)
    return BlockSchema(model, attributes, blocks, description or (model.__doc__ or "").strip())


def schema_of(model: type[BaseModel], *, version: int = 0, description: str = "") -> Schema:
    return Schema(block_schema(model, description), version)


# ----------------------------------------------------------------------------------------------
# Validation: pydantic checks on the configuration; unknown values are skipped.


def _known_only(value: object, path: AttributePath, unknown_paths: set[AttributePath]) -> object:
    if cty.is_unknown(value):
        unknown_paths.add(path)
        return None
    if isinstance(value, dict):
        return {k: _known_only(v, (*path, k), unknown_paths) for k, v in value.items()}
    if isinstance(value, list):
        return [_known_only(v, (*path, i), unknown_paths) for i, v in enumerate(value)]
    return value


def _message(error: Mapping[str, Any]) -> str:
    msg = str(error.get("msg", "invalid value"))
    for prefix in ("Value error, ", "Assertion failed, "):
        msg = msg.removeprefix(prefix)
    return msg


def validate(model: type[BaseModel], config: Mapping[str, object]) -> list[Diagnostic]:
    """Validate a configuration value against the model; one diagnostic per problem, with its path."""
    unknown_paths: set[AttributePath] = set()
    known = _known_only(dict(config), (), unknown_paths)
    if not isinstance(known, dict):  # pragma: no cover - config is always an object
        return []
    try:
        model.model_validate(known)
    except ValidationError as exc:
        diagnostics: list[Diagnostic] = []
        for error in exc.errors():
            path = tuple(p for p in error["loc"] if isinstance(p, str | int))
            if any(path[: len(u)] == u for u in unknown_paths) or (not path and unknown_paths):
                continue  # the value is not known yet: Terraform validates again once it is
            where = ".".join(str(p) for p in path) or model.__name__
            diagnostics.append(Diagnostic.error(f"Invalid value for {where}", _message(error), path or None))
        return diagnostics
    return []


__all__ = [
    "MISSING",
    "Attribute",
    "AttributeSchema",
    "Block",
    "BlockSchema",
    "NestedBlockSchema",
    "PlanRule",
    "RequiresReplace",
    "RequiresReplaceIf",
    "Schema",
    "UseStateForUnknown",
    "block_schema",
    "cty_type_of",
    "schema_of",
    "unwrap_optional",
    "validate",
]
