"""LiumClient refuses bad configuration up front, without echoing secrets."""

from __future__ import annotations

import pytest

from lium_provider.api.client import LiumClient, default_user_agent
from lium_provider.api.errors import InvalidArgument

KEY = "sk-live-abcdef0123456789"


@pytest.mark.parametrize("url", ["ftp://lium.io/api", "http://", "lium.io/api", "http://[::1"])
def test_bad_base_url(url: str) -> None:
    with pytest.raises(InvalidArgument, match="must be an http") as caught:
        LiumClient(url, KEY)
    assert caught.value.argument == "base_url"


def test_url_with_credentials_is_refused_without_echoing_them() -> None:
    with pytest.raises(InvalidArgument) as caught:
        LiumClient("https://user:hunter2@lium.io/api", KEY)
    assert "hunter2" not in str(caught.value) and caught.value.argument == "base_url"


@pytest.mark.parametrize("key", ["", "has space", "line\nbreak", "ключ"])
def test_bad_api_key_is_refused_without_echoing_it(key: str) -> None:
    with pytest.raises(InvalidArgument, match="API key must be") as caught:
        LiumClient("https://lium.io/api", key)
    assert not key or key not in str(caught.value)
    assert caught.value.argument == "api_key"


def test_repr_and_user_agent_hide_the_key() -> None:
    with LiumClient("https://lium.io/api/", KEY) as client:
        assert client.base_url == "https://lium.io/api"
        assert KEY not in repr(client) and client.request_count == 0
    assert default_user_agent().startswith("lium-stacks/")


@pytest.mark.parametrize("pod_id", ["", ".", ".."])
def test_ids_that_would_address_another_route_are_refused(pod_id: str) -> None:
    with (
        LiumClient("https://lium.io/api", KEY) as client,
        pytest.raises(ValueError, match="invalid resource id"),
    ):
        client.delete_pod(pod_id)
    assert client.request_count == 0


def test_events_limit_is_checked() -> None:
    with LiumClient("https://lium.io/api", KEY) as client, pytest.raises(ValueError, match="limit"):
        client.events(limit=1001)
