"""cty types and values as Terraform exchanges them with providers: msgpack and JSON, both ways.

Terraform sends and expects every value as a ``DynamicValue`` whose bytes are a cty encoding against a
type both sides already know (derived from the schema). This module follows go-cty's rules
(``cty/msgpack``, ``cty/json`` and the type JSON of ``cty/json.go``) so that what we send decodes in
Terraform exactly like its own encoder's output would.

Python representation of values:

* ``None`` is null and :data:`UNKNOWN` is an unknown value (known only after apply);
* ``str``, ``bool``, and ``int``/``float``/``decimal.Decimal`` for numbers;
* ``list`` for list, set and tuple values; ``dict`` for map and object values;
* :class:`TypedValue` pins the exact type of a value where the schema says ``dynamic``; a plain value
  there gets the type :func:`implied_type` infers (objects and tuples).

Decoded numbers are ``int`` when integral, ``float`` when a float has the same shortest decimal text
(which is how cty compares numbers), and ``Decimal`` otherwise, so nothing Terraform sends loses
precision. Errors are :class:`CtyError` with a path; their messages name types, never values, because
values may be secrets.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from itertools import repeat
from types import MappingProxyType
from typing import ClassVar, Final, Literal, Protocol

import msgpack

Path = tuple[str | int, ...]
"""Where in a value a problem is: attribute names and map keys (str), list/set/tuple indexes (int)."""

_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def format_path(path: Path) -> str:
    """A readable rendering of a path, like ``ports[0].name`` or ``labels["a b"]``."""
    parts: list[str] = []
    for step in path:
        if isinstance(step, int):
            parts.append(f"[{step}]")
        elif _IDENTIFIER.fullmatch(step):
            parts.append(f".{step}" if parts else step)
        else:
            parts.append(f"[{json.dumps(step, ensure_ascii=False)}]")
    return "".join(parts)


class CtyError(ValueError):
    """A value or type that does not fit its cty type or encoding; ``path`` says where."""

    def __init__(self, message: str, path: Path = ()) -> None:
        super().__init__(message)
        self.message = message
        self.path = path

    def prepend(self, step: str | int) -> None:
        """Re-root this error one level up; containers call it as the error passes through them."""
        self.path = (step, *self.path)

    def __str__(self) -> str:
        return f"{format_path(self.path)}: {self.message}" if self.path else self.message


# ----------------------------------------------------------------------------------------------
# Types.


class CtyType:
    """A cty type: immutable, hashable, compared by value; ``str()`` gives a readable name.

    Deliberately not an ``abc.ABC``: the codecs test a type's class on every value they walk, and an
    ``isinstance`` against an ABC-derived class goes through ``ABCMeta.__instancecheck__`` (several times
    slower); every concrete type overrides :meth:`to_json`.
    """

    __slots__ = ()

    def to_json(self) -> object:
        """The type in cty's JSON form, as plain Python data (``["list", "string"]``)."""
        raise NotImplementedError(type(self).__name__)

    def __repr__(self) -> str:
        return str(self)


@dataclass(frozen=True, slots=True, repr=False)
class PrimitiveType(CtyType):
    """``string``, ``number`` or ``bool``."""

    name: Literal["string", "number", "bool"]

    def to_json(self) -> object:
        return self.name

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True, repr=False)
class DynamicPseudoType(CtyType):
    """The ``dynamic`` placeholder: each value carries its own type on the wire."""

    def to_json(self) -> object:
        return "dynamic"

    def __str__(self) -> str:
        return "dynamic"


@dataclass(frozen=True, slots=True, repr=False)
class _CollectionType(CtyType):
    element: CtyType
    kind: ClassVar[str]

    def to_json(self) -> object:
        return [self.kind, self.element.to_json()]

    def __str__(self) -> str:
        return f"{self.kind}({self.element})"


@dataclass(frozen=True, slots=True, repr=False)
class ListType(_CollectionType):
    """An ordered sequence of values of one type."""

    kind = "list"


@dataclass(frozen=True, slots=True, repr=False)
class SetType(_CollectionType):
    """An unordered collection of distinct values of one type (a list in Python, kept in wire order)."""

    kind = "set"


