"""Typed values: Terraform's decoded objects as model instances, and model instances back as objects.

Terraform hands a provider objects whose attributes may be null (``None``) or unknown
(:data:`tfbridge.protocol.cty.UNKNOWN`: known only after apply). A model cannot hold an unknown, so building one
reads an attribute that is, or holds, an unknown as ``None``; :class:`ConfigView` (and
:class:`tfbridge.plan.PlanChange`) answer which attributes those are. A null attribute with a Terraform
default (``Attribute(default=...)``) reads as that default, so a defaulted attribute is never ``None``
in a model, whichever request built it: configuration, plan, state, data source or provider.

Models are built without validation (``model_construct``): the configuration was validated at
``Validate*Config``, and state read back from Terraform (after an import, say) may legitimately lack
required values.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache
from typing import Any, Generic, NamedTuple, TypeVar, get_args, get_origin

from pydantic import BaseModel

from tfbridge.protocol import cty
from tfbridge.schema import MISSING, Attribute, block_schema, unwrap_optional

M = TypeVar("M", bound=BaseModel)

Converter = Callable[[object], object]
"""Turns one decoded Terraform value into the Python value of a field; :data:`cty.UNKNOWN` if not known."""


def _converter(annotation: Any) -> Converter:
    """How a decoded Terraform value becomes the Python value of a field of this annotation.

    Built once per model field (the typing introspection is the costly part), then applied to every
    request's values. ``None`` stays ``None``; a value that is unknown, or a collection with an unknown
    element, becomes :data:`cty.UNKNOWN` (a half-known list is no list of the field's type); values of
    an unexpected shape pass unchanged. Unknowns inside a nested model read as ``None`` there.
    """
    annotation = unwrap_optional(annotation)
    origin, args = get_origin(annotation), get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        model = annotation

        def to_nested_model(value: object) -> object:
            return to_model(model, value) if isinstance(value, dict) else value

        return to_nested_model
    if origin is list or origin in (set, frozenset):
        element, collection = _converter(args[0]), origin

        def to_collection(value: object) -> object:
            if not isinstance(value, list):
                return value
            items = [element(v) for v in value]
            return cty.UNKNOWN if any(i is cty.UNKNOWN for i in items) else collection(items)

        return to_collection
    if origin is dict:
        item = _converter(args[1])

        def to_dict(value: object) -> object:
            if not isinstance(value, dict):
                return value
            items = {k: item(v) for k, v in value.items()}
            return cty.UNKNOWN if any(v is cty.UNKNOWN for v in items.values()) else items

        return to_dict
    if annotation is float:

        def to_float(value: object) -> object:
            return float(value) if isinstance(value, int) and not isinstance(value, bool) else value

        return to_float

    def unchanged(value: object) -> object:
        return value

    return unchanged


class _Field(NamedTuple):
    name: str
    convert: Converter
    default: object
    """The Terraform default, read when the value is null; None when the attribute has none."""


def _terraform_default(metadata: list[Any]) -> object:
    specs = [m for m in metadata if isinstance(m, Attribute)]
    return specs[0].default if specs and specs[0].default is not MISSING else None


@cache
def _fields(model: type[BaseModel]) -> tuple[_Field, ...]:
    return tuple(
        _Field(name, _converter(info.annotation), _terraform_default(info.metadata))
        for name, info in model.model_fields.items()
    )


def to_model(model: type[M], value: Mapping[str, object]) -> M:
    """Build a model from a decoded Terraform object: defaults applied, unknowns read as ``None``."""
    data: dict[str, Any] = {}
    for name, convert, default in _fields(model):
        raw = value.get(name)
        # Converting a list, set or map default builds a fresh one: no model shares the schema's.
        converted = convert(default if raw is None else raw)
        data[name] = None if converted is cty.UNKNOWN else converted
    return model.model_construct(**data)


def terraform_value(t: cty.CtyType, value: object) -> object:
    """The Terraform value of a model field's Python value (sets become sorted lists, models objects)."""
    if value is None or cty.is_unknown(value):
        return value
    if isinstance(value, BaseModel):
        return from_model(value)
    if isinstance(t, cty.ListType | cty.SetType) and isinstance(value, list | set | frozenset | tuple):
        items = [terraform_value(t.element, v) for v in value]
        if isinstance(value, set | frozenset):
            items.sort(key=repr)
        return items
    if isinstance(t, cty.MapType) and isinstance(value, dict):
        return {k: terraform_value(t.element, v) for k, v in value.items()}
    return value


def from_model(instance: BaseModel) -> dict[str, object]:
    """The Terraform object value of a model instance (every attribute present, nulls included)."""
    block = block_schema(type(instance))
    result: dict[str, object] = {}
    for name, attr in block.attributes.items():
        result[name] = terraform_value(attr.type, getattr(instance, name, None))
    for name, nested in block.blocks.items():
        value = getattr(instance, name, None)
        if nested.nesting == "list":
            result[name] = [from_model(v) for v in value or []]
        else:
            result[name] = from_model(value) if value is not None else None
    return result


def check_attribute(model: type[BaseModel], attribute: str) -> None:
    """Raise :class:`KeyError` naming the model when ``attribute`` is none of its fields (a typo)."""
    if attribute not in model.model_fields:
        raise KeyError(f"{model.__name__} has no attribute {attribute!r}")


class ConfigView(Generic[M]):
    """A configuration as a typed model, and which of its attributes are not known yet.

    What ``validate_config`` receives. :attr:`model` has Terraform defaults applied and reads unknown
    values as ``None``; ask :meth:`is_unknown` before treating a ``None`` as "not set", and
    :meth:`is_null` whether the configuration leaves an attribute out (the model may still hold its
    default).
    """

    __slots__ = ("_model", "_type", "_value")

    def __init__(self, model: type[M], value: Mapping[str, object]) -> None:
        self._type = model
        self._value = value
        self._model: M | None = None

    @property
    def model(self) -> M:
        """The configuration as a model, built on first use (most resources never ask)."""
        if self._model is None:
            self._model = to_model(self._type, self._value)
        return self._model

    def is_unknown(self, attribute: str) -> bool:
        """Whether the attribute's value is, or holds, a value Terraform knows only after apply."""
        check_attribute(self._type, attribute)
        return cty.contains_unknown(self._value.get(attribute))

    def is_null(self, attribute: str) -> bool:
        """Whether the configuration leaves the attribute null (unset): not a value, not unknown."""
        check_attribute(self._type, attribute)
        return self._value.get(attribute) is None


__all__ = ["ConfigView", "check_attribute", "from_model", "terraform_value", "to_model"]
