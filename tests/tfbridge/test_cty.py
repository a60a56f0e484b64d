"""tfbridge.protocol.cty: round trips over generated types and values, and golden bytes from go-cty's rules.

The golden cases pin the exact encoding go-cty uses (cty/msgpack, cty/json, the type JSON of
cty/json.go), so a drift in what we put on the wire fails here rather than in a Terraform run.
"""

from __future__ import annotations

import copy
import json
import math
import pickle
import re
from collections.abc import Mapping
from decimal import Decimal

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tfbridge.protocol import cty
from tfbridge.protocol.cty import (
    BOOL,
    DYNAMIC,
    NUMBER,
    STRING,
    UNKNOWN,
    CtyError,
    CtyType,
    List,
    Map,
    Object,
    Set,
    Tuple,
    TypedValue,
)

DETERMINISTIC = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=150,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

# ----------------------------------------------------------------------------------------------
# Strategies: nested types, and values of a type with nulls and unknowns anywhere.

ATTRIBUTE_NAMES = st.text(alphabet="abxyz_-", min_size=1, max_size=3)
MAP_KEYS = st.text(max_size=4)  # any Unicode, including what Go's JSON escapes (<, >, &, U+2028)


def _object_types(children: st.SearchStrategy[CtyType]) -> st.SearchStrategy[CtyType]:
    def with_optional(attrs: dict[str, CtyType]) -> st.SearchStrategy[CtyType]:
        if not attrs:
            return st.just(Object({}))
        return st.sets(st.sampled_from(sorted(attrs))).map(lambda optional: Object(attrs, optional))

    return st.dictionaries(ATTRIBUTE_NAMES, children, max_size=4).flatmap(with_optional)


def _compound_types(children: st.SearchStrategy[CtyType]) -> st.SearchStrategy[CtyType]:
    return st.one_of(
        children.map(List),
        children.map(Set),
        children.map(Map),
        _object_types(children),
        st.lists(children, max_size=3).map(Tuple),
    )


CONCRETE_TYPES = st.recursive(st.sampled_from([STRING, NUMBER, BOOL]), _compound_types, max_leaves=6)
TYPES = st.recursive(st.sampled_from([STRING, NUMBER, BOOL, DYNAMIC]), _compound_types, max_leaves=10)


def _exact_decimal(value: Decimal) -> bool:
    """Decimals that survive decode -> encode byte for byte (``0.1`` decodes to the float 0.1)."""
    return (
        value == value.to_integral_value() or Decimal(float(value)) == value or _repr_decimal(value) != value
    )


def _repr_decimal(value: Decimal) -> Decimal:
    return Decimal(repr(float(value)))


def numbers(infinity: bool) -> st.SearchStrategy[object]:
    return st.one_of(
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=False, allow_infinity=infinity),
        st.decimals(allow_nan=False, allow_infinity=False, places=22).filter(_exact_decimal),
    )


def plain_values(unknowns: bool, infinity: bool) -> st.SearchStrategy[object]:
    """JSON-like values without a type, as a provider might put in a dynamic attribute."""
    leaves = st.one_of(st.none(), st.text(max_size=4), st.booleans(), numbers(infinity))
    if unknowns:
        leaves = leaves | st.just(UNKNOWN)
    return st.recursive(
        leaves, lambda c: st.lists(c, max_size=3) | st.dictionaries(MAP_KEYS, c, max_size=3), max_leaves=6
    )


def values_of(t: CtyType, unknowns: bool = True, infinity: bool = True) -> st.SearchStrategy[object]:
    """Values of type ``t``; null and (if asked) unknown may stand in for any value at any depth."""
    known: st.SearchStrategy[object]
    if t == STRING:
        known = st.text(max_size=6)
    elif t == NUMBER:
        known = numbers(infinity)
    elif t == BOOL:
        known = st.booleans()
    elif t == DYNAMIC:
        typed = CONCRETE_TYPES.flatmap(
            lambda inner: values_of(inner, unknowns, infinity).map(lambda v: TypedValue(v, inner))
        )
        known = plain_values(unknowns, infinity) | typed
    elif isinstance(t, cty.ListType | cty.SetType):
        known = st.lists(values_of(t.element, unknowns, infinity), max_size=3)
    elif isinstance(t, cty.MapType):
        known = st.dictionaries(MAP_KEYS, values_of(t.element, unknowns, infinity), max_size=3)
    elif isinstance(t, cty.TupleType):
        known = st.tuples(*(values_of(e, unknowns, infinity) for e in t.elements)).map(list)
    else:
        assert isinstance(t, cty.ObjectType)
        # every attribute may be left out: a missing attribute encodes as null
        attrs = {name: values_of(a, unknowns, infinity) for name, a in t.attrs.items()}
        known = st.fixed_dictionaries({}, optional=attrs)
    absent = st.none() | st.just(UNKNOWN) if unknowns else st.none()
    return st.one_of(known, absent)


