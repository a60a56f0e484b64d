"""Typed views of Lium's API-key and workspace bodies (docs/lium-api.md#api-keys): what ``/keys`` and
``/workspaces`` answer, and what ``POST /keys`` takes."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from lium_provider.api.errors import BUDGET_WINDOWS
from lium_provider.api.models import NonEmptyStr, RequestModel, ResponseModel, UtcDatetime

SCOPES = ("read", "rent", "manage", "billing")
"""The scopes a key may hold; ``billing`` only alone (Lium refuses it beside another)."""
DEFAULT_SCOPES = ("read", "rent", "manage")
"""What a key gets when none are named: everything but the money routes (Lium's CLI default too)."""
POD_VISIBILITIES = ("own", "account")
BUDGET_FIELDS = tuple(f"{window}_budget_usd" for window in BUDGET_WINDOWS)
"""``daily_budget_usd``, ``monthly_budget_usd``, ``max_budget_usd``: USD, at least 1, whole cents."""
MIN_BUDGET_USD = 1.0


def _usd(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        return float(value)
    except ValueError:
        return None


class ApiKeyRow(ResponseModel):
    """A key as ``GET /keys`` lists it: never its secret."""

    id: NonEmptyStr
    name: str = ""
    scopes: tuple[str, ...] = ()
    workspace_id: str | None = None
    pod_visibility: str | None = None
    daily_budget_usd: float | None = None
    monthly_budget_usd: float | None = None
    max_budget_usd: float | None = None
    spent_today_usd: float | None = None
    spent_month_usd: float | None = None
    spent_total_usd: float | None = None
    pods_count: int | None = None
    created_at: UtcDatetime | None = None
    last_used: UtcDatetime | None = None

    @field_validator(
        "daily_budget_usd",
        "monthly_budget_usd",
        "max_budget_usd",
        "spent_today_usd",
        "spent_month_usd",
        "spent_total_usd",
        mode="before",
    )
    @classmethod
    def _amount(cls, value: Any) -> float | None:
        return _usd(value)

    @field_validator("scopes", mode="before")
    @classmethod
    def _scope_names(cls, value: Any) -> tuple[str, ...]:
        return tuple(str(s) for s in value) if isinstance(value, list) else ()

    def budgets(self) -> dict[str, float | None]:
        return {name: getattr(self, name) for name in BUDGET_FIELDS}


class MintedApiKey(ApiKeyRow):
    """``POST /keys``'s answer: the row, and the secret this once."""

    key: NonEmptyStr = Field(repr=False)


class ApiKeySpec(RequestModel):
    """The body of ``POST /keys``: budgets and visibility only when given (the scopes always, so a server
    whose default is wider cannot hand the key more)."""

    name: NonEmptyStr
    scopes: tuple[str, ...]
    pod_visibility: str | None = None
    daily_budget_usd: float | None = None
    monthly_budget_usd: float | None = None
    max_budget_usd: float | None = None

    def to_body(self) -> dict[str, Any]:
        body = self.model_dump(exclude_none=True)
        body["scopes"] = list(self.scopes)
        return body


class WorkspaceRow(ResponseModel):
    """A workspace as ``GET /workspaces`` lists it."""

    id: NonEmptyStr
    name: str = ""
    role: str | None = None
    is_personal: bool | None = None
