"""Whose object a state holds, with Lium as the truth: what plan, refresh, update and delete may do with it.

Every rule of ownership is here; docs/design.md ("Stacks: identity, names and ownership") says it once
for users. A pod, cluster, template, volume, credential or runner records in its computed ``stack_tag``
the stack that made it (or took it over), and, when it carries another stack's tag in Lium because it was
taken over (Lium cannot rename a pod, and rewriting a template restarts its pods), that tag in
``adopted_from``. What Lium holds for the object is its **mark**: the tag in a pod's Lium name (a
cluster's members', a runner's pod's), on a template's or volume's description, on the templates that
use a credential; none for an object made outside lium-stacks.

* **An object is the state's own** when its mark is none, its ``stack_tag`` or its ``adopted_from``
  (the state records it as Lium knows it), and, for a stack named with ``stack`` or ``LIUM_STACK``,
  when its ``stack_tag`` is that name's or an adopted stack's. A stack that is not named *is* its state:
  wherever the state goes (a moved or re-cloned directory, a migrated backend, a copy) its objects go
  with it.
* **Any other object is another stack's** (an edited id, the state of a stack named otherwise, an
  import of an object another stack made): a refresh refuses it (warns during a destroy, which must
  never be blocked), a plan refuses it, an update or delete never touches it. A destroy fails naming
  it, its stack and how to take it over or let it go, and still deletes everything else it may.
* **Taking over on purpose**: ``adopt_stacks`` names stacks whose marks this stack accepts: an import
  of their objects, an object of the state that carries one. The object is then recorded with this
  stack's tag, and its mark in ``adopted_from`` (remembered: the setting can go afterwards).
* An id that cannot name a Lium object is refused at plan and forgotten by a destroy.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any, Protocol

from lium_provider.api.models import is_lium_id
from lium_provider.session import LiumSession, session
from tfbridge import Attribute, Context, PlanChange, TFError, UseStateForUnknown, destroying

STACK_TAG = Attribute(
    computed=True,
    plan=(UseStateForUnknown(),),
    description='Tag of the stack this object belongs to (docs/design.md, "Stacks: identity, names and '
    "ownership\"): an object whose tag in Lium is not the one its state records is another stack's, "
    "refused at plan and never changed or deleted.",
)
StackTag = Annotated[str | None, STACK_TAG]
"""The ``stack_tag`` field of every resource that carries one."""

ADOPTED_FROM = Attribute(
    computed=True,
    plan=(UseStateForUnknown(),),
    description="The stack tag this object still carries in Lium (a pod's or cluster's Lium name, a "
    "template's description, a runner's pod) when this stack took it over from that stack "
    "(`adopt_stacks`); null for an object this stack made.",
)
AdoptedFrom = Annotated[str | None, ADOPTED_FROM]
"""The ``adopted_from`` field of every resource that carries one."""


class Owned(Protocol):
    """A resource model with a Lium id and its ownership record."""

    @property
    def id(self) -> str | None: ...

    @property
    def stack_tag(self) -> str | None: ...

    @property
    def adopted_from(self) -> str | None: ...


def _answers_to(s: LiumSession, recorded: str | None) -> bool:
    """Whether a state object recorded under ``recorded`` may be this stack's at all: any tag when the
    stack is its state; under a name, that name's tag or an adopted stack's."""
    return not s.named or recorded in (None, s.stack_tag) or recorded in s.adopt_tags


def owns(s: LiumSession, state: Owned, mark: str | None) -> bool:
    """Whether the state object ``state``, whose mark in Lium is ``mark``, is this stack's to change."""
    if state.stack_tag is None:  # not recorded yet (an import a destroy refreshed): judged by its mark
        return mark is None or mark == s.stack_tag or mark in s.adopt_tags
    carried = mark is None or mark in (state.stack_tag, state.adopted_from) or mark in s.adopt_tags
    return carried and _answers_to(s, state.stack_tag)


def _mark_said(mark: str | None) -> str:
    return f"stack {mark}'s tag" if mark else "no stack's tag"


def _refusal(s: LiumSession, type_name: str, state: Owned, mark: str | None, what: str) -> TFError:
    """The error for another stack's object: what it is, whose, and the line that takes it over or
    lets it go."""
    marked_otherwise = mark is not None and mark not in (state.stack_tag, state.adopted_from)
    other = mark if marked_otherwise else state.stack_tag
    if state.stack_tag is None:
        why = f"it carries {_mark_said(mark)} in Lium, and this is stack {s.stack_tag}"
    elif marked_otherwise:
        why = f"it carries {_mark_said(mark)} in Lium, but the state records it as stack {state.stack_tag}'s"
    else:
        why = (
            f"the state records it as stack {state.stack_tag}'s, and this stack is named {s.stack_name!r} "
            f"(tag {s.stack_tag}; a stack that had no name when it made it records the tag it had then)"
        )
    return TFError(
        f"{type_name} {state.id} belongs to another stack",
        f"{why} (an edited or copied state, another stack's state, or an import of its object). {what} "
        f'To take it over on purpose, add `adopt_stacks = ["{other}"]` to this provider block (or set '
        f"LIUM_ADOPT_STACKS={other}) and run the command again; to let it go, run `terraform state rm` "
        "on this resource (its address is shown with this error).",
        path=("stack_tag",),
    )


