"""What a provider author implements: a provider, its resources and its data sources.

Each resource is one class holding its schema (a pydantic model), its plan rules and its CRUD
methods side by side, as in terraform-plugin-framework. The protocol layer (:mod:`tfbridge.protocol.server`)
calls these with typed model instances and never knows what the resource manages.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel

from tfbridge.cancel import CancelToken
from tfbridge.diagnostics import AttributePath, Diagnostic, TFError
from tfbridge.logs import Logger
from tfbridge.plan import PlanChange
from tfbridge.schema import Schema, schema_of
from tfbridge.values import ConfigView

StateT = TypeVar("StateT", bound=BaseModel)
ConfigT = TypeVar("ConfigT", bound=BaseModel)


@dataclass
class Context:
    """Per-request context: cancellation, logging, the configured provider, and time budgets."""

    cancel: CancelToken
    log: Logger
    provider: Any = None
    deadline: float | None = None
    """Monotonic time by which the operation must finish (from a ``timeouts`` block), or None."""

    partial_state: BaseModel | None = None
    private: bytes = b""
    warnings: list[Diagnostic] = field(default_factory=list)

    def record(self, state: BaseModel) -> None:
        """Remember what exists so far.

        If the operation then fails, times out or is cancelled, Terraform still receives this state
        (a create is recorded as tainted), so a paid object is never lost between creating it and
        waiting for it.
        """
        self.partial_state = state.model_copy()

    def remaining(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def sleep(self, seconds: float) -> None:
        """Sleep, waking up early for Ctrl-C; raises :class:`TimeoutError` past the deadline."""
        remaining = self.remaining()
        if remaining is not None:
            if remaining <= 0:
                raise TimeoutError("the operation's timeout was reached")
            seconds = min(seconds, remaining)
        self.cancel.sleep(seconds)

    def make_current(self) -> None:
        """Make this the context :func:`current_context` returns in this thread (the server does)."""
        _CURRENT.set(self)

    @property
    def abandoned(self) -> bool:
        """True when this operation's result can never be recorded: Terraform died (or the launcher it
        started was killed) while it ran. A create that made something billable should delete it now,
        within seconds: the process exits shortly after (:mod:`tfbridge.serving.handshake`)."""
        return self.cancel.abandoned

    def check(self) -> None:
        """Raise if the operation was cancelled or ran out of time."""
        self.cancel.raise_if_cancelled()
        remaining = self.remaining()
        if remaining is not None and remaining <= 0:
            raise TimeoutError("the operation's timeout was reached")

    def warn(self, summary: str, detail: str = "", path: AttributePath | None = None) -> None:
        self.warnings.append(Diagnostic.warning(summary, detail, path))


_CURRENT: ContextVar[Context | None] = ContextVar("tfbridge_current_context", default=None)


def current_context() -> Context | None:
    """The context of the request this thread serves, for code that is not handed one: an API client
    shared by every request can still honour the operation's deadline while it waits."""
    return _CURRENT.get()


