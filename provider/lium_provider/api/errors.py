"""Errors raised by the Lium API client, and the rules that classify them.

Every failed request is a :class:`LiumError` (an unusable argument is an :class:`InvalidArgument` before
any request; a cancelled wait is :class:`tfbridge.Cancelled`, which is no failure of Lium's). Its
``str()`` is safe to show to a user or to write to a log: it names the request (method and path, never
the query or the body), the HTTP status, a validated machine code and at most a short, sanitised message
taken from the server's error envelope. It never contains the API key, a request body or a raw response
body, because providers sometimes echo what they were sent (registry passwords, keys) back in their
error text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_CODE = re.compile(r"[a-z][a-z0-9_]{0,63}")

# dstack's list (docs/lium-api.md#error-codes): refusals meaning "this node cannot take the order now"; the caller
# should try another offer rather than fail.
NO_CAPACITY_CODES: frozenset[str] = frozenset(
    {
        "node_not_found",
        "node_rent_in_progress",
        "node_not_verified",
        "node_unavailable",
        "node_paused_by_provider",
        "provider_banned",
        "node_below_bandwidth_floor",
        "gpu_count_invalid",
        "gpu_split_not_allowed",
        "no_executor_matches_spec",
    }
)

# Codes with which a rent endpoint says "I do not know (yet) what happened to the first request with this
# Idempotency-Key" (docs/lium-api.md#idempotency): such a 409 is never a refusal.
IDEMPOTENCY_UNCERTAIN_CODES: frozenset[str] = frozenset(
    {"idempotency_in_progress", "idempotency_outcome_unknown"}
)

# 403 codes that mean "this key may not do that" (docs/lium-api.md#error-codes, SDK aliases).
SCOPE_CODES: frozenset[str] = frozenset(
    {"missing_scope", "api_key_scope", "insufficient_scope", "scope_required"}
)


# The code of Lium's own 404 for a pod it does not have (docs/lium-api.md#get-pod): a 404 without it
# (a gateway's, a proxy's) says nothing of the pod.
POD_NOT_FOUND = "pod_not_found"
# The same for the other objects a stack deletes (docs/lium-api.md#error-codes).
TEMPLATE_NOT_FOUND = "template_not_found"
DOCKER_CREDENTIAL_NOT_FOUND = "docker_credential_not_found"
VOLUME_NOT_FOUND = "volume_not_found"
SSH_KEY_NOT_FOUND = "ssh_key_not_found"


def valid_code(value: object) -> str | None:
    """``value`` if it is a machine code dstack would accept (``^[a-z][a-z0-9_]{0,63}$``), else None."""
    if isinstance(value, str) and _CODE.fullmatch(value):
        return value
    return None


class LiumError(Exception):
    """A Lium API request failed; attributes describe how, ``str()`` is safe to display."""

    def __init__(
        self,
        message: str,
        *,
        method: str | None = None,
        path: str | None = None,
        status: int | None = None,
        code: str | None = None,
        request_id: str | None = None,
        idempotent_replayed: bool = False,
    ) -> None:
        self.message = message
        self.method = method
        self.path = path
        self.status = status
        self.code = valid_code(code)
        self.request_id = request_id
        self.idempotent_replayed = idempotent_replayed
        super().__init__(self._render())

    def __str__(self) -> str:
        # Rendered when shown: a subclass's details (a missing scope, a budget) are set after construction.
        return self._render()

    def _render(self) -> str:
        parts: list[str] = []
        if self.status is not None:
            parts.append(f"HTTP {self.status}")
        if self.code is not None:
            parts.append(self.code)
        head = " ".join(parts)
        text = f"{head}: {self.message}" if head else self.message
        if self.method and self.path:
            text = f"{self.method} {self.path}: {text}"
        if self.request_id:
            text += f" (request id {self.request_id})"
        return text


class LiumNotFound(LiumError):
    """HTTP 404: the resource does not exist (or no longer exists)."""


class LiumAuthError(LiumError):
    """HTTP 401, or a 403 for a missing API-key scope: the key is invalid or may not do this.

    ``str()`` says where the key comes from: the first request a provider process sends may be any
    (a refresh, a create), so each has to name what to fix, and the scope the key lacks when Lium named it.
    """

    missing_scope: str | None = None
    by_session: bool = False
    """The request carried a browser-session token (``/keys``), not an API key: that is what to fix."""

    def _render(self) -> str:
        if self.by_session:
            return (
                f"{super()._render()}; check the browser-session token (provider `session_token`, or "
                "LIUM_SESSION_TOKEN): it may have expired; `lium workspaces login` prints a new one"
            )
        if self.missing_scope:
            fix = f"the API key: it lacks the '{self.missing_scope}' scope, which this needs; use a key that has it"
        else:
            fix = "the API key" if self.status == 401 else "the API key's scopes"
        return f"{super()._render()}; check {fix} (provider `api_key`, or LIUM_API_KEY)"


BUDGET_WINDOWS = ("daily", "monthly", "max")
"""The windows an API key's budget counts spend over (docs/lium-api.md#api-keys): a UTC day, a UTC month,
the key's lifetime."""