def typed_values(
    types: st.SearchStrategy[CtyType] = TYPES, unknowns: bool = True, infinity: bool = True
) -> st.SearchStrategy[tuple[CtyType, object]]:
    return types.flatmap(lambda t: st.tuples(st.just(t), values_of(t, unknowns, infinity)))


# Deep generated types mostly hold small values, so numbers and dynamic values get their own runs.
NUMBER_AND_DYNAMIC_TYPES = st.sampled_from(
    [
        NUMBER,
        DYNAMIC,
        List(NUMBER),
        Map(DYNAMIC),
        Object({"n": NUMBER, "d": DYNAMIC, "l": List(DYNAMIC)}, ["d"]),
    ]
)


# ----------------------------------------------------------------------------------------------
# What a decoded value must be: the input with missing attributes null, types dropped (unless
# kept), numbers in their simplest form; compared with Python types made explicit (1 is not True).


def expected_number(value: object) -> object:
    """Integral numbers decode as int; a Decimal as the float of the same shortest text, if any."""
    assert isinstance(value, int | float | Decimal)
    if isinstance(value, float) and not value.is_integer():
        return value
    if isinstance(value, Decimal) and value != value.to_integral_value():
        return float(value) if _repr_decimal(value) == value else value
    return int(value)


def expected(value: object, t: CtyType) -> object:
    if isinstance(value, TypedValue):
        return expected(value.value, value.type)
    if value is None or value is UNKNOWN:
        return value
    if isinstance(t, cty.ObjectType):
        assert isinstance(value, Mapping)
        return {name: expected(value.get(name), a) for name, a in t.attrs.items()}
    if isinstance(t, cty.MapType):
        assert isinstance(value, Mapping)
        return {k: expected(v, t.element) for k, v in value.items()}
    if isinstance(t, cty.ListType | cty.SetType):
        assert isinstance(value, list)
        return [expected(v, t.element) for v in value]
    if isinstance(t, cty.TupleType):
        assert isinstance(value, list)
        return [expected(v, e) for v, e in zip(value, t.elements, strict=True)]
    # primitives, and plain values under dynamic (whose nested values are dynamic too)
    if isinstance(value, Mapping):
        return {k: expected(v, DYNAMIC) for k, v in value.items()}
    if isinstance(value, list):
        return [expected(v, DYNAMIC) for v in value]
    if isinstance(value, str | bool):
        return value
    return expected_number(value)


def tagged(value: object) -> object:
    """``value`` with every leaf's Python type made part of it, so == also compares types."""
    if value is None or value is UNKNOWN:
        return value
    if isinstance(value, TypedValue):
        return ("typed", value.type, tagged(value.value))
    if isinstance(value, Mapping):
        return {k: tagged(v) for k, v in value.items()}
    if isinstance(value, list):
        return ("list", [tagged(v) for v in value])
    return (type(value).__name__, value)


def navigate(value: object, path: tuple[str | int, ...]) -> object:
    for step in path:
        while isinstance(value, TypedValue):
            value = value.value
        assert isinstance(value, Mapping | list)
        value = value[step]  # type: ignore[index]
    return value


# ----------------------------------------------------------------------------------------------
# Property tests.


def check_msgpack_round_trip(t: CtyType, value: object) -> None:
    data = cty.encode_msgpack(value, t)
    decoded = cty.decode_msgpack(data, t)
    assert tagged(decoded) == tagged(expected(value, t))
    assert cty.contains_unknown(decoded) == cty.contains_unknown(value)
    # with dynamic types kept, decoding then encoding gives back the very same bytes
    assert cty.encode_msgpack(cty.decode_msgpack(data, t, keep_dynamic_types=True), t) == data


