"""``lium_volume``: S3-backed network storage, mounted at /mnt in one pod at a time; it outlives pods."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

from lium_provider.api.errors import LiumError
from lium_provider.resources.common import (
    api_errors,
    check_access_on_create,
    create_reconciled,
    delete_reconciled,
    newest,
)
from lium_provider.resources.inputs import PRINTABLE_NAME
from lium_provider.resources.pod import settle_orphans
from lium_provider.session import session
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

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(
                f'"{value}" is not a valid volume name: use only letters, digits, spaces and -_.,()!?/'
            )
        return value


class VolumeResource(Resource[VolumeModel]):
    type_name = "lium_volume"
    model = VolumeModel
    description = VolumeModel.__doc__ or ""

    def modify_plan(self, ctx: Context, change: PlanChange[VolumeModel]) -> None:
        check_access_on_create(ctx, change)

    def create(self, ctx: Context, plan: VolumeModel, config: VolumeModel) -> VolumeModel:
        client = session(ctx).client
        volume = create_reconciled(
            ctx,
            "creating the volume",
            lambda: client.create_volume(plan.name, plan.description),
            lambda since: newest(
                [v for v in client.list_volumes() if v.name == plan.name], lambda v: v.created_at, since
            ),
        )
        return plan.model_copy(update={"id": volume.id})

    def read(self, ctx: Context, state: VolumeModel) -> VolumeModel | None:
        with api_errors("reading the volume"):
            volume = session(ctx).client.get_volume(state.id or "")
        if volume is None:
            return None
        description = volume.description if state.description is not None or volume.description else None
        return state.model_copy(update={"name": volume.name, "description": description})

    def update(self, ctx: Context, prior: VolumeModel, plan: VolumeModel, config: VolumeModel) -> VolumeModel:
        with api_errors("updating the volume"):
            session(ctx).client.update_volume(prior.id or "", name=plan.name, description=plan.description)
        return plan.model_copy(update={"id": prior.id})

    def delete(self, ctx: Context, state: VolumeModel) -> None:
        s = session(ctx)
        client = s.client
        volume_id = state.id or ""
        # A pod an interrupted run rented with this volume, but never recorded, would hold it: it goes first.
        settle_orphans(ctx, s, volume_id=volume_id)

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
