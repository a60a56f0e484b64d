"""Lium's error envelope (docs/lium-api.md#error-envelope) and the exception that carries one out of a handler.

Every 4xx/5xx the emulator sends has the same shape::

    {"success": false,
     "error": {"code": "...", "message": "...", "hint": "...", "request_id": "..."},
     "message": "...", "status_code": 404}

Codes follow ``^[a-z][a-z0-9_]{0,63}$`` so dstack accepts them (it ignores any other code).
"""

from typing import Any

from fastapi.responses import JSONResponse

# Default code and hint for statuses that are raised without a more specific code.
_STATUS_DEFAULTS: dict[int, tuple[str, str]] = {
    400: ("bad_request", "Check the request and try again."),
    401: ("invalid_api_key", "Send a valid API key in the X-API-KEY header."),
    403: ("forbidden", "This key may not do that."),
    404: ("not_found", "Check the path and the id."),
    405: ("method_not_allowed", "Check the HTTP method."),
    409: ("conflict", "Re-read the resource and try again."),
    422: ("validation_error", "Fix the fields listed in validation_errors."),
    429: ("rate_limited", "Wait for Retry-After seconds, then resend."),
    500: ("internal_error", "Retry later; a POST may or may not have taken effect."),
    502: ("bad_gateway", "Retry later; a POST may or may not have taken effect."),
    503: ("service_unavailable", "Retry later; a POST may or may not have taken effect."),
    504: ("gateway_timeout", "Retry later; a POST may or may not have taken effect."),
}


class ApiError(Exception):
    """An HTTP error answer: raised anywhere in a request, rendered as the envelope."""

    def __init__(
        self,
        status: int,
        code: str | None = None,
        message: str = "",
        *,
        hint: str | None = None,
        headers: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        default_code, default_hint = default_code_and_hint(status)
        self.status = status
        self.code = code or default_code
        self.message = message or self.code.replace("_", " ").capitalize()
        self.hint = hint if hint is not None else default_hint
        self.headers = headers or {}
        self.extra = extra or {}
        super().__init__(f"{status} {self.code}")

    def body(self, request_id: str) -> dict[str, Any]:
        """The JSON envelope for this error."""
        return error_body(
            self.status, self.code, self.message, request_id=request_id, hint=self.hint, extra=self.extra
        )

    def response(self, request_id: str) -> JSONResponse:
        """The complete HTTP response for this error."""
        return JSONResponse(self.body(request_id), status_code=self.status, headers=self.headers)


def default_code_and_hint(status: int) -> tuple[str, str]:
    """The generic code and hint for ``status`` (used when a raiser names no code)."""
    if status in _STATUS_DEFAULTS:
        return _STATUS_DEFAULTS[status]
    return ("server_error", "Retry later.") if status >= 500 else ("request_error", "Check the request.")


def error_body(
    status: int,
    code: str,
    message: str,
    *,
    request_id: str,
    hint: str,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Build the envelope (docs/lium-api.md#error-envelope); ``extra`` adds top-level fields (e.g. ``validation_errors``)."""
    body: dict[str, Any] = {
        "success": False,
        "error": {"code": code, "message": message, "hint": hint, "request_id": request_id},
        "message": message,
        "status_code": status,
    }
    body.update(extra or {})
    return body
