"""``lium_backup_config``: Lium's backup schedule of one pod (``/backup-configs``, docs/lium-api.md#backups).

Lium copies ``path`` of the pod every ``frequency_hours`` and keeps each copy ``retention_days``; a new pod
can be rented restoring one (``lium_pod.restore_backup_id``). A pod has at most one configuration, and
``POST /backup-configs`` creates or replaces it, so a create that was interrupted is simply sent again.
The configuration has no name or description: whose it is, is read from its pod's Lium name (the stack's
tag), as a ``lium_runner``'s is. Path and schedule change in place (``PUT``); another pod is another
configuration. Deleting it deletes its backups (Lium's rule), so when the pod is re-rented (or deleted
outside Terraform) the new pod gets a schedule of its own in place and the old one, whose pod is gone,
is kept with its backups (``retired_ids``), restorable until ``terraform destroy`` deletes them.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from lium_provider.api.backups import (
    BackupConfigRow,
    BackupFrequencyHours,
    BackupRetentionDays,
    BackupSchedule,
)
from lium_provider.api.models import DELETED, DELETING, is_lium_id
from lium_provider.domain.stack import tag_in_pod_name
from lium_provider.resources.common import api_errors, delete_reconciled, import_by_lium_id
from lium_provider.resources.inputs import LIUM_ID, POD_PATH
from lium_provider.resources.ownership import (
    AdoptedFrom,
    StackTag,
    check_before_change,
    claim_lium_name,
    left_alone_at_delete,
    plan_ownership,
    refreshed_ownership,
    refuse_another_stacks_pod,
)
from lium_provider.session import LiumSession, session
from tfbridge import Attribute, Context, PlanChange, Resource, UseStateForUnknown

DEFAULT_FREQUENCY_HOURS, DEFAULT_RETENTION_DAYS = 6, 7
"""Lium's own defaults (its SDK's ``backup_create``)."""


class BackupConfigModel(BaseModel):
    """A pod's backup schedule: Lium copies `path` every `frequency_hours` and keeps each copy
    `retention_days`. Restore one into a new pod with `lium_pod.restore_backup_id`; list them with
    `data.lium_backups`."""

    model_config = ConfigDict(extra="forbid")

    id: Annotated[
        str | None,
        Attribute(computed=True, plan=(UseStateForUnknown(),), description="Configuration id (UUID)."),
    ] = None
    pod_id: Annotated[
        str,
        Attribute(
            required=True,
            description="The `lium_pod` to back up. Another pod (the pod re-rented) gets a schedule of its own "
            "(a new `id`), in place: the schedule of a pod that is gone is kept with its backups "
            "(`retired_ids`), restorable until destroy.",
        ),
        LIUM_ID,
    ]
    path: Annotated[
        str,
        Attribute(
            required=True,
            description="The absolute directory in the pod to back up (a stable subdirectory of its volume "
            "is the safest: files changing while copied are copied as they were then).",
        ),
        POD_PATH,
    ] = Field(min_length=1)
    frequency_hours: Annotated[
        BackupFrequencyHours | None,
        Attribute(
            optional=True,
            computed=True,
            description=f"Hours between backups. Default: {DEFAULT_FREQUENCY_HOURS}.",
        ),
    ] = None
    retention_days: Annotated[
        BackupRetentionDays | None,
        Attribute(
            optional=True,
            computed=True,
            description=f"Days each backup is kept. Default: {DEFAULT_RETENTION_DAYS}.",
        ),
    ] = None
    retired_ids: Annotated[
        list[str] | None,
        Attribute(
            computed=True,
            plan=(UseStateForUnknown(),),
            description="The schedules of this resource's earlier pods, kept when their pod went so their "
            "backups stay restorable (`data.lium_backups` with the old pod's id); deleted, with their "
            "backups, by destroy.",
        ),
    ] = None
    stack_tag: StackTag = None
    adopted_from: AdoptedFrom = None

    def schedule(self) -> BackupSchedule:
        return BackupSchedule(
            backup_path=self.path,
            backup_frequency_hours=self.frequency_hours or DEFAULT_FREQUENCY_HOURS,
            retention_days=self.retention_days or DEFAULT_RETENTION_DAYS,
        )


def _pod_mark(s: LiumSession, pod_id: str) -> str | None:
    """The stack tag the pod's Lium name carries (None: no pod, or a pod no stack rented)."""
    with api_errors("reading the backed-up pod", path=("pod_id",)):
        pod = s.client.get_pod(pod_id)
    return tag_in_pod_name(pod.pod_name) if pod is not None else None


def _config_mark(s: LiumSession, config_id: str) -> str | None:
    """The stack tag of the pod the configuration ``config_id`` really backs up, read from Lium (never from
    the state's ``pod_id``: a state edited to another stack's configuration is judged by that one's pod)."""
    with api_errors("reading the backup configuration"):
        row = next((c for c in s.client.list_backup_configs() if c.id == config_id), None)
    return _pod_mark(s, row.pod_id) if row is not None and row.pod_id else None