@dataclass(frozen=True, slots=True, repr=False)
class MapType(_CollectionType):
    """String keys to values of one type."""

    kind = "map"


@dataclass(frozen=True, slots=True, repr=False)
class TupleType(CtyType):
    """A fixed-length sequence whose elements each have their own type."""

    elements: tuple[CtyType, ...]

    def to_json(self) -> object:
        return ["tuple", [e.to_json() for e in self.elements]]

    def __str__(self) -> str:
        return f"tuple([{', '.join(map(str, self.elements))}])"


class ObjectType(CtyType):
    """Named attributes, each with its own type; ``optional`` names attributes a type constraint may omit."""

    __slots__ = ("_attrs", "_hash", "_items", "_optional")

    _attrs: Mapping[str, CtyType]
    _items: tuple[tuple[str, CtyType], ...]
    _optional: frozenset[str]
    _hash: int

    def __init__(self, attrs: Mapping[str, CtyType], optional: Iterable[str] = ()) -> None:
        items = tuple(sorted(attrs.items()))  # cty orders attributes by name on the wire
        optional_names = frozenset(optional)
        strays = optional_names - attrs.keys()
        if strays:
            raise CtyError(f"optional attributes {sorted(strays)} are not attributes of the object type")
        object.__setattr__(self, "_items", items)
        object.__setattr__(self, "_attrs", MappingProxyType(dict(items)))
        object.__setattr__(self, "_optional", optional_names)
        object.__setattr__(self, "_hash", hash((items, optional_names)))

    @property
    def attrs(self) -> Mapping[str, CtyType]:
        """Attribute types by name, in name order."""
        return self._attrs

    @property
    def optional(self) -> frozenset[str]:
        return self._optional

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("cty types are immutable")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ObjectType):
            return NotImplemented
        return self._items == other._items and self._optional == other._optional

    def __hash__(self) -> int:
        return self._hash

    def to_json(self) -> object:
        attrs = {name: t.to_json() for name, t in self._items}
        if self._optional:
            return ["object", attrs, sorted(self._optional)]
        return ["object", attrs]

    def __str__(self) -> str:
        def attr(name: str, t: CtyType) -> str:
            return f"{name}=optional({t})" if name in self._optional else f"{name}={t}"

        return f"object({{{', '.join(attr(n, t) for n, t in self._items)}}})"


STRING: Final[CtyType] = PrimitiveType("string")
NUMBER: Final[CtyType] = PrimitiveType("number")
BOOL: Final[CtyType] = PrimitiveType("bool")
DYNAMIC: Final[CtyType] = DynamicPseudoType()


def List(elem: CtyType) -> CtyType:
    return ListType(elem)


def Set(elem: CtyType) -> CtyType:
    return SetType(elem)


def Map(elem: CtyType) -> CtyType:
    return MapType(elem)


def Object(attrs: Mapping[str, CtyType], optional: Iterable[str] = ()) -> CtyType:
    return ObjectType(attrs, optional)


def Tuple(elems: Sequence[CtyType]) -> CtyType:
    return TupleType(tuple(elems))


_PRIMITIVES: Final[Mapping[object, CtyType]] = {
    "string": STRING,
    "number": NUMBER,
    "bool": BOOL,
    "dynamic": DYNAMIC,
}


@lru_cache(maxsize=1024)
def type_to_json(t: CtyType) -> bytes:
    """The type's JSON bytes, as go-cty writes them (compact, attribute names sorted)."""
    return _dump_json(t.to_json()).encode()


def type_from_json(data: bytes | str | object) -> CtyType:
    """Parse a type from JSON text (bytes, or a str starting with ``"`` or ``[``) or its parsed form."""
    if isinstance(data, bytes | bytearray):
        return _type_from_text(bytes(data))
    if isinstance(data, str) and data.lstrip()[:1] in ('"', "["):
        return _type_from_text(data.encode())
    return _type_from_data(data)


@lru_cache(maxsize=1024)
def _type_from_text(text: bytes) -> CtyType:
    try:
        data = json.loads(text)
    except ValueError as err:
        raise CtyError(f"invalid type JSON: {err}") from err
    return _type_from_data(data)