def check_json_round_trip(t: CtyType, value: object) -> None:
    data = cty.encode_json(value, t)
    json.loads(data)  # plain JSON any parser reads
    decoded = cty.decode_json(data, t)
    assert tagged(decoded) == tagged(expected(value, t))
    assert tagged(decoded) == tagged(cty.decode_msgpack(cty.encode_msgpack(value, t), t))
    assert cty.encode_json(cty.decode_json(data, t, keep_dynamic_types=True), t) == data


@DETERMINISTIC
@given(typed_values())
def test_msgpack_round_trip(case: tuple[CtyType, object]) -> None:
    check_msgpack_round_trip(*case)


@DETERMINISTIC
@given(typed_values(NUMBER_AND_DYNAMIC_TYPES))
def test_msgpack_round_trip_of_numbers_and_dynamic_values(case: tuple[CtyType, object]) -> None:
    check_msgpack_round_trip(*case)


@DETERMINISTIC
@given(typed_values(unknowns=False, infinity=False))
def test_json_round_trip(case: tuple[CtyType, object]) -> None:
    check_json_round_trip(*case)


@DETERMINISTIC
@given(typed_values(NUMBER_AND_DYNAMIC_TYPES, unknowns=False, infinity=False))
def test_json_round_trip_of_numbers_and_dynamic_values(case: tuple[CtyType, object]) -> None:
    check_json_round_trip(*case)


@DETERMINISTIC
@given(typed_values().filter(lambda case: cty.contains_unknown(case[1])))
def test_json_refuses_unknowns_and_points_at_one(case: tuple[CtyType, object]) -> None:
    t, value = case
    with pytest.raises(CtyError, match="JSON cannot represent unknown values") as caught:
        cty.encode_json(value, t)
    found = navigate(value, caught.value.path)
    assert (found.value if isinstance(found, TypedValue) else found) is UNKNOWN


@DETERMINISTIC
@given(TYPES)
def test_type_json_round_trip(t: CtyType) -> None:
    data = cty.type_to_json(t)
    parsed = cty.type_from_json(data)
    assert parsed == t and hash(parsed) == hash(t)
    assert cty.type_to_json(parsed) == data
    assert json.loads(data) == t.to_json()
    assert cty.type_from_json(t.to_json()) == t
    assert cty.type_from_json(data.decode()) == t


@DETERMINISTIC
@given(plain_values(unknowns=True, infinity=True))
def test_plain_values_in_a_dynamic_attribute_keep_their_implied_type(value: object) -> None:
    data = cty.encode_msgpack(value, DYNAMIC)
    kept = cty.decode_msgpack(data, DYNAMIC, keep_dynamic_types=True)
    if value is None or value is UNKNOWN:
        assert kept is value
    else:
        assert isinstance(kept, TypedValue) and kept.type == cty.implied_type(value)
    assert tagged(cty.decode_msgpack(data, DYNAMIC)) == tagged(expected(value, DYNAMIC))


# ----------------------------------------------------------------------------------------------
# Golden msgpack bytes, derived from go-cty's marshal.go / unknown.go / dynamic.go.

PAIR = Object({"b": NUMBER, "a": STRING})