def refreshed_ownership(ctx: Context, type_name: str, state: Owned, mark: str | None) -> dict[str, Any]:
    """The ownership fields a refresh records for ``state`` whose mark in Lium is ``mark``.

    An object just imported (nothing recorded) is this stack's when its mark is none or this stack's;
    taken over (``adopted_from``) when ``adopt_stacks`` names its mark; otherwise the import is refused.
    A recorded object whose mark is not what its state records is refused too, unless ``adopt_stacks``
    names the mark (then it is remembered in ``adopted_from``). A refusal is only a warning during a
    destroy, which must never be blocked: its delete then leaves the object alone (and fails).
    """
    s = session(ctx)
    recorded, adopted = state.stack_tag, state.adopted_from
    if recorded is None:
        if mark is None or mark == s.stack_tag:
            return {"stack_tag": s.stack_tag, "adopted_from": None}
        if mark in s.adopt_tags:
            return {"stack_tag": s.stack_tag, "adopted_from": mark}
        _refuse_or_warn(
            ctx,
            TFError(
                f"{type_name} {state.id} belongs to another stack",
                f"It carries stack {mark}'s tag in Lium, and this is stack {s.stack_tag}: importing it "
                "would let this stack change or delete what that stack runs. Nothing was changed. To take "
                f'it over on purpose (the other stack first lets go of it), add `adopt_stacks = ["{mark}"]` '
                f"to this provider block (or set LIUM_ADOPT_STACKS={mark}). A name made outside "
                f"lium-stacks that merely looks like a stack's (`<name>-<8 letters><3 letters>`) is "
                "taken the same way.",
                path=("id",),
            ),
        )
        return {"stack_tag": None, "adopted_from": None}
    if mark is None or mark in (recorded, adopted):
        return {"stack_tag": recorded, "adopted_from": adopted}
    if mark in s.adopt_tags:
        return {"stack_tag": recorded, "adopted_from": mark}
    _refuse_or_warn(ctx, _refusal(s, type_name, state, mark, "Nothing was changed."))
    return {"stack_tag": recorded, "adopted_from": adopted}


def _refuse_or_warn(ctx: Context, refusal: TFError) -> None:
    if not destroying():
        raise refusal
    for diagnostic in refusal.diagnostics():
        ctx.warnings.append(diagnostic.as_warning())


def plan_ownership(
    ctx: Context, change: PlanChange[Any], type_name: str, *, rewrites_mark: bool = False
) -> None:
    """A create is planned with this stack's tag; an object in the state is refused when its id cannot
    name an object, or when this stack is named and the object is recorded under another name (unless
    ``adopt_stacks`` names it: then it moves onto this stack's tag in place, its mark remembered in
    ``adopted_from``; ``rewrites_mark``: the update writes this stack's mark into Lium, as a volume's
    does). The mark itself was compared with the record by the refresh before this plan."""
    s = session(ctx)
    prior: Owned | None = change.prior
    if prior is None:
        change.set_planned("stack_tag", s.stack_tag)
        change.set_planned("adopted_from", None)
        return
    if not is_lium_id(prior.id):
        raise TFError(
            f"{type_name} has no usable id in the state",
            f"The state holds the id {prior.id!r}, which names no Lium object (a hand-edited or "
            "damaged state). Remove it with `terraform state rm`, then import the object by its id or "
            "let the next apply create it; `terraform destroy` forgets it without calling Lium.",
            path=("id",),
        )
    recorded = prior.stack_tag
    s.note_held(recorded, prior.adopted_from)
    if recorded is None:  # refreshed during a destroy as another stack's import: the plan refuses it
        raise TFError(
            f"{type_name} {prior.id} belongs to another stack",
            "Its refresh found another stack's tag on it in Lium; nothing was changed.",
            path=("stack_tag",),
        )
    if not _answers_to(s, recorded):
        raise _refusal(s, type_name, prior, None, "Nothing was changed.")
    if s.named and recorded != s.stack_tag:  # named in adopt_stacks: taken over in place
        change.set_planned("stack_tag", s.stack_tag)
        change.set_planned("adopted_from", None if rewrites_mark else prior.adopted_from or recorded)


def check_before_change(
    ctx: Context, type_name: str, state: Owned, mark: Callable[[], str | None], action: str
) -> None:
    """Before an update or delete sends anything to Lium: ``state`` must be this stack's by what Lium
    holds now (``mark()``), else the change fails, naming the object and its stack (``action`` says
    what was not done). Run in the apply, where nothing refreshed the object since the plan."""
    s = session(ctx)
    found = mark()
    if not owns(s, state, found):
        raise _refusal(s, type_name, state, found, f"It was not {action}.")


