"""``lium_template``: a pod template (image, entrypoint, startup command, environment, ports)."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from lium_provider.api.models import Template, TemplateSpec
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
from tfbridge import Attribute, Context, PlanChange, Resource, UseStateForUnknown

# A Docker image reference: [registry[:port]/]path[:tag][@sha256:digest], lower-case path components.
_IMAGE_REF = re.compile(
    r"^(?:(?P<registry>[a-zA-Z0-9.-]+(?::[0-9]+)?)/)?"
    r"(?P<path>[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*)"
    r"(?::(?P<tag>[\w][\w.-]{0,127}))?"
    r"(?:@(?P<digest>sha256:[a-f0-9]{64}))?$"
)


def check_image_reference(value: str) -> str:
    if not _IMAGE_REF.match(value):
        raise ValueError(
            f'"{value}" is not a Docker image reference: expected [registry/]name[:tag][@sha256:digest], '
            'e.g. "python:3.11-slim" or "ghcr.io/team/trainer:1.2"'
        )
    return value


def image_of(template: Template) -> str:
    """The full reference Lium stored, re-joined from its split image and tag."""
    image = template.docker_image or ""
    tag = template.docker_image_tag or ""
    if tag and not tag.startswith("sha256:"):
        return f"{image}:{tag}"
    return f"{image}@{tag}" if tag else image


class TemplateModel(BaseModel):
    """A Lium template: what image a pod runs and how. Private by default; changes reboot pods using it."""

    model_config = ConfigDict(extra="forbid")

    id: Annotated[
        str | None, Attribute(computed=True, plan=(UseStateForUnknown(),), description="Template id (UUID).")
    ] = None
    name: Annotated[str, Attribute(required=True, description="Template name."), PRINTABLE_NAME] = Field(
        min_length=1, max_length=255
    )
    image: Annotated[
        str,
        Attribute(
            required=True,
            description="Full image reference, e.g. `python:3.11-slim` or `registry:5000/team/img:tag`; "
            "Lium splits it into image and tag.",
        ),
    ]
    entrypoint: Annotated[
        str | None, Attribute(optional=True, description="Entrypoint, e.g. `/bin/sh` (default: the image's).")
    ] = None
    startup_commands: Annotated[
        str | None,
        Attribute(optional=True, description="Arguments after the image, e.g. `-c 'exec sleep infinity'`."),
    ] = None
    environment: Annotated[
        dict[str, str] | None, Attribute(optional=True, description="Extra environment variables.")
    ] = None
    internal_ports: Annotated[
        list[int] | None,
        Attribute(
            optional=True,
            computed=True,
            default=[22, 10022],
            description="Container ports Lium maps to external ports; the default is SSH and the dstack "
            "runner's SSH.",
        ),
    ] = None
    local_volume_path: Annotated[
        str | None,
        Attribute(
            optional=True,
            computed=True,
            default="/root",
            description="Where the pod's local volume is mounted.",
        ),
    ] = None
    is_private: Annotated[
        bool | None,
        Attribute(optional=True, computed=True, default=True, description="Visible only to this account."),
    ] = None
    docker_credential_id: Annotated[
        str | None,
        Attribute(optional=True, description="`lium_docker_credential` id for a private registry."),
    ] = None

    @field_validator("image")
    @classmethod
    def _image(cls, value: str) -> str:
        return check_image_reference(value)

    @field_validator("internal_ports")
    @classmethod
    def _ports(cls, value: list[int] | None) -> list[int] | None:
        for port in value or []:
            if not 1 <= port <= 65535:
                raise ValueError(f"{port} is not a TCP port (1-65535)")
        return value

    @field_validator("local_volume_path")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("/"):
            raise ValueError(f'"{value}" must be an absolute path')
        return value


def _spec(model: TemplateModel) -> TemplateSpec:
    return TemplateSpec(
        name=model.name,
        docker_image=model.image,
        docker_image_tag="",
        volumes=[model.local_volume_path or "/root"],
        environment=dict(model.environment or {}),
        entrypoint=model.entrypoint or "",
        startup_commands=model.startup_commands or "",
        internal_ports=list(model.internal_ports or [22, 10022]),
        is_private=True if model.is_private is None else model.is_private,
        docker_credential_id=model.docker_credential_id,
    )


def _state(template: Template, base: TemplateModel) -> TemplateModel:
    """The refreshed state: what Lium reports, keeping the user's spelling of the image when equivalent."""
    image = base.image if base.image and image_of(template) in _equivalent(base.image) else image_of(template)
    volumes = template.volumes or []
    update: dict[str, Any] = {
        "id": template.id,
        "name": template.name,
        "image": image,
        "entrypoint": template.entrypoint or None if base.entrypoint is None else template.entrypoint,
        "startup_commands": template.startup_commands or None
        if base.startup_commands is None
        else template.startup_commands,
        "environment": template.environment or None if base.environment is None else template.environment,
        "internal_ports": template.internal_ports,
        "local_volume_path": volumes[0] if volumes else base.local_volume_path,
        "is_private": template.is_private,
        "docker_credential_id": template.docker_credential_id,
    }
    return base.model_copy(update=update)


def _equivalent(image: str) -> set[str]:
    """Spellings Lium may hand back for the same reference (an implied ``latest`` tag)."""
    match = _IMAGE_REF.match(image)
    if match and not match.group("tag") and not match.group("digest"):
        return {image, f"{image}:latest"}
    return {image}


class TemplateResource(Resource[TemplateModel]):
    type_name = "lium_template"
    model = TemplateModel
    description = TemplateModel.__doc__ or ""

    def modify_plan(self, ctx: Context, change: PlanChange[TemplateModel]) -> None:
        check_access_on_create(ctx, change)

    def create(self, ctx: Context, plan: TemplateModel, config: TemplateModel) -> TemplateModel:
        client = session(ctx).client
        template = create_reconciled(
            ctx,
            "creating the template",
            lambda: client.create_template(_spec(plan)),
            lambda since: newest(
                [
                    t
                    for t in client.list_templates()
                    if t.name == plan.name
                    and t.user_id == client.me().id
                    and image_of(t) in _equivalent(plan.image)
                ],
                lambda t: t.created_at,
                since,
            ),
        )
        return _state(template, plan)

    def read(self, ctx: Context, state: TemplateModel) -> TemplateModel | None:
        with api_errors("reading the template"):
            template = session(ctx).client.get_template(state.id or "")
        return None if template is None else _state(template, state)

    def update(
        self, ctx: Context, prior: TemplateModel, plan: TemplateModel, config: TemplateModel
    ) -> TemplateModel:
        with api_errors("updating the template"):
            template = session(ctx).client.update_template(prior.id or "", _spec(plan))
        return _state(template, plan)

    def delete(self, ctx: Context, state: TemplateModel) -> None:
        s = session(ctx)
        template_id = state.id or ""
        settle_orphans(ctx, s, template_id=template_id)
        delete_reconciled(
            ctx,
            "deleting the template",
            lambda: s.client.delete_template(template_id),
            lambda: s.client.get_template(template_id) is not None,
        )
