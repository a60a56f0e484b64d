"""One HTTP exchange with retries: the single place that decides when a request may be resent.

Reads (GET) are resent after connection failures, timeouts, 408, 5xx and 429. Mutations (POST, PUT,
DELETE) are resent only when the server provably did not execute them: after a 429 (contract §2.2) or when
the TCP connection could not even be opened. Any other failure of a mutation may have taken effect and
raises :class:`LiumUncertainOutcome`; the caller reconciles instead of resending.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import httpx

from lium_provider.api.envelope import ErrorDetails, parse_error_body
from lium_provider.api.errors import (
    IDEMPOTENCY_UNCERTAIN_CODES,
    SCOPE_CODES,
    LiumAuthError,
    LiumCancelled,
    LiumError,
    LiumNotFound,
    LiumProtocolError,
    LiumRateLimited,
    LiumUnavailable,
    LiumUncertainOutcome,
)
from lium_provider.api.retry import RetryPolicy, parse_retry_after

MAX_RESPONSE_BYTES = 16 * 1024 * 1024  # the whole public feed is a few hundred KiB
MAX_ERROR_BODY_BYTES = 64 * 1024  # an error envelope is tiny; a larger body is ignored, not parsed
_SAFE_METHODS = frozenset({"GET", "HEAD"})
# Failures raised before a single byte of the request left this machine.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)

_E = TypeVar("_E", bound=LiumError)


@dataclass(frozen=True)
class Answer:
    """A successful (2xx) response: its status, headers and decoded JSON (None when the body is empty)."""

    status: int
    headers: httpx.Headers
    data: object


class HttpTransport:
    """Sends requests with the retry policy above; counts every request it puts on the wire."""

    def __init__(
        self,
        *,
        timeout: float,
        user_agent: str,
        sleep: Callable[[float], None] | None,
        cancel: Callable[[], bool] | None,
        policy: RetryPolicy,
        rng: random.Random | None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._http = httpx.Client(
            timeout=httpx.Timeout(timeout),
            follow_redirects=False,
            headers={"User-Agent": user_agent, "Accept": "application/json"},
            transport=transport,
            trust_env=False,  # never route Lium traffic (and its key) through an ambient proxy
        )
        self._sleep = sleep if sleep is not None else time.sleep
        self._cancel = cancel if cancel is not None else (lambda: False)
        self.policy = policy
        self._rng = rng if rng is not None else random.Random()
        self._lock = threading.Lock()
        self._request_count = 0

    @property
    def request_count(self) -> int:
        with self._lock:
            return self._request_count

    def close(self) -> None:
        self._http.close()

    def pause(self, seconds: float, *, method: str | None = None, path: str | None = None) -> None:
        """Wait ``seconds`` through the caller's sleep; raise :class:`LiumCancelled` once cancel is set."""
        self._raise_if_cancelled(method, path)
        if seconds > 0:
            self._sleep(seconds)
        self._raise_if_cancelled(method, path)

    def backoff(self, retry_number: int) -> float:
        """The jittered delay before resend number ``retry_number`` (0-based)."""
        return self.policy.backoff(retry_number, self._rng)

    def request(
        self,
        method: str,
        url: str,
        *,
        path: str,
        headers: Mapping[str, str] | None = None,
        json_body: object = None,
        params: Mapping[str, str | int] | None = None,
        secrets: Iterable[str] = (),
    ) -> Answer:
        """Send until a definitive answer; return a 2xx :class:`Answer` or raise a :class:`LiumError`.

        ``path`` names the request in errors (never the query or body); ``secrets`` are strings that must
        never appear in an error message taken from the response.
        """
        secret_list = tuple(secrets)
        mutation = method not in _SAFE_METHODS
        retry_number = 0
        while True:
            self._raise_if_cancelled(method, path)
            try:
                status, response_headers, body = self._exchange(method, url, path, headers, json_body, params)
            except httpx.DecodingError:
                raise LiumProtocolError(
                    "response body could not be decoded (bad content encoding)", method=method, path=path
                ) from None
            except httpx.TransportError as exc:
                delay = self._after_transport_error(exc, method, path, mutation, retry_number)
            else:
                answer, delay = self._after_response(
                    status, response_headers, body, method, path, mutation, retry_number, secret_list
                )
                if answer is not None:
                    return answer
            self.pause(delay, method=method, path=path)
            retry_number += 1

    def _exchange(
        self,
        method: str,
        url: str,
        path: str,
        headers: Mapping[str, str] | None,
        json_body: object,
        params: Mapping[str, str | int] | None,
    ) -> tuple[int, httpx.Headers, bytes]:
        request = self._http.build_request(
            method, url, headers=headers, json=json_body, params=dict(params) if params else None
        )
        with self._lock:
            self._request_count += 1
        response = self._http.send(request, stream=True)
        try:
            limit = MAX_RESPONSE_BYTES if 200 <= response.status_code < 300 else MAX_ERROR_BODY_BYTES
            chunks: list[bytes] = []
            size = 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > limit:
                    if limit == MAX_ERROR_BODY_BYTES:
                        return response.status_code, response.headers, b""
                    raise LiumProtocolError(
                        f"response body larger than {limit} bytes", method=method, path=path
                    )
                chunks.append(chunk)
            return response.status_code, response.headers, b"".join(chunks)
        finally:
            response.close()

    def _after_transport_error(
        self, exc: httpx.TransportError, method: str, path: str, mutation: bool, retry_number: int
    ) -> float:
        what = _describe_transport_error(exc)
        not_sent = isinstance(exc, _NOT_SENT)
        if mutation and not not_sent:
            raise LiumUncertainOutcome(
                f"no complete answer ({what}); the request may or may not have taken effect",
                method=method,
                path=path,
            ) from None
        if retry_number >= self.policy.max_retries:
            error = LiumUnavailable(
                f"no answer after {retry_number + 1} attempts ({what})", method=method, path=path
            )
            error.sent = not not_sent
            raise error from None
        return self.backoff(retry_number)

    def _after_response(
        self,
        status: int,
        headers: httpx.Headers,
        body: bytes,
        method: str,
        path: str,
        mutation: bool,
        retry_number: int,
        secrets: tuple[str, ...],
    ) -> tuple[Answer | None, float]:
        if 200 <= status < 300:
            data = None if method == "DELETE" or not body.strip() else decode_json(body, method, path, status)
            return Answer(status, headers, data), 0.0
        details = _error_details(body, headers, secrets)
        if status == 429:
            return None, self._rate_limit_delay(headers, details, method, path, retry_number)
        if status >= 500 or status == 408:
            if mutation:
                raise self._error(
                    LiumUncertainOutcome,
                    status,
                    details,
                    method,
                    path,
                    headers,
                    "the request may have taken effect",
                )
            if retry_number >= self.policy.max_retries:
                raise self._error(LiumUnavailable, status, details, method, path, headers, "server error")
            return None, self.backoff(retry_number)
        raise self._classify(status, details, method, path, headers, mutation)

    def _rate_limit_delay(
        self, headers: httpx.Headers, details: ErrorDetails, method: str, path: str, retry_number: int
    ) -> float:
        retry_after = parse_retry_after(headers.get("Retry-After"), datetime.now(UTC))
        too_long = retry_after is not None and retry_after > self.policy.max_retry_after
        if too_long or retry_number >= self.policy.max_retries:
            reason = (
                f"rate limited; the server asks to wait {retry_after:g} s"
                if retry_after is not None
                else f"rate limited after {retry_number + 1} attempts"
            )
            error = self._error(LiumRateLimited, 429, details, method, path, headers, reason)
            error.retry_after = retry_after
            raise error
        # The server did not execute a 429'd request; resend exactly when it says, never earlier.
        return retry_after if retry_after is not None else self.backoff(retry_number)

    def _classify(
        self,
        status: int,
        details: ErrorDetails,
        method: str,
        path: str,
        headers: httpx.Headers,
        mutation: bool,
    ) -> LiumError:
        if mutation and status == 409 and details.code in IDEMPOTENCY_UNCERTAIN_CODES:
            return self._error(
                LiumUncertainOutcome,
                status,
                details,
                method,
                path,
                headers,
                "the first request's outcome is unknown",
            )
        if 300 <= status < 400:
            return self._error(
                LiumProtocolError, status, details, method, path, headers, "unexpected redirect"
            )
        if status == 404:
            return self._error(LiumNotFound, status, details, method, path, headers, "not found")
        if status == 401 or (status == 403 and details.code in SCOPE_CODES):
            return self._error(LiumAuthError, status, details, method, path, headers, "not authorised")
        if not 400 <= status < 500:
            return self._error(LiumProtocolError, status, details, method, path, headers, "unexpected status")
        return self._error(LiumError, status, details, method, path, headers, "request refused")

    @staticmethod
    def _error(
        kind: type[_E],
        status: int,
        details: ErrorDetails,
        method: str,
        path: str,
        headers: httpx.Headers,
        fallback: str,
    ) -> _E:
        return kind(
            details.message or fallback,
            method=method,
            path=path,
            status=status,
            code=details.code,
            request_id=details.request_id,
            idempotent_replayed=headers.get("Idempotent-Replayed", "").strip().lower() == "true",
        )

    def _raise_if_cancelled(self, method: str | None, path: str | None) -> None:
        if self._cancel():
            raise LiumCancelled("cancelled while waiting for the Lium API", method=method, path=path)


def decode_json(body: bytes, method: str, path: str, status: int) -> Any:
    """Decode a JSON body strictly (no NaN/Infinity, bounded nesting); raise LiumProtocolError otherwise."""
    try:
        return json.loads(body, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        raise LiumProtocolError(
            f"response is not valid JSON ({len(body)} bytes, possibly truncated)",
            method=method,
            path=path,
            status=status,
        ) from None


def _reject_constant(name: str) -> object:
    raise ValueError(f"non-standard JSON constant {name}")


def _error_details(body: bytes, headers: httpx.Headers, secrets: tuple[str, ...]) -> ErrorDetails:
    try:
        data = json.loads(body, parse_constant=_reject_constant) if body else None
    except (ValueError, RecursionError):
        data = None
    return parse_error_body(data, secrets, headers.get("X-Request-Id"))


def _describe_transport_error(exc: httpx.TransportError) -> str:
    # The class name is informative and, unlike str(exc), cannot carry a URL or header.
    kind = type(exc).__name__
    if isinstance(exc, httpx.TimeoutException):
        return f"timed out: {kind}"
    return f"connection failed: {kind}"
