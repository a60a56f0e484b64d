"""Template routes (docs/lium-api.md#templates). Public templates (``user_id`` null) are readable by every caller
and read-only."""

import uuid
from typing import Any
from uuid import UUID

from fastapi import APIRouter

from lium_emulator.api.caller import Caller, CallerDep, OptionalCallerDep
from lium_emulator.api.deps import RuntimeDep
from lium_emulator.api.models import TemplateRequest
from lium_emulator.api.owned import owned
from lium_emulator.catalogs.templates import split_image_reference
from lium_emulator.errors import ApiError
from lium_emulator.records.entities import Template
from lium_emulator.records.timeutil import utcnow
from lium_emulator.runtime import Runtime
from lium_emulator.views import template_object

router = APIRouter()


def _fields(runtime: Runtime, caller: Caller, body: TemplateRequest) -> dict[str, Any]:
    """The stored fields of a template request: full image references split, credential checked."""
    fields = body.model_dump()
    if body.docker_image_tag == "":
        image, tag, digest = split_image_reference(body.docker_image)
        fields.update(
            docker_image=image, docker_image_tag=tag, docker_image_digest=body.docker_image_digest or digest
        )
    if body.docker_credential_id is not None:
        credential = owned(runtime.state.credentials, caller, body.docker_credential_id, "Docker credential")
        fields["docker_credential_id"] = credential.id
    return fields


def visible_template(runtime: Runtime, caller: Caller, template_id: UUID) -> Template:
    """A public template or one of the caller's; 404 for any other id."""
    template = runtime.state.templates.get(str(template_id))
    if template is None or template.user_id not in (None, caller.workspace_id):
        raise ApiError(404, "template_not_found", "Template not found.")
    return template


def _own_template(runtime: Runtime, caller: Caller, template_id: UUID) -> Template:
    template = visible_template(runtime, caller, template_id)
    if template.user_id is None:
        raise ApiError(403, "template_read_only", "Public templates cannot be changed.")
    return template


@router.get("/templates")
async def list_templates(runtime: RuntimeDep, caller: OptionalCallerDep) -> list[dict[str, Any]]:
    """Public templates and the caller's own; without a key, only the public ones."""
    owners = {None} if caller is None else {None, caller.workspace_id}
    return [template_object(t) for t in runtime.state.templates.values() if t.user_id in owners]


@router.post("/templates")
async def create_template(body: TemplateRequest, runtime: RuntimeDep, caller: CallerDep) -> dict[str, Any]:
    """Create a template; it is usable for rent at once."""
    now = utcnow()
    template = Template(
        id=str(uuid.uuid4()),
        user_id=caller.workspace_id,
        status="CREATED",
        created_at=now,
        updated_at=now,
        **_fields(runtime, caller, body),
    )
    runtime.state.templates[template.id] = template
    runtime.state.save(template)
    runtime.state.record_event(
        caller.workspace_id, "template-create.success", actor=caller.actor, detail=template.id
    )
    return template_object(template)


@router.get("/templates/{template_id}")
async def get_template(template_id: UUID, runtime: RuntimeDep, caller: CallerDep) -> dict[str, Any]:
    """One template; 422 for a non-UUID id, 404 for an unknown one."""
    return template_object(visible_template(runtime, caller, template_id))


@router.put("/templates/{template_id}")
async def update_template(
    template_id: UUID, body: TemplateRequest, runtime: RuntimeDep, caller: CallerDep
) -> dict[str, Any]:
    """Replace a template (full body). Live pods keep the template they were rented with."""
    template = _own_template(runtime, caller, template_id)
    updated = template.model_copy(
        update={**_fields(runtime, caller, body), "status": "UPDATED", "updated_at": utcnow()}
    )
    runtime.state.templates[template.id] = updated
    runtime.state.save(updated)
    return template_object(updated)


@router.delete("/templates/{template_id}")
async def delete_template(template_id: UUID, runtime: RuntimeDep, caller: CallerDep) -> dict[str, Any]:
    """Delete a template (live pods that use it are not affected)."""
    template = _own_template(runtime, caller, template_id)
    del runtime.state.templates[template.id]
    runtime.state.forget(template)
    runtime.state.record_event(
        caller.workspace_id, "template-delete.success", actor=caller.actor, detail=template.id
    )
    return {"success": True}
