"""One HTTP exchange with retries: the single place that decides when a request may be resent.

Reads (GET) are resent after connection failures, timeouts, 408, 5xx and 429. Mutations (POST, PUT,
DELETE) are resent only when the server provably did not execute them: after a 429 (docs/lium-api.md#status-codes) or when
the TCP connection could not even be opened. Any other failure of a mutation may have taken effect and
raises :class:`LiumUncertainOutcome`; the caller reconciles instead of resending.

A wait between attempts ends with :class:`tfbridge.Cancelled` once the caller's cancel flag is set: the
one cancellation of the project, whoever waits. ``tfbridge.cancel`` is standard library only, so the
client still imports none of the plugin framework (gRPC, schemas) and works without Terraform.
"""

from __future__ import annotations

import functools
import json
import os
import random
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import httpx

from lium_provider.api.envelope import ErrorDetails, parse_error_body
from lium_provider.api.errors import (
    IDEMPOTENCY_UNCERTAIN_CODES,
    SCOPE_CODES,
    LiumAuthError,
    LiumBudgetExceeded,
    LiumError,
    LiumNotFound,
    LiumProtocolError,
    LiumRateLimited,
    LiumUnavailable,
    LiumUncertainOutcome,
)
from lium_provider.api.retry import RetryPolicy, parse_retry_after
from tfbridge.cancel import Cancelled

# One logical request, resends included, ends within the request timeout (waits a 429 asks for aside:
# they have their own budget and the operation's deadline); a connection must open within the connect one.
DEFAULT_REQUEST_TIMEOUT_SECONDS = 30.0
DEFAULT_CONNECT_TIMEOUT_SECONDS = 10.0
MAX_RESPONSE_BYTES = 16 * 1024 * 1024  # the whole public feed is a few hundred KiB
MAX_ERROR_BODY_BYTES = 64 * 1024  # an error envelope is tiny; a larger body is ignored, not parsed
_SAFE_METHODS = frozenset({"GET", "HEAD"})
# Failures raised before a single byte of the request left this machine.
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
# Every thread of a provider process (Terraform's -parallelism, up to this) keeps its connection,
# instead of httpx's 20 kept and the rest reconnecting.
MAX_CONNECTIONS = 100
# An idle connection is reused only this long: under the 5 s after which uvicorn (the server of
# FastAPI apps) closes it, so a request is not sent down a connection the server is closing at that
# moment; such a race drops the request with an unknown outcome (seen at 200 pods, 1 run in 5).
KEEPALIVE_SECONDS = 4.0

_E = TypeVar("_E", bound=LiumError)


def tls_context() -> ssl.SSLContext:
    """The TLS settings of every client this process makes, as httpx would make them (``SSL_CERT_FILE``
    or ``SSL_CERT_DIR`` when set, else certifi's bundle). Loading the CA bundle costs ~40 ms of CPU, and
    Terraform starts the provider several times per command: it is loaded once per process and
    setting (once for all of a zygote's forks, which inherit it), not once per client. A setting is
    keyed by the path it names from this process's working directory and that file's modification
    time and size: a fork in another directory, or a bundle rewritten since, gets a context of its own."""
    return _tls_context(_trust_setting("SSL_CERT_FILE"), _trust_setting("SSL_CERT_DIR"))


TrustSetting = tuple[str, int, int] | None
"""A trust variable's absolute path, modification time (ns) and size (``-1, -1`` when missing), or None."""


def _trust_setting(variable: str) -> TrustSetting:
    value = os.environ.get(variable)
    if not value:
        return None
    path = os.path.abspath(value)
    try:
        stat = os.stat(path)
    except OSError:
        return path, -1, -1  # httpx reports the missing file when it builds the context
    return path, stat.st_mtime_ns, stat.st_size


