"""Request dependencies shared by the routes: the runtime, the admin check, the fault decision (the
caller is resolved in ``caller.py``)."""

import hmac
from typing import Annotated, cast

from fastapi import Depends, Request

from lium_emulator.config import ADMIN_KEY_FILE
from lium_emulator.errors import ApiError
from lium_emulator.faults import FaultDecision
from lium_emulator.runtime import Runtime


def runtime_of(request: Request) -> Runtime:
    """The emulator behind this app."""
    return cast(Runtime, request.app.state.runtime)


RuntimeDep = Annotated[Runtime, Depends(runtime_of)]


def require_admin(request: Request, runtime: RuntimeDep) -> None:
    """403 for connections out of a pod (whatever key they carry), else 401 unless
    ``X-Emulator-Admin`` carries the admin key."""
    client = request.client
    if client is not None and runtime.sandboxes.comes_from_a_pod((client.host, client.port)):
        raise ApiError(
            403, "admin_forbidden_from_pod", "The emulator's admin routes are not reachable from pods"
        )
    given = request.headers.get("x-emulator-admin", "")
    if not hmac.compare_digest(given.encode(), runtime.config.admin_key.encode()):
        raise ApiError(
            401,
            "invalid_admin_key",
            "Invalid or missing X-Emulator-Admin key",
            hint=f"Send the emulator's admin key in the X-Emulator-Admin header: the one given with "
            f"--admin-key, else the `admin key:` line the emulator printed at start (also in "
            f"<state dir>/{ADMIN_KEY_FILE} with --state-dir).",
        )


AdminDep = Depends(require_admin)


def fault_decision(request: Request) -> FaultDecision | None:
    """The fault plan's decision for this request (None outside /api)."""
    decision = request.scope.get("state", {}).get("fault")
    return decision if isinstance(decision, FaultDecision) else None


def request_id(request: Request) -> str:
    """The id the edge gave this request (also in the X-Request-Id header)."""
    value = request.scope.get("state", {}).get("request_id", "")
    return str(value)
