"""Docker credential routes (docs/lium-api.md#docker-credentials). The collection path has a trailing slash (as clients send
it); the item path has none. Passwords are kept only as a SHA-256 and never returned."""

import secrets
from typing import Any
from uuid import UUID

from fastapi import APIRouter

from lium_emulator.api.caller import CallerDep
from lium_emulator.api.deps import RuntimeDep
from lium_emulator.api.models import DockerCredentialRequest
from lium_emulator.api.owned import new_owned, owned, owned_by
from lium_emulator.records.entities import DockerCredential
from lium_emulator.records.state import sha256_hex
from lium_emulator.records.timeutil import utcnow
from lium_emulator.views import credential_object

router = APIRouter()


@router.post("/docker-credentials/")
async def create_docker_credential(
    runtime: RuntimeDep, caller: CallerDep, body: DockerCredentialRequest | None = None
) -> dict[str, Any]:
    """Store a registry login; without a body, a platform-generated default credential."""
    if body is None:
        username, password = f"lium-default-{secrets.token_hex(4)}", secrets.token_urlsafe(24)
    else:
        username, password = body.docker_username, body.docker_password
    credential = DockerCredential(
        **new_owned(caller), username=username, password_sha256=sha256_hex(password)
    )
    runtime.state.credentials[credential.id] = credential
    runtime.state.save(credential)
    return credential_object(credential)


@router.get("/docker-credentials/")
async def list_docker_credentials(runtime: RuntimeDep, caller: CallerDep) -> list[dict[str, Any]]:
    """The caller's credentials (without passwords)."""
    return [credential_object(c) for c in owned_by(runtime.state.credentials.values(), caller)]


@router.put("/docker-credentials/{credential_id}")
async def update_docker_credential(
    credential_id: UUID, body: DockerCredentialRequest, runtime: RuntimeDep, caller: CallerDep
) -> dict[str, Any]:
    """Replace a credential's username and password."""
    credential = owned(runtime.state.credentials, caller, credential_id, "Docker credential")
    credential.username = body.docker_username
    credential.password_sha256 = sha256_hex(body.docker_password)
    credential.updated_at = utcnow()
    runtime.state.save(credential)
    return credential_object(credential)


@router.delete("/docker-credentials/{credential_id}")
async def delete_docker_credential(
    credential_id: UUID, runtime: RuntimeDep, caller: CallerDep
) -> dict[str, Any]:
    """Delete a credential; templates that reference it can no longer be rented (``template_invalid``)."""
    credential = owned(runtime.state.credentials, caller, credential_id, "Docker credential")
    del runtime.state.credentials[credential.id]
    runtime.state.forget(credential)
    return {"success": True}