class Resource(Generic[StateT]):
    """Base class of a managed resource. Subclasses set ``type_name`` and ``model`` and implement CRUD."""

    type_name: ClassVar[str]
    model: ClassVar[type[BaseModel]]
    schema_version: ClassVar[int] = 0
    description: ClassVar[str] = ""
    default_timeouts: ClassVar[Mapping[str, float]] = {}
    """Seconds per operation (create, read, update, delete) unless the ``timeouts`` block says otherwise."""

    @classmethod
    def schema(cls) -> Schema:
        return schema_of(cls.model, version=cls.schema_version, description=cls.description)

    def validate_config(self, config: ConfigView[StateT]) -> list[Diagnostic]:
        """Cross-attribute checks on the configuration (it may hold unknowns). Field checks live on the model."""
        return []

    def modify_plan(self, ctx: Context, change: PlanChange[StateT]) -> None:
        """Adjust a plan after the declarative rules ran (defaults, unknowns, requires-replace)."""

    def create(self, ctx: Context, plan: StateT, config: StateT) -> StateT:
        raise NotImplementedError

    def plan_delete(self, ctx: Context, prior: StateT) -> None:
        """A plan deletes ``prior``: its instance left the configuration (a lower ``count``, a removed
        ``for_each`` key or block), outside a destroy. Called with the plan's other instances, so an object
        that is being deleted can still hold what a create of the same run must not take over (a name).
        A :class:`TFError` fails the plan. By default nothing."""

    def end_unrecorded(self, ctx: Context, config: StateT) -> None:
        """End what an interrupted create of this instance made and no state records.

        Called instead of :meth:`modify_plan` when a ``terraform destroy`` of everything (or ``apply
        -destroy``; never a speculative ``plan -destroy`` nor one narrowed by ``-target``) refreshes with
        a normal plan and that plan would create this instance: the only moment a destroy meets an
        instance its state does not hold (Terraform skips that plan when the state is empty). ``config`` is
        the instance's configuration (unknowns read as None). A :class:`TFError` it raises becomes a
        warning: a destroy is never blocked. Terraform shows no diagnostic of that plan unless it fails,
        so what was done belongs in the log too. By default nothing.
        """

    def read(self, ctx: Context, state: StateT) -> StateT | None:
        """Refresh ``state``; return ``None`` when the object is gone, so Terraform plans to create it."""
        raise NotImplementedError

    def update(self, ctx: Context, prior: StateT, plan: StateT, config: StateT) -> StateT:
        raise TFError(f"{self.type_name} cannot be updated in place")

    def delete(self, ctx: Context, state: StateT) -> None:
        raise NotImplementedError

    def import_state(self, ctx: Context, import_id: str) -> dict[str, Any]:
        """The object Terraform reads after ``terraform import``; by default just its ``id``."""
        return {"id": import_id}

    def upgrade_state(self, from_version: int, state: dict[str, Any]) -> dict[str, Any]:
        """Move a JSON state written by an older schema version to the current one."""
        raise TFError(
            f"{self.type_name}: no upgrade from schema version {from_version} to {self.schema_version}"
        )


class DataSource(Generic[StateT]):
    """Base class of a data source: one ``read`` from the configuration to the full object."""

    type_name: ClassVar[str]
    model: ClassVar[type[BaseModel]]
    description: ClassVar[str] = ""

    @classmethod
    def schema(cls) -> Schema:
        return schema_of(cls.model, description=cls.description)

    def validate_config(self, config: ConfigView[StateT]) -> list[Diagnostic]:
        """Cross-attribute checks on the configuration (it may hold unknowns)."""
        return []

    def read(self, ctx: Context, config: StateT) -> StateT:
        raise NotImplementedError


class Provider(Generic[ConfigT]):
    """Base class of a provider: its configuration model, resources and data sources."""

    type_name: ClassVar[str]
    model: ClassVar[type[BaseModel]]
    description: ClassVar[str] = ""
    resources: ClassVar[tuple[type[Resource[Any]], ...]] = ()
    data_sources: ClassVar[tuple[type[DataSource[Any]], ...]] = ()

    @classmethod
    def schema(cls) -> Schema:
        return schema_of(cls.model, description=cls.description)

    def validate_config(self, config: ConfigView[ConfigT]) -> list[Diagnostic]:
        """Cross-attribute checks on the provider's configuration (it may hold unknowns)."""
        return []

    def configure(self, ctx: Context, config: ConfigT) -> Any:
        """Check credentials and build the client every resource receives as ``ctx.provider``."""
        return config

    def diagnose(self, error: Exception) -> list[Diagnostic] | None:
        """Diagnostics for an exception of the provider's own kinds (an API client's errors, say) that
        escaped an operation; None lets the framework report it as an internal error."""
        return None
