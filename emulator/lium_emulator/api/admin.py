"""The emulator's own routes (not part of Lium's API): health, fault plan, inspection, accounts, and the
runner stand-in download that pods use. Everything but health and the download needs
``X-Emulator-Admin``."""

from typing import Any

from fastapi import APIRouter, Query
from fastapi.responses import Response

from lium_emulator.api.deps import AdminDep, RuntimeDep
from lium_emulator.api.models import AccountCreateRequest, AccountUpdateRequest
from lium_emulator.api.sessions import issue_session
from lium_emulator.errors import ApiError
from lium_emulator.faults import FaultPlan
from lium_emulator.inspection import resources_report
from lium_emulator.records.entities import ACTIVE_STATUSES
from lium_emulator.records.timeutil import utcnow
from lium_emulator.runner_standin import runner_standin_script

RUNNER_PATH = "/runner/{version}/dstack-runner-linux-amd64"

router = APIRouter(prefix="/_emulator")
runner_router = APIRouter()


@router.get("/health")
async def health(runtime: RuntimeDep) -> dict[str, Any]:
    """Liveness, and how many pods are active."""
    active = sum(1 for p in runtime.state.pods.values() if p.status in ACTIVE_STATUSES)
    return {"status": "ok", "active_pods": active}


@router.get("/faults", dependencies=[AdminDep])
async def get_faults(runtime: RuntimeDep) -> dict[str, Any]:
    """The fault plan with per-rule match and fire counters."""
    return runtime.faults.snapshot()


@router.put("/faults", dependencies=[AdminDep])
async def put_faults(plan: FaultPlan, runtime: RuntimeDep) -> dict[str, Any]:
    """Replace the fault plan (counters and RNG restart from the plan's seed)."""
    runtime.faults.replace(plan)
    return runtime.faults.snapshot()


@router.post("/backups/run-due", dependencies=[AdminDep])
async def run_due_backups(
    runtime: RuntimeDep, after_hours: float = Query(0, ge=0, le=24 * 366)
) -> dict[str, Any]:
    """Run every backup schedule that is due, and expire old copies, as the tick would ``after_hours`` of
    a schedule's hours from now (``--backup-hour-seconds``); answers once the backups it started have
    finished. Tests use it instead of waiting."""
    started = await runtime.backups.run_due(utcnow() + runtime.backups.hours(after_hours))
    return {"started": [b.id for b in started], "statuses": {b.id: b.status for b in started}}


@router.get("/resources", dependencies=[AdminDep])
async def get_resources(runtime: RuntimeDep, user_id: str | None = None) -> dict[str, Any]:
    """Everything every account has or had, or only the account ``user_id``'s (see ``inspection.py``)."""
    return resources_report(runtime, user_id)


@router.post("/accounts", dependencies=[AdminDep])
async def create_account(body: AccountCreateRequest, runtime: RuntimeDep) -> dict[str, Any]:
    """Add an account for another API key (idempotent: an existing key keeps its account)."""
    credit = body.balance if body.balance is not None else runtime.config.balance_usd
    if body.email is not None:
        holder = runtime.state.account_by_email(body.email)
        if holder is not None and runtime.state.account_for_key(body.api_key) is not holder:
            raise ApiError(409, "email_taken", "Another account has this e-mail address.")
    account = runtime.state.ensure_account(body.api_key, credit, email=body.email, password=body.password)
    return {
        "user_id": account.user_id,
        "api_key_id": account.api_key_id,
        "email": account.email,
        "workspace_id": account.user_id,
        "balance": runtime.state.balance(account, utcnow()),
    }


@router.post("/accounts/{user_id}/session-token", dependencies=[AdminDep])
async def create_session_token(user_id: str, runtime: RuntimeDep) -> dict[str, Any]:
    """A browser-session token of the account (as ``POST /users/login`` would answer), for tests and
    ``LIUM_SESSION_TOKEN``."""
    if user_id not in runtime.state.accounts:
        raise ApiError(404, "account_not_found", "Account not found.")
    return {"token": issue_session(runtime.state, user_id)}


@router.patch("/accounts/{user_id}", dependencies=[AdminDep])
async def update_account(user_id: str, body: AccountUpdateRequest, runtime: RuntimeDep) -> dict[str, Any]:
    """Set an account's balance (e.g. to provoke ``insufficient_balance``)."""
    account = runtime.state.accounts.get(user_id)
    if account is None:
        raise ApiError(404, "account_not_found", "Account not found.")
    now = utcnow()
    account.credit_usd += body.balance - runtime.state.balance(account, now)
    runtime.state.save(account)
    return {"user_id": account.user_id, "balance": runtime.state.balance(account, now)}


@runner_router.get(RUNNER_PATH)
async def download_runner(version: str) -> Response:
    """The runner stand-in, reporting the version of the URL (pods download it from 127.0.0.1:<port>)."""
    try:
        script = runner_standin_script(version)
    except ValueError:
        raise ApiError(404, "runner_version_not_found", f"No runner for version {version!r}.") from None
    return Response(script, media_type="application/octet-stream")
