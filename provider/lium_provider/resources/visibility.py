"""Which API key rented a pod or cluster, and whether a "not found" means it is gone.

Lium scopes what a key sees (docs/lium-api.md#api-keys): a key whose ``pod_visibility`` is ``own`` sees only
the pods it rented itself, and every key acts in one workspace. To such a key another key's pod, or a pod
of another workspace, answers 404 exactly as a deleted one does. A refresh that took that 404 for "gone"
would plan to re-rent the pod while it keeps running, and a destroy would forget it while it bills, which
is what happens the day a CI key is rotated. So a pod and a cluster record the key that rented them
(``api_key_id``) and their workspace (``workspace_id``), and a pod that reads as not found is gone only when
this key could have seen it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel

from lium_provider.api.errors import LiumError
from lium_provider.api.models import POD_VISIBILITY_OWN, User, is_lium_id, key_label
from lium_provider.resources.common import api_errors
from lium_provider.session import LiumSession, session
from tfbridge import Attribute, Context, Resource, TFError, UseStateForUnknown

RENTED_BY_KEY = Attribute(
    computed=True,
    plan=(UseStateForUnknown(),),
    description="Id of the Lium API key that rented it (null when Lium does not say). A key whose "
    "`pod_visibility` is `own` sees only what it rented itself: under another such key this object reads "
    "as hidden, never as gone (docs/guides/api-keys.md).",
)
RentedByKey = Annotated[str | None, RENTED_BY_KEY]
"""The ``api_key_id`` field of a pod and of a cluster."""

WORKSPACE_ID = Attribute(
    computed=True,
    plan=(UseStateForUnknown(),),
    description="Id of the Lium workspace it belongs to (null on a server without workspaces).",
)
WorkspaceId = Annotated[str | None, WORKSPACE_ID]
"""The ``workspace_id`` field of a pod and of a cluster."""


KEPT_IN_STATE = (
    "It is not treated as gone: nothing was deleted or re-rented, and the state keeps it, since it may still "
    "be running and billing."
)
NOT_IMPORTED = "Nothing was imported."
NOT_RENTED_AGAIN = "Nothing was rented: a second pod for this instance would bill beside the first."


def check_not_hidden(
    ctx: Context,
    s: LiumSession,
    what: str,
    pod_id: str,
    rented_by: str | None,
    workspace_id: str | None,
    consequence: str = KEPT_IN_STATE,
) -> None:
    """Raise when the pod ``pod_id`` (``what``: "Pod <id>", "Cluster <id>") reads as not found only because
    this key cannot see it: it belongs to another workspace, or this key sees only its own pods and
    another key (``rented_by``) rented it. A pod whose renter is not known is judged by its event history,
    which the key that rented it can still read after the pod is deleted. ``consequence`` says what was
    left undone.
    """
    me = s.verify_access()
    elsewhere = bool(workspace_id and me.workspace and not same_id(workspace_id, me.workspace.id))
    another_key = me.sees_only_own_pods and not same_id(rented_by, me.api_key_id)
    if not (elsewhere or another_key):
        return
    if not elsewhere and rented_by is None and pod_id and _history_visible(s, pod_id):
        return
    raise TFError(
        f"{what} is hidden from this API key",
        _why_hidden(me, rented_by, workspace_id, elsewhere, consequence),
    )


def same_id(first: str | None, second: str | None) -> bool:
    """Whether two Lium ids are one (UUIDs, in any case)."""
    return first is not None and second is not None and first.casefold() == second.casefold()


def _history_visible(s: LiumSession, pod_id: str) -> bool:
    try:
        return bool(s.client.events(pod_id=pod_id, limit=1))
    except LiumError:
        return False


def _why_hidden(
    me: User, rented_by: str | None, workspace_id: str | None, elsewhere: bool, consequence: str
) -> str:
    if elsewhere:
        where = (me.workspace.name or me.workspace.id) if me.workspace else "another workspace"
        reason = (
            f"it belongs to workspace {workspace_id}, and this key ({me.key_label()}) acts in workspace "
            f"{where!r}"
        )
        fix = "a key of its workspace (the provider's `workspace` argument checks which one a key acts in)"
    else:
        renter = (
            f"it was rented by API key {key_label(rented_by)}" if rented_by else "this key did not rent it"
        )
        reason = (
            f"{renter}, and this key ({me.key_label()}) has pod_visibility `{POD_VISIBILITY_OWN}`: it sees only "
            "the pods it rented itself (another key's pod, or no pod at all, reads alike)"
        )
        fix = (
            "the key that rented it, or a key of the same workspace whose pod_visibility is `account` "
            "(`lium keys create <name> --pod-visibility account`)"
        )
    return f'Lium answers "not found" for it: {reason}. {consequence} Run this stack with {fix}.'


M = TypeVar("M", bound=BaseModel)


def check_in_this_workspace(s: LiumSession, what: str, workspace_id: str | None) -> None:
    """Raise, before a read or delete, when the object belongs to a workspace the key does not act in:
    there it reads as not found, and a refresh or destroy would forget it (a template, a volume, a
    credential or an account SSH key: what has no renting key). Nothing is read or changed."""
    if not workspace_id:
        return
    me = s.verify_access()
    if me.workspace is not None and not same_id(workspace_id, me.workspace.id):
        raise TFError(
            f"{what} is hidden from this API key", _why_hidden(me, None, workspace_id, True, KEPT_IN_STATE)
        )


def with_workspace(s: LiumSession, model: M, recorded: str | None) -> M:
    """``model`` recording its workspace: ``recorded``, else the one the key acts in now (it made or sees
    the object there)."""
    if recorded is None:
        me = s.verify_access()
        recorded = me.workspace.id if me.workspace else None
    return model.model_copy(update={"workspace_id": recorded})


R = TypeVar("R", bound=type[Resource[Any]])


def records_workspace(exists: Callable[[LiumSession, str], bool]) -> Callable[[R], R]:
    """A class decorator for a resource with no renting key (template, volume, credential, account SSH key):
    its create records ``workspace_id`` (the workspace the key acts in, known from the plan's access
    check), and a read or delete that finds no object (``exists``) under a key of another workspace fails
    (:func:`check_in_this_workspace`) instead of taking it for gone. Only then is the key's workspace asked
    for: a refresh or destroy that finds its objects costs no request more."""

    def decorate(resource: R) -> R:
        create, read, delete = resource.create, resource.read, resource.delete

        def create_recorded(self: Any, ctx: Context, plan: Any, config: Any) -> Any:
            return with_workspace(session(ctx), create(self, ctx, plan, config), None)

        def read_recorded(self: Any, ctx: Context, state: Any) -> Any:
            refreshed = read(self, ctx, state)
            if refreshed is None:
                check_in_this_workspace(session(ctx), f"{self.type_name} {state.id}", state.workspace_id)
            return refreshed

        def delete_recorded(self: Any, ctx: Context, state: Any) -> None:
            s = session(ctx)
            if state.workspace_id and is_lium_id(state.id):
                with api_errors(f"reading the {self.type_name}"):
                    found = exists(s, state.id)
                if not found:
                    check_in_this_workspace(s, f"{self.type_name} {state.id}", state.workspace_id)
            delete(self, ctx, state)

        for name, method in (
            ("create", create_recorded),
            ("read", read_recorded),
            ("delete", delete_recorded),
        ):
            method.__name__ = method.__qualname__ = name
            method.__doc__ = getattr(resource, name).__doc__
            setattr(resource, name, method)
        return resource

    return decorate