@dataclass(frozen=True)
class BudgetRefusal:
    """What a budget refusal says: which window, the budget, what the key has spent in it and what the
    request needed, in USD (each None when the server left it out)."""

    window: str | None = None
    budget_usd: float | None = None
    spent_usd: float | None = None
    amount_usd: float | None = None


class LiumBudgetExceeded(LiumError):
    """HTTP 402 ``API_KEY_BUDGET_EXCEEDED``: the API key's own budget refused the request, which Lium did
    not carry out. Never retried: spending does not go down by waiting within the window."""

    budget: BudgetRefusal = BudgetRefusal()

    def _render(self) -> str:
        b = self.budget
        window = {"max": "lifetime (max)"}.get(b.window or "", b.window or "a")
        numbers = [
            f"{label} ${value:,.2f}"
            for label, value in (
                ("budget", b.budget_usd),
                ("spent", b.spent_usd),
                ("this request needs", b.amount_usd),
            )
            if value is not None
        ]
        said = f"; {', '.join(numbers)}" if numbers else ""
        return (
            f"{super()._render()}. The API key's {window} budget refused it (API_KEY_BUDGET_EXCEEDED){said}. "
            "Lium did not carry it out; raise the key's budget (`lium keys budget <key>`) or use another key"
        )


class LiumRateLimited(LiumError):
    """HTTP 429 after the retry budget was spent, or with a ``Retry-After`` too long to wait for.

    ``retry_after`` is the server's last ``Retry-After`` in seconds, when it sent a usable one.
    """

    retry_after: float | None = None


class LiumUncertainOutcome(LiumError):
    """A mutating request may or may not have taken effect (5xx, 408, timeout, dropped connection, or an
    idempotency record that is still in progress / without outcome). Never resend it blindly."""


class LiumProtocolError(LiumError):
    """The server answered something the client cannot use: not JSON, wrong types, too large, truncated."""


class LiumUnavailable(LiumError):
    """No usable answer within the retry budget (connection failures, timeouts, 5xx on a read).

    ``sent`` is False when no attempt ever reached the server (the connection could not be opened), which
    proves that a mutation did not take effect.
    """

    sent: bool = True


class InvalidArgument(ValueError):
    """An argument given to the client is unusable, found before any request is sent.

    ``argument`` is the parameter's name (``base_url``, ``api_key``, ``feed_url``), so a caller can point
    at the setting it came from; ``str()`` never echoes a key or a URL's credentials.
    """

    def __init__(self, argument: str, message: str) -> None:
        self.argument = argument
        super().__init__(message)


def is_definitive(error: LiumError) -> bool:
    """True when ``error`` proves the request was *not* executed (dstack's rule, docs/lium-api.md#status-codes).

    That is an HTTP refusal below 500, other than 408, whose code is not an idempotency "don't know"
    code, or a request that never left this machine. A garbage 2xx, a redirect or a timeout prove nothing.
    """
    if isinstance(error, LiumUnavailable):
        return not error.sent
    if isinstance(error, LiumUncertainOutcome | LiumProtocolError):
        return False
    return (
        error.status is not None
        and 400 <= error.status < 500
        and error.status != 408
        and error.code not in IDEMPOTENCY_UNCERTAIN_CODES
    )
