"""A test-only provider on tfbridge: ``bridgetest_thing`` objects stored as JSON files in a directory.

It exercises every part of the bridge through real Terraform: create, update in place, replacement
(unconditional and conditional), out-of-band deletion, import, a write-only secret, a slow cancellable
create that records partial state, state upgrades and a data source. ``bridgetest_label`` plans a
computed value itself (a typed ``modify_plan``) and checks its configuration across attributes (a typed
``validate_config``). ``serve_bridgetest.py`` serves it.
"""

from __future__ import annotations

import json
import os
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from tfbridge import (
    TIMEOUTS_BLOCK,
    Attribute,
    ConfigView,
    Context,
    DataSource,
    Diagnostic,
    PlanChange,
    Provider,
    RequiresReplace,
    RequiresReplaceIf,
    Resource,
    TFError,
    Timeouts,
    UseStateForUnknown,
)


class BridgeTestConfig(BaseModel):
    """Where the test objects live."""

    model_config = ConfigDict(extra="forbid")
    store_dir: Annotated[
        str, Attribute(required=True, description="Directory holding one JSON file per object.")
    ]
    token: Annotated[
        str | None,
        Attribute(optional=True, sensitive=True, description="A secret that must never be logged."),
    ] = None


def _zone_needs_replace(prior: object, planned: object) -> bool:
    # Moving into or out of the "any" zone is free; other moves recreate the object.
    return prior != "any" and planned != "any"


class Thing(BaseModel):
    """A stored object."""

    model_config = ConfigDict(extra="forbid")
    id: Annotated[
        str | None, Attribute(computed=True, plan=(UseStateForUnknown(),), description="Object id.")
    ] = None
    name: Annotated[str, Attribute(required=True, description="Name; can change in place.")] = Field(
        min_length=1
    )
    size: Annotated[
        int | None,
        Attribute(
            optional=True,
            computed=True,
            default=1,
            plan=(RequiresReplace(),),
            description="Forces a new object.",
        ),
    ] = Field(default=None, ge=1, le=1000)
    zone: Annotated[
        str | None,
        Attribute(
            optional=True,
            plan=(RequiresReplaceIf(_zone_needs_replace, "a move between two real zones"),),
            description="Zone; conditional replacement.",
        ),
    ] = None
    tags: Annotated[dict[str, str] | None, Attribute(optional=True, description="Free-form tags.")] = None
    ports: Annotated[list[int] | None, Attribute(optional=True, description="A list attribute.")] = None
    secret_wo: Annotated[
        str | None, Attribute(optional=True, write_only=True, sensitive=True, description="Never stored.")
    ] = None
    secret_wo_version: Annotated[
        int | None, Attribute(optional=True, description="Change it to send a new `secret_wo`.")
    ] = None
    secret_length: Annotated[
        int | None, Attribute(computed=True, description="Length of the last secret received.")
    ] = None
    create_delay_seconds: Annotated[
        float | None, Attribute(optional=True, description="Wait this long in create (cancellable).")
    ] = None
    revision: Annotated[int | None, Attribute(computed=True, description="Bumped on every update.")] = None
    created_at: Annotated[
        str | None, Attribute(computed=True, plan=(UseStateForUnknown(),), description="Creation time.")
    ] = None
    timeouts: Annotated[Timeouts | None, TIMEOUTS_BLOCK] = None


class Store:
    """One JSON file per object, so tests can delete objects behind Terraform's back."""

    def __init__(self, directory: str) -> None:
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)

    def path(self, object_id: str) -> Path:
        return self.dir / f"{object_id}.json"

    def put(self, thing: Thing) -> None:
        assert thing.id is not None
        data = thing.model_dump(exclude={"secret_wo", "timeouts"})
        tmp = self.path(thing.id).with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, self.path(thing.id))

    def get(self, object_id: str) -> dict[str, Any] | None:
        try:
            data: dict[str, Any] = json.loads(self.path(object_id).read_text())
        except FileNotFoundError:
            return None
        return data

    def delete(self, object_id: str) -> None:
        self.path(object_id).unlink(missing_ok=True)


