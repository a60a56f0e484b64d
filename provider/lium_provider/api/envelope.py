"""Reading Lium's error envelope (docs/lium-api.md#error-envelope) without trusting it.

Servers answer errors in several shapes: the current ``{"error": {"code", "message", "request_id"}, ...}``
envelope, a flat ``{"code", "message"}`` (rent-by-spec), or older ``{"detail": "..."}`` bodies. Only three
things are taken from them, each validated: a machine code, a short plain-text message with no secret in
it, and a request id. Everything else is ignored, so an echoed request body can never reach a log.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from lium_provider.api.errors import BUDGET_WINDOWS, BudgetRefusal, valid_code

MAX_MESSAGE_CHARS = 160
_REQUEST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
_FIELD = re.compile(r"[A-Za-z0-9_ .\->\[\]]{1,80}")
_SHORTEST_SECRET = 4  # a shorter "secret" would match ordinary words and erase every message


BUDGET_CODE = "API_KEY_BUDGET_EXCEEDED"
"""The code of a refusal by the API key's own budget (docs/lium-api.md#api-keys): upper case, so no code
dstack's rule accepts; it is recognised here by name."""
_MISSING_SCOPE = re.compile(r"does not have the '([a-z_]{1,32})' scope")


@dataclass(frozen=True)
class ErrorDetails:
    """What the client keeps from an error body."""

    code: str | None = None
    message: str | None = None
    request_id: str | None = None
    budget: BudgetRefusal | None = None
    """Set when the body is a budget refusal (:data:`BUDGET_CODE`)."""
    missing_scope: str | None = None
    """The scope a refusal says the key lacks, when its message names one."""


def valid_request_id(value: object) -> str | None:
    """``value`` if it looks like a request id (a short token), else None."""
    if isinstance(value, str) and _REQUEST_ID.fullmatch(value):
        return value
    return None


def parse_error_body(
    data: object, secrets: Iterable[str], header_request_id: str | None = None
) -> ErrorDetails:
    """Extract code, safe message and request id from a decoded error body of any shape.

    ``header_request_id`` (the ``X-Request-Id`` response header) wins over the body's request id.
    """
    secret_list = [s for s in secrets if len(s) >= _SHORTEST_SECRET]
    request_id = _free_of(valid_request_id(header_request_id), secret_list)
    if not isinstance(data, dict):
        return ErrorDetails(request_id=request_id)
    error = data.get("error")
    nested = error if isinstance(error, dict) else {}
    code = _free_of(valid_code(nested.get("code")) or valid_code(data.get("code")), secret_list)
    request_id = request_id or _free_of(valid_request_id(nested.get("request_id")), secret_list)
    structured = _structured(data, nested)
    message = None
    for candidate in (
        nested.get("message"),
        data.get("message"),
        data.get("detail"),
        structured.get("message"),
    ):
        message = safe_message(candidate, secret_list)
        if message is not None:
            break
    fields = _validation_fields(data)
    if fields:
        message = f"{message or 'request validation failed'} (fields: {', '.join(fields)})"
    budget = _budget(structured) if BUDGET_CODE in (nested.get("code"), data.get("code")) else None
    scope = _MISSING_SCOPE.search(message or "")
    return ErrorDetails(
        code=code,
        message=message,
        request_id=request_id,
        budget=budget,
        missing_scope=scope.group(1) if scope else None,
    )


def _structured(data: dict[object, object], nested: dict[object, object]) -> dict[object, object]:
    """The object an error carries its extra fields in: ``error.data``, else an object ``message`` or
    ``detail`` (Lium keeps ``HTTPException.detail`` as the top-level ``message``); empty when none."""
    for candidate in (nested.get("data"), data.get("message"), data.get("detail")):
        if isinstance(candidate, dict):
            return candidate
    return {}


def _budget(fields: dict[object, object]) -> BudgetRefusal:
    """The numbers of a budget refusal, each kept only if it is what it claims to be."""
    window = fields.get("window")
    return BudgetRefusal(
        window=window if isinstance(window, str) and window in BUDGET_WINDOWS else None,
        budget_usd=_usd(fields.get("budget_usd")),
        spent_usd=_usd(fields.get("spent_usd")),
        amount_usd=_usd(fields.get("amount_usd")),
    )


def _usd(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        amount = float(value)
    except ValueError:
        return None
    return amount if 0 <= amount < 1e12 else None


def safe_message(value: object, secrets: Iterable[str]) -> str | None:
    """A one-line, printable, truncated version of ``value`` if it is a string free of any secret."""
    if not isinstance(value, str):
        return None
    if any(s and s in value for s in secrets):
        return None
    text = " ".join("".join(ch if ch.isprintable() else " " for ch in value).split())
    if not text:
        return None
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[: MAX_MESSAGE_CHARS - 1].rstrip() + "…"
    return text


def _free_of(value: str | None, secrets: list[str]) -> str | None:
    return None if value is None or any(s in value for s in secrets) else value


def _validation_fields(data: dict[object, object]) -> list[str]:
    """Names (never values) of the fields a 422 complains about, in Lium's and FastAPI's shapes."""
    fields: list[str] = []
    for item in _as_list(data.get("validation_errors")):
        if isinstance(item, dict) and isinstance(item.get("field"), str) and _FIELD.fullmatch(item["field"]):
            fields.append(item["field"])
    for item in _as_list(data.get("detail")):
        loc = item.get("loc") if isinstance(item, dict) else None
        if isinstance(loc, list) and all(isinstance(p, str | int) for p in loc):
            name = " -> ".join(str(p) for p in loc)
            if _FIELD.fullmatch(name):
                fields.append(name)
    return fields[:3]


def _as_list(value: object) -> list[object]:
    return value if isinstance(value, list) else []
