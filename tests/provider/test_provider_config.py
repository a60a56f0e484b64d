"""The provider block's values: a bad one fails configure naming its attribute, and never echoes a key."""

from __future__ import annotations

import pytest

from lium_provider.provider import LiumProvider, LiumProviderConfig
from tfbridge import CancelToken, Context, TFError
from tfbridge.logs import Logger

GOOD_KEY = "sk-live-abcdef0123456789"


@pytest.mark.parametrize(
    ("endpoint", "api_key", "attribute"),
    [
        ("ftp://lium.io/api", GOOD_KEY, "endpoint"),
        ("https://user:hunter2@lium.io/api", GOOD_KEY, "endpoint"),
        ("https://lium.io/api", "has space", "api_key"),
        ("https://lium.io/api", "sk-ключ", "api_key"),
    ],
    ids=["scheme", "credentials-in-url", "space-in-key", "non-ascii-key"],
)
def test_a_bad_value_names_its_attribute(
    monkeypatch: pytest.MonkeyPatch, endpoint: str, api_key: str, attribute: str
) -> None:
    monkeypatch.delenv("LIUM_SSH_PRIVATE_KEY_FILE", raising=False)
    ctx = Context(cancel=CancelToken(), log=Logger("test"))
    config = LiumProviderConfig(endpoint=endpoint, api_key=api_key)
    with pytest.raises(TFError) as caught:
        LiumProvider().configure(ctx, config)
    error = caught.value
    assert (error.summary, error.path) == ("Invalid provider configuration", (attribute,))
    assert api_key not in error.detail and "hunter2" not in error.detail