def _type_from_data(data: object) -> CtyType:
    if isinstance(data, str):
        if data in _PRIMITIVES:
            return _PRIMITIVES[data]
        raise CtyError(f"invalid type name {data!r}")
    match data:
        case ["list", element]:
            return ListType(_type_from_data(element))
        case ["set", element]:
            return SetType(_type_from_data(element))
        case ["map", element]:
            return MapType(_type_from_data(element))
        case ["tuple", list(elements)]:
            return TupleType(tuple(_type_from_data(e) for e in elements))
        case ["object", dict(attrs)]:
            return ObjectType({name: _type_from_data(t) for name, t in attrs.items()})
        case ["object", dict(attrs), list(optional)] if all(isinstance(name, str) for name in optional):
            return ObjectType({name: _type_from_data(t) for name, t in attrs.items()}, optional)
        case [str(kind), *_]:
            raise CtyError(f"invalid type description of kind {kind!r}")
    raise CtyError("invalid type description: expected a type name or a [kind, ...] array")


# ----------------------------------------------------------------------------------------------
# Values.


class Unknown:
    """The type of :data:`UNKNOWN`, a value Terraform will only know after apply (a singleton)."""

    __slots__ = ()
    _singleton: ClassVar[Unknown]

    def __new__(cls) -> Unknown:
        if not hasattr(cls, "_singleton"):
            cls._singleton = super().__new__(cls)
        return cls._singleton

    def __repr__(self) -> str:
        return "UNKNOWN"

    def __reduce__(self) -> str:
        return "UNKNOWN"  # copy/deepcopy/pickle hand back the module's singleton


UNKNOWN: Final = Unknown()


def is_unknown(value: object) -> bool:
    return value is UNKNOWN


@dataclass(frozen=True, slots=True)
class TypedValue:
    """A value with its exact cty type, for positions whose schema type is ``dynamic``.

    Terraform compares a planned dynamic value with the configuration by type too (``tolist([..])`` is
    not ``[..]``), so a provider that echoes a dynamic value should echo its type: decode with
    ``keep_dynamic_types=True`` to get these, and encode them back as they came.
    """

    value: object
    type: CtyType

    def __post_init__(self) -> None:
        if isinstance(self.type, DynamicPseudoType) and not (self.value is None or self.value is UNKNOWN):
            raise CtyError("only null and unknown values can have type dynamic")


def contains_unknown(value: object) -> bool:
    """Whether ``value`` is or contains :data:`UNKNOWN` anywhere."""
    if value is UNKNOWN:
        return True
    if isinstance(value, TypedValue):
        return contains_unknown(value.value)
    if isinstance(value, Mapping):
        return any(contains_unknown(v) for v in value.values())
    if isinstance(value, list | tuple | set | frozenset):
        return any(contains_unknown(v) for v in value)
    return False


def implied_type(value: object) -> CtyType:
    """The type cty would infer for a JSON-like value: dicts are objects, lists tuples, null dynamic."""
    if isinstance(value, TypedValue):
        return value.type
    if value is None or value is UNKNOWN:
        return DYNAMIC
    if isinstance(value, str):
        return STRING
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, int | float | Decimal):
        return NUMBER
    if isinstance(value, Mapping):
        attrs: dict[str, CtyType] = {}
        for name, item in value.items():
            if not isinstance(name, str):
                raise CtyError(f"object attribute names must be strings, got {_describe(name)}")
            try:
                attrs[name] = implied_type(item)
            except CtyError as err:
                err.prepend(name)
                raise
        return ObjectType(attrs)
    if isinstance(value, list | tuple):
        elements: list[CtyType] = []
        for index, item in enumerate(value):
            try:
                elements.append(implied_type(item))
            except CtyError as err:
                err.prepend(index)
                raise
        return TupleType(tuple(elements))
    raise CtyError(f"cannot infer a cty type for {_describe(value)} (use a list, dict or TypedValue)")


def _brief(t: CtyType) -> str:
    """A type's name for error messages, with object attributes left out (schemas can be large)."""
    if isinstance(t, ObjectType):
        return "object"
    if isinstance(t, TupleType):
        return "tuple"
    if isinstance(t, _CollectionType):
        return f"{t.kind}({_brief(t.element)})"
    return str(t)


