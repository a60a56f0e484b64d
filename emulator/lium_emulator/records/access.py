"""Who may call the API: API keys, browser sessions, workspaces and their members, and the ledger of
requests a key's budget refused (docs/lium-api.md#api-keys, #workspaces).

An ``Account`` (``entities.py``) is a user. Each user has a personal workspace whose id is the user's id,
so every record stored before workspaces existed (``user_id`` = the account) still belongs to the
personal workspace: a record's ``user_id`` names the workspace that owns it.
"""

from datetime import datetime
from typing import Literal

from lium_emulator.records.entities import Record

Scope = Literal["read", "rent", "manage", "billing"]
PodVisibility = Literal["own", "account"]
Role = Literal["owner", "admin", "member"]
BudgetWindow = Literal["daily", "monthly", "max"]

ALL_SCOPES: tuple[Scope, ...] = ("read", "rent", "manage", "billing")


class ApiKey(Record):
    """One API key of a user, bound to one workspace; only its SHA-256 is kept."""

    id: str
    user_id: str  # the account (user) that owns the key
    workspace_id: str  # the workspace the key acts in
    name: str
    key_sha256: str
    scopes: list[Scope]
    daily_budget_usd: float | None = None
    monthly_budget_usd: float | None = None
    max_budget_usd: float | None = None
    pod_visibility: PodVisibility = "account"
    created_at: datetime
    last_used: datetime | None = None
    revoked: bool = False
    revoked_at: datetime | None = None

    def budget(self, window: BudgetWindow) -> float | None:
        """The key's budget of ``window`` in USD, or None."""
        return {
            "daily": self.daily_budget_usd,
            "monthly": self.monthly_budget_usd,
            "max": self.max_budget_usd,
        }[window]


class Session(Record):
    """A browser session (``Authorization: Bearer <token>``); only the token's SHA-256 is kept."""

    id: str  # the token's SHA-256
    user_id: str
    created_at: datetime


class Workspace(Record):
    """A team; every user has a personal one whose id is the user's id."""

    id: str
    name: str
    is_personal: bool
    billing_owner_user_id: str
    pending_billing_owner_user_id: str | None = None
    created_at: datetime
    deleted: bool = False


class Membership(Record):
    """A user's place in a workspace; ``id`` is ``<workspace_id>:<user_id>``."""

    id: str
    workspace_id: str
    user_id: str
    role: Role
    joined_at: datetime


class Invitation(Record):
    """An invitation of an e-mail address to a workspace (accepted when an account with it exists)."""

    id: str
    workspace_id: str
    email: str
    role: Role
    invited_by_user_id: str
    status: Literal["pending", "accepted"]
    created_at: datetime


class BudgetRefusal(Record):
    """One request a key's budget refused (``GET /keys/{id}/refusals``)."""

    id: str
    api_key_id: str
    created_at: datetime
    window: BudgetWindow
    route: str
    amount_usd: float
    budget_usd: float
    spent_usd: float