def _pod_gone(s: LiumSession, pod_id: str) -> bool:
    with api_errors("reading the backed-up pod", path=("pod_id",)):
        pod = s.client.get_pod(pod_id)
    return pod is None or pod.status in (DELETED, DELETING)


def _fields(row: BackupConfigRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "pod_id": row.pod_id,
        "path": row.backup_path,
        "frequency_hours": row.backup_frequency_hours,
        "retention_days": row.retention_days,
    }


class BackupConfigResource(Resource[BackupConfigModel]):
    type_name = "lium_backup_config"
    model = BackupConfigModel
    description = BackupConfigModel.__doc__ or ""

    def modify_plan(self, ctx: Context, change: PlanChange[BackupConfigModel]) -> None:
        plan_ownership(ctx, change, self.type_name)
        for name, default in (
            ("frequency_hours", DEFAULT_FREQUENCY_HOURS),
            ("retention_days", DEFAULT_RETENTION_DAYS),
        ):
            if change.config_is_null(name):
                change.set_planned(name, default)
        prior = change.prior
        if prior is not None and (change.is_unknown("pod_id") or change.planned.pod_id != prior.pod_id):
            change.set_unknown("id")  # another pod's schedule is another configuration
            change.set_unknown("retired_ids")
        if change.is_unknown("pod_id"):
            return
        pod_id = change.planned.pod_id
        # One configuration per pod: a second resource on the pod would replace this one's schedule.
        claim_lium_name(
            ctx, change, (self.type_name, pod_id.casefold()), f"the backup configuration of pod {pod_id}"
        )
        if change.prior is None or change.prior.pod_id != pod_id:
            refuse_another_stacks_pod(ctx, self.type_name, pod_id, _pod_mark(session(ctx), pod_id))

    def create(self, ctx: Context, plan: BackupConfigModel, config: BackupConfigModel) -> BackupConfigModel:
        s = session(ctx)
        refuse_another_stacks_pod(ctx, self.type_name, plan.pod_id, _pod_mark(s, plan.pod_id))
        # Create or replace: sent again after an interrupted create, it replaces what that one made.
        with api_errors("configuring the pod's backups", path=("pod_id",)):
            row = s.client.create_backup_config(plan.pod_id, plan.schedule())
        return plan.model_copy(update=_fields(row) | {"pod_id": plan.pod_id})

    def read(self, ctx: Context, state: BackupConfigModel) -> BackupConfigModel | None:
        s = session(ctx)
        if not is_lium_id(state.id):
            return state  # names no configuration: the plan refuses it, a destroy forgets it
        with api_errors("reading the backup configuration"):  # by its id: whose it is, is its pod's
            row = next((c for c in s.client.list_backup_configs() if c.id == state.id), None)
        if row is None or not row.pod_id:
            return None  # deleted outside Terraform
        refreshed = state.model_copy(update=_fields(row))
        mark = _pod_mark(s, row.pod_id)
        return refreshed.model_copy(update=refreshed_ownership(ctx, self.type_name, state, mark))

    def update(
        self, ctx: Context, prior: BackupConfigModel, plan: BackupConfigModel, config: BackupConfigModel
    ) -> BackupConfigModel:
        s = session(ctx)
        check_before_change(ctx, self.type_name, prior, lambda: _config_mark(s, prior.id or ""), "changed")
        if plan.pod_id == prior.pod_id:
            with api_errors("changing the pod's backup schedule"):
                row = s.client.update_backup_config(prior.id or "", plan.schedule())
            return plan.model_copy(update=_fields(row) | {"pod_id": prior.pod_id})
        # Another pod: its own schedule first; the old one's pod gone (re-rented), it is kept with its
        # backups, which are what outlives a pod; else it ends, with them.
        created = self.create(ctx, plan, config)
        retired = list(prior.retired_ids or [])
        if _pod_gone(s, prior.pod_id):
            ctx.warn(
                f"Kept the backups of pod {prior.pod_id}",
                f"Its pod is gone, so schedule {prior.id} backs nothing up any more; its backups stay "
                f"restorable (`data.lium_backups` with pod_id = {prior.pod_id}) until they expire or this "
                "stack is destroyed.",
            )
            retired.append(prior.id or "")
        else:
            self._delete_config(ctx, s, prior.id or "")
        return created.model_copy(update={"retired_ids": retired})

    def delete(self, ctx: Context, state: BackupConfigModel) -> None:
        s = session(ctx)
        if left_alone_at_delete(ctx, self.type_name, state, lambda: _config_mark(s, state.id or "")):
            return
        for config_id in (*(state.retired_ids or []), state.id or ""):
            self._delete_config(ctx, s, config_id)

    def _delete_config(self, ctx: Context, s: LiumSession, config_id: str) -> None:
        """Delete a schedule, and with it its backups (Lium's rule)."""

        def exists() -> bool:
            return any(c.id == config_id for c in s.client.list_backup_configs())

        delete_reconciled(
            ctx, "deleting the backup configuration", lambda: s.client.delete_backup_config(config_id), exists
        )

    def import_state(self, ctx: Context, import_id: str) -> dict[str, Any]:
        return import_by_lium_id(self.type_name, import_id)
