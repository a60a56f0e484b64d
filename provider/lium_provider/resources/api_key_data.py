"""``data.lium_api_key``: a Lium API key's budgets and what it has spent in each window, read with the
provider's ``session_token`` (``GET /keys/{id}``), never its secret."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict

from lium_provider.resources.api_key import keys_session
from lium_provider.resources.common import api_errors
from lium_provider.session import session
from tfbridge import Attribute, Context, DataSource, TFError


def _usd(what: str) -> Attribute:
    return Attribute(computed=True, description=what)


class ApiKeyDataModel(BaseModel):
    """A Lium API key's scopes, visibility, budgets and spend (never its secret), by id."""

    model_config = ConfigDict(extra="forbid")

    id: Annotated[str, Attribute(required=True, description="The key's id (a `lium_api_key`'s `id`).")]
    name: Annotated[str | None, Attribute(computed=True, description="Its name on Lium.")] = None
    scopes: Annotated[list[str] | None, Attribute(computed=True, description="What it may do.")] = None
    pod_visibility: Annotated[str | None, Attribute(computed=True, description="`own` or `account`.")] = None
    workspace_id: Annotated[str | None, Attribute(computed=True, description="The workspace it acts in.")] = (
        None
    )
    daily_budget_usd: Annotated[float | None, _usd("Budget per UTC day (null: none).")] = None
    monthly_budget_usd: Annotated[float | None, _usd("Budget per UTC month (null: none).")] = None
    max_budget_usd: Annotated[float | None, _usd("Budget over its lifetime (null: none).")] = None
    spent_today_usd: Annotated[float | None, _usd("Billed today (UTC) for the pods it rented.")] = None
    spent_month_usd: Annotated[float | None, _usd("Billed this UTC month.")] = None
    spent_total_usd: Annotated[float | None, _usd("Billed over its lifetime.")] = None
    pods_count: Annotated[int | None, Attribute(computed=True, description="Its live pods.")] = None


class ApiKeyDataSource(DataSource[ApiKeyDataModel]):
    type_name = "lium_api_key"
    model = ApiKeyDataModel
    description = ApiKeyDataModel.__doc__ or ""

    def read(self, ctx: Context, config: ApiKeyDataModel) -> ApiKeyDataModel:
        keys = keys_session(session(ctx), "Reading data.lium_api_key")
        with api_errors("reading the API key"):
            row = keys.find_api_key(config.id)
        if row is None:
            raise TFError(
                f"No API key {config.id}", "Lium knows no such key in the session's workspaces.", path=("id",)
            )
        fields = row.model_dump(include=set(ApiKeyDataModel.model_fields) - {"id"})
        return config.model_copy(update={**fields, "scopes": list(row.scopes)})
