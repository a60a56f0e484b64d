"""``lium-tf sweep``: find, and optionally delete, what stacks left behind — like Terraform's acceptance sweepers.

Leftovers are the account's pods, own templates and volumes whose names start with a prefix, the Docker
credentials that only those templates use, the account SSH keys a stack registered (their names carry
a stack's tag) whose names start with the prefix, and rent attempts still in the local journal (a
provider killed between a rent and the state write). With a stack tag instead (``--stack``), they are
exactly that stack's: the pods and SSH keys whose Lium names carry the tag, the templates and volumes
whose descriptions carry it, the credentials only those templates use (a credential has no field for a
tag), and the journal's attempts for those pods. With a browser session (``LIUM_SESSION_TOKEN``), the
API keys a stack minted (``lium_api_key``: their names carry the tag), in every workspace of the session,
are listed too. Deletion order follows dependencies: pods (waiting until they are gone), then templates,
then credentials and SSH keys, then API keys; volumes hold data, so with ``--name-prefix`` only when
asked, and with ``--stack`` always (they are provably that stack's).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lium_provider.api.api_keys import ApiKeyRow
from lium_provider.api.client import LiumClient
from lium_provider.api.models import (
    DELETED,
    DELETING,
    POD_GONE_TIMEOUT,
    AccountSshKey,
    DockerCredential,
    Pod,
    Template,
    Volume,
)
from lium_provider.api.rent import RentAttempt, find_rented_pod
from lium_provider.domain.journal import RentJournal
from lium_provider.domain.stack import parse_tagged_name, tag_in, tag_in_pod_name

POLL_SECONDS = 2.0


@dataclass
class Leftovers:
    pods: list[Pod] = field(default_factory=list)
    templates: list[Template] = field(default_factory=list)
    credentials: list[DockerCredential] = field(default_factory=list)
    volumes: list[Volume] = field(default_factory=list)
    journal: list[RentAttempt] = field(default_factory=list)
    ssh_keys: list[AccountSshKey] = field(default_factory=list)
    api_keys: list[ApiKeyRow] = field(default_factory=list)

    def empty(self) -> bool:
        return not (
            self.pods
            or self.templates
            or self.credentials
            or self.volumes
            or self.journal
            or self.ssh_keys
            or self.api_keys
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "pods": [
                {"id": p.id, "name": p.pod_name, "status": p.status, "price": p.price} for p in self.pods
            ],
            "templates": [{"id": t.id, "name": t.name} for t in self.templates],
            "docker_credentials": [{"id": c.id, "username": c.username} for c in self.credentials],
            "volumes": [{"id": v.id, "name": v.name} for v in self.volumes],
            "ssh_keys": [{"id": k.id, "name": k.name} for k in self.ssh_keys],
            "api_keys": [{"id": k.id, "name": k.name, "workspace_id": k.workspace_id} for k in self.api_keys],
            "journal": [
                {"pod_name": a.pod_name, "executor_id": a.executor_id, "started_at": a.started_at.isoformat()}
                for a in self.journal
            ],
        }


def has_tag(lium_name: str, tags: frozenset[str]) -> bool:
    """Whether a Lium pod name was made for a stack with one of these tags."""
    return tag_in_pod_name(lium_name) in tags


def find_stack_leftovers(
    client: LiumClient, tags: frozenset[str], journal: RentJournal | None = None
) -> Leftovers:
    """Everything of the stack tagged with one of ``tags`` (live pods, templates, volumes, the
    credentials only its templates use, SSH keys, journalled rents); nothing of any other stack."""
    me = client.me()
    pods = [p for p in client.list_pods() if p.status != DELETED and has_tag(p.pod_name, tags)]
    own = [t for t in client.list_templates() if t.user_id == me.id]
    templates = [t for t in own if tag_in(t.description) in tags]
    return Leftovers(
        pods=pods,
        templates=templates,
        credentials=_used_only_by(client, templates, own),
        volumes=[v for v in client.list_volumes() if tag_in(v.description) in tags],
        journal=[a for a in (journal.pending() if journal else []) if has_tag(a.pod_name, tags)],
        ssh_keys=[k for k in client.list_ssh_keys() if (parse_tagged_name(k.name) or ("", ""))[1] in tags],
    )


def stack_api_keys(sessions: LiumClient, matches: Callable[[str], bool]) -> list[ApiKeyRow]:
    """The API keys of every workspace of the browser session ``sessions`` whose names a stack gave them
    (``<name>.lium-stacks-<tag>``) and ``matches`` accepts; keys people named themselves are never listed."""
    found: dict[str, ApiKeyRow] = {}
    workspace_ids: list[str | None] = [w.id for w in sessions.list_workspaces()] or [None]
    for workspace_id in workspace_ids:
        for key in sessions.list_api_keys(workspace_id):
            if parse_tagged_name(key.name) and matches(key.name):
                found.setdefault(key.id, key)
    return list(found.values())


def _used_only_by(client: LiumClient, swept: list[Template], own: list[Template]) -> list[DockerCredential]:
    """The account's credentials that some of the ``swept`` templates use and none of the others."""
    swept_ids = {t.id for t in swept}
    kept = {t.docker_credential_id for t in own if t.id not in swept_ids}
    used = {t.docker_credential_id for t in swept} - kept
    return [c for c in client.list_docker_credentials() if c.id in used]