@functools.cache
def _tls_context(cert_file: TrustSetting, cert_dir: TrustSetting) -> ssl.SSLContext:
    return httpx.create_ssl_context(trust_env=True)  # reads the two variables the cache is keyed by


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
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_SECONDS,
        user_agent: str,
        sleep: Callable[[float], None] | None,
        cancel: Callable[[], bool] | None,
        policy: RetryPolicy,
        rng: random.Random | None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._http = httpx.Client(
            timeout=httpx.Timeout(timeout, connect=min(connect_timeout, timeout)),
            follow_redirects=False,
            headers={"User-Agent": user_agent, "Accept": "application/json"},
            verify=tls_context(),
            transport=transport,
            limits=httpx.Limits(
                max_connections=MAX_CONNECTIONS,
                max_keepalive_connections=MAX_CONNECTIONS,
                keepalive_expiry=KEEPALIVE_SECONDS,
            ),
            # trust_env stays on, like Go providers: HTTPS_PROXY / NO_PROXY and SSL_CERT_FILE are honoured.
        )
        self._timeout = timeout
        self._connect_timeout = connect_timeout
        self._sleep = sleep if sleep is not None else time.sleep
        self._cancel = cancel if cancel is not None else (lambda: False)
        self.policy = policy
        self._rng = rng if rng is not None else random.Random()
        self._lock = threading.Lock()
        self._request_count = 0
        self._holds = _RetryAfterHolds()

    @property
    def timeout(self) -> float:
        """The longest one request may take, resends after failed connections and server errors included."""
        return self._timeout

    @property
    def request_count(self) -> int:
        with self._lock:
            return self._request_count

    def close(self) -> None:
        self._http.close()

    def pause(self, seconds: float) -> None:
        """Wait ``seconds`` through the caller's sleep; raise :class:`Cancelled` once cancel is set."""
        self._raise_if_cancelled()
        if seconds > 0:
            self._sleep(seconds)
        self._raise_if_cancelled()

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
        text: bool = False,
    ) -> Answer:
        """Send until a definitive answer; return a 2xx :class:`Answer` or raise a :class:`LiumError`.

        ``path`` names the request in errors (never the query or body); ``secrets`` are strings that must
        never appear in an error message taken from the response; with ``text`` the answer's ``data`` is
        its body as text (UTF-8, undecodable bytes replaced), not JSON. Attempts and the waits between them
        end within the transport's ``timeout``, plus whatever 429 answers asked to wait.
        """
        call = _Call(method, url, path, headers, json_body, params, tuple(secrets), text)
        retry_number = 0
        # 429s have their own budget, in seconds waited: under sustained rate limiting every request
        # keeps its place and goes out again exactly when the server says, however often that takes.
        rate_limits = _RateLimitWait()
        started = time.monotonic()
        while True:
            self._raise_if_cancelled()
            held = self._holds.left(call.identity)
            if held > 0:  # this very request was refused for another thread; Lium's wait holds for all
                if reason := self._beyond_rate_limit_budget(held, held, rate_limits):
                    error = LiumRateLimited(reason, method=call.method, path=call.path, status=429)
                    error.retry_after = held
                    raise error
                rate_limits.seconds += held
                self.pause(held)
                continue
            clock = _Clock(started + self._timeout + rate_limits.seconds)
            try:
                reply = self._exchange(call, clock)
            except httpx.DecodingError:
                raise LiumProtocolError(
                    "response body could not be decoded (bad content encoding)", method=method, path=path
                ) from None
            except httpx.TransportError as exc:
                delay = self._after_transport_error(exc, call, retry_number, clock)
            else:
                if 200 <= reply.status < 300:
                    return reply.answer(call)
                if reply.status == 429:
                    delay = self._rate_limit_delay(reply, call, rate_limits)
                    self.pause(delay)
                    continue
                delay = self._after_error_status(reply, call, retry_number, clock)
            self.pause(delay)
            retry_number += 1

    def stream_lines(
        self,
        method: str,
        url: str,
        *,
        path: str,
        headers: Mapping[str, str] | None = None,
        params: Mapping[str, str | int] | None = None,
        secrets: Iterable[str] = (),
    ) -> Iterator[str]:
        """Send once and yield the 2xx body line by line as it arrives (a followed log), for as long as
        the server writes; a non-2xx answer raises the :class:`LiumError` :meth:`request` would. Not
        resent: a followed stream cut off is the caller's to start again. Each read waits at most the
        transport's timeout for more, so a followed pod that prints nothing must be read again."""
        call = _Call(method, url, path, headers, None, params, tuple(secrets), True)
        self._raise_if_cancelled()
        request = self._http.build_request(
            method,
            url,
            headers=headers,
            params=dict(params) if params else None,
            timeout=httpx.Timeout(None, connect=self._connect_timeout),
        )
        with self._lock:
            self._request_count += 1
        try:
            response = self._http.send(request, stream=True)
        except httpx.TransportError as exc:
            raise LiumUnavailable(_describe_transport_error(exc), method=method, path=path) from None
        try:
            if not 200 <= response.status_code < 300:
                body = response.read()[:MAX_ERROR_BODY_BYTES]
                reply = _Reply(response.status_code, response.headers, body)
                raise _classify(reply, call, _error_details(body, response.headers, call.secrets))
            for line in response.iter_lines():
                self._raise_if_cancelled()
                yield line
        except httpx.TransportError as exc:
            raise LiumUnavailable(_describe_transport_error(exc), method=method, path=path) from None
        finally:
            response.close()

    def _exchange(self, call: _Call, clock: _Clock) -> _Reply:
        request = self._http.build_request(
            call.method,
            call.url,
            headers=call.headers,
            json=call.json_body,
            params=dict(call.params) if call.params else None,
            timeout=clock.attempt_timeout(self._connect_timeout),
        )
        with self._lock:
            self._request_count += 1
        response = self._http.send(request, stream=True)
        try:
            success = 200 <= response.status_code < 300
            limit = MAX_RESPONSE_BYTES if success else MAX_ERROR_BODY_BYTES
            chunks: list[bytes] = []
            size = 0
            for chunk in response.iter_bytes():
                # httpx bounds each read, not the body: a server trickling bytes would hold the call
                # forever. The request's deadline bounds the whole answer.
                if time.monotonic() > clock.deadline:
                    raise httpx.ReadTimeout(
                        "the answer's body outlasted the request timeout", request=request
                    )
                size += len(chunk)
                if size > limit:
                    if not success:  # an oversize error body is ignored, the status still counts
                        return _Reply(response.status_code, response.headers, b"")
                    raise LiumProtocolError(
                        f"response body larger than {limit} bytes",
                        method=call.method,
                        path=call.path,
                        status=response.status_code,
                    )
                chunks.append(chunk)
            return _Reply(response.status_code, response.headers, b"".join(chunks))
        finally:
            response.close()

    def _after_transport_error(
        self, exc: httpx.TransportError, call: _Call, retry_number: int, clock: _Clock
    ) -> float:
        """The delay before a resend, or raise: a mutation that may have been sent is never resent."""
        what = _describe_transport_error(exc)
        not_sent = isinstance(exc, _NOT_SENT)
        if call.mutation and not not_sent:
            raise LiumUncertainOutcome(
                f"no complete answer from {call.shown_url} ({what}); {_MAY_HAVE_TAKEN_EFFECT}",
                method=call.method,
                path=call.path,
            ) from None
        delay = self.backoff(retry_number)
        if retry_number >= self.policy.max_retries or not clock.allows(delay):
            attempts = "1 attempt" if retry_number == 0 else f"{retry_number + 1} attempts"
            error = LiumUnavailable(
                f"no answer from {call.shown_url} after {attempts} ({what}; request timeout "
                f"{self._timeout:g} s, connect timeout {self._connect_timeout:g} s)",
                method=call.method,
                path=call.path,
            )
            error.sent = not not_sent
            raise error from None
        return delay

    def _after_error_status(self, reply: _Reply, call: _Call, retry_number: int, clock: _Clock) -> float:
        """The delay before a resend after a non-2xx status, or raise the error it means."""
        details = _error_details(reply.body, reply.headers, call.secrets)
        if reply.status >= 500 or reply.status == 408:
            if call.mutation:
                raise reply.error(
                    LiumUncertainOutcome, call, details, "server error", note=_MAY_HAVE_TAKEN_EFFECT
                )
            delay = self.backoff(retry_number)
            if retry_number >= self.policy.max_retries or not clock.allows(delay):
                raise reply.error(LiumUnavailable, call, details, "server error")
            return delay
        raise _classify(reply, call, details)

    def _rate_limit_delay(self, reply: _Reply, call: _Call, waited: _RateLimitWait) -> float:
        """How long to wait before resending a 429'd request (not executed), or raise past the budget."""
        details = _error_details(reply.body, reply.headers, call.secrets)
        retry_after = parse_retry_after(reply.headers.get("Retry-After"), datetime.now(UTC))
        delay = retry_after if retry_after is not None else self.backoff(min(waited.count, 6))
        # Every thread sending this request waits too, also when this one gives up now.
        self._holds.hold(call.identity, delay)
        if reason := self._beyond_rate_limit_budget(retry_after, delay, waited):
            error = reply.error(LiumRateLimited, call, details, reason)
            error.retry_after = retry_after
            raise error
        waited.count += 1
        waited.seconds += delay
        # Exactly when the server says, never earlier.
        return delay

    def _beyond_rate_limit_budget(
        self, retry_after: float | None, delay: float, waited: _RateLimitWait
    ) -> str | None:
        """Why waiting ``delay`` more is not done (a ``Retry-After`` too long, the 429 budget spent), or None."""
        if retry_after is not None and retry_after > self.policy.max_retry_after:
            return f"rate limited; the server asks to wait {retry_after:g} s"
        if waited.seconds + delay > self.policy.max_rate_limited_seconds:
            return f"still rate limited after waiting {waited.seconds:.0f} s over {waited.count} attempts"
        return None

    def _raise_if_cancelled(self) -> None:
        if self._cancel():
            raise Cancelled()