@pytest.mark.parametrize(
    ("value", "t", "hex_bytes"),
    [
        # unknown: fixext1, extension type 0, one zero byte
        (UNKNOWN, STRING, "d40000"),
        (UNKNOWN, PAIR, "d40000"),
        (UNKNOWN, DYNAMIC, "d40000"),
        # attributes in name order; a missing attribute is nil
        ({"a": "x"}, PAIR, "82 a161 a178 a162 c0"),
        (None, PAIR, "c0"),
        # dynamic: [type JSON as bin, value]; a null dynamic is plain nil
        ("hello", DYNAMIC, "92 c408 22737472696e6722 a568656c6c6f"),
        (None, DYNAMIC, "c0"),
        (TypedValue(None, STRING), DYNAMIC, "92 c408 22737472696e6722 c0"),
        (TypedValue(UNKNOWN, List(STRING)), DYNAMIC, "92 c411 5b226c697374222c22737472696e67225d d40000"),
        # numbers: compact ints, float64, and decimal text beyond int64 or float64
        (1, NUMBER, "01"),
        (-1, NUMBER, "ff"),
        (300, NUMBER, "cd012c"),
        (-129, NUMBER, "d1ff7f"),
        (-(2**63), NUMBER, "d38000000000000000"),
        (2**63, NUMBER, "b3" + b"9223372036854775808".hex()),
        (3.0, NUMBER, "03"),
        (1e20, NUMBER, "b5" + b"100000000000000000000".hex()),
        (1.5, NUMBER, "cb3ff8000000000000"),
        (math.inf, NUMBER, "cb7ff0000000000000"),
        (-math.inf, NUMBER, "cbfff0000000000000"),
        (Decimal("0.5"), NUMBER, "cb3fe0000000000000"),
        (Decimal("0.1"), NUMBER, "a3" + b"0.1".hex()),
        (Decimal("1E+3"), NUMBER, "cd03e8"),
        (True, BOOL, "c3"),
        # sets keep the given order; maps go out in key order
        (["b", "a"], Set(STRING), "92 a162 a161"),
        ({"b": 1, "a": 2}, Map(NUMBER), "82 a161 02 a162 01"),
        (["x", 1], Tuple([STRING, NUMBER]), "92 a178 01"),
        ([], List(STRING), "90"),
    ],
)
def test_msgpack_golden_bytes(value: object, t: CtyType, hex_bytes: str) -> None:
    assert cty.encode_msgpack(value, t).hex() == hex_bytes.replace(" ", "")


@pytest.mark.parametrize(
    "hex_bytes",
    [
        "d40000",  # what go-cty writes for a totally unknown value
        "c70000",  # a zero-length extension, which go-cty also reads as unknown
        "c7030c8101c2",  # type 12 refinements {1 (nullness): false}: unknown but not null
        "c7090c 8201c2 02a4666f6f2d",  # {not null, string prefix "foo-"}
    ],
)
def test_msgpack_unknowns_decode_with_or_without_refinements(hex_bytes: str) -> None:
    data = bytes.fromhex(hex_bytes.replace(" ", ""))
    assert cty.decode_msgpack(data, STRING) is UNKNOWN
    assert cty.decode_msgpack(b"\x91" + data, List(STRING)) == [UNKNOWN]


def test_msgpack_decoding_follows_go_cty_leniencies() -> None:
    assert cty.decode_msgpack(msgpack.packb(3.0), NUMBER) == 3
    assert isinstance(cty.decode_msgpack(msgpack.packb(3.0), NUMBER), int)
    assert cty.decode_msgpack(msgpack.packb(2**64 - 1), NUMBER) == 2**64 - 1
    assert cty.decode_msgpack(msgpack.packb(-math.inf), NUMBER) == -math.inf
    assert cty.decode_msgpack(msgpack.packb("0.1"), NUMBER) == 0.1  # cty: same text, same number
    precise = cty.decode_msgpack(msgpack.packb("0.1000000000000000000001"), NUMBER)
    assert precise == Decimal("0.1000000000000000000001") and isinstance(precise, Decimal)
    assert cty.decode_msgpack(msgpack.packb("-12e3"), NUMBER) == -12000
    assert cty.decode_msgpack(msgpack.packb(b"bin", use_bin_type=True), STRING) == "bin"
    # an empty object map means "all attributes null" rather than an error
    assert cty.decode_msgpack(msgpack.packb({}), PAIR) == {"a": None, "b": None}


# ----------------------------------------------------------------------------------------------
# Golden JSON, derived from go-cty's cty/json marshal.go and cty/json.go.


@pytest.mark.parametrize(
    ("value", "t", "text"),
    [
        ("hello", DYNAMIC, '{"value":"hello","type":"string"}'),
        ({"a": "x"}, PAIR, '{"a":"x","b":null}'),
        (
            {"k": [1, "2"]},
            DYNAMIC,
            '{"value":{"k":[1,"2"]},"type":["object",{"k":["tuple",["number","string"]]}]}',
        ),
        (1.25e-7, NUMBER, "0.000000125"),
        (1e20, NUMBER, "100000000000000000000"),
        (Decimal("1.50"), NUMBER, "1.5"),
        (Decimal("0.1000000000000000000001"), NUMBER, "0.1000000000000000000001"),
        ({"<a&b>": "\u2028"}, Map(STRING), '{"\\u003ca\\u0026b\\u003e":"\\u2028"}'),
        ("é\n", STRING, '"é\\n"'),
    ],
)
def test_json_golden_text(value: object, t: CtyType, text: str) -> None:
    assert cty.encode_json(value, t) == text.encode()


