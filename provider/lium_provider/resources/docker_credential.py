"""``lium_docker_credential``: a private-registry login that templates reference.

The password is a write-only argument: Terraform passes it at apply time and never stores it in state
or plans. Bump ``password_wo_version`` to send a new password (rotation happens in place).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from lium_provider.api.models import is_lium_id
from lium_provider.domain.stack import tag_in
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
    left_alone_at_delete,
    plan_ownership,
    refreshed_ownership,
)
from lium_provider.resources.visibility import WorkspaceId, records_workspace
from lium_provider.session import LiumSession, session
from tfbridge import Attribute, Context, PlanChange, Resource, TFError, UseStateForUnknown


class DockerCredentialModel(BaseModel):
    """A Docker registry credential for private images (Lium keeps the password; Terraform never does)."""

    model_config = ConfigDict(extra="forbid")

    id: Annotated[
        str | None,
        Attribute(computed=True, plan=(UseStateForUnknown(),), description="Credential id (UUID)."),
    ] = None
    username: Annotated[str, Attribute(required=True, description="Registry user name."), PRINTABLE_NAME] = (
        Field(min_length=1)
    )
    password_wo: Annotated[
        str | None,
        Attribute(
            optional=True,
            write_only=True,
            sensitive=True,
            description="Registry password or token. Write-only: never stored in state or shown in plans. "
            "Required when creating, and whenever `password_wo_version` changes. Lium checks it only when a "
            "pod pulls the image: a wrong one fails that pod's create (Lium's reason "
            "`image_pull_failed`), after the rent; the failed pod is kept as tainted, and the next apply or "
            "destroy deletes it.",
        ),
    ] = None
    password_wo_version: Annotated[
        int | None,
        Attribute(optional=True, description="Change this number to send a new `password_wo` (rotation)."),
    ] = None
    stack_tag: StackTag = None
    """Only in the state (Lium has no field for it): its mark is that of the templates that use it."""
    adopted_from: AdoptedFrom = None
    workspace_id: WorkspaceId = None


def _password(config: DockerCredentialModel) -> str:
    if not config.password_wo:
        raise TFError(
            "password_wo is required",
            "Set `password_wo` (for example from a variable marked sensitive or ephemeral) to create the "
            "credential or to rotate it.",
            path=("password_wo",),
        )
    return config.password_wo


def _mark_of_users(s: LiumSession, state: DockerCredentialModel) -> str | None:
    """A credential's mark (Lium has no field for it): the stack tag of another stack whose template
    uses it, other than the tags the state records it under; None when only this stack's templates use
    it, or none does. Another stack's template that merely refers to this stack's credential does not
    make it that stack's: the state stays its record (a refresh never refuses it), but it is never
    changed or deleted under that template, which would break."""
    with api_errors("listing the templates that use the Docker credential"):
        me = s.verify_access().id
        tags = {
            tag
            for t in s.client.list_templates()
            if t.user_id == me and t.docker_credential_id == state.id and (tag := tag_in(t.description))
        }
    others = sorted(tags - {state.stack_tag or s.stack_tag, state.adopted_from})
    return others[0] if others else None


@records_workspace(lambda s, object_id: s.client.get_docker_credential(object_id) is not None)
class DockerCredentialResource(Resource[DockerCredentialModel]):
    type_name = "lium_docker_credential"
    model = DockerCredentialModel
    description = DockerCredentialModel.__doc__ or ""

    def modify_plan(self, ctx: Context, change: PlanChange[DockerCredentialModel]) -> None:
        plan_ownership(ctx, change, self.type_name)
        check_access_on_create(ctx, change)

    def create(
        self, ctx: Context, plan: DockerCredentialModel, config: DockerCredentialModel
    ) -> DockerCredentialModel:
        password = _password(config)
        client = session(ctx).client
        credential = create_reconciled(
            ctx,
            "creating the Docker credential",
            lambda: client.create_docker_credential(plan.username, password),
            lambda since: newest(
                [c for c in client.list_docker_credentials() if c.username == plan.username],
                lambda c: c.created_at,
                since,
            ),
        )
        return plan.model_copy(update={"id": credential.id, "password_wo": None})

    def read(self, ctx: Context, state: DockerCredentialModel) -> DockerCredentialModel | None:
        if not is_lium_id(state.id):
            return state  # names no credential: the plan refuses it, a destroy forgets it
        with api_errors("reading the Docker credential"):
            credential = session(ctx).client.get_docker_credential(state.id or "")
        if credential is None:
            return None
        s = session(ctx)
        # Only an import is judged by the templates that use the credential: a state's record is its mark.
        mark = _mark_of_users(s, state) if state.stack_tag is None else None
        owner = refreshed_ownership(ctx, self.type_name, state, mark)
        return state.model_copy(
            update={"username": credential.username or state.username, "password_wo": None, **owner}
        )

    def update(
        self,
        ctx: Context,
        prior: DockerCredentialModel,
        plan: DockerCredentialModel,
        config: DockerCredentialModel,
    ) -> DockerCredentialModel:
        if (prior.username, prior.password_wo_version) == (plan.username, plan.password_wo_version):
            return plan.model_copy(update={"id": prior.id, "password_wo": None})  # only the stack tag moved
        password = _password(config)
        s = session(ctx)
        check_before_change(ctx, self.type_name, prior, lambda: _mark_of_users(s, prior), "changed")
        with api_errors("updating the Docker credential"):
            s.client.update_docker_credential(prior.id or "", plan.username, password)
        return plan.model_copy(update={"id": prior.id, "password_wo": None})

    def delete(self, ctx: Context, state: DockerCredentialModel) -> None:
        s = session(ctx)
        if left_alone_at_delete(ctx, self.type_name, state, lambda: _mark_of_users(s, state)):
            return
        client = s.client
        credential_id = state.id or ""
        delete_reconciled(
            ctx,
            "deleting the Docker credential",
            lambda: client.delete_docker_credential(credential_id),
            lambda: client.get_docker_credential(credential_id) is not None,
        )

    def import_state(self, ctx: Context, import_id: str) -> dict[str, Any]:
        return import_by_lium_id(self.type_name, import_id)