def _mismatch(t: CtyType, value: object) -> CtyError:
    return CtyError(f"expected {_brief(t)}, got {_describe(value)}")


_UNEXPECTED_ATTRIBUTE: Final = "unexpected attribute: the object type has no attribute of this name"


def _describe(value: object) -> str:
    """A value's kind for error messages; never the value itself, which may be a secret."""
    if isinstance(value, _JsonNumber):
        return "number"
    return _KIND_NAMES.get(type(value), type(value).__name__)


# ----------------------------------------------------------------------------------------------
# Numbers. cty numbers are arbitrary-precision decimals; on the msgpack wire they travel as an int
# when integral and within int64, as a float64 when exactly one, else as their decimal text.

_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
_DECIMAL_LITERAL: Final = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")

_Number = int | float | Decimal
_NAN: Final = "NaN is not a number cty can represent"


def _canonical_number(value: object) -> _Number:
    """A Python number in its simplest exact form (integral values as int); NaN and non-numbers rejected."""
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        raise _mismatch(NUMBER, value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, Decimal):
        if value.is_nan():
            raise CtyError(_NAN)
        if value.is_infinite():
            return float(value)
        if value == value.to_integral_value():
            return int(value)
        return float(value) if Decimal(float(value)) == value else value
    if math.isnan(value):
        raise CtyError(_NAN)
    return int(value) if value.is_integer() else value


def _decimal_text(value: Decimal) -> str:
    """A non-integral number in plain notation, no exponent or trailing zeros, as cty writes it."""
    return format(value, "f").rstrip("0")


def _number_from_text(text: str) -> _Number:
    if not _DECIMAL_LITERAL.fullmatch(text):
        raise CtyError("expected number, got a string that is not a decimal number")
    return _simplest_number(Decimal(text))


def _simplest_number(value: Decimal) -> _Number:
    """int when integral; a float when it prints as the same decimal (cty's number equality); else exact."""
    if value == value.to_integral_value():
        return int(value)
    as_float = float(value)
    if math.isfinite(as_float) and Decimal(repr(as_float)) == value:
        return as_float
    return value


def _number_from_float(value: float) -> _Number:
    if math.isnan(value):
        raise CtyError(_NAN)
    if math.isfinite(value) and value.is_integer():
        return int(value)
    return value


# ----------------------------------------------------------------------------------------------
# Wire formats: what differs between msgpack and JSON. The walkers below do the type checking.


class _WireFormat(Protocol):
    def unknown(self) -> object: ...
    def number(self, value: _Number) -> object: ...
    def dynamic(self, t: CtyType, inner: object) -> object: ...
    def read_dynamic(self, raw: object) -> tuple[CtyType, object]: ...
    def read_number(self, raw: object) -> _Number: ...
    def read_string(self, raw: object) -> str: ...
    def read_bool(self, raw: object) -> bool: ...


_UNKNOWN_EXT: Final = msgpack.ExtType(0, b"\x00")  # go-cty writes an unknown as fixext1 type 0: d4 00 00
_REFINED_UNKNOWN_EXT: Final = 0x0C  # an unknown with refinements (not-null, prefix, bounds) as payload


def _msgpack_ext(code: int, payload: bytes) -> object:
    """Every cty msgpack extension is an unknown value; refinements are dropped (they only narrow it)."""
    if len(payload) <= 1 or code == _REFINED_UNKNOWN_EXT:
        return UNKNOWN
    raise CtyError(f"unsupported msgpack extension type {code} with {len(payload)} bytes")


