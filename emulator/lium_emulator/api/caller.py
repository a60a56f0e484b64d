"""Who is calling: the account, the API key or browser session it authenticated with, and the workspace
it acts in — resolved once per request by ``authorize``, which also enforces the scope table
(``scopes.py``) on every ``/api`` route (docs/lium-api.md#api-keys).

Credentials: ``X-API-KEY`` (a key acts in the workspace it is bound to), else ``Authorization: Bearer
<session token>`` (the user's personal workspace, or the one ``X-Lium-Workspace-Id`` names).
"""

from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated, Any

from fastapi import Depends, Request

from lium_emulator.api.deps import RuntimeDep
from lium_emulator.api.edge import API_PREFIX
from lium_emulator.api.scopes import RouteFamily, family_of
from lium_emulator.errors import ApiError
from lium_emulator.records.access import ApiKey, Scope, Session, Workspace
from lium_emulator.records.entities import Account, Pod
from lium_emulator.records.state import EmulatorState, actor_of, sha256_hex
from lium_emulator.records.timeutil import utcnow
from lium_emulator.runtime import Runtime

WORKSPACE_HEADER = "x-lium-workspace-id"
# last_used is written through at most this often per key (every request would be a store write)
LAST_USED_RESOLUTION = timedelta(seconds=10)


@dataclass
class Caller:
    """The resolved caller of one request."""

    account: Account
    workspace: Workspace
    role: str  # the account's role in the workspace
    key: ApiKey | None  # None: a browser session
    session: Session | None = None

    @property
    def workspace_id(self) -> str:
        """The workspace whose records the caller reaches (records' ``user_id``)."""
        return self.workspace.id

    @property
    def actor(self) -> dict[str, Any]:
        """The ``actor`` object of the events this caller causes."""
        return actor_of(self.account, self.key)

    @property
    def idempotency_scope(self) -> str:
        """Whose ``Idempotency-Key`` values a rent's key is looked up among: the API key's (a browser
        session's: its user's) in the workspace. Another key's repeat of the same value is a new request,
        so a replay never hands one key the pod of another (docs/lium-api.md#idempotency)."""
        who = self.key.id if self.key is not None else f"session:{self.account.user_id}"
        return f"{self.workspace.id}:{who}"

    @property
    def api_key_id(self) -> str | None:
        return self.key.id if self.key is not None else None

    def sees(self, pod: Pod) -> bool:
        """Whether the pod exists for this caller: its workspace's, and under ``own`` visibility the key's."""
        if pod.user_id != self.workspace.id:
            return False
        return self.key is None or self.key.pod_visibility == "account" or pod.api_key_id == self.key.id

    def require(self, scope: Scope) -> None:
        """403 ``missing_scope`` unless the caller's key holds ``scope`` (sessions hold every scope)."""
        if self.key is not None and scope not in self.key.scopes:
            raise missing_scope(self.key, scope)

    def may_remove(self, pod: Pod, family_scope: Scope = "rent") -> None:
        """A key removes the pods it rented with ``rent``, any other with ``manage``."""
        self.require(family_scope if pod.api_key_id == self.api_key_id else "manage")

    def billing_account(self, state: EmulatorState) -> Account:
        """The account whose balance the caller's rentals are billed to: the workspace's billing owner."""
        return state.accounts.get(self.workspace.billing_owner_user_id, self.account)


def missing_scope(key: ApiKey, scope: str) -> ApiError:
    """Lium's scope refusal."""
    return ApiError(
        403,
        "missing_scope",
        f"API key '{key.name}' does not have the '{scope}' scope",
        hint=f"Use a key with the '{scope}' scope (`lium keys scopes` says what each one allows).",
    )


def _family(request: Request) -> RouteFamily:
    route = request.scope.get("route")
    path = str(getattr(route, "path", request.url.path))
    path = path.removeprefix(API_PREFIX)
    family = family_of(request.method, path)
    if family is None:  # every route is in the table (tests/emulator/test_api_keys.py checks it)
        raise ApiError(500, "internal_error", f"No scope is declared for {request.method} {path}")
    return family


def _bearer(request: Request) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def resolve(request: Request, runtime: Runtime) -> Caller | None:
    """The caller of the request's credentials; None when it sends none; 401 for a bad one."""
    state = runtime.state
    api_key = request.headers.get("x-api-key", "")
    if api_key:
        key = state.key_for_secret(api_key)
        account = state.accounts.get(key.user_id) if key is not None else None
        workspace = state.workspaces.get(key.workspace_id) if key is not None else None
        member = state.membership(key.workspace_id, key.user_id) if key is not None else None
        if key is None or account is None or workspace is None or member is None:
            raise ApiError(401, "invalid_api_key", "Invalid API key")
        now = utcnow()
        if key.last_used is None or now - key.last_used >= LAST_USED_RESOLUTION:
            key.last_used = now
            state.save(key)
        return Caller(account, workspace, member.role, key)
    token = _bearer(request)
    if not token:
        return None
    session = state.sessions.get(sha256_hex(token))
    account = state.accounts.get(session.user_id) if session is not None else None
    if session is None or account is None:
        raise ApiError(
            401,
            "invalid_session",
            "Invalid or expired session token",
            hint="Sign in again: `lium workspaces login` (POST /users/login).",
        )
    workspace_id = request.headers.get(WORKSPACE_HEADER) or account.user_id
    member = state.membership(workspace_id, account.user_id)
    if member is None:
        raise ApiError(404, "workspace_not_found", "Workspace not found.")
    return Caller(account, state.workspaces[workspace_id], member.role, None, session)


def authorize(request: Request, runtime: RuntimeDep) -> Caller | None:
    """Every ``/api`` route's dependency: the caller (None on a public route or without credentials),
    with the route family's scope enforced for an API key."""
    family = _family(request)
    if family.scope is None:
        return None
    caller = resolve(request, runtime)
    if caller is not None and family.other_key_scope is None:
        caller.require(family.scope)
    return caller


AuthorizeDep = Depends(authorize)
OptionalCaller = Annotated[Caller | None, AuthorizeDep]


def require_caller(caller: OptionalCaller) -> Caller:
    """The caller; 401 when the request carries no credential."""
    if caller is None:
        raise ApiError(401, "invalid_api_key", "Invalid API key")
    return caller


def require_session(caller: OptionalCaller) -> Caller:
    """The caller of a session-only route; 401 ``session_required`` for an API key or no credential."""
    if caller is None or caller.session is None:
        raise ApiError(
            401,
            "session_required",
            "This route needs a browser session (Authorization: Bearer <token>), not an API key",
            hint="Sign in with `lium workspaces login` (POST /users/login) and send the session token.",
        )
    return caller


CallerDep = Annotated[Caller, Depends(require_caller)]
OptionalCallerDep = OptionalCaller
SessionDep = Annotated[Caller, Depends(require_session)]
