"""The outermost ASGI layer: request ids on every response, a bound on request bodies, and the fault
plan on ``/api`` routes.

It wraps the FastAPI app directly (not through ``add_middleware``) so that it receives the server's
own ``send``: dropping a connection with no response at all (fault ``drop_after_commit``) needs the
server's transport, which Starlette's middleware stack would hide.
"""

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any

from lium_emulator.errors import ApiError
from lium_emulator.faults import FaultDecision, FaultEngine

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
AsgiApp = Callable[[Scope, Receive, Send], Awaitable[None]]

API_PREFIX = "/api"
MAX_BODY_BYTES = 4 * 1024 * 1024
"""The largest request body read (the largest the API takes, a template's, stays well under it)."""
POD_BODY_BYTES = 64 * 1024 * 1024
"""The bodies of requests from pods the emulator holds at once, all pods together."""

logger = logging.getLogger(__name__)


class EdgeMiddleware:
    """Adds ``X-Request-Id``; bounds request bodies; decides and applies faults for ``/api`` requests."""

    def __init__(
        self,
        app: AsgiApp,
        engine: FaultEngine,
        client_of: Callable[[Scope], str],
        on_request: Callable[[str, str, str], None] | None = None,
        from_pod: Callable[[Scope], bool] = lambda scope: False,
    ) -> None:
        self._app = app
        self._engine = engine
        self._client_of = client_of
        self._on_request = on_request
        self._from_pod = from_pod
        self._pod_body_bytes = 0  # of pods' requests' bodies, held now

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        request_id = uuid.uuid4().hex
        state = scope.setdefault("state", {})
        state["request_id"] = request_id
        tagged_send = _with_request_id(send, request_id)
        async with self._body(scope, receive) as body:
            if isinstance(body, ApiError):
                await _send_response(tagged_send, body.status, body.body(request_id), body.headers)
                return
            await self._serve(scope, body, send, tagged_send, request_id)

    @contextlib.asynccontextmanager
    async def _body(self, scope: Scope, receive: Receive) -> AsyncIterator[Receive | ApiError]:
        """A ``receive`` that replays the request's body, read here whole; or why it is refused unread.

        The routes read the whole body into memory before they check anything, the API key included:
        without bounds, anyone reaching the port (a pod too) could make the emulator hold gigabytes. So
        a body is at most ``MAX_BODY_BYTES``, and pods' bodies together at most ``POD_BODY_BYTES`` at a
        time (each pod may hold hundreds of connections); the host's requests are not held to that.
        """
        from_pod = self._from_pod(scope)
        charged = 0
        try:
            declared = dict(scope.get("headers") or []).get(b"content-length", b"")
            if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
                yield _too_large()
                return
            read: list[Message] = []
            size = 0
            while True:
                message = await receive()
                read.append(message)
                if message["type"] != "http.request":
                    break  # the client went away: the app sees it
                chunk = len(message.get("body", b""))
                size += chunk
                if size > MAX_BODY_BYTES:
                    yield _too_large()
                    return
                if from_pod:
                    if self._pod_body_bytes + chunk > POD_BODY_BYTES:
                        yield ApiError(
                            503,
                            "emulator_busy",
                            "Requests from pods hold as much memory as the emulator gives them; retry.",
                            headers={"Retry-After": "1"},
                        )
                        return
                    self._pod_body_bytes += chunk
                    charged += chunk
                if not message.get("more_body", False):
                    break

            async def replay() -> Message:
                return read.pop(0) if read else await receive()

            yield replay
        finally:
            self._pod_body_bytes -= charged

    async def _serve(
        self, scope: Scope, receive: Receive, send: Send, tagged_send: Send, request_id: str
    ) -> None:
        path: str = scope["path"]
        if not path.startswith(API_PREFIX + "/"):
            await self._app(scope, receive, tagged_send)
            return
        state = scope["state"]
        client = self._client_of(scope)
        if self._on_request is not None:
            self._on_request(client, scope["method"], path[len(API_PREFIX) :])
        decision = self._engine.decide(scope["method"], path[len(API_PREFIX) :], client)
        state["fault"] = decision
        if decision.reject is not None:
            await _send_response(
                tagged_send, decision.reject.status, decision.reject.body(request_id), decision.reject.headers
            )
            return
        if not decision.rewrites_response:
            await self._app(scope, receive, tagged_send)
            return
        messages = await _run_captured(self._app, scope, receive)
        if decision.latency_seconds > 0 and not decision.latency_consumed:
            await asyncio.sleep(decision.latency_seconds)
        await _deliver(decision, messages, send, tagged_send, request_id)


def _too_large() -> ApiError:
    return ApiError(413, "request_too_large", f"The request body is larger than {MAX_BODY_BYTES} bytes.")


async def _deliver(
    decision: FaultDecision, messages: list[Message], raw_send: Send, send: Send, request_id: str
) -> None:
    if decision.drop_after_commit:
        await _drop_connection(raw_send)
    elif decision.error_after_commit is not None:
        error = decision.error_after_commit
        await _send_response(send, error.status, error.body(request_id), error.headers)
    elif decision.garbage is not None:
        body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.response.body")
        content, content_type = garble(body, decision.garbage)
        await _send_raw(send, 200, content, content_type)
    else:
        for message in messages:
            await send(message)


def garble(body: bytes, how: str) -> tuple[bytes, str]:
    """A damaged version of a JSON body: cut in half, with its top-level type swapped, or not JSON."""
    if how == "truncated":
        return body[: max(1, len(body) // 2)], "application/json"
    if how == "wrong_type":
        try:
            data = json.loads(body)
        except ValueError:
            data = None
        swapped: Any = [data] if isinstance(data, dict) else {"data": data}
        return json.dumps(swapped).encode(), "application/json"
    return b"<html><body><h1>502 Bad Gateway</h1></body></html>", "text/html"


def _with_request_id(send: Send, request_id: str) -> Send:
    async def tagged(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"x-request-id"]
            message["headers"] = [*headers, (b"x-request-id", request_id.encode())]
        await send(message)

    return tagged


async def _run_captured(app: AsgiApp, scope: Scope, receive: Receive) -> list[Message]:
    messages: list[Message] = []

    async def capture(message: Message) -> None:
        messages.append(message)

    try:
        await app(scope, receive, capture)
    except Exception:
        # Starlette re-raises an unhandled error after sending its 500 answer; keep that answer.
        if not messages:
            raise
        logger.exception("error after the response was produced")
    return messages


async def _send_response(send: Send, status: int, body: dict[str, Any], headers: dict[str, str]) -> None:
    await _send_raw(send, status, json.dumps(body).encode(), "application/json", headers)


async def _send_raw(
    send: Send, status: int, content: bytes, content_type: str, headers: dict[str, str] | None = None
) -> None:
    raw_headers = [
        (b"content-type", content_type.encode()),
        (b"content-length", str(len(content)).encode()),
        *((k.lower().encode(), v.encode()) for k, v in (headers or {}).items()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": content, "more_body": False})


async def _drop_connection(raw_send: Send) -> None:
    """Close the client connection without sending a byte of response."""
    # uvicorn passes its per-request cycle's bound ``send``; the cycle owns the transport.
    transport = getattr(getattr(raw_send, "__self__", None), "transport", None)
    if transport is None:
        raise ConnectionAbortedError("cannot reach the server transport to drop the connection")
    transport.close()
    # Let the server notice the disconnect before the app returns, so it sends nothing itself.
    for _ in range(3):
        await asyncio.sleep(0)