class _Msgpack:
    def unknown(self) -> object:
        return _UNKNOWN_EXT

    def number(self, value: _Number) -> object:
        if isinstance(value, int):
            return value if _INT64_MIN <= value <= _INT64_MAX else str(value)
        if isinstance(value, float):
            return value
        return _decimal_text(value)

    def dynamic(self, t: CtyType, inner: object) -> object:
        return [type_to_json(t), inner]  # the type JSON travels as msgpack bin, like go-cty's EncodeBytes

    def read_dynamic(self, raw: object) -> tuple[CtyType, object]:
        if not (isinstance(raw, list) and len(raw) == 2 and isinstance(raw[0], bytes | str)):
            raise CtyError(f"expected a dynamic value as a [type JSON, value] array, got {_describe(raw)}")
        return type_from_json(raw[0] if isinstance(raw[0], bytes) else raw[0].encode()), raw[1]

    def read_number(self, raw: object) -> _Number:
        if isinstance(raw, int) and not isinstance(raw, bool):
            return raw
        if isinstance(raw, float):
            return _number_from_float(raw)
        if isinstance(raw, str):
            return _number_from_text(raw)
        raise _mismatch(NUMBER, raw)

    def read_string(self, raw: object) -> str:
        if isinstance(raw, str):
            return raw
        if isinstance(raw, bytes):  # go-cty's decoder takes bin where it expects a string
            try:
                return raw.decode()
            except UnicodeDecodeError:
                raise CtyError("expected string, got bytes that are not UTF-8") from None
        raise _mismatch(STRING, raw)

    def read_bool(self, raw: object) -> bool:
        if isinstance(raw, bool):
            return raw
        raise _mismatch(BOOL, raw)


class _JsonNumber(str):
    """A JSON number literal kept as its text, so that no precision is lost either way."""

    __slots__ = ()


class _Json:
    def unknown(self) -> object:
        raise CtyError("value is unknown, and JSON cannot represent unknown values")

    def number(self, value: _Number) -> object:
        if isinstance(value, int):
            return _JsonNumber(value)
        if isinstance(value, float):
            if math.isinf(value):
                raise CtyError("infinity cannot be represented in JSON")
            return _JsonNumber(_decimal_text(Decimal(repr(value))))
        return _JsonNumber(_decimal_text(value))

    def dynamic(self, t: CtyType, inner: object) -> object:
        return {"value": inner, "type": t.to_json()}

    def read_dynamic(self, raw: object) -> tuple[CtyType, object]:
        if not (isinstance(raw, dict) and raw.keys() == {"value", "type"}):
            raise CtyError(
                f'expected a dynamic value as an object with "value" and "type", got {_describe(raw)}'
            )
        return _type_from_data(raw["type"]), raw["value"]

    def read_number(self, raw: object) -> _Number:
        if isinstance(raw, str):  # a number literal, or a string holding one (cty converts those)
            return _number_from_text(raw)
        raise _mismatch(NUMBER, raw)

    def read_string(self, raw: object) -> str:
        if isinstance(raw, str):  # including number literals, as text: cty converts those
            return str(raw)
        if isinstance(raw, bool):
            return "true" if raw else "false"
        raise _mismatch(STRING, raw)

    def read_bool(self, raw: object) -> bool:
        if isinstance(raw, bool):
            return raw
        if type(raw) is str and raw in ("true", "false"):
            return raw == "true"
        raise _mismatch(BOOL, raw)


_MSGPACK: Final = _Msgpack()
_JSON: Final = _Json()

_KIND_NAMES: Final[Mapping[type, str]] = {
    type(None): "null",
    bool: "bool",
    int: "number",
    float: "number",
    Decimal: "number",
    str: "string",
    bytes: "bytes",
    list: "list",
    tuple: "tuple",
    dict: "map or object",
    set: "set",
    frozenset: "set",
    Unknown: "unknown",
    TypedValue: "typed value",
}

# go-cty writes JSON with Go's encoding/json, which escapes these even inside strings.
_GO_JSON_ESCAPES: Final = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026"} | {
    0x2028: "\\u2028",
    0x2029: "\\u2029",
}


def _json_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False).translate(_GO_JSON_ESCAPES)


def _dump_json(wire: object) -> str:
    """Compact JSON of a wire tree (only None, bool, str, _JsonNumber, list and dict occur in it)."""
    if wire is None:
        return "null"
    if isinstance(wire, bool):
        return "true" if wire else "false"
    if isinstance(wire, _JsonNumber):
        return str(wire)
    if isinstance(wire, str):
        return _json_string(wire)
    if isinstance(wire, list):
        return f"[{','.join(_dump_json(item) for item in wire)}]"
    if isinstance(wire, dict):
        return f"{{{','.join(f'{_json_string(k)}:{_dump_json(v)}' for k, v in wire.items())}}}"
    raise TypeError(f"not a JSON wire value: {type(wire).__name__}")


