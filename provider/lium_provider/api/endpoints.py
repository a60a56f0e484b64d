"""Where Lium lives: the API base URL and the public nodes feed, and how one is derived from the other."""

from __future__ import annotations

from urllib.parse import urlsplit

DEFAULT_ENDPOINT = "https://lium.io/api"
PUBLIC_FEED_URL = "https://lium.io/api/public/v1/nodes"
SESSION_TOKEN_ENV = "LIUM_SESSION_TOKEN"
"""The environment variable of a Lium browser-session token (Lium's own CLI reads it too): the provider's
``session_token``, and what ``--within-key-budget`` reads a key's budgets with."""


def feed_url_for(endpoint: str, configured: str | None = None) -> str:
    """The nodes feed to search offers in: the configured URL, lium.io's public feed, or the endpoint's own."""
    if configured:
        return configured
    host = urlsplit(endpoint).hostname or ""
    if host == "lium.io" or host.endswith(".lium.io"):
        return PUBLIC_FEED_URL
    return endpoint.rstrip("/") + "/public/v1/nodes"
