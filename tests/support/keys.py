"""Lium API keys minted for tests as Lium's dashboard mints them: with a browser session (which the
emulator's admin route hands out) and ``POST /keys``."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from tests.support import http
from tests.support.lium import PROVIDER_BLOCK, Account
from tests.support.terraform import Terraform

RENTING_SCOPES = ["read", "rent", "manage"]


def session_token(account: Account) -> str:
    """A browser-session token of the account, from the emulator's admin route."""
    response = http.post(
        f"{account.emulator.root_url}/_emulator/accounts/{account.user_id}/session-token",
        headers=account.emulator.admin_headers,
        timeout=30,
    )
    assert response.status_code == 200, response.text
    token: str = response.json()["token"]
    return token


def mint_key(account: Account, name: str, **fields: Any) -> tuple[Account, str]:
    """A new API key of the account (``POST /keys`` with a session), as an account to run stacks with,
    and its id."""
    response = http.post(
        f"{account.emulator.api_url}/keys",
        json={"name": name, "scopes": RENTING_SCOPES, **fields},
        headers={"Authorization": f"Bearer {session_token(account)}"},
        timeout=30,
    )
    assert response.status_code == 200, response.text
    row = response.json()
    for field, value in fields.items():
        assert row[field] == value, f"the key was minted without {field}: {row}"
    return dataclasses.replace(account, api_key=row["key"]), row["id"]


def key_stack(make_terraform: Callable[..., Terraform], account: Account, body: str) -> Terraform:
    tf = make_terraform(PROVIDER_BLOCK + body, **account.env)
    tf.init()
    return tf