def left_alone_at_delete(ctx: Context, type_name: str, state: Owned, mark: Callable[[], str | None]) -> bool:
    """At delete: True (with a warning) when ``state``'s id names no object, which Terraform then
    forgets; raises when the object is another stack's (:func:`check_before_change`): the destroy
    fails naming it, and the object stays in the state."""
    if not is_lium_id(state.id):
        ctx.warn(
            f"Forgot a {type_name} without a usable id",
            f"The state held the id {state.id!r}, which names no Lium object: nothing was deleted by it. "
            "`lium-tf sweep --stack <this stack>` lists what the stack still holds in Lium.",
        )
        return True
    check_before_change(ctx, type_name, state, mark, "deleted")
    return False


def refuse_another_stacks_pod(ctx: Context, type_name: str, pod_id: str, mark: str | None) -> None:
    """A new ``type_name`` on a pod whose Lium name carries the tag ``mark`` is refused unless the tag is
    this stack's, adopted, or one an object of this state is recorded under (a pod it holds): it would
    take over (and its destroy would stop) what another stack runs there."""
    s = session(ctx)
    if mark is None or s.holds_tag(mark):
        return
    raise TFError(
        f"Pod {pod_id} belongs to another stack",
        f"Its Lium name carries stack {mark}'s tag, and this is stack {s.stack_tag}: a {type_name} here "
        "would take over what that stack runs on the pod, and this stack's destroy would stop it. Nothing "
        f'was changed. To do it on purpose, set `adopt_stacks = ["{mark}"]` in this provider block (or '
        f"LIUM_ADOPT_STACKS={mark}).",
        path=("pod_id",),
    )


def claim_create_name(ctx: Context, change: PlanChange[Any], type_name: str) -> None:
    """A create's ``name``, claimed for this plan: a second create of one name in this stack is refused,
    because the name (with the stack's tag) is how a fresh runner recognises what a killed run made."""
    if change.prior is not None or change.is_unknown("name"):
        return
    name = change.planned.name
    if not session(ctx).use_name((type_name, "name", name), create=True):
        raise TFError(
            f"Another {type_name} of this stack is also named {name!r}",
            f"{type_name} names must be unique within a stack: the name, with the stack's tag, is how it is "
            f"recognised after an interrupted run. Give each {type_name} its own `name`.",
            path=("name",),
        )


# The key, in an object's planned private record (a JSON object every resource's record may carry), of
# the name its plan holds: Terraform hands that record to the plan of the create that replaces the object.
_HELD_NAME = "held_name"


def claim_lium_name(ctx: Context, change: PlanChange[Any], key: tuple[str, ...], shown: str) -> None:
    """The name a create finds an interrupted run's object by (``key``; ``shown`` as users see it), or the
    one an object of the state has: a create whose name an object of the state keeps, or another create
    claims, would take that object over, so the plan refuses whichever of the two it plans second. The
    create that replaces an object may take its name: Terraform plans it with the object's planned
    private record, which says so.
    """
    s = session(ctx)
    create = change.prior is None
    replacing = create and _held_name(ctx.private) == list(key)
    if s.use_name(key, create=create, replacing=replacing):
        if not create:
            ctx.private = _with_held_name(ctx.private, key)
        return
    if create:
        detail = (
            f"Another resource of this stack already records, or also plans, an object named {shown}: this "
            "create would find that object and take it over, leaving two resources one object. Give each "
            "resource its own `name` (with `count` or `for_each`, from `count.index` or `each.key`); for "
            "an object this plan deletes because its address changed (a renamed resource or `for_each` "
            "key), a `moved` block from the old address to the new one keeps it instead."
        )
    else:
        detail = (
            f"A create in this plan would be named {shown} too, and would take this object over, leaving "
            "two resources one object. Give each resource its own `name` (with `count` or `for_each`, "
            "from `count.index` or `each.key`)."
        )
    raise TFError(f"Two resources of this stack would share {shown}", detail, path=("name",))


def hold_at_delete(ctx: Context, key: tuple[str, ...], shown: str) -> None:
    """An object this plan deletes keeps its name (``key``; ``shown`` as users see it) until it is gone:
    a create of the same run that would find it by that name, and take over an object being deleted, is
    refused, whichever of the two is planned first."""
    if session(ctx).use_name(key, create=False):
        return
    raise TFError(
        f"A create of this plan would take over {shown}, which this plan deletes",
        "Its instance left the configuration (a lowered `count`, a renamed resource or `for_each` key) "
        "while a new instance has the same `name`: the create would find the object that is being deleted "
        "and take it over. Give the new instance another `name`, or keep the object with a `moved` block "
        "from its old address to the new one.",
        path=("name",),
    )


def _record(private: bytes) -> dict[str, Any]:
    try:
        record = json.loads(private) if private else {}
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


def _held_name(private: bytes) -> object:
    return _record(private).get(_HELD_NAME)


def _with_held_name(private: bytes, key: tuple[str, ...]) -> bytes:
    return json.dumps({**_record(private), _HELD_NAME: list(key)}).encode()
