"""Hostile response bodies never escape as anything but a clear LiumError.

A real server cannot be made to produce every malformed body, so this file alone feeds bodies through
``httpx.MockTransport``: garbage bytes, wrong JSON types, truncated JSON, deep nesting, oversize bodies,
and error envelopes echoing the API key or a registry password. Every client call must either return its
typed result or raise a :class:`LiumError` whose message is one short line free of secrets.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lium_provider.api.client import LiumClient
from lium_provider.api.errors import LiumError, LiumProtocolError
from lium_provider.api.models import RentRequest, TemplateSpec
from lium_provider.api.transport import MAX_RESPONSE_BYTES

API_KEY = "sk-test-KEY-0123456789"
PASSWORD = "registry-Pa55word-xyz"
BASE = "http://127.0.0.1:9/api"

RENT = RentRequest(pod_name="p1", template_id="t1", user_public_key="ssh-ed25519 AAAA")
CALLS: dict[str, Callable[[LiumClient], object]] = {
    "me": lambda c: c.me(),
    "version_features": lambda c: c.version_features(),
    "list_pods": lambda c: c.list_pods(),
    "get_pod": lambda c: c.get_pod("p1"),
    "delete_pod": lambda c: c.delete_pod("p1"),
    "rent": lambda c: c.rent("e1", RENT, idempotency_key="k1"),
    "events": lambda c: c.events(limit=10),
    "create_template": lambda c: c.create_template(TemplateSpec(name="n", docker_image="img")),
    "list_templates": lambda c: c.list_templates(),
    "get_template": lambda c: c.get_template("t1"),
    "create_docker_credential": lambda c: c.create_docker_credential("bob", PASSWORD),
    "update_docker_credential": lambda c: c.update_docker_credential("c1", "bob", PASSWORD),
    "get_docker_credential": lambda c: c.get_docker_credential("c1"),
    "create_volume": lambda c: c.create_volume("v", None),
    "get_volume": lambda c: c.get_volume("v1"),
    "nodes_feed": lambda c: c.nodes_feed("http://127.0.0.1:9/api/public/v1/nodes"),
}
SENDS_PASSWORD = {"create_docker_credential", "update_docker_credential"}

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=20,
)
secret_text = st.sampled_from([API_KEY, PASSWORD, f"key {API_KEY} rejected", f"bad password {PASSWORD}"])
# Objects that look like the real shapes, with fields replaced by hostile values.
plausible = st.fixed_dictionaries(
    {},
    optional={
        "id": json_values | secret_text,
        "pod_id": json_values | secret_text,
        "pod_name": json_values,
        "status": json_values,
        "gpu_count": json_values,
        "ports_mapping": json_values | st.dictionaries(secret_text, json_values, max_size=2),
        "ssh_connect_cmd": json_values | secret_text,
        "name": json_values,
        "nodes": json_values,
        "features": json_values,
        "error": st.fixed_dictionaries(
            {}, optional={"code": json_values | secret_text, "message": json_values | secret_text}
        ),
        "message": json_values | secret_text,
        "detail": json_values | secret_text,
    },
)


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["bytes", "json", "plausible", "list", "truncated", "nested", "empty"]))
    if kind == "bytes":
        return draw(st.binary(max_size=200))
    if kind == "json":
        return json.dumps(draw(json_values)).encode()
    if kind == "plausible":
        return json.dumps(draw(plausible)).encode()
    if kind == "list":
        return json.dumps(draw(st.lists(plausible, max_size=3))).encode()
    if kind == "truncated":
        whole = json.dumps(draw(plausible)).encode()
        return whole[: draw(st.integers(min_value=0, max_value=max(0, len(whole) - 1)))]
    if kind == "nested":
        depth = draw(st.integers(min_value=500, max_value=100_000))
        return b"[" * depth + b"]" * draw(st.sampled_from([0, depth]))
    return b""


def make_client(handler: Callable[[httpx.Request], httpx.Response]) -> LiumClient:
    return LiumClient(
        BASE,
        API_KEY,
        sleep=lambda seconds: None,
        max_retries=2,
        rng=random.Random(0),
        transport=httpx.MockTransport(handler),
    )


def assert_safe(error: LiumError, secrets: tuple[str, ...]) -> None:
    text = str(error)
    assert not any(secret in text for secret in secrets)
    assert "\n" not in text and len(text) < 600
    assert text.split(":", 1)[0].split(" ", 1)[0] in {"GET", "POST", "PUT", "DELETE"}


@settings(derandomize=True, max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    call=st.sampled_from(sorted(CALLS)),
    status=st.sampled_from([200, 201, 204, 301, 400, 401, 403, 404, 408, 409, 422, 429, 500, 503, 418, 199]),
    body=bodies(),
    headers=st.dictionaries(
        st.sampled_from(["Retry-After", "X-Request-Id", "Idempotent-Replayed", "Content-Type"]),
        st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=40) | secret_text,
        max_size=4,
    ),
)
def test_any_answer_is_a_result_or_a_safe_lium_error(
    call: str, status: int, body: bytes, headers: dict[str, str]
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=body, headers=headers)

    with make_client(handler) as client:
        try:
            CALLS[call](client)
        except LiumError as error:
            # The client knows the registry password only in the calls that send it.
            assert_safe(error, (API_KEY, PASSWORD) if call in SENDS_PASSWORD else (API_KEY,))


def test_garbage_2xx_is_a_protocol_error_with_a_clear_message() -> None:
    truncated = make_client(lambda request: httpx.Response(200, content=b'{"id": "6f1c", "pod_na'))
    with (
        truncated,
        pytest.raises(LiumProtocolError, match=r"^GET /pods/p1: HTTP 200: response is not valid JSON"),
    ):
        truncated.get_pod("p1")
    wrong_type = make_client(lambda request: httpx.Response(200, json={"id": 5, "pod_name": "p"}))
    with (
        wrong_type,
        pytest.raises(LiumProtocolError, match=r"^GET /pods/p1: Pod field .id.: Input should be a valid"),
    ):
        wrong_type.get_pod("p1")


def test_oversize_body_is_refused_without_reading_it_all() -> None:
    chunks_sent = 0

    def stream() -> Iterator[bytes]:
        nonlocal chunks_sent
        yield b'{"nodes": ['
        while True:
            chunks_sent += 1
            yield b"0," * (512 * 1024)

    client = make_client(lambda request: httpx.Response(200, content=stream()))
    with client, pytest.raises(LiumProtocolError, match="larger than"):
        client.nodes_feed("http://127.0.0.1:9/feed")
    assert chunks_sent * 1024 * 1024 <= MAX_RESPONSE_BYTES + 2 * 1024 * 1024


def test_feed_and_requests_carry_the_key_only_to_the_api() -> None:
    seen: list[tuple[str, str | None]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.url.path, request.headers.get("X-API-KEY")))
        payload: Any = {"nodes": []} if request.url.path.endswith("/nodes") else []
        return httpx.Response(200, json=payload)

    with make_client(handler) as client:
        client.list_pods()
        client.nodes_feed("http://127.0.0.1:9/api/public/v1/nodes")
        assert client.request_count == 2
    assert seen == [("/api/pods", API_KEY), ("/api/public/v1/nodes", None)]
