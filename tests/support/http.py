"""HTTP clients for tests, all on the one TLS context of the process.

httpx builds a TLS context for every client, even one that only speaks plain HTTP to the emulator, and
building one loads the CA bundle (~40 ms of CPU). The provider shares one per process
(:func:`lium_provider.api.transport.tls_context`); tests do the same, through these helpers.
"""

from __future__ import annotations

from typing import Any

import httpx

from lium_provider.api.transport import tls_context


def client(**options: Any) -> httpx.Client:
    """``httpx.Client(**options)`` on the shared TLS context."""
    return httpx.Client(verify=tls_context(), **options)


def request(method: str, url: str, **options: Any) -> httpx.Response:
    """One request, like ``httpx.request``, on the shared TLS context."""
    with client() as one:
        return one.request(method, url, **options)


def get(url: str, **options: Any) -> httpx.Response:
    return request("GET", url, **options)


def post(url: str, **options: Any) -> httpx.Response:
    return request("POST", url, **options)


def put(url: str, **options: Any) -> httpx.Response:
    return request("PUT", url, **options)
