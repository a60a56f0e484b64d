"""The configured provider as resources see it (``ctx.provider``)."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from lium_provider.api.client import LiumClient
from lium_provider.api.errors import LiumAuthError, LiumError, LiumProtocolError
from lium_provider.api.models import DEAD_POD_STATES, Pod, User
from lium_provider.api.pod_watch import PodWatcher
from lium_provider.domain.journal import RentJournal
from lium_provider.domain.placement import Placement
from lium_provider.domain.stack import parse_lium_pod_name
from tfbridge import Context, TFError

_CREATED = "a create"
_HELD = "an object of the state"


@dataclass
class LiumSession:
    """What a configured provider hands each resource: the API client and the user's SSH identity."""

    client: LiumClient
    feed_url: str
    ssh_private_key: str | None
    runner_download_url: str | None
    journal: RentJournal
    stack_tag: str
    """The tag of what this stack creates (:mod:`lium_provider.domain.stack`): recovery touches only
    objects that carry it."""
    stack_name: str | None = None
    """The stack's name (``stack``, ``LIUM_STACK``), None when it has none: a named stack's state objects
    are its own only under its name's tag or an adopted one (:mod:`lium_provider.resources.ownership`)."""
    adopt_tags: frozenset[str] = frozenset()
    """Tags of the stacks whose objects this stack takes over (the provider's ``adopt_stacks``)."""
    default_termination_hours: int | None = None
    """``termination_hours`` of a pod that sets none (the provider's ``default_termination_hours``)."""
    workspace: str | None = None
    """The workspace (name or id) the API key must act in (the provider's ``workspace``, LIUM_WORKSPACE);
    None: whichever it acts in."""
    session_client: LiumClient | None = None
    """The API client of the provider's browser session (``session_token``), None without one: the only
    credential Lium takes on ``/keys``."""
    watcher: PodWatcher = field(init=False)
    placement: Placement = field(init=False)
    _names: dict[tuple[str, ...], str] = field(init=False, default_factory=dict)
    """Each name this run's plans use, and by what (:data:`_CREATED` or :data:`_HELD`)."""
    _held_tags: set[str] = field(init=False, default_factory=set)
    _names_lock: threading.Lock = field(init=False, default_factory=threading.Lock)
    _earlier_pods: dict[str, Pod] | None = field(init=False, default=None)
    _earlier_lock: threading.Lock = field(init=False, default_factory=threading.Lock)
    _templates: set[str] | None = field(init=False, default=None)
    _account: User | None = field(init=False, default=None)
    _access_refused: TFError | None = field(init=False, default=None)
    _access_lock: threading.Lock = field(init=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.watcher = PodWatcher(self.client)
        self.placement = Placement(lambda: self.client.nodes_feed(self.feed_url))

    def verify_access(self) -> User:
        """``GET /users/me`` once per process: a bad key or endpoint fails the plan that would create.

        Configure sends nothing, so a Terraform run costs no request per provider start (it starts the
        provider two to three times a command). Refreshes, reads and deletes need no check of their own:
        a refused key fails their first request with the same error (:func:`access_error`), and an
        unreachable endpoint with that request's own, which names the URL. A failed check is kept: the
        process's other creates fail with it at once instead of each waiting out the request timeout.
        Returns the key's user, whose id a template create needs to find its own templates.
        """
        with self._access_lock:
            if self._access_refused is not None:
                raise self._access_refused
            if self._account is None:
                try:
                    account = self.client.me()
                except LiumError as exc:
                    self._access_refused = access_error(exc, self.client.base_url)
                    raise self._access_refused from None
                self._access_refused = workspace_mismatch(self.workspace, account)
                if self._access_refused is not None:
                    raise self._access_refused
                self._account = account
            return self._account

    def check_workspace(self) -> None:
        """With a ``workspace`` configured, fail every operation (reads and deletes too) unless the key acts
        in it: a key of another workspace sees none of this stack's pods, and a refresh or destroy under it
        would take each for gone while it bills. One ``GET /users/me`` per process, shared with
        :meth:`verify_access`."""
        if self.workspace is not None:
            self.verify_access()

    @property
    def named(self) -> bool:
        return self.stack_name is not None

    def earlier_pod(self, lium_name: str) -> Pod | None:
        """The live pod named ``lium_name`` that existed when this process first asked.

        An interrupted run's pod exists before this process starts, so one listing per process (not
        one per create, which would spend Lium's listing budget that :mod:`lium_provider.api.pod_watch`
        shares out) finds every one of them.
        """
        with self._earlier_lock:
            if self._earlier_pods is None:
                self._earlier_pods = {
                    p.pod_name: p
                    for p in self.client.list_pods()
                    if p.status not in DEAD_POD_STATES and parse_lium_pod_name(p.pod_name) is not None
                }
            return self._earlier_pods.get(lium_name)

    def template_visible(self, template_id: str) -> bool:
        """Whether the template ``template_id`` is visible to this key (public, or the account's own):
        from one listing per process, and, for one it lacks (created since, by this very apply), the
        template's own GET."""
        with self._earlier_lock:
            if self._templates is None:
                self._templates = {t.id for t in self.client.list_templates()}
            if template_id in self._templates:
                return True
        if self.client.get_template(template_id) is None:
            return False
        with self._earlier_lock:
            self._templates.add(template_id)
        return True

    def use_name(self, key: tuple[str, ...], *, create: bool, replacing: bool = False) -> bool:
        """Note that this run's plan uses the name ``key`` (a Lium pod name, or a kind, name and stack
        tag), for a create (``create``) or for an object the state holds; False when the name is taken
        already by a create, or, for a create, by an object the state holds, unless the create is
        ``replacing`` that very object (Terraform plans a replacement's create half right after it).

        The name (with the stack's tag) is how a create finds what an interrupted run of it made, so a
        create whose name another resource of the stack uses would adopt that resource's object. Every
        object of the state and every create is planned in this one process, in any order: whichever
        comes second sees the other.
        """
        with self._names_lock:
            taken = self._names.get(key)
            if create:
                if taken is not None and not (taken == _HELD and replacing):
                    return False
                self._names[key] = _CREATED
                return True
            if taken == _CREATED:
                return False
            self._names.setdefault(key, _HELD)
            return True

    def note_held(self, *tags: str | None) -> None:
        """Tags an object of this state is recorded under (its ``stack_tag``, and ``adopted_from``),
        seen while planning: a ``lium_runner`` may run on a pod that carries one of them."""
        with self._names_lock:
            self._held_tags.update(t for t in tags if t)

    def holds_tag(self, tag: str) -> bool:
        """Whether ``tag`` is this stack's, adopted, or one an object of this state is recorded under."""
        with self._names_lock:
            return tag == self.stack_tag or tag in self.adopt_tags or tag in self._held_tags

    def require_ssh_key(self, attribute: str) -> str:
        if not self.ssh_private_key:
            raise TFError(
                "No SSH private key configured",
                "Set `ssh_private_key` or `ssh_private_key_file` in the provider block, or the environment "
                f"variable LIUM_SSH_PRIVATE_KEY_FILE: {attribute} needs root SSH access to the pod.",
            )
        return self.ssh_private_key


UNUSABLE_ANSWER = "Lium answered something unusable"
"""The title of every error about an answer that was not what the API promises (not JSON, wrong types)."""


def access_error(exc: LiumError, endpoint: str | None = None) -> TFError:
    """The error for a request the API key or the endpoint made fail (its text names the argument).

    It is raised where the request was made (a resource's plan, read or apply), so it carries no
    attribute path: the argument to fix is the provider block's.
    """
    if isinstance(exc, LiumAuthError):
        credential = "browser session" if exc.by_session else "API key"
        title = (
            f"Lium rejected the {credential}" if exc.status != 403 else f"The {credential} may not do this"
        )
        return TFError(title, str(exc))
    where = f" ({endpoint})" if endpoint else ""
    if isinstance(exc, LiumProtocolError):  # it was reached: what came back is the problem
        return TFError(UNUSABLE_ANSWER, f"{exc}. Check that `endpoint`{where} is Lium's API.")
    return TFError(
        "Cannot reach the Lium API",
        f"{exc}. Check `endpoint`{where}; `request_timeout` and `connect_timeout` bound the wait.",
    )


def workspace_mismatch(wanted: str | None, account: User) -> TFError | None:
    """The error when the key does not act in the workspace ``wanted`` (its name, any case, or its id)."""
    if wanted is None:
        return None
    current = account.workspace
    if current is None:
        return TFError(
            "This Lium server has no workspaces",
            f"The provider's `workspace` (or LIUM_WORKSPACE) asks for workspace {wanted!r}, but `GET /users/me` "
            "names no workspace for the API key. Remove the setting, or point `endpoint` at a server with "
            "workspaces.",
        )
    if wanted.casefold() in (current.id.casefold(), current.name.casefold()):
        return None
    return TFError(
        "The API key acts in another workspace",
        f"The provider's `workspace` (or LIUM_WORKSPACE) is {wanted!r}, but the API key ({account.key_label()}) "
        f"acts in workspace {current.name!r} ({current.id}). Nothing was read or changed: under this key the "
        "stack's pods would read as gone while they run. Use a key of that workspace "
        "(`lium keys create <name> --workspace <workspace>`), or correct `workspace`.",
    )


def journal_dir() -> Path:
    """Where rent attempts are written before they are sent, so a crashed run can be reconciled."""
    base = os.environ.get("LIUM_STATE_DIR") or os.path.join(
        os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state"), "lium-stacks"
    )
    return Path(base) / "rent-journal"


def session(ctx: Context) -> LiumSession:
    """The configured session, or a clear error if Terraform never configured the provider."""
    if not isinstance(ctx.provider, LiumSession):
        raise TFError(
            "The lium provider is not configured", "Terraform did not configure the provider block."
        )
    ctx.provider.check_workspace()
    return ctx.provider
