"""``/workspaces``: teams, their members, invitations, billing owner (docs/lium-api.md#workspaces).

Reads work with a key (the workspace it acts in) or a session (every workspace of the user); writes
need a session. Roles: ``owner`` (everything), ``admin`` (invite, remove members other than owners,
see every key), ``member`` (read; own keys). A personal workspace takes no invitations and cannot be
deleted.
"""

import uuid
from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from lium_emulator.api.caller import Caller, CallerDep, SessionDep
from lium_emulator.api.deps import RuntimeDep
from lium_emulator.errors import ApiError
from lium_emulator.records.access import Invitation, Workspace
from lium_emulator.records.entities import ACTIVE_STATUSES
from lium_emulator.records.timeutil import iso, utcnow
from lium_emulator.runtime import Runtime
from lium_emulator.views import workspace_object

router = APIRouter()


class WorkspaceCreateRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=100)


class InvitationRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    email: str = Field(min_length=3, max_length=320, pattern=r"^[^@\s]+@[^@\s]+$")
    role: Literal["member", "admin", "owner"] = "member"


class TransferRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user_id: str = Field(min_length=1, max_length=100)


def _not_found() -> ApiError:
    return ApiError(404, "workspace_not_found", "Workspace not found.")


def _forbidden(what: str) -> ApiError:
    return ApiError(403, "workspace_role_required", f"Only {what} may do that in this workspace.")


def _role_in(runtime: Runtime, caller: Caller, workspace_id: str) -> tuple[Workspace, str]:
    """The workspace the caller reaches and its role there: a key only its own, a session any the user
    is a member of; 404 otherwise."""
    if caller.key is not None:
        if workspace_id != caller.workspace_id:
            raise _not_found()
        return caller.workspace, caller.role
    member = runtime.state.membership(workspace_id, caller.account.user_id)
    if member is None:
        raise _not_found()
    return runtime.state.workspaces[workspace_id], member.role


def _member_row(
    runtime: Runtime, workspace: Workspace, user_id: str, role: str, joined: Any
) -> dict[str, Any]:
    account = runtime.state.accounts.get(user_id)
    email = account.email if account else None
    return {
        "user_id": user_id,
        "name": email.split("@", 1)[0] if email else "",
        "email": email,
        "role": role,
        "is_billing_owner": workspace.billing_owner_user_id == user_id,
        "joined_at": iso(joined),
    }


@router.get("/workspaces")
async def list_workspaces(runtime: RuntimeDep, caller: CallerDep) -> list[dict[str, Any]]:
    """A key: the workspace it acts in; a session: every workspace of the user (personal first)."""
    if caller.key is not None:
        return [workspace_object(caller.workspace, caller.role)]
    state = runtime.state
    rows = []
    for member in state.memberships.values():
        if member.user_id != caller.account.user_id:
            continue
        workspace = state.workspaces.get(member.workspace_id)
        if workspace is not None and not workspace.deleted:
            rows.append(
                (not workspace.is_personal, workspace.created_at, workspace_object(workspace, member.role))
            )
    return [row for _, _, row in sorted(rows, key=lambda r: (r[0], r[1]))]


@router.get("/workspaces/{workspace_id}")
async def get_workspace(workspace_id: str, runtime: RuntimeDep, caller: CallerDep) -> dict[str, Any]:
    """One workspace the caller reaches."""
    workspace, role = _role_in(runtime, caller, workspace_id)
    return workspace_object(workspace, role)


@router.get("/workspaces/{workspace_id}/members")
async def list_members(workspace_id: str, runtime: RuntimeDep, caller: CallerDep) -> list[dict[str, Any]]:
    """The workspace's members, by join time."""
    workspace, _ = _role_in(runtime, caller, workspace_id)
    return [
        _member_row(runtime, workspace, m.user_id, m.role, m.joined_at)
        for m in runtime.state.members(workspace.id)
    ]


@router.post("/workspaces")
async def create_workspace(
    body: WorkspaceCreateRequest, runtime: RuntimeDep, caller: SessionDep
) -> dict[str, Any]:
    """A team workspace; the creator is its owner and billing owner."""
    state = runtime.state
    now = utcnow()
    workspace = Workspace(
        id=str(uuid.uuid4()),
        name=body.name,
        is_personal=False,
        billing_owner_user_id=caller.account.user_id,
        created_at=now,
    )
    state.workspaces[workspace.id] = workspace
    state.save(workspace)
    state.add_member(workspace.id, caller.account.user_id, "owner", now)
    state.record_event(workspace.id, "workspace-create.success", actor=caller.actor, detail=workspace.name)
    return workspace_object(workspace, "owner")