_MAY_HAVE_TAKEN_EFFECT = "the request may or may not have taken effect"


@dataclass(frozen=True)
class _Clock:
    """When one logical request must be done (monotonic seconds)."""

    deadline: float

    def attempt_timeout(self, connect: float) -> httpx.Timeout:
        """httpx's timeouts for the next attempt: what is left, and at most ``connect`` to connect."""
        left = max(0.001, self.deadline - time.monotonic())
        return httpx.Timeout(left, connect=min(connect, left))

    def allows(self, delay: float) -> bool:
        """Whether a resend after ``delay`` still starts before the deadline."""
        return time.monotonic() + delay < self.deadline


class _RetryAfterHolds:
    """When each refused request may go out again, shared by every thread of the transport.

    A 429 answers the request, not the thread that sent it: when one waiter gives up at its deadline,
    another asking the same thing (the pod watcher's listing) must still wait out the ``Retry-After``.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._until: dict[tuple[str, str, str], float] = {}  # request identity -> monotonic time

    def hold(self, identity: tuple[str, str, str], seconds: float) -> None:
        now = time.monotonic()
        with self._lock:
            self._until = {key: until for key, until in self._until.items() if until > now}
            self._until[identity] = max(self._until.get(identity, now), now + seconds)

    def left(self, identity: tuple[str, str, str]) -> float:
        """Seconds until ``identity`` may be sent (0 when it may now)."""
        with self._lock:
            until = self._until.get(identity)
        return 0.0 if until is None else max(0.0, until - time.monotonic())


@dataclass
class _RateLimitWait:
    """What one request has spent waiting on 429 answers so far."""

    count: int = 0
    seconds: float = 0.0


@dataclass(frozen=True)
class _Call:
    """One logical request, as the retry loop resends it."""

    method: str
    url: str
    path: str
    headers: Mapping[str, str] | None
    json_body: object
    params: Mapping[str, str | int] | None
    secrets: tuple[str, ...]
    text: bool = False

    @property
    def identity(self) -> tuple[str, str, str]:
        """What makes two sends the same request: method, URL with its query, and body."""
        query = sorted((self.params or {}).items())
        return (self.method, f"{self.url}?{query}", json.dumps(self.json_body, sort_keys=True, default=str))

    @property
    def mutation(self) -> bool:
        return self.method not in _SAFE_METHODS

    @property
    def shown_url(self) -> str:
        """The URL without its query (which may carry filters or tokens), for error messages."""
        return str(httpx.URL(self.url).copy_with(query=None, fragment=None))


@dataclass(frozen=True)
class _Reply:
    """One HTTP answer, body fully read (or dropped when an error body is oversize)."""

    status: int
    headers: httpx.Headers
    body: bytes

    def answer(self, call: _Call) -> Answer:
        if call.text:
            return Answer(self.status, self.headers, self.body.decode("utf-8", "replace"))
        empty = (
            call.method == "DELETE" or not self.body.strip()
        )  # DELETE bodies are ignored (docs/lium-api.md#conventions)
        data = None if empty else decode_json(self.body, call.method, call.path, self.status)
        return Answer(self.status, self.headers, data)

    def error(
        self, kind: type[_E], call: _Call, details: ErrorDetails, fallback: str, *, note: str | None = None
    ) -> _E:
        """An error of ``kind`` for this reply: the server's safe message (else ``fallback``) + ``note``."""
        message = details.message or fallback
        return kind(
            f"{message.rstrip('.')}; {note}" if note else message,
            method=call.method,
            path=call.path,
            status=self.status,
            code=details.code,
            request_id=details.request_id,
            idempotent_replayed=self.headers.get("Idempotent-Replayed", "").strip().lower() == "true",
        )


def _classify(reply: _Reply, call: _Call, details: ErrorDetails) -> LiumError:
    """The error for a non-retryable, non-2xx status."""
    status = reply.status
    if call.mutation and status == 409 and details.code in IDEMPOTENCY_UNCERTAIN_CODES:
        return reply.error(
            LiumUncertainOutcome, call, details, "idempotency conflict", note=_MAY_HAVE_TAKEN_EFFECT
        )
    if 300 <= status < 400:
        return reply.error(LiumProtocolError, call, details, "unexpected redirect")
    if status == 404:
        return reply.error(LiumNotFound, call, details, "not found")
    if status == 401 or (status == 403 and (details.code in SCOPE_CODES or details.missing_scope)):
        refused = reply.error(LiumAuthError, call, details, "not authorised")
        refused.missing_scope = details.missing_scope
        return refused
    if status == 402 and details.budget is not None:
        over = reply.error(LiumBudgetExceeded, call, details, "the API key's budget is spent")
        over.budget = details.budget
        return over
    if not 400 <= status < 500:
        return reply.error(LiumProtocolError, call, details, "unexpected status")
    return reply.error(LiumError, call, details, "request refused")


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
