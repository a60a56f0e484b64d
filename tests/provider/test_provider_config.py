"""The provider block's values: a bad one fails configure naming its attribute, and never echoes a key."""

from __future__ import annotations

import pytest

from lium_provider.provider import LiumProvider, LiumProviderConfig
from tfbridge import CancelToken, Context, TFError
from tfbridge.logs import Logger

GOOD_KEY = "sk-live-abcdef0123456789"


@pytest.mark.parametrize(
    ("endpoint", "api_key", "feed", "attribute"),
    [
        ("ftp://lium.io/api", GOOD_KEY, None, "endpoint"),
        ("https://user:hunter2@lium.io/api", GOOD_KEY, None, "endpoint"),
        ("https://lium.io/api", "has space", None, "api_key"),
        ("https://lium.io/api", "sk-ключ", None, "api_key"),
        ("https://lium.io/api", GOOD_KEY, "lium.io/feed", "nodes_feed_url"),
        ("lium.example/api", GOOD_KEY, None, "endpoint"),  # the feed derived from it is no better
    ],
    ids=["scheme", "credentials-in-url", "space-in-key", "non-ascii-key", "feed", "derived-feed"],
)
def test_a_bad_value_names_its_attribute(
    monkeypatch: pytest.MonkeyPatch, endpoint: str, api_key: str, feed: str | None, attribute: str
) -> None:
    monkeypatch.delenv("LIUM_SSH_PRIVATE_KEY_FILE", raising=False)
    ctx = Context(cancel=CancelToken(), log=Logger("test"))
    config = LiumProviderConfig(endpoint=endpoint, api_key=api_key, nodes_feed_url=feed)
    with pytest.raises(TFError) as caught:
        LiumProvider().configure(ctx, config)
    error = caught.value
    assert (error.summary, error.path) == ("Invalid provider configuration", (attribute,))
    assert api_key not in error.detail and "hunter2" not in error.detail