@router.post("/workspaces/{workspace_id}/invitations")
async def invite(
    workspace_id: str, body: InvitationRequest, runtime: RuntimeDep, caller: SessionDep
) -> dict[str, Any]:
    """Invite an address: an emulator account with it joins at once; any other stays pending until an
    account with that address is made (``POST /_emulator/accounts`` with ``email``)."""
    state = runtime.state
    workspace, role = _role_in(runtime, caller, workspace_id)
    if role not in ("owner", "admin"):
        raise _forbidden("owners and admins")
    if body.role == "owner" and role != "owner":
        raise _forbidden("owners")
    if workspace.is_personal:
        raise ApiError(400, "personal_workspace", "A personal workspace has no other members.")
    invitee = state.account_by_email(body.email)
    joined = invitee is not None
    if invitee is not None and state.membership(workspace.id, invitee.user_id) is None:
        state.add_member(workspace.id, invitee.user_id, body.role)
    invitation = Invitation(
        id=str(uuid.uuid4()),
        workspace_id=workspace.id,
        email=body.email,
        role=body.role,
        invited_by_user_id=caller.account.user_id,
        status="accepted" if joined else "pending",
        created_at=utcnow(),
    )
    state.invitations[invitation.id] = invitation
    state.save(invitation)
    state.record_event(workspace.id, "workspace-invite.success", actor=caller.actor, detail=body.email)
    return {
        "id": invitation.id,
        "workspace_id": workspace.id,
        "email": invitation.email,
        "role": invitation.role,
        "status": invitation.status,
        "user_id": invitee.user_id if invitee else None,
        "created_at": iso(invitation.created_at),
        "message": f"{body.email} joined {workspace.name}."
        if joined
        else f"Invitation sent to {body.email}.",
    }


@router.delete("/workspaces/{workspace_id}/members/{user_id}")
async def remove_member(
    workspace_id: str, user_id: str, runtime: RuntimeDep, caller: SessionDep
) -> dict[str, Any]:
    """Remove a member (or leave): owners remove anyone, admins members and admins; the billing owner
    cannot be removed. The member's keys of this workspace are revoked; its pods stay."""
    state = runtime.state
    workspace, role = _role_in(runtime, caller, workspace_id)
    target = state.membership(workspace.id, user_id)
    if target is None:
        raise ApiError(404, "member_not_found", "Member not found.")
    leaving = user_id == caller.account.user_id
    if not leaving and (role == "member" or (role == "admin" and target.role == "owner")):
        raise _forbidden("owners (and admins, for non-owners)")
    if workspace.billing_owner_user_id == user_id:
        raise ApiError(
            409, "billing_owner_cannot_leave", "Transfer the billing ownership before removing this member."
        )
    del state.memberships[target.id]
    state.forget(target)
    now = utcnow()
    for key in state.api_keys.values():
        if key.workspace_id == workspace.id and key.user_id == user_id and not key.revoked:
            key.revoked, key.revoked_at = True, now
            state.save(key)
    state.record_event(workspace.id, "workspace-member-remove.success", actor=caller.actor, detail=user_id)
    return {"message": "Member removed."}


@router.post("/workspaces/{workspace_id}/billing-owner/transfer")
async def transfer_billing(
    workspace_id: str, body: TransferRequest, runtime: RuntimeDep, caller: SessionDep
) -> dict[str, Any]:
    """Make another member the billing owner, at once (and an owner): rentals from now on bill them."""
    state = runtime.state
    workspace, _ = _role_in(runtime, caller, workspace_id)
    if workspace.billing_owner_user_id != caller.account.user_id:
        raise _forbidden("the billing owner")
    if workspace.is_personal:
        raise ApiError(400, "personal_workspace", "A personal workspace is billed to its user.")
    target = state.membership(workspace.id, body.user_id)
    if target is None:
        raise ApiError(404, "member_not_found", "Member not found.")
    workspace.billing_owner_user_id = body.user_id
    workspace.pending_billing_owner_user_id = None
    state.save(workspace)
    if target.role != "owner":
        state.add_member(workspace.id, body.user_id, "owner", target.joined_at)
    state.record_event(
        workspace.id, "workspace-billing-transfer.success", actor=caller.actor, detail=body.user_id
    )
    _, role = _role_in(runtime, caller, workspace_id)
    return workspace_object(workspace, role)


@router.delete("/workspaces/{workspace_id}")
async def delete_workspace(workspace_id: str, runtime: RuntimeDep, caller: SessionDep) -> dict[str, Any]:
    """Delete a team workspace (owners; none of its pods may be active); its keys are revoked."""
    state = runtime.state
    workspace, role = _role_in(runtime, caller, workspace_id)
    if role != "owner":
        raise _forbidden("owners")
    if workspace.is_personal:
        raise ApiError(400, "personal_workspace", "A personal workspace cannot be deleted.")
    if any(p.user_id == workspace.id and p.status in ACTIVE_STATUSES for p in state.pods.values()):
        raise ApiError(409, "workspace_has_active_pods", "Delete the workspace's pods first.")
    workspace.deleted = True
    state.save(workspace)
    now = utcnow()
    for key in state.api_keys.values():
        if key.workspace_id == workspace.id and not key.revoked:
            key.revoked, key.revoked_at = True, now
            state.save(key)
    return {"message": f"Workspace {workspace.name} deleted."}
