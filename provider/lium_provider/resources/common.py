"""Helpers every Lium resource shares: API errors as diagnostics, and reconciled creates and deletes.

Creating a template, credential or volume is not idempotent on Lium, and a 5xx or a dropped connection
leaves it unknown whether the object exists. As dstack does, such an outcome is reconciled by looking
for the object (by name, or by user name for credentials, created since the request began) instead of
sending the request again, which could make a second one. Deletes are idempotent (a 404 is success), so
an uncertain delete is checked and repeated until the object is gone.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar

from lium_provider.api.errors import LiumAuthError, LiumError, LiumNotFound, is_definitive
from lium_provider.api.models import CLOCK_SKEW, is_lium_id
from lium_provider.session import LiumSession, access_error
from tfbridge import Context, PlanChange, Schema, TFError
from tfbridge.schema import PlanRule

T = TypeVar("T")
RECONCILE_ROUNDS = 5
RECONCILE_PAUSE_SECONDS = 1.0
ABANDONED_UNDO_SECONDS = 6.0
"""How long an abandoned create keeps sending the delete of what it rented: within the 8 s the bridge
gives in-flight calls once Terraform is gone (``tfbridge.serving.handshake.ABANDON_GRACE_SECONDS``)."""
ABANDONED_UNDO_PAUSE_SECONDS = 0.5


@contextmanager
def api_errors(action: str, path: tuple[str, ...] | None = None) -> Iterator[None]:
    """Report a failed API call as one diagnostic that says what was being done, never a traceback."""
    try:
        yield
    except LiumNotFound as exc:
        raise TFError(f"{action}: not found", str(exc), path=path) from None
    except LiumAuthError as exc:  # no configure-time check: any request may be the first (session.py)
        raise access_error(exc) from None
    except LiumError as exc:
        raise TFError(f"{action} failed", str(exc), path=path) from None


def check_access_on_create(ctx: Context, change: PlanChange[Any]) -> None:
    """Before planning a create, make sure the key and endpoint work (once per process, see
    :meth:`LiumSession.verify_access`), so a bad one fails ``terraform plan``, not the apply after it.
    A provider Terraform could not configure yet (its arguments unknown until apply) is not checked."""
    if change.prior is None and isinstance(ctx.provider, LiumSession):
        ctx.provider.verify_access()


def create_reconciled(
    ctx: Context, action: str, create: Callable[[], T], find: Callable[[datetime], T | None]
) -> T:
    """``create()``; after an uncertain failure, ``find(since)`` what it may have made instead of resending."""
    since = datetime.now(UTC) - CLOCK_SKEW
    try:
        return create()
    except LiumError as exc:
        if is_definitive(exc):
            raise TFError(f"{action} failed", str(exc)) from None
        first_error = exc
    for round_number in range(RECONCILE_ROUNDS):
        try:
            found = find(since)
        except LiumError:
            found = None
        if found is not None:
            ctx.log.info(f"{action}: found the object an uncertain request created")
            return found
        if round_number + 1 < RECONCILE_ROUNDS:
            ctx.sleep(RECONCILE_PAUSE_SECONDS * (round_number + 1))
    raise TFError(
        f"{action}: the outcome is unknown",
        f"{first_error}. Nothing matching was found afterwards, so nothing was recorded; run apply again "
        "(and `lium-tf sweep` to check for leftovers).",
    )


def delete_reconciled(
    ctx: Context, action: str, delete: Callable[[], None], exists: Callable[[], bool]
) -> None:
    """Delete until the object is gone: an uncertain delete is checked, then repeated."""
    for round_number in range(RECONCILE_ROUNDS):
        try:
            delete()
            return
        except LiumError as exc:
            if is_definitive(exc):
                raise TFError(f"{action} failed", str(exc)) from None
            last = exc
        try:
            if not exists():
                return
        except LiumError:
            pass
        ctx.sleep(RECONCILE_PAUSE_SECONDS * (round_number + 1))
    raise TFError(f"{action} failed", str(last))


def newest(items: list[T], created: Callable[[T], datetime | None], since: datetime) -> T | None:
    """The one item created at or after ``since`` (items without a time do not count); None if none.

    Objects other than pods carry no stack tag, so after a lost answer the candidates are those of the
    same name (and spec) created since the request began. When there are several, another stack (or
    workspace) made one at the same moment and nothing tells which is this request's: adopting either
    could give two states one object, so the create fails instead and records nothing.
    """
    recent = [i for i in items if (stamp := created(i)) is not None and stamp >= since]
    if len(recent) > 1:
        raise TFError(
            "The create's outcome is ambiguous",
            f"{len(recent)} objects of this name were created since the request began (another stack may "
            "have created one at the same moment), so none is adopted and nothing was recorded. Check them "
            "with `lium-tf sweep --name-prefix`, delete this stack's one if it exists, and apply again.",
        )
    return recent[0] if recent else None


def with_plan_rules(schema: Schema, rules: Mapping[str, tuple[PlanRule, ...]]) -> Schema:
    """``schema`` with ``rules`` added to the named attributes' plan rules: how a resource gives fields it
    shares with a data source (the offer filter) rules only a managed resource has."""
    attributes = dict(schema.block.attributes)
    for name, added in rules.items():
        attr = attributes[name]
        spec = dataclasses.replace(attr.spec, plan=(*attr.spec.plan, *added))
        attributes[name] = dataclasses.replace(attr, spec=spec)
    return dataclasses.replace(schema, block=dataclasses.replace(schema.block, attributes=attributes))


def undo_abandoned(remove: Callable[[], object]) -> Exception | None:
    """Send ``remove`` (an idempotent delete) for what an abandoned create rented, again after anything
    but a definitive refusal (a 5xx, a lost answer, a 409 while a member is still being created, a
    429), for at most :data:`ABANDONED_UNDO_SECONDS`: no state will ever hold the object, so one failed
    request would leave it billed until its removal deadline. The last error when it was not done.

    The pauses are plain sleeps: the operation's own waits end at once, since abandoning cancels it."""
    deadline = time.monotonic() + ABANDONED_UNDO_SECONDS
    while True:
        try:
            remove()
            return None
        except Exception as exc:
            if isinstance(exc, LiumError) and exc.status not in (409, 429) and is_definitive(exc):
                return exc
            if time.monotonic() + ABANDONED_UNDO_PAUSE_SECONDS >= deadline:
                return exc
        time.sleep(ABANDONED_UNDO_PAUSE_SECONDS)


def import_by_lium_id(type_name: str, import_id: str) -> dict[str, Any]:
    """The state ``terraform import`` starts from: the id alone, refused unless it can name a Lium object
    (a UUID as Lium writes it), so garbage never imports as successful."""
    if not is_lium_id(import_id):
        raise TFError(
            f"Cannot import {type_name} {import_id!r}",
            f"A {type_name} is imported by its Lium id, a UUID such as "
            "3f2a5c1e-8b7d-4e6f-9a0b-1c2d3e4f5a6b (`lium ps`, `lium-tf sweep`, or Lium's console show it).",
        )
    return {"id": import_id}
