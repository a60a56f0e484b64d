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

from typing import Annotated

from lium_provider.api.errors import LiumError
from lium_provider.api.models import POD_VISIBILITY_OWN, User, key_label
from lium_provider.session import LiumSession
from tfbridge import Attribute, Context, TFError, UseStateForUnknown

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


def check_not_hidden(
    ctx: Context,
    s: LiumSession,
    what: str,
    pod_id: str,
    rented_by: str | None,
    workspace_id: str | None,
) -> None:
    """Raise when the pod ``pod_id`` (``what``: "Pod <id>", "Cluster <id>") reads as not found only because
    this key cannot see it: it belongs to another workspace, or this key sees only its own pods and
    another key (``rented_by``) rented it. A pod whose renter the state does not know is judged by its
    event history, which the key that rented it can still read after the pod is deleted.

    Nothing is changed and the state keeps the object: the error names the key that can see it.
    """
    me = s.verify_access()
    elsewhere = bool(workspace_id and me.workspace and workspace_id != me.workspace.id)
    another_key = me.pod_visibility == POD_VISIBILITY_OWN and rented_by != me.api_key_id
    if not (elsewhere or another_key):
        return
    if not elsewhere and rented_by is None and _history_visible(s, pod_id):
        return
    raise TFError(
        f"{what} is hidden from this API key", _why_hidden(what, me, rented_by, workspace_id, elsewhere)
    )


def _history_visible(s: LiumSession, pod_id: str) -> bool:
    try:
        return bool(s.client.events(pod_id=pod_id, limit=1))
    except LiumError:
        return False


def _why_hidden(what: str, me: User, rented_by: str | None, workspace_id: str | None, elsewhere: bool) -> str:
    if elsewhere:
        where = me.workspace.name or me.workspace.id if me.workspace else "another workspace"
        reason = (
            f"it belongs to workspace {workspace_id}, and this key ({me.key_label()}) acts in workspace "
            f"{where!r}"
        )
        fix = "a key of its workspace (the provider's `workspace` argument checks which one a key acts in)"
    else:
        renter = key_label(rented_by) or "another API key"
        reason = (
            f"it was rented by API key {renter}, and this key ({me.key_label()}) has pod_visibility "
            f"`{POD_VISIBILITY_OWN}`: it sees only the pods it rented itself"
        )
        fix = (
            "the key that rented it, or a key of the same workspace whose pod_visibility is `account` "
            "(`lium keys create <name> --pod-visibility account`)"
        )
    return (
        f'Lium answers "not found" for it because {reason}. It is not treated as gone: nothing was '
        f"deleted or re-rented, and the state keeps it, since it may still be running and billing. Run "
        f"this stack with {fix}."
    )