def test_json_decoding_converts_like_go_cty() -> None:
    assert cty.decode_json(b'"12"', NUMBER) == 12
    assert cty.decode_json(b"1.50", STRING) == "1.50"
    assert cty.decode_json(b"true", STRING) == "true"
    assert cty.decode_json(b'"false"', BOOL) is False
    assert cty.decode_json(b"0.1", NUMBER) == 0.1
    assert cty.decode_json(b'{"a":"x"}', PAIR) == {"a": "x", "b": None}
    assert cty.decode_json(b'{"type":["list","number"],"value":[1]}', DYNAMIC, keep_dynamic_types=True) == (
        TypedValue([1], List(NUMBER))
    )


@pytest.mark.parametrize(
    ("t", "text"),
    [
        (STRING, '"string"'),
        (DYNAMIC, '"dynamic"'),
        (Set(Map(BOOL)), '["set",["map","bool"]]'),
        (Tuple([STRING, NUMBER]), '["tuple",["string","number"]]'),
        (Object({"z": STRING, "a": List(NUMBER)}), '["object",{"a":["list","number"],"z":"string"}]'),
        (Object({"z": STRING, "a": BOOL}, ["z", "a"]), '["object",{"a":"bool","z":"string"},["a","z"]]'),
    ],
)
def test_type_json_golden(t: CtyType, text: str) -> None:
    assert cty.type_to_json(t) == text.encode()
    assert cty.type_from_json(text) == t


# ----------------------------------------------------------------------------------------------
# Errors: strict, with the path of the problem, never echoing a value.

PORTS = Object({"ports": List(Object({"name": STRING, "port": NUMBER})), "labels": Map(STRING)})


@pytest.mark.parametrize(
    ("value", "path", "message"),
    [
        ({"ports": [{"name": "a"}, {"name": 7}]}, ("ports", 1, "name"), "expected string, got number"),
        ({"ports": [{"port": "secret-token"}]}, ("ports", 0, "port"), "expected number, got string"),
        ({"ports": [{"port": True}]}, ("ports", 0, "port"), "expected number, got bool"),
        ({"ports": [{"port": math.nan}]}, ("ports", 0, "port"), "NaN"),
        ({"ports": [{"nmae": "a"}]}, ("ports", 0, "nmae"), "unexpected attribute"),
        ({"labels": {"k": 1}}, ("labels", "k"), "expected string, got number"),
        ({"labels": {1: "v"}}, ("labels",), "map keys must be strings"),
        ({"ports": "abc"}, ("ports",), "expected list(object), got string"),
        ({"ports": {"abc"}}, ("ports",), "expected list(object), got set"),
        ("x", (), "expected object, got string"),
    ],
)
def test_encode_errors_carry_the_path(value: object, path: tuple[str | int, ...], message: str) -> None:
    for encode in (cty.encode_msgpack, cty.encode_json):
        with pytest.raises(CtyError, match=re.escape(message)) as caught:
            encode(value, PORTS)
        assert caught.value.path == path
        assert "secret-token" not in str(caught.value)


def test_error_message_renders_the_path() -> None:
    with pytest.raises(CtyError) as caught:
        cty.encode_msgpack({"labels": {"a b": 1}}, PORTS)
    assert str(caught.value) == 'labels["a b"]: expected string, got number'


