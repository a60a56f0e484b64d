"""Whose object a state holds: what plan, refresh and destroy do with another stack's, or with an id
that cannot name any object.

A pod, template or volume records the stack it belongs to in its computed ``stack_tag``, set when it is
created (the same tag its Lium name or description carries) or imported (the tag Lium holds, when the
object carries one; Lium cannot rename a pod, so once adopted, its new owner is recorded in the state).
A state copied from another stack, or the wrong workspace's, or an import of another stack's object,
then holds objects whose tag is not this stack's:

* the plan refuses them, naming both stacks and how to take them over on purpose (``adopt_stacks``);
* a refresh keeps them as they are and warns (a refresh also runs inside ``destroy``, which must never be
  blocked);
* a destroy drops them from this state with a warning and leaves them alone in Lium.

A stack whose identity changed (its backend was migrated, its directory moved) names its old stack in the
provider argument ``adopt_stacks``: its objects are then planned in place onto this stack's tag. An id
that is empty or not a Lium id (a hand-edited state) is refused at plan and treated as gone by destroy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Protocol

from lium_provider.api.models import is_lium_id
from lium_provider.session import session
from tfbridge import Attribute, Context, PlanChange, TFError, UseStateForUnknown

STACK_TAG = Attribute(
    computed=True,
    plan=(UseStateForUnknown(),),
    description='Tag of the stack this object belongs to (docs/reliability.md, "What counts as the same '
    "stack\"): another stack's object in this state is refused at plan and left alone by destroy.",
)
StackTag = Annotated[str | None, STACK_TAG]
"""The ``stack_tag`` field of every resource that carries one."""


class Identified(Protocol):
    """A resource model with a Lium id; those with a ``stack_tag`` field are also checked for it."""

    @property
    def id(self) -> str | None: ...


def _owner(ctx: Context, state: Identified) -> str:
    """The stack ``state`` belongs to: its ``stack_tag``, this stack's for a model without one."""
    return getattr(state, "stack_tag", session(ctx).stack_tag) or ""


def refreshed_owner(ctx: Context, recorded: str | None, *, in_lium: str | None) -> str:
    """The ``stack_tag`` a refresh records: the one the state holds; for an object just imported (or a
    state from before the tag), the tag Lium holds (in a pod's name, a template's or volume's
    description), else this stack's. So an import of another stack's object is refused at plan like any
    other stack's object, until ``adopt_stacks`` names that stack: a hand-over is said on both sides."""
    return recorded or in_lium or session(ctx).stack_tag


def plan_ownership(ctx: Context, change: PlanChange[Any], type_name: str) -> None:
    """A create is planned with this stack's tag; a planned change of an object in the state is refused
    when its id cannot name an object or it is another stack's (unless ``adopt_stacks`` names that
    stack: then it moves onto this stack's tag in place, as does an object from before the tag)."""
    s = session(ctx)
    prior: Identified | None = change.prior
    tagged = "stack_tag" in type(change.planned).model_fields
    if prior is None:
        if tagged:
            change.set_planned("stack_tag", s.stack_tag)
        return
    if not is_lium_id(prior.id):
        raise TFError(
            f"{type_name} has no usable id in the state",
            f"The state holds the id {prior.id!r}, which names no Lium object (a hand-edited or "
            "damaged state). Remove it with `terraform state rm`, then import the object by its id or "
            "let the next apply create it; `terraform destroy` forgets it without calling Lium.",
            path=("id",),
        )
    owner = _owner(ctx, prior)
    if owner == s.stack_tag:
        return
    if not owner or owner in s.adopt_tags:
        change.set_planned("stack_tag", s.stack_tag)
        return
    raise TFError(
        f"This {type_name} belongs to another stack",
        f"{prior.id} is stack {owner}'s, and this is stack {s.stack_tag}: it was imported from another "
        "stack, the state was copied from another stack or workspace, or this stack's identity changed. "
        "Nothing was changed. If the state is another stack's, use that stack's own state. To take the "
        "object over on purpose (the other stack first lets go of it: a `removed` block with "
        f'`lifecycle {{ destroy = false }}`), set `adopt_stacks = ["{owner}"]` in this provider block (or '
        f"LIUM_ADOPT_STACKS={owner}). `terraform destroy` here leaves it alone.",
        path=("stack_tag",),
    )


