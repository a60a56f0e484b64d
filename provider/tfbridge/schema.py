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

import annotated_types
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from tfbridge.diagnostics import AttributePath, Diagnostic
from tfbridge.protocol import cty


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


def _number(value: object) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


@dataclass(frozen=True)
class Bounds:
    """The limits a field declares with pydantic (``Field(ge=1, le=720)``, ``min_length``…), read from
    that one declaration so that docs and messages state them the same way."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    min_length: int | None = None
    max_length: int | None = None
    element: Bounds | None = None  # of each list or set item, or map value

    def range_text(self) -> str:
        """The value's range in words (``1 to 720``, ``at least 0``), or ``""``."""
        low = f"more than {_number(self.gt)}" if self.gt is not None else None
        high = f"less than {_number(self.lt)}" if self.lt is not None else None
        if self.ge is not None and self.le is not None:
            return f"{_number(self.ge)} to {_number(self.le)}"
        low = f"at least {_number(self.ge)}" if self.ge is not None else low
        high = f"at most {_number(self.le)}" if self.le is not None else high
        return " and ".join(part for part in (low, high) if part)

    def length_text(self, unit: str) -> str:
        """The length in words (``1 to 63 characters``), or ``""``."""
        low, high = self.min_length, self.max_length
        if low is not None and high is not None:
            return f"{low} to {high} {unit}"
        if low is not None:
            return f"at least {low} {unit if low != 1 else unit.removesuffix('s')}"
        return f"at most {high} {unit}" if high is not None else ""

    def sentence(self, t: cty.CtyType) -> str:
        """What the docs say of these bounds for a value of type ``t`` (``Must be 1 to 720.``), or ``""``."""
        parts = []
        if isinstance(t, cty.ListType | cty.SetType | cty.MapType):
            if length := self.length_text("items"):
                parts.append(f"Must have {length}.")
            if self.element is not None and (inner := self.element.sentence(t.element)):
                parts.append(inner.replace("Must ", "Each item must ", 1))
        elif t == cty.STRING:
            if (self.min_length, self.max_length) == (1, None):
                parts.append("Must not be empty.")
            elif length := self.length_text("characters"):
                parts.append(f"Must be {length} long.")
        elif text := self.range_text():
            parts.append(f"Must be {text}.")
        return " ".join(parts)


# The annotated-types constraints pydantic records (``Field(ge=…)``, ``Interval``, ``Len``…: grouped ones
# are unpacked first), each the Bounds field (and the constraint's attribute) of the same name.
_BOUND_FIELDS: dict[type, str] = {
    annotated_types.Ge: "ge",
    annotated_types.Gt: "gt",
    annotated_types.Le: "le",
    annotated_types.Lt: "lt",
    annotated_types.MinLen: "min_length",
    annotated_types.MaxLen: "max_length",
}


def bounds_of(annotation: Any, metadata: typing.Iterable[object] = ()) -> Bounds:
    """The bounds declared on a field (its ``metadata``) and inside its annotation (``Annotated`` members,
    through ``X | None``); a collection's item bounds as ``element``. ``Bounds()`` when it declares none.
    A bound declared twice counts as pydantic enforces it: the last one declared."""
    found: dict[str, Any] = {}
    pending = list(metadata)
    while True:
        while pending:
            item = pending.pop(0)
            if isinstance(item, FieldInfo):
                pending.extend(item.metadata)
            elif isinstance(item, annotated_types.GroupedMetadata):
                pending.extend(item)
            elif (name := _BOUND_FIELDS.get(type(item))) is not None:
                found[name] = getattr(item, name)
        if get_origin(annotation) is typing.Annotated:
            annotation, *extra = get_args(annotation)
            pending = list(extra)
            continue
        if get_origin(annotation) in (Union, types.UnionType):
            members = [a for a in get_args(annotation) if a is not type(None)]
            if len(members) == 1:
                annotation = members[0]
                continue
        break
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (list, set, frozenset) and args:
        found["element"] = bounds_of(args[0])
    elif origin is dict and len(args) == 2:
        found["element"] = bounds_of(args[1])
    if found.get("element") == Bounds():
        del found["element"]
    return Bounds(**found)


@dataclass(frozen=True)
class AttributeSchema:
    name: str
    type: cty.CtyType
    annotation: Any
    spec: Attribute
    bounds: Bounds = Bounds()

    def documentation(self) -> str:
        """The description with the declared bounds in words, as docs and constructs show it."""
        limits = self.bounds.sentence(self.type)
        return " ".join(part for part in (self.spec.description.strip(), limits) if part)

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
            bounds = bounds_of(info.annotation, info.metadata)
            attributes[name] = AttributeSchema(name, ctype, info.annotation, spec, bounds)
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


# pydantic's error types for a declared bound: said in the declaration's own words instead.
_RANGE_ERRORS = frozenset({"greater_than", "greater_than_equal", "less_than", "less_than_equal"})
_LENGTH_ERRORS = frozenset({"string_too_short", "string_too_long", "too_short", "too_long"})
# pydantic's error types for a number of the wrong kind, and what the field wants instead.
_NUMBER_KIND_ERRORS = {"int_from_float": "a whole number", "finite_number": "a finite number"}


def _message(model: type[BaseModel], error: Mapping[str, Any]) -> str:
    """The problem in the words the docs use: a broken bound as the field declares it ("Must be 1 to
    720 (got 900)."), a validator's own message, else pydantic's."""
    loc, kind = error.get("loc", ()), error.get("type", "")
    field = model.model_fields.get(loc[0]) if len(loc) == 1 and isinstance(loc[0], str) else None
    if field is not None and kind in _RANGE_ERRORS | _LENGTH_ERRORS:
        bounds = bounds_of(field.annotation, field.metadata)
        given = error.get("input")
        if kind in _RANGE_ERRORS and (text := bounds.range_text()):
            return f"Must be {text} (got {given!r})."
        unit = "characters" if isinstance(given, str) else "items"
        if kind in _LENGTH_ERRORS and (text := bounds.length_text(unit)):
            verb, tail = ("Must be", " long") if unit == "characters" else ("Must have", "")
            size = len(given) if isinstance(given, str | list | dict | set | tuple) else "?"
            return f"{verb} {text}{tail} (got {size})."
    if kind in _NUMBER_KIND_ERRORS:
        within = bounds_of(field.annotation, field.metadata).range_text() if field is not None else ""
        within = f", {within}" if within else ""
        return f"Must be {_NUMBER_KIND_ERRORS[kind]}{within} (got {error.get('input')!r})."
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
            diagnostics.append(
                Diagnostic.error(f"Invalid value for {where}", _message(model, error), path or None)
            )
        return diagnostics
    return []


__all__ = [
    "MISSING",
    "Attribute",
    "AttributeSchema",
    "Block",
    "BlockSchema",
    "Bounds",
    "NestedBlockSchema",
    "PlanRule",
    "RequiresReplace",
    "RequiresReplaceIf",
    "Schema",
    "UseStateForUnknown",
    "block_schema",
    "bounds_of",
    "cty_type_of",
    "schema_of",
    "unwrap_optional",
    "validate",
]