# ----------------------------------------------------------------------------------------------
# The walkers: Python value + type -> wire tree, and wire tree + type -> Python value.


def _to_wire(value: object, t: CtyType, fmt: _WireFormat) -> object:
    if isinstance(value, TypedValue):
        if isinstance(t, DynamicPseudoType) and not isinstance(value.type, DynamicPseudoType):
            return fmt.dynamic(value.type, _to_wire(value.value, value.type, fmt))
        if value.type != t:
            raise CtyError(f"expected {_brief(t)}, got a value typed {_brief(value.type)}")
        value = value.value
    if value is UNKNOWN:
        return fmt.unknown()
    if value is None:
        return None
    if isinstance(t, PrimitiveType):
        if t.name == "string":
            if isinstance(value, str):
                return value
        elif t.name == "number":
            return fmt.number(_canonical_number(value))
        elif isinstance(value, bool):
            return value
        raise _mismatch(t, value)
    if isinstance(t, ObjectType):
        return _object_to_wire(value, t, fmt)
    if isinstance(t, ListType | SetType):
        if isinstance(value, list | tuple) or (isinstance(t, SetType) and isinstance(value, set | frozenset)):
            return _elements_to_wire(value, repeat(t.element, len(value)), fmt)
        raise _mismatch(t, value)
    if isinstance(t, MapType):
        if not isinstance(value, Mapping):
            raise _mismatch(t, value)
        for key in value:
            if not isinstance(key, str):
                raise CtyError(f"map keys must be strings, got {_describe(key)}")
        result: dict[str, object] = {}
        for key in sorted(value):  # cty iterates maps in key order
            try:
                result[key] = _to_wire(value[key], t.element, fmt)
            except CtyError as err:
                err.prepend(key)
                raise
        return result
    if isinstance(t, TupleType):
        if not isinstance(value, list | tuple):
            raise _mismatch(t, value)
        if len(value) != len(t.elements):
            raise CtyError(f"expected a tuple of {len(t.elements)} elements, got {len(value)}")
        return _elements_to_wire(value, t.elements, fmt)
    inner = implied_type(value)  # dynamic: a plain value is wrapped with the type it implies
    return fmt.dynamic(inner, _to_wire(value, inner, fmt))


def _elements_to_wire(values: Iterable[object], types: Iterable[CtyType], fmt: _WireFormat) -> list[object]:
    result: list[object] = []
    for index, (item, t) in enumerate(zip(values, types, strict=True)):
        try:
            result.append(_to_wire(item, t, fmt))
        except CtyError as err:
            err.prepend(index)
            raise
    return result


def _object_to_wire(value: object, t: ObjectType, fmt: _WireFormat) -> dict[str, object]:
    if not isinstance(value, Mapping):
        raise _mismatch(t, value)
    result: dict[str, object] = {}
    present = 0
    for name, attr_type in t._items:
        if name in value:
            present += 1
            item = value[name]
        else:
            item = None  # a missing attribute is null
        if item is None:  # null whatever the type: no walk
            result[name] = None
            continue
        try:
            result[name] = _to_wire(item, attr_type, fmt)
        except CtyError as err:
            err.prepend(name)
            raise
    if present != len(value):
        stray = sorted(str(name) for name in value if name not in t._attrs)[0]
        raise CtyError(_UNEXPECTED_ATTRIBUTE, (stray,))
    return result


