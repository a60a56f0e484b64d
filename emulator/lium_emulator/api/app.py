"""The ASGI application: FastAPI routes under ``/api``, Lium's error envelope on every error, no
redirects, and the edge layer (request ids, fault plan) around it all."""

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from lium_emulator.api import (
    account,
    admin,
    backups,
    billing,
    clusters,
    credentials,
    keys,
    nodes,
    notebooks,
    pod_logs,
    pods,
    quotes,
    rent,
    sessions,
    templates,
    volumes,
    workspaces,
)
from lium_emulator.api.caller import AuthorizeDep
from lium_emulator.api.deps import request_id
from lium_emulator.api.edge import API_PREFIX, AsgiApp, EdgeMiddleware, Scope
from lium_emulator.budgets import BudgetWatch
from lium_emulator.errors import ApiError
from lium_emulator.runtime import Runtime

logger = logging.getLogger(__name__)

# The routers of Lium's API, in the order they match: clusters before rent, since
# ``/executors/cluster/rent`` is not ``/executors/{executor_id}/rent``.
API_MODULES = (
    account,
    billing,
    backups,
    nodes,
    quotes,
    clusters,
    rent,
    pods,
    notebooks,
    pod_logs,
    templates,
    credentials,
    volumes,
    keys,
    sessions,
    workspaces,
)


def create_app(runtime: Runtime) -> AsgiApp:
    """The complete ASGI app for ``runtime``; its lifespan resumes pods and tears them down at exit."""

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        runtime.lifecycle.recover()
        loop = asyncio.get_running_loop()
        ticks = [
            loop.create_task(BudgetWatch(runtime, runtime.config.budget_tick_seconds).run()),
            loop.create_task(runtime.backups.run()),
        ]
        try:
            yield
        finally:
            for tick in ticks:
                tick.cancel()
            await asyncio.gather(*ticks, return_exceptions=True)
            await runtime.lifecycle.shutdown()
            runtime.close()

    app = FastAPI(
        title="lium-emulator",
        redirect_slashes=False,  # a wrong slash is a 404, never a 307
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        lifespan=lifespan,
    )
    app.state.runtime = runtime
    for module in API_MODULES:
        # every /api route resolves its caller and is scope-checked once (api/caller.py, api/scopes.py)
        app.include_router(module.router, prefix=API_PREFIX, dependencies=[AuthorizeDep])
    app.include_router(admin.router)
    app.include_router(admin.runner_router)
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected_error)

    def client_of(scope: Scope) -> str:
        """Who a rate limit counts against: the account of a valid key, else the client address."""
        headers = dict(scope.get("headers") or [])
        api_key = headers.get(b"x-api-key", b"").decode(errors="replace")
        found = runtime.state.account_for_key(api_key) if api_key else None
        if found is not None:
            return f"user:{found.user_id}"
        client = scope.get("client") or ("unknown", 0)
        return f"ip:{client[0]}"

    def from_pod(scope: Scope) -> bool:
        """Whether a pod opened the request's connection (relayed out of its network namespace)."""
        client = scope.get("client")
        return client is not None and runtime.sandboxes.comes_from_a_pod((client[0], client[1]))

    return EdgeMiddleware(app, runtime.faults, client_of, runtime.requests.count, from_pod)


async def _api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return exc.response(request_id(request))


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = [validation_problem(error) for error in exc.errors()]
    error = ApiError(
        422, "validation_error", "Request validation failed", extra={"validation_errors": problems}
    )
    return error.response(request_id(request))


def validation_problem(error: dict[str, Any]) -> dict[str, str]:
    """One pydantic error in the contract's shape: ``{"field": "body -> x", "message", "type"}``."""
    field = " -> ".join(str(part) for part in error.get("loc", ()))
    return {"field": field, "message": str(error.get("msg", "")), "type": str(error.get("type", ""))}


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    message = exc.detail if isinstance(exc.detail, str) else "Request failed"
    if exc.status_code == 404:
        message = f"No route {request.method} {request.url.path}"
    return ApiError(exc.status_code, message=message, headers=dict(exc.headers or {})).response(
        request_id(request)
    )


async def _unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    logger.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
    return ApiError(500, "internal_error", "Internal server error").response(request_id(request))
