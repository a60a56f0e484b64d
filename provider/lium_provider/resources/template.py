"""``lium_template``: a pod template (image, entrypoint, startup command, environment, ports)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from lium_provider.api.models import Template, TemplateSpec, is_lium_id
from lium_provider.domain.stack import described, tag_in
from lium_provider.resources.common import (
    api_errors,
    check_access_on_create,
    create_reconciled,
    delete_reconciled,
    import_by_lium_id,
    newest,
)
from lium_provider.resources.inputs import (
    COMMAND_LINE,
    COMMAND_LINE_BYTES,
    ENVIRONMENT,
    ENVIRONMENT_BYTES,
    EXEC_STRING_BYTES,
    LIUM_ID,
    PRINTABLE_NAME,
    SCRIPT,
)
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
        str | None,
        Attribute(
            optional=True,
            description="Entrypoint, e.g. `/bin/sh` (default: the image's). Split into words as a shell "
            f"would; one line, each word at most {EXEC_STRING_BYTES} bytes.",
        ),
        COMMAND_LINE,
    ] = None
    startup_commands: Annotated[
        str | None,
        Attribute(
            optional=True,
            description="Arguments after the image, e.g. `-c 'exec sleep infinity'`, split into words as a "
            "shell would (quotes closed; tabs and newlines allowed, no other control character); each word "
            f"at most {EXEC_STRING_BYTES} bytes, all of them {COMMAND_LINE_BYTES}.",
        ),
        SCRIPT,
    ] = None
    environment: Annotated[
        dict[str, str] | None,
        Attribute(
            optional=True,
            description="Extra environment variables: names without `=`, values without NUL; each "
            f"`NAME=value` at most {EXEC_STRING_BYTES} bytes, all of them {ENVIRONMENT_BYTES} (what one "
            "process start can carry, with room for the image's own).",
        ),
        ENVIRONMENT,
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
        LIUM_ID,
    ] = None
    stack_tag: StackTag = None
    adopted_from: AdoptedFrom = None
    workspace_id: WorkspaceId = None

    @field_validator("image")
    @classmethod
    def _image(cls, value: str) -> str:
        return check_image_reference(value)

    @field_validator("internal_ports")
    @classmethod
    def _ports(cls, value: list[int] | None) -> list[int] | None:
        seen: set[int] = set()
        for port in value or []:
            if not 1 <= port <= 65535:
                raise ValueError(f"{port} is not a TCP port (1-65535)")
            if port in seen:
                raise ValueError(f"port {port} is listed twice: each container port is mapped once")
            seen.add(port)
        return value

    @field_validator("local_volume_path")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("/"):
            raise ValueError(f'"{value}" must be an absolute path')
        return value


def _tag_in_lium(s: LiumSession, template_id: str) -> str | None:
    """The stack tag the template's description carries in Lium (None: none, or no such template)."""
    with api_errors("reading the template"):
        template = s.client.get_template(template_id)
    return tag_in(template.description) if template else None


def _spec(model: TemplateModel, tag: str) -> TemplateSpec:
    """The body Lium gets; its description carries the stack's ``tag``, so a fresh runner finds it."""
    return TemplateSpec(
        name=model.name,
        description=described(None, tag),
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


def _state(template: Template, base: TemplateModel, owner: dict[str, Any]) -> TemplateModel:
    """The refreshed state: what Lium reports, keeping the user's spelling of the image when equivalent,
    and ``owner``'s ownership fields."""
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
        **owner,
    }
    return base.model_copy(update=update)


def used_credentials(s: LiumSession) -> set[str]:
    """The ids of the registry credentials some template of the account uses."""
    return {t.docker_credential_id for t in s.client.list_templates() if t.docker_credential_id}


def _same_in_lium(prior: TemplateModel, plan: TemplateModel) -> bool:
    """Whether the two differ in nothing Lium holds but the ownership record."""
    moved = {"stack_tag": plan.stack_tag, "adopted_from": plan.adopted_from, "id": plan.id}
    return prior.model_copy(update=moved) == plan


def _owned_by(plan: TemplateModel, tag: str) -> dict[str, Any]:
    return {"stack_tag": plan.stack_tag or tag, "adopted_from": plan.adopted_from}


def _name_key(name: str, tag: str | None) -> tuple[str, ...]:
    """The name a template create finds an interrupted run's template by: its name and stack tag."""
    return ("lium_template", name, tag or "")


def _equivalent(image: str) -> set[str]:
    """Spellings Lium may hand back for the same reference (an implied ``latest`` tag)."""
    match = _IMAGE_REF.match(image)
    if match and not match.group("tag") and not match.group("digest"):
        return {image, f"{image}:latest"}
    return {image}