class ThingResource(Resource[Thing]):
    type_name = "bridgetest_thing"
    model = Thing
    schema_version = 1
    description = "A test object stored as a JSON file."
    default_timeouts = {"create": 600.0}

    def create(self, ctx: Context, plan: Thing, config: Thing) -> Thing:
        store: Store = ctx.provider
        thing = plan.model_copy(
            update={
                "id": uuid.uuid4().hex[:12],
                "revision": 1,
                "created_at": datetime.now(UTC).isoformat(),
                "secret_length": len(config.secret_wo) if config.secret_wo else None,
                "secret_wo": None,
            }
        )
        store.put(thing)
        ctx.record(thing)  # it exists now: a cancelled or failed wait must still hand it to Terraform
        if plan.create_delay_seconds:
            ctx.sleep(plan.create_delay_seconds)
        return thing

    def read(self, ctx: Context, state: Thing) -> Thing | None:
        store: Store = ctx.provider
        data = store.get(state.id or "")
        if data is None:
            return None
        return state.model_copy(update={k: v for k, v in data.items() if k in Thing.model_fields})

    def update(self, ctx: Context, prior: Thing, plan: Thing, config: Thing) -> Thing:
        store: Store = ctx.provider
        secret_length = prior.secret_length
        if plan.secret_wo_version != prior.secret_wo_version:
            secret_length = len(config.secret_wo) if config.secret_wo else None
        thing = plan.model_copy(
            update={"revision": (prior.revision or 0) + 1, "secret_length": secret_length, "secret_wo": None}
        )
        store.put(thing)
        return thing

    def delete(self, ctx: Context, state: Thing) -> None:
        store: Store = ctx.provider
        store.delete(state.id or "")

    def upgrade_state(self, from_version: int, state: dict[str, Any]) -> dict[str, Any]:
        if from_version == 0:  # version 0 called the name "label"
            upgraded = dict(state)
            upgraded["name"] = upgraded.pop("label", None)
            return upgraded
        return super().upgrade_state(from_version, state)


MAX_LABEL_LENGTH = 64


class Label(BaseModel):
    """A name repeated `copies` times: the label is planned by the resource, not by the apply."""

    model_config = ConfigDict(extra="forbid")
    id: Annotated[
        str | None, Attribute(computed=True, plan=(UseStateForUnknown(),), description="Label id.")
    ] = None
    name: Annotated[str, Attribute(required=True, description="What to repeat.")] = Field(min_length=1)
    copies: Annotated[
        int | None,
        Attribute(optional=True, computed=True, default=1, description="How many times. Default 1."),
    ] = Field(default=None, ge=1)
    label: Annotated[str | None, Attribute(computed=True, description="`name` repeated, dash-joined.")] = None


def label_of(name: str, copies: int) -> str:
    return "-".join([name] * copies)


class LabelResource(Resource[Label]):
    type_name = "bridgetest_label"
    model = Label
    description = "A computed label the plan already shows."

    def validate_config(self, config: ConfigView[Label]) -> list[Diagnostic]:
        if config.is_unknown("name") or config.is_unknown("copies"):
            return []  # Terraform validates again once both are known
        label = config.model
        # copies reads its default (1) when the configuration leaves it out
        if len(label_of(label.name, label.copies or 0)) > MAX_LABEL_LENGTH:
            return [
                Diagnostic.error(
                    "The label is too long",
                    f"{label.copies} copies of {label.name!r} exceed {MAX_LABEL_LENGTH} characters.",
                    ("copies",),
                )
            ]
        return []

    def modify_plan(self, ctx: Context, change: PlanChange[Label]) -> None:
        if change.is_unknown("name") or change.is_unknown("copies"):
            change.set_unknown("label")
            return
        planned = change.planned
        change.set_planned("label", label_of(planned.name, planned.copies or 0))

    def create(self, ctx: Context, plan: Label, config: Label) -> Label:
        return plan.model_copy(
            update={"id": uuid.uuid4().hex[:12], "label": label_of(plan.name, plan.copies or 0)}
        )

    def read(self, ctx: Context, state: Label) -> Label | None:
        return state

    def update(self, ctx: Context, prior: Label, plan: Label, config: Label) -> Label:
        return plan.model_copy(update={"label": label_of(plan.name, plan.copies or 0)})

    def delete(self, ctx: Context, state: Label) -> None:
        return None


class ThingsQuery(BaseModel):
    """All stored objects with a name prefix."""

    model_config = ConfigDict(extra="forbid")
    name_prefix: Annotated[str | None, Attribute(optional=True, description="Filter by name prefix.")] = None
    names: Annotated[list[str] | None, Attribute(computed=True, description="Matching names, sorted.")] = None


class ThingsDataSource(DataSource[ThingsQuery]):
    type_name = "bridgetest_things"
    model = ThingsQuery

    def read(self, ctx: Context, config: ThingsQuery) -> ThingsQuery:
        store: Store = ctx.provider
        names = []
        for path in store.dir.glob("*.json"):
            name = json.loads(path.read_text()).get("name", "")
            if name.startswith(config.name_prefix or ""):
                names.append(name)
        return config.model_copy(update={"names": sorted(names)})


class BridgeTestProvider(Provider[BridgeTestConfig]):
    type_name = "bridgetest"
    model = BridgeTestConfig
    resources = (ThingResource, LabelResource)
    data_sources = (ThingsDataSource,)

    def configure(self, ctx: Context, config: BridgeTestConfig) -> Store:
        if config.token == "reject-me":
            raise TFError("token rejected", path=("token",))
        ctx.log.info("configured", token=config.token or "")
        return Store(config.store_dir)
