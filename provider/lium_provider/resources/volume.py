"""``lium_volume``: S3-backed network storage, mounted at /mnt in one pod at a time; it outlives pods."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from lium_provider.api.errors import LiumError
from lium_provider.api.models import is_lium_id
from lium_provider.domain.stack import described, tag_in, without_tag
from lium_provider.resources.common import (
    api_errors,
    check_access_on_create,
    create_reconciled,
    delete_reconciled,
    import_by_lium_id,
    newest,
)
from lium_provider.resources.inputs import PRINTABLE_NAME
from lium_provider.resources.ownership import (
    AdoptedFrom,
    StackTag,
    check_before_change,
    claim_create_name,
    claim_lium_name,
    hold_at_delete,
    left_alone_at_delete,
    plan_ownership,
    refreshed_ownership,
)
from lium_provider.resources.pod_lifecycle import settle_orphans
from lium_provider.resources.visibility import WorkspaceId, records_workspace
from lium_provider.session import LiumSession, session
from tfbridge import Attribute, Context, PlanChange, Resource, TFError, UseStateForUnknown

# Lium's documented volume-name alphabet (docs/lium-api.md#volumes).
_NAME = re.compile(r"^[A-Za-z0-9\-_. ,()!?/]*$")
NAME_MAX_LENGTH = 100


class VolumeModel(BaseModel):
    """A Lium network volume. Data persists across rentals; it cannot be deleted while a pod uses it."""

    model_config = ConfigDict(extra="forbid")

    id: Annotated[
        str | None, Attribute(computed=True, plan=(UseStateForUnknown(),), description="Volume id (UUID).")
    ] = None
    name: Annotated[
        str,
        Attribute(required=True, description="Volume name: letters, digits, `-_.`, spaces and `,()!?/`."),
        PRINTABLE_NAME,
    ] = Field(min_length=1, max_length=NAME_MAX_LENGTH)
    description: Annotated[str | None, Attribute(optional=True, description="Free text.")] = None
    stack_tag: StackTag = None
    adopted_from: AdoptedFrom = None
    workspace_id: WorkspaceId = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(
                f'"{value}" is not a valid volume name: use only letters, digits, spaces and -_.,()!?/'
            )
        return value


def _tag_in_lium(s: LiumSession, volume_id: str) -> str | None:
    """The stack tag the volume's description carries in Lium (None: none, or no such volume)."""
    with api_errors("reading the volume"):
        volume = s.client.get_volume(volume_id)
    return tag_in(volume.description) if volume else None


@records_workspace(lambda s, object_id: s.client.get_volume(object_id) is not None)
class VolumeResource(Resource[VolumeModel]):
    type_name = "lium_volume"
    model = VolumeModel
    description = VolumeModel.__doc__ or ""

    def modify_plan(self, ctx: Context, change: PlanChange[VolumeModel]) -> None:
        # An update writes the volume's stack tag (this stack's, after a take-over) into its description.
        plan_ownership(ctx, change, self.type_name, rewrites_mark=True)
        claim_create_name(ctx, change, self.type_name)
        check_access_on_create(ctx, change)
        prior, tag = change.prior, change.planned.stack_tag
        names = {prior.name} if prior is not None else set()
        if not change.is_unknown("name"):
            names.add(change.planned.name)  # a rename runs beside the creates of the same apply
        for name in sorted(names):
            key = ("lium_volume", name, tag or "")
            claim_lium_name(ctx, change, key, f"the volume name {name!r}")

    def plan_delete(self, ctx: Context, prior: VolumeModel) -> None:
        key = ("lium_volume", prior.name, prior.stack_tag or "")
        hold_at_delete(ctx, key, f"the volume name {prior.name!r}")

    def create(self, ctx: Context, plan: VolumeModel, config: VolumeModel) -> VolumeModel:
        s = session(ctx)
        client = s.client
        tag = plan.stack_tag or s.stack_tag  # as planned: the state's tag may be read otherwise now
        description = described(plan.description, tag)
        with api_errors("looking for this stack's volume of that name"):
            earlier = [
                v for v in client.list_volumes() if v.name == plan.name and tag_in(v.description) == tag
            ]
        if earlier:  # an interrupted run of this stack made it (names are unique within a stack)
            volume = max(earlier, key=lambda v: v.created_at or datetime.min)
            ctx.log.info("adopting a volume an interrupted run of this stack created", volume=volume.id)
            if volume.description != description:
                with api_errors("updating the adopted volume"):
                    client.update_volume(volume.id, description=description)
            return plan.model_copy(update={"id": volume.id})
        volume = create_reconciled(
            ctx,
            "creating the volume",
            lambda: client.create_volume(plan.name, description),
            lambda since: newest(
                [v for v in client.list_volumes() if v.name == plan.name and tag_in(v.description) == tag],
                lambda v: v.created_at,
                since,
            ),
        )
        return plan.model_copy(update={"id": volume.id})

    def read(self, ctx: Context, state: VolumeModel) -> VolumeModel | None:
        if not is_lium_id(state.id):
            return state  # names no volume: the plan refuses it, a destroy forgets it
        with api_errors("reading the volume"):
            volume = session(ctx).client.get_volume(state.id or "")
        if volume is None:
            return None
        text = without_tag(volume.description)
        refreshed = state.model_copy(
            update={
                "name": volume.name,
                "description": text if state.description is not None or text else None,
                **refreshed_ownership(ctx, self.type_name, state, tag_in(volume.description)),
            }
        )
        return refreshed

    def update(self, ctx: Context, prior: VolumeModel, plan: VolumeModel, config: VolumeModel) -> VolumeModel:
        s = session(ctx)
        check_before_change(ctx, self.type_name, prior, lambda: _tag_in_lium(s, prior.id or ""), "changed")
        tag = plan.stack_tag or s.stack_tag  # a take-over writes this stack's tag
        with api_errors("updating the volume"):
            s.client.update_volume(
                prior.id or "", name=plan.name, description=described(plan.description, tag)
            )
        return plan.model_copy(update={"id": prior.id})

    def delete(self, ctx: Context, state: VolumeModel) -> None:
        s = session(ctx)
        client = s.client
        if left_alone_at_delete(ctx, self.type_name, state, lambda: _tag_in_lium(s, state.id or "")):
            return
        volume_id = state.id or ""
        # A pod an interrupted run rented with this volume, but never recorded, would hold it: it goes first.
        settle_orphans(ctx, s, state.stack_tag or s.stack_tag, volume_id=volume_id)

        def delete() -> None:
            try:
                client.delete_volume(volume_id)
            except LiumError as exc:
                if exc.code == "volume_in_use":
                    raise TFError(
                        "The volume is still attached to a live pod",
                        f"Lium refused to delete volume {volume_id} ({exc}). Nothing was deleted: destroy or "
                        "replace the pod that mounts it first, then run destroy again.",
                    ) from None
                raise

        delete_reconciled(
            ctx, "deleting the volume", delete, lambda: client.get_volume(volume_id) is not None
        )

    def import_state(self, ctx: Context, import_id: str) -> dict[str, Any]:
        return import_by_lium_id(self.type_name, import_id)