@records_workspace(lambda s, object_id: s.client.get_template(object_id) is not None)
class TemplateResource(Resource[TemplateModel]):
    type_name = "lium_template"
    model = TemplateModel
    description = TemplateModel.__doc__ or ""

    def modify_plan(self, ctx: Context, change: PlanChange[TemplateModel]) -> None:
        plan_ownership(ctx, change, self.type_name)
        claim_create_name(ctx, change, self.type_name)
        check_access_on_create(ctx, change)
        prior, tag = change.prior, change.planned.stack_tag
        names = {prior.name} if prior is not None else set()
        if not change.is_unknown("name"):
            names.add(change.planned.name)  # a rename runs beside the creates of the same apply
        for name in sorted(names):
            claim_lium_name(ctx, change, _name_key(name, tag), f"the template name {name!r}")

    def plan_delete(self, ctx: Context, prior: TemplateModel) -> None:
        hold_at_delete(ctx, _name_key(prior.name, prior.stack_tag), f"the template name {prior.name!r}")

    def create(self, ctx: Context, plan: TemplateModel, config: TemplateModel) -> TemplateModel:
        s = session(ctx)
        client = s.client
        tag = plan.stack_tag or s.stack_tag  # as planned: the state's tag may be read otherwise now
        owner = _owned_by(plan, tag)
        with api_errors("looking for this stack's template of that name"):
            me = s.verify_access().id  # the key's user, from the plan's access check
            mine = [t for t in client.list_templates() if t.user_id == me and t.name == plan.name]
        earlier = [t for t in mine if tag_in(t.description) == tag]
        if earlier:  # an interrupted run of this stack made it (names are unique within a stack)
            return self._adopt(ctx, s, max(earlier, key=lambda t: t.created_at or datetime.min), plan, tag)
        template = create_reconciled(
            ctx,
            "creating the template",
            lambda: client.create_template(_spec(plan, tag)),
            lambda since: newest(
                [
                    t
                    for t in client.list_templates()
                    if t.name == plan.name
                    and t.user_id == me
                    and tag_in(t.description) == tag
                    and image_of(t) in _equivalent(plan.image)
                ],
                lambda t: t.created_at,
                since,
            ),
        )
        return _state(template, plan, owner)

    def _adopt(
        self, ctx: Context, s: LiumSession, template: Template, plan: TemplateModel, tag: str
    ) -> TemplateModel:
        """Take on this stack's template an interrupted run created but never recorded: the same id (so
        the pods named after it are found too), set to the plan. A registry credential carries no tag:
        it is found through this template, and when the plan names another one (the fresh runner made
        its own), the interrupted run's credential, now used by no template, is deleted."""
        ctx.log.info("adopting a template an interrupted run of this stack created", template=template.id)
        current = _state(template, plan, _owned_by(plan, tag))
        if _same_in_lium(current, plan.model_copy(update={"id": template.id})):
            return current  # as planned: no PUT, which would restart the pods that use it
        with api_errors("updating the adopted template"):
            adopted = s.client.update_template(template.id, _spec(plan, tag))
            old = template.docker_credential_id
            if old and old != plan.docker_credential_id and old not in used_credentials(s):
                s.client.delete_docker_credential(old)
        return _state(adopted, plan, _owned_by(plan, tag))

    def read(self, ctx: Context, state: TemplateModel) -> TemplateModel | None:
        if not is_lium_id(state.id):
            return state  # names no template: the plan refuses it, a destroy forgets it
        s = session(ctx)
        with api_errors("reading the template"):
            template = s.client.get_template(state.id or "")
        if template is None:
            return None
        owner = refreshed_ownership(ctx, self.type_name, state, tag_in(template.description))
        return _state(template, state, owner)

    def update(
        self, ctx: Context, prior: TemplateModel, plan: TemplateModel, config: TemplateModel
    ) -> TemplateModel:
        if _same_in_lium(prior, plan):  # only the stack tag moved (a take-over): the state is enough
            return plan.model_copy(update={"id": prior.id})
        s = session(ctx)
        check_before_change(ctx, self.type_name, prior, lambda: _tag_in_lium(s, prior.id or ""), "changed")
        # Its mark stays the one its state records (a take-over writes this stack's).
        tag = plan.stack_tag or s.stack_tag
        with api_errors("updating the template"):
            template = s.client.update_template(prior.id or "", _spec(plan, tag))
        return _state(template, plan, _owned_by(plan, tag))

    def delete(self, ctx: Context, state: TemplateModel) -> None:
        s = session(ctx)
        if left_alone_at_delete(ctx, self.type_name, state, lambda: _tag_in_lium(s, state.id or "")):
            return
        template_id = state.id or ""
        settle_orphans(ctx, s, state.stack_tag or s.stack_tag, template_id=template_id)
        delete_reconciled(
            ctx,
            "deleting the template",
            lambda: s.client.delete_template(template_id),
            lambda: s.client.get_template(template_id) is not None,
        )

    def import_state(self, ctx: Context, import_id: str) -> dict[str, Any]:
        return import_by_lium_id(self.type_name, import_id)