def _from_wire(raw: object, t: CtyType, fmt: _WireFormat, keep_types: bool) -> object:
    if raw is UNKNOWN:
        return UNKNOWN
    if isinstance(t, DynamicPseudoType):
        if raw is None:
            return None
        inner_type, inner_raw = fmt.read_dynamic(raw)
        inner = _from_wire(inner_raw, inner_type, fmt, keep_types)
        if keep_types and not isinstance(inner_type, DynamicPseudoType):
            return TypedValue(inner, inner_type)
        return inner
    if raw is None:
        return None
    if isinstance(t, PrimitiveType):
        if t.name == "string":
            return fmt.read_string(raw)
        if t.name == "number":
            return fmt.read_number(raw)
        return fmt.read_bool(raw)
    if isinstance(t, ObjectType):
        if not isinstance(raw, dict):
            raise _mismatch(t, raw)
        for name in raw:
            if name not in t._attrs:
                raise CtyError(_UNEXPECTED_ATTRIBUTE, (str(name),))
        result: dict[str, object] = {}
        for name, attr_type in t._items:
            item = raw.get(name)
            if item is None:  # null whatever the type (most attributes of most objects): no walk
                result[name] = None
                continue
            try:
                result[name] = _from_wire(item, attr_type, fmt, keep_types)
            except CtyError as err:
                err.prepend(name)
                raise
        return result
    if isinstance(t, ListType | SetType):
        if not isinstance(raw, list):
            raise _mismatch(t, raw)
        return _elements_from_wire(raw, repeat(t.element, len(raw)), fmt, keep_types)
    if isinstance(t, MapType):
        if not isinstance(raw, dict):
            raise _mismatch(t, raw)
        entries: dict[str, object] = {}
        for key, item in raw.items():
            if not isinstance(key, str):
                raise CtyError(f"map keys must be strings, got {_describe(key)}")
            try:
                entries[key] = _from_wire(item, t.element, fmt, keep_types)
            except CtyError as err:
                err.prepend(key)
                raise
        return entries
    if isinstance(t, TupleType):
        if not isinstance(raw, list):
            raise _mismatch(t, raw)
        if len(raw) != len(t.elements):
            raise CtyError(f"expected a tuple of {len(t.elements)} elements, got {len(raw)}")
        return _elements_from_wire(raw, t.elements, fmt, keep_types)
    raise CtyError(f"unsupported type {t}")


def _elements_from_wire(
    raws: list[object], types: Iterable[CtyType], fmt: _WireFormat, keep_types: bool
) -> list[object]:
    result: list[object] = []
    for index, (raw, t) in enumerate(zip(raws, types, strict=True)):
        try:
            result.append(_from_wire(raw, t, fmt, keep_types))
        except CtyError as err:
            err.prepend(index)
            raise
    return result


# ----------------------------------------------------------------------------------------------
# The public codecs.


def encode_msgpack(value: object, t: CtyType) -> bytes:
    """The msgpack bytes go-cty would write for ``value`` of type ``t`` (unknowns included)."""
    wire = _to_wire(value, t, _MSGPACK)
    try:
        packed: bytes = msgpack.packb(wire, use_bin_type=True)
    except UnicodeEncodeError:
        raise CtyError("a string is not valid Unicode (it contains a lone surrogate)") from None
    return packed


def decode_msgpack(data: bytes, t: CtyType, *, keep_dynamic_types: bool = False) -> object:
    """The value of type ``t`` in cty msgpack ``data``; dynamic positions as :class:`TypedValue` if asked."""
    try:
        raw = msgpack.unpackb(data, raw=False, ext_hook=_msgpack_ext, strict_map_key=False)
    except CtyError:
        raise
    except (ValueError, msgpack.UnpackException) as err:
        raise CtyError(f"invalid msgpack: {err}") from err
    return _from_wire(raw, t, _MSGPACK, keep_dynamic_types)


def encode_json(value: object, t: CtyType) -> bytes:
    """The JSON go-cty would write for ``value`` of type ``t``; unknown values cannot be encoded."""
    text = _dump_json(_to_wire(value, t, _JSON))
    try:
        return text.encode()
    except UnicodeEncodeError:
        raise CtyError("a string is not valid Unicode (it contains a lone surrogate)") from None


def _reject_json_constant(name: str) -> object:
    raise CtyError(f"{name} is not valid JSON")


def decode_json(data: bytes | str, t: CtyType, *, keep_dynamic_types: bool = False) -> object:
    """The value of type ``t`` in cty JSON ``data`` (as go-cty, strings convert to numbers and bools)."""
    try:
        raw = json.loads(
            data, parse_int=_JsonNumber, parse_float=_JsonNumber, parse_constant=_reject_json_constant
        )
    except CtyError:
        raise
    except ValueError as err:
        raise CtyError(f"invalid JSON: {err}") from err
    return _from_wire(raw, t, _JSON, keep_dynamic_types)
