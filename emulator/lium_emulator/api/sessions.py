"""Browser sessions: ``POST /users/login`` (e-mail and password) answers a bearer token
(docs/lium-api.md#sessions). Only the token's SHA-256 is kept; a session does not expire while the
emulator's state lives."""

import hmac
import secrets
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from lium_emulator.api.deps import RuntimeDep
from lium_emulator.errors import ApiError
from lium_emulator.records.access import Session
from lium_emulator.records.state import EmulatorState, sha256_hex
from lium_emulator.records.timeutil import utcnow

router = APIRouter()


class LoginRequest(BaseModel):
    """``POST /users/login``."""

    model_config = ConfigDict(extra="ignore")

    email: str = Field(min_length=1, max_length=320)
    password: str = Field(min_length=1, max_length=1024)


def issue_session(state: EmulatorState, user_id: str) -> str:
    """A new session token of ``user_id`` (stored as its hash)."""
    token = "lium-session-" + secrets.token_urlsafe(32)
    session = Session(id=sha256_hex(token), user_id=user_id, created_at=utcnow())
    state.sessions[session.id] = session
    state.save(session)
    return token


@router.post("/users/login")
async def login(body: LoginRequest, runtime: RuntimeDep) -> dict[str, Any]:
    """A session token for the account with this e-mail and password; 401 otherwise."""
    account = runtime.state.account_by_email(body.email)
    given = sha256_hex(body.password).encode()
    if (
        account is None
        or account.password_sha256 is None
        or not hmac.compare_digest(given, account.password_sha256.encode())
    ):
        raise ApiError(
            401,
            "invalid_credentials",
            "Invalid e-mail or password",
            hint="Check the e-mail and password (an emulator account gets one on POST /_emulator/accounts).",
        )
    return {"token": issue_session(runtime.state, account.user_id)}