def refuse_another_stacks_pod(ctx: Context, type_name: str, pod_id: str, owner: str | None) -> None:
    """A new ``type_name`` on a pod whose Lium name carries another stack's tag ``owner`` is refused,
    unless ``adopt_stacks`` names that stack: it would take over (and its destroy would stop) what that
    stack runs there."""
    s = session(ctx)
    if not owner or owner == s.stack_tag or owner in s.adopt_tags:
        return
    raise TFError(
        f"Pod {pod_id} belongs to another stack",
        f"Its Lium name carries stack {owner}'s tag, and this is stack {s.stack_tag}: a {type_name} here "
        "would take over what that stack runs on the pod, and this stack's destroy would stop it. Nothing "
        f'was changed. To do it on purpose, set `adopt_stacks = ["{owner}"]` in this provider block (or '
        f"LIUM_ADOPT_STACKS={owner}).",
        path=("pod_id",),
    )


def claim_create_name(ctx: Context, change: PlanChange[Any], type_name: str) -> None:
    """A create's ``name``, claimed for this plan: a second create of one name in this stack is refused,
    because the name (with the stack's tag) is how a fresh runner recognises what a killed run made."""
    if change.prior is not None or change.is_unknown("name"):
        return
    name = change.planned.name
    if not session(ctx).claim_name(type_name, name):
        raise TFError(
            f"Another {type_name} of this stack is also named {name!r}",
            f"{type_name} names must be unique within a stack: the name, with the stack's tag, is how it is "
            f"recognised after an interrupted run. Give each {type_name} its own `name`.",
            path=("name",),
        )


def is_foreign(ctx: Context, state: Identified) -> bool:
    """Whether ``state`` is another stack's object this stack may not touch."""
    s = session(ctx)
    owner = _owner(ctx, state)
    return bool(owner) and owner != s.stack_tag and owner not in s.adopt_tags


def warn_if_foreign(ctx: Context, type_name: str, state: Identified) -> bool:
    """At refresh: a warning for another stack's object (the plan then refuses it); whether it is one."""
    foreign = is_foreign(ctx, state)
    if foreign:
        ctx.warn(
            f"This {type_name} belongs to another stack",
            f"{state.id} is stack {_owner(ctx, state)}'s, not this stack's ({session(ctx).stack_tag}): a plan "
            "refuses to change it, and a destroy leaves it alone and forgets it.",
            path=("stack_tag",),
        )
    return foreign


def left_alone_at_delete(
    ctx: Context, type_name: str, state: Identified, in_lium: Callable[[], str | None] | None = None
) -> bool:
    """At delete: True (with a warning) when ``state`` must not be deleted in Lium: another stack's
    object, or an id that names none. Terraform then forgets it; nothing blocks the destroy.

    A state that records no stack (written before the tag, and not refreshed since: ``destroy
    -refresh=false``) is judged by what Lium holds, ``in_lium()`` (the tag in a pod's name, a
    template's or volume's description, the templates that use a credential); without it, by the state.
    """
    if not is_lium_id(state.id):
        ctx.warn(
            f"Forgot a {type_name} without a usable id",
            f"The state held the id {state.id!r}, which names no Lium object: nothing was deleted by it. "
            "`lium-tf sweep --stack <this stack>` lists what the stack still holds in Lium.",
        )
        return True
    s = session(ctx)
    owner = _owner(ctx, state) if getattr(state, "stack_tag", None) or in_lium is None else in_lium()
    if owner and owner != s.stack_tag and owner not in s.adopt_tags:
        ctx.warn(
            f"Left another stack's {type_name} alone",
            f"{state.id} is stack {owner}'s, not this stack's ({s.stack_tag}): it was removed from this "
            "state and not deleted in Lium.",
        )
        return True
    return False
