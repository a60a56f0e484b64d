"""Bounds declared with pydantic are read from that one declaration and said in words, and durations
print in the syntax they are parsed from."""

from __future__ import annotations

from typing import Annotated

import annotated_types
import pytest
from pydantic import BaseModel, Field

from tfbridge.protocol import cty
from tfbridge.schema import Attribute, Bounds, block_schema, bounds_of, validate
from tfbridge.timeouts import format_duration, parse_duration

Hours = Annotated[int, Field(ge=1, le=720)]


class Bounded(BaseModel):
    hours: Annotated[Hours | None, Attribute(optional=True, description="Hours.")] = None
    name: Annotated[str, Attribute(required=True, description="A name.")] = Field(min_length=1, max_length=63)
    label: Annotated[str, Attribute(required=True, description="A label.")] = Field(min_length=1)
    price: Annotated[float | None, Attribute(optional=True, description="USD.")] = Field(default=None, gt=0)
    ports: Annotated[
        list[Annotated[int, Field(ge=1, le=65535)]] | None, Attribute(optional=True, description="Ports.")
    ] = Field(default=None, min_length=1, max_length=8)
    free: Annotated[str | None, Attribute(optional=True, description="Anything.")] = None


def test_bounds_come_from_the_field_and_from_types_inside_optional() -> None:
    fields = Bounded.model_fields
    assert bounds_of(fields["hours"].annotation, fields["hours"].metadata) == Bounds(ge=1, le=720)
    assert bounds_of(fields["name"].annotation, fields["name"].metadata) == Bounds(
        min_length=1, max_length=63
    )
    assert bounds_of(fields["ports"].annotation, fields["ports"].metadata) == Bounds(
        min_length=1, max_length=8, element=Bounds(ge=1, le=65535)
    )
    assert bounds_of(fields["free"].annotation, fields["free"].metadata) == Bounds()


def test_each_kind_of_bound_reads_as_a_sentence() -> None:
    attributes = block_schema(Bounded).attributes
    said = {name: attr.bounds.sentence(attr.type) for name, attr in attributes.items()}
    assert said == {
        "hours": "Must be 1 to 720.",
        "name": "Must be 1 to 63 characters long.",
        "label": "Must not be empty.",
        "price": "Must be more than 0.",
        "ports": "Must have 1 to 8 items. Each item must be 1 to 65535.",
        "free": "",
    }
    assert attributes["hours"].documentation() == "Hours. Must be 1 to 720."
    assert attributes["free"].documentation() == "Anything."


def test_one_sided_ranges() -> None:
    assert Bounds(ge=0).range_text() == "at least 0"
    assert Bounds(le=64).range_text() == "at most 64"
    assert Bounds(gt=0, lt=1.5).range_text() == "more than 0 and less than 1.5"
    assert Bounds(max_length=100).sentence(cty.STRING) == "Must be at most 100 characters long."


@pytest.mark.parametrize(
    ("seconds", "text"), [(1800, "30m"), (5400, "1h30m"), (90, "1m30s"), (3661, "1h1m1s"), (0.5, "500ms")]
)
def test_durations_print_as_they_are_parsed(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(("seconds", "text"), [(0.9996, "1s"), (3599.6, "1h"), (0, "0s"), (59.5, "1m")])
def test_durations_round_to_what_reads_back_nearest(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text
    assert abs(parse_duration(text) - seconds) < 1


class Grouped(BaseModel):
    count: Annotated[int, annotated_types.Interval(ge=1, le=9)] = Field(default=1, le=5)
    label: Annotated[str, annotated_types.Len(2, 8)] = "ab"
    tags: list[Annotated[str, annotated_types.MaxLen(4)]] = Field(default_factory=list, max_length=3)


def test_grouped_constraints_count_and_a_bound_declared_twice_is_the_one_pydantic_enforces() -> None:
    fields = Grouped.model_fields
    assert bounds_of(fields["count"].annotation, fields["count"].metadata) == Bounds(ge=1, le=9)
    assert Grouped(count=9).count == 9 and validate(Grouped, {"count": 10}), "pydantic's bound is the last"
    assert bounds_of(fields["label"].annotation, fields["label"].metadata) == Bounds(
        min_length=2, max_length=8
    )
    assert bounds_of(fields["tags"].annotation, fields["tags"].metadata) == Bounds(
        max_length=3, element=Bounds(max_length=4)
    )


def test_a_broken_bound_is_said_as_the_field_declares_it() -> None:
    problems = {
        d.path: d.detail for d in validate(Grouped, {"count": 10, "label": "x", "tags": list("abcd")})
    }
    assert problems == {
        ("count",): "Must be 1 to 9 (got 10).",
        ("label",): "Must be 2 to 8 characters long (got 1).",
        ("tags",): "Must have at most 3 items (got 4).",
    }


def test_a_number_of_the_wrong_kind_is_said_with_the_fields_bound() -> None:
    """A fractional count or an infinite price: what the field wants, in words, and its range."""

    class Kinds(BaseModel):
        hours: Annotated[Hours | None, Attribute(optional=True)] = None
        price: Annotated[float | None, Field(gt=0, allow_inf_nan=False), Attribute(optional=True)] = None

    details = {d.path: d.detail for d in validate(Kinds, {"hours": 1.5, "price": float("inf")})}
    assert details == {
        ("hours",): "Must be a whole number, 1 to 720 (got 1.5).",
        ("price",): "Must be a finite number, more than 0 (got inf).",
    }