def find_leftovers(client: LiumClient, prefix: str, journal: RentJournal | None = None) -> Leftovers:
    """What is named ``prefix``*: the account's live pods, own templates and volumes of those names, the
    credentials only those templates use, the SSH keys stacks registered under those names, and
    journalled rents. An empty prefix is refused (it would be everything), before any request."""
    if not prefix.strip():
        raise ValueError("an empty name prefix matches every pod, template and volume of the account")
    me = client.me()
    pods = [p for p in client.list_pods() if p.pod_name.startswith(prefix) and p.status != DELETED]
    own = [t for t in client.list_templates() if t.user_id == me.id]
    templates = [t for t in own if t.name.startswith(prefix)]
    credentials = _used_only_by(client, templates, own)
    volumes = [v for v in client.list_volumes() if v.name.startswith(prefix)]
    attempts = [a for a in (journal.pending() if journal else []) if a.pod_name.startswith(prefix)]
    # Only keys a stack registered: the account's other keys are people's, and no stack made them.
    keys = [k for k in client.list_ssh_keys() if k.name.startswith(prefix) and parse_tagged_name(k.name)]
    return Leftovers(pods, templates, credentials, volumes, attempts, keys)


def delete_leftovers(
    client: LiumClient,
    leftovers: Leftovers,
    journal: RentJournal | None = None,
    *,
    include_volumes: bool = False,
    sessions: LiumClient | None = None,
) -> None:
    """Delete ``leftovers`` in dependency order; API keys are revoked through the browser session
    ``sessions``."""
    pod_ids = {p.id for p in leftovers.pods}
    for attempt in leftovers.journal:
        found = find_rented_pod(client, attempt)
        if found is not None and found.outcome == "rented" and found.pod_id:
            pod_ids.add(found.pod_id)
    for pod_id in pod_ids:
        client.delete_pod(pod_id)
    deadline = time.monotonic() + POD_GONE_TIMEOUT
    while pod_ids:
        live = {p.id: p for p in client.list_pods()}
        pod_ids = {i for i in pod_ids if i in live and live[i].status != DELETED}
        for pod_id in pod_ids:
            if live[pod_id].status != DELETING:
                client.delete_pod(pod_id)
        if pod_ids:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"pods still not deleted after {POD_GONE_TIMEOUT:.0f} s: {sorted(pod_ids)}"
                )
            time.sleep(POLL_SECONDS)
    for template in leftovers.templates:
        client.delete_template(template.id)
    for credential in leftovers.credentials:
        client.delete_docker_credential(credential.id)
    for key in leftovers.ssh_keys:
        client.delete_ssh_key(key.id)
    if leftovers.api_keys and sessions is not None:  # last: the key this sweep runs with may be one
        for api_key in leftovers.api_keys:
            sessions.revoke_api_key(api_key.id, api_key.workspace_id)
    if include_volumes:
        for volume in leftovers.volumes:
            client.delete_volume(volume.id)
    if journal is not None:
        for attempt in leftovers.journal:
            journal.forget(attempt.pod_name)