@pytest.mark.parametrize(
    ("data", "t", "path", "message"),
    [
        (msgpack.packb({"a": 1}), PAIR, ("a",), "expected string, got number"),
        (msgpack.packb({"a": "x", "c": 1}), PAIR, ("c",), "unexpected attribute"),
        (msgpack.packb([1, 2, 3]), Tuple([NUMBER, NUMBER]), (), "tuple of 2 elements, got 3"),
        (msgpack.packb({"k": [1, "x"]}), Map(List(NUMBER)), ("k", 1), "not a decimal number"),
        (msgpack.packb([b'"strin', 1]), DYNAMIC, (), "invalid type JSON"),
        (msgpack.packb(["x"]), DYNAMIC, (), r"\[type JSON, value\] array"),
        (bytes.fromhex("c7020500ff"), STRING, (), "unsupported msgpack extension type 5"),
        (b"\x92\x01", List(NUMBER), (), "invalid msgpack"),  # truncated
        (msgpack.packb(1) + b"\x01", NUMBER, (), "invalid msgpack"),
    ],
)
def test_msgpack_decode_errors(data: bytes, t: CtyType, path: tuple[str | int, ...], message: str) -> None:
    with pytest.raises(CtyError, match=message) as caught:
        cty.decode_msgpack(data, t)
    assert caught.value.path == path


@pytest.mark.parametrize(
    ("text", "t", "message"),
    [
        (b"{", PAIR, "invalid JSON"),
        (b"NaN", NUMBER, "NaN is not valid JSON"),
        (b'{"value":1}', DYNAMIC, '"value" and "type"'),
        (b'"maybe"', BOOL, "expected bool, got string"),
        (b"[true]", List(NUMBER), "expected number, got bool"),
    ],
)
def test_json_decode_errors(text: bytes, t: CtyType, message: str) -> None:
    with pytest.raises(CtyError, match=message):
        cty.decode_json(text, t)


@pytest.mark.parametrize(
    "data",
    ['"str"', '["list"]', '["list","string","extra"]', '["object",{"a":"string"},["b"]]', '["nope",1]', "7"],
)
def test_invalid_type_json_is_refused(data: str) -> None:
    with pytest.raises(CtyError):
        cty.type_from_json(data)


def test_infinity_and_lone_surrogates_have_no_encoding() -> None:
    with pytest.raises(CtyError, match="infinity"):
        cty.encode_json(math.inf, NUMBER)
    for encode in (cty.encode_msgpack, cty.encode_json):
        with pytest.raises(CtyError, match="lone surrogate"):
            encode("\udc80", STRING)


# ----------------------------------------------------------------------------------------------
# Types and helpers.


def test_types_compare_by_value() -> None:
    assert List(STRING) == cty.ListType(STRING) and List(STRING) != Set(STRING) != Map(STRING)
    assert Object({"a": STRING, "b": NUMBER}) == Object({"b": NUMBER, "a": STRING})
    assert hash(Object({"a": STRING, "b": NUMBER})) == hash(Object({"b": NUMBER, "a": STRING}))
    assert Object({"a": STRING}) != Object({"a": STRING}, ["a"])
    assert Tuple([STRING]) != List(STRING)
    assert str(Object({"a": List(STRING)}, ["a"])) == "object({a=optional(list(string))})"
    with pytest.raises(AttributeError):
        Object({}).x = 1  # type: ignore[attr-defined]
    with pytest.raises(CtyError, match="not attributes"):
        Object({"a": STRING}, ["b"])


def test_implied_type() -> None:
    value = {"s": "x", "n": 1.5, "b": True, "l": [1, None], "o": {}, "t": TypedValue([], Set(STRING))}
    assert cty.implied_type(value) == Object(
        {
            "s": STRING,
            "n": NUMBER,
            "b": BOOL,
            "l": Tuple([NUMBER, DYNAMIC]),
            "o": Object({}),
            "t": Set(STRING),
        }
    )
    assert cty.implied_type(UNKNOWN) == DYNAMIC
    with pytest.raises(CtyError, match="cannot infer") as caught:
        cty.implied_type({"a": [{"x", "y"}]})
    assert caught.value.path == ("a", 0)


def test_unknown_is_one_singleton() -> None:
    assert repr(UNKNOWN) == "UNKNOWN" and cty.Unknown() is UNKNOWN
    assert copy.deepcopy({"a": UNKNOWN})["a"] is UNKNOWN
    assert pickle.loads(pickle.dumps(UNKNOWN)) is UNKNOWN
    assert cty.is_unknown(UNKNOWN) and not cty.is_unknown(None)
    assert cty.contains_unknown({"a": [1, {"b": UNKNOWN}]}) and not cty.contains_unknown({"a": [1, None]})
    with pytest.raises(CtyError, match="null and unknown"):
        TypedValue("x", DYNAMIC)
