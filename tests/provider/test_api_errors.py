"""Error envelope parsing, safe error messages and the "definitive refusal" rule."""

from __future__ import annotations

import pytest

from lium_provider.api.envelope import MAX_MESSAGE_CHARS, parse_error_body, safe_message
from lium_provider.api.errors import (
    NO_CAPACITY_CODES,
    BudgetRefusal,
    LiumAuthError,
    LiumBudgetExceeded,
    LiumError,
    LiumProtocolError,
    LiumUnavailable,
    LiumUncertainOutcome,
    is_definitive,
    valid_code,
)

API_KEY = "sk-live-0123456789abcdef"


def test_current_envelope_gives_code_message_and_request_id() -> None:
    body = {
        "success": False,
        "error": {"code": "node_unavailable", "message": "Node is not available.", "request_id": "ab12cd"},
        "message": "Node is not available.",
        "status_code": 400,
    }
    details = parse_error_body(body, [API_KEY])
    assert (details.code, details.message, details.request_id) == (
        "node_unavailable",
        "Node is not available.",
        "ab12cd",
    )


def test_flat_and_legacy_shapes() -> None:
    flat = parse_error_body({"success": False, "code": "no_executor_matches_spec", "message": "no match"}, [])
    assert (flat.code, flat.message) == ("no_executor_matches_spec", "no match")
    legacy = parse_error_body({"detail": "Pod not found"}, [])
    assert (legacy.code, legacy.message) == (None, "Pod not found")
    old = parse_error_body({"success": False, "error": "HTTP error", "message": "Node is not available."}, [])
    assert (old.code, old.message) == (None, "Node is not available.")


def test_upper_case_and_malformed_codes_are_no_code() -> None:
    assert parse_error_body({"error": {"code": "API_KEY_BUDGET_EXCEEDED"}}, []).code is None
    assert valid_code("x" * 65) is None
    assert valid_code("a" + "b" * 63) == "a" + "b" * 63
    assert valid_code("1abc") is None
    assert valid_code(42) is None


def test_message_echoing_a_secret_is_dropped() -> None:
    body = {"error": {"code": "template_invalid", "message": f"bad key {API_KEY} used"}}
    details = parse_error_body(body, [API_KEY])
    assert details.code == "template_invalid"
    assert details.message is None


def test_object_message_is_ignored_and_long_message_truncated() -> None:
    assert parse_error_body({"message": {"window": "day", "budget_usd": 5}}, []).message is None
    long = safe_message("x" * 1000, [])
    assert long is not None and len(long) == MAX_MESSAGE_CHARS and long.endswith("…")


def test_control_characters_are_flattened() -> None:
    assert safe_message("line one\n\x1b[31mred\x00", []) == "line one [31mred"


def test_validation_fields_are_named_never_their_values() -> None:
    body = {
        "message": "Request validation failed",
        "validation_errors": [
            {"field": "body -> template_id", "message": "bad 'hunter2'", "type": "uuid_parsing"}
        ],
    }
    details = parse_error_body(body, [])
    assert details.message == "Request validation failed (fields: body -> template_id)"
    fastapi = parse_error_body(
        {"detail": [{"loc": ["body", "gpu_count"], "msg": "x", "input": "hunter2"}]}, []
    )
    assert fastapi.message == "request validation failed (fields: body -> gpu_count)"


def test_str_format() -> None:
    error = LiumError(
        "Node is not available.",
        method="POST",
        path="/executors/e1/rent",
        status=400,
        code="node_unavailable",
        request_id="r1",
    )
    assert (
        str(error)
        == "POST /executors/e1/rent: HTTP 400 node_unavailable: Node is not available. (request id r1)"
    )
    assert str(LiumError("boom", method="GET", path="/pods")) == "GET /pods: boom"
    assert LiumError("x", code="NOT_VALID").code is None


@pytest.mark.parametrize(
    ("status", "code", "expected"),
    [
        (400, "node_unavailable", True),
        (403, "insufficient_balance", True),
        (404, None, True),
        (409, "idempotency_in_progress", False),
        (409, "idempotency_outcome_unknown", False),
        (408, None, False),
        (500, None, False),
        (503, "node_unavailable", False),
        (None, None, False),
    ],
)
def test_definitive_rule(status: int | None, code: str | None, expected: bool) -> None:
    assert is_definitive(LiumError("x", status=status, code=code)) is expected


def test_uncertain_protocol_and_unsent_errors() -> None:
    assert not is_definitive(LiumUncertainOutcome("x", status=400))
    assert not is_definitive(LiumProtocolError("garbage 2xx", status=200))
    assert not is_definitive(LiumUnavailable("timed out"))
    never_sent = LiumUnavailable("connection refused")
    never_sent.sent = False
    assert is_definitive(never_sent)


def test_no_capacity_codes_are_dstacks_list() -> None:
    assert {"node_unavailable", "gpu_split_not_allowed", "no_executor_matches_spec"} <= NO_CAPACITY_CODES
    assert len(NO_CAPACITY_CODES) == 10
    assert "insufficient_balance" not in NO_CAPACITY_CODES


def test_budget_refusal_keeps_its_numbers_from_an_object_message() -> None:
    body = {
        "success": False,
        "error": {"code": "API_KEY_BUDGET_EXCEEDED", "message": "API key 'ci' spent its max budget"},
        "message": {"window": "max", "budget_usd": 1, "spent_usd": "0.25", "amount_usd": 5.5, "route": "/x"},
        "status_code": 402,
    }
    details = parse_error_body(body, [API_KEY])
    assert details.budget == BudgetRefusal(window="max", budget_usd=1.0, spent_usd=0.25, amount_usd=5.5)
    assert details.message == "API key 'ci' spent its max budget"
    nested = parse_error_body(
        {"error": {"code": "API_KEY_BUDGET_EXCEEDED", "data": {"window": "daily", "budget_usd": 20}}}, []
    )
    assert nested.budget == BudgetRefusal(window="daily", budget_usd=20.0)


def test_budget_numbers_that_are_not_numbers_are_left_out() -> None:
    body = {
        "error": {"code": "API_KEY_BUDGET_EXCEEDED"},
        "message": {"window": "fortnight", "budget_usd": True, "spent_usd": "lots", "amount_usd": -3},
    }
    assert parse_error_body(body, []).budget == BudgetRefusal()
    assert parse_error_body({"error": {"code": "insufficient_balance"}}, []).budget is None


def test_budget_error_names_window_budget_spent_and_need() -> None:
    error = LiumBudgetExceeded("refused", method="POST", path="/executors/e/rent", status=402)
    error.budget = BudgetRefusal(window="max", budget_usd=1.0, spent_usd=0.0, amount_usd=5.12)
    text = str(error)
    for part in (
        "lifetime (max) budget",
        "budget $1.00",
        "spent $0.00",
        "needs $5.12",
        "API_KEY_BUDGET_EXCEEDED",
    ):
        assert part in text
    assert is_definitive(error), "a budget refusal is never resent"


def test_scope_refusal_names_the_missing_scope() -> None:
    body = {"error": {"code": "missing_scope", "message": "API key 'ci' does not have the 'rent' scope"}}
    details = parse_error_body(body, [])
    assert (details.code, details.missing_scope) == ("missing_scope", "rent")
    error = LiumAuthError(details.message or "", status=403, code=details.code)
    error.missing_scope = details.missing_scope
    assert "lacks the 'rent' scope" in str(error)
    plain = parse_error_body(
        {"error": {"code": "insufficient_balance", "message": "Insufficient balance."}}, []
    )
    assert plain.missing_scope is None
