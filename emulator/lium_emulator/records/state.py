"""The emulator's working state: every account's records, kept in memory and written through to the
store, plus the derived facts the API needs (free GPUs per node, balances, event log).

All mutation happens on the event loop thread, so no locking is needed; sandbox work runs in worker
threads but only reports back through the loop (see ``lifecycle.py``).
"""

import hashlib
import uuid
from datetime import datetime
from typing import Any

from lium_emulator.catalogs.nodes import Catalog, Node
from lium_emulator.records.access import (
    ALL_SCOPES,
    ApiKey,
    BudgetRefusal,
    Invitation,
    Membership,
    Session,
    Workspace,
)
from lium_emulator.records.backups import BackupConfig, BackupLog, RestoreLog
from lium_emulator.records.entities import (
    ACTIVE_STATUSES,
    Account,
    DockerCredential,
    Event,
    IdempotencyRecord,
    Pod,
    Record,
    SshKey,
    Template,
    Volume,
)
from lium_emulator.records.store import Store
from lium_emulator.records.timeutil import utcnow

_KINDS: dict[type[Record], str] = {
    Account: "account",
    Template: "template",
    DockerCredential: "docker_credential",
    Volume: "volume",
    SshKey: "ssh_key",
    Pod: "pod",
    Event: "event",
    IdempotencyRecord: "idempotency",
    ApiKey: "api_key",
    Session: "session",
    Workspace: "workspace",
    Membership: "membership",
    Invitation: "invitation",
    BudgetRefusal: "budget_refusal",
    BackupConfig: "backup_config",
    BackupLog: "backup_log",
    RestoreLog: "restore_log",
}


def sha256_hex(text: str) -> str:
    """Hex SHA-256 of ``text`` (how API keys and registry passwords are kept)."""
    return hashlib.sha256(text.encode()).hexdigest()


def record_id(record: Record) -> str:
    """The store id of ``record``."""
    if isinstance(record, Account):
        return record.user_id
    if isinstance(record, IdempotencyRecord):
        return f"{record.user_id}:{record.key}"
    record_key = getattr(record, "id", None)
    if not isinstance(record_key, str):
        raise TypeError(f"{type(record).__name__} has no id")
    return record_key


class EmulatorState:
    """Every record of every account, by id, with write-through persistence."""

    def __init__(self, store: Store, catalog: Catalog) -> None:
        self.store = store
        self.catalog = catalog
        self.accounts: dict[str, Account] = {}
        self.templates: dict[str, Template] = {}
        self.credentials: dict[str, DockerCredential] = {}
        self.volumes: dict[str, Volume] = {}
        self.ssh_keys: dict[str, SshKey] = {}
        self.pods: dict[str, Pod] = {}
        self.events: list[Event] = []
        self.idempotency: dict[tuple[str, str], IdempotencyRecord] = {}
        self.api_keys: dict[str, ApiKey] = {}
        self.sessions: dict[str, Session] = {}
        self.workspaces: dict[str, Workspace] = {}
        self.memberships: dict[str, Membership] = {}
        self.invitations: dict[str, Invitation] = {}
        self.backup_configs: dict[str, BackupConfig] = {}
        self.backups: dict[str, BackupLog] = {}
        self.restores: dict[str, RestoreLog] = {}
        self.refusals: list[BudgetRefusal] = []
        self._keys_by_hash: dict[str, ApiKey] = {}
        self._load()

    def _load(self) -> None:
        for account in (Account.model_validate(doc) for doc in self.store.load("account")):
            self._index_account(account)
        for template in (Template.model_validate(doc) for doc in self.store.load("template")):
            self.templates[template.id] = template
        for credential in (
            DockerCredential.model_validate(doc) for doc in self.store.load("docker_credential")
        ):
            self.credentials[credential.id] = credential
        for volume in (Volume.model_validate(doc) for doc in self.store.load("volume")):
            self.volumes[volume.id] = volume
        for key in (SshKey.model_validate(doc) for doc in self.store.load("ssh_key")):
            self.ssh_keys[key.id] = key
        for pod in (Pod.model_validate(doc) for doc in self.store.load("pod")):
            self.pods[pod.id] = pod
        self.events = sorted(
            (Event.model_validate(doc) for doc in self.store.load("event")), key=lambda e: e.created_at
        )
        for idem in (IdempotencyRecord.model_validate(doc) for doc in self.store.load("idempotency")):
            self.idempotency[(idem.user_id, idem.key)] = idem
        for api_key in (ApiKey.model_validate(doc) for doc in self.store.load("api_key")):
            self._index_key(api_key)
        for session in (Session.model_validate(doc) for doc in self.store.load("session")):
            self.sessions[session.id] = session
        for workspace in (Workspace.model_validate(doc) for doc in self.store.load("workspace")):
            self.workspaces[workspace.id] = workspace
        for member in (Membership.model_validate(doc) for doc in self.store.load("membership")):
            self.memberships[member.id] = member
        for invitation in (Invitation.model_validate(doc) for doc in self.store.load("invitation")):
            self.invitations[invitation.id] = invitation
        self.refusals = sorted(
            (BudgetRefusal.model_validate(doc) for doc in self.store.load("budget_refusal")),
            key=lambda r: r.created_at,
        )
        for config in (BackupConfig.model_validate(doc) for doc in self.store.load("backup_config")):
            self.backup_configs[config.id] = config
        for backup in (BackupLog.model_validate(doc) for doc in self.store.load("backup_log")):
            self.backups[backup.id] = backup
        for restore in (RestoreLog.model_validate(doc) for doc in self.store.load("restore_log")):
            self.restores[restore.id] = restore
        for account in list(self.accounts.values()):
            self._ensure_personal(account)  # state written before keys and workspaces existed

    def _index_account(self, account: Account) -> None:
        self.accounts[account.user_id] = account

    def _index_key(self, api_key: ApiKey) -> None:
        self.api_keys[api_key.id] = api_key
        self._keys_by_hash[api_key.key_sha256] = api_key

    def _ensure_personal(self, account: Account) -> None:
        """The account's personal workspace, its owner membership and its first key, made when missing."""
        if account.user_id not in self.workspaces:
            workspace = Workspace(
                id=account.user_id,
                name="Personal",
                is_personal=True,
                billing_owner_user_id=account.user_id,
                created_at=account.created_at,
            )
            self.workspaces[workspace.id] = workspace
            self.save(workspace)
        membership_id = f"{account.user_id}:{account.user_id}"
        if membership_id not in self.memberships:
            self.add_member(account.user_id, account.user_id, "owner", account.created_at)
        if account.api_key_id not in self.api_keys:
            first = ApiKey(
                id=account.api_key_id,
                user_id=account.user_id,
                workspace_id=account.user_id,
                name=account.api_key_name,
                key_sha256=account.key_sha256,
                scopes=list(ALL_SCOPES),  # a key from before scopes holds them all
                pod_visibility="account",
                created_at=account.created_at,
            )
            self._index_key(first)
            self.save(first)

    # --- persistence -------------------------------------------------------------------------

    def save(self, record: Record) -> None:
        """Write ``record`` through to the store (call after every change)."""
        self.store.put(_KINDS[type(record)], record_id(record), record.model_dump(mode="json"))

    def forget(self, record: Record) -> None:
        """Remove ``record`` from the store."""
        self.store.delete(_KINDS[type(record)], record_id(record))

    # --- accounts ----------------------------------------------------------------------------

    def key_for_secret(self, api_key: str) -> ApiKey | None:
        """The live (not revoked) API key record of a secret, or None."""
        found = self._keys_by_hash.get(sha256_hex(api_key))
        return None if found is None or found.revoked else found

    def account_for_key(self, api_key: str) -> Account | None:
        """The account a live API key belongs to, or None."""
        found = self.key_for_secret(api_key)
        return None if found is None else self.accounts.get(found.user_id)

    def add_api_key(self, api_key: ApiKey) -> None:
        """Store a new key."""
        self._index_key(api_key)
        self.save(api_key)

    def ensure_account(
        self, api_key: str, credit_usd: float, *, email: str | None = None, password: str | None = None
    ) -> Account:
        """The account of ``api_key``, created with ``credit_usd`` if it does not exist yet (with its
        personal workspace and ``api_key`` as its first key); ``password`` (re)sets its login password."""
        existing = self._keys_by_hash.get(sha256_hex(api_key))
        if existing is not None:
            account = self.accounts[existing.user_id]
            if password is not None:
                account.password_sha256 = sha256_hex(password)
                self.save(account)
            return account
        number = len(self.accounts) + 1
        account = Account(
            user_id=str(uuid.uuid4()),
            api_key_id=str(uuid.uuid4()),
            api_key_name=f"emulator-key-{number}",
            key_sha256=sha256_hex(api_key),
            email=email or f"user{number}@lium-emulator.local",
            credit_usd=credit_usd,
            created_at=utcnow(),
            password_sha256=sha256_hex(password) if password is not None else None,
        )
        self._index_account(account)
        self.save(account)
        self._ensure_personal(account)
        self._accept_invitations(account)
        return account

    def account_by_email(self, email: str) -> Account | None:
        """The account with this e-mail address (any case), or None."""
        wanted = email.strip().lower()
        return next((a for a in self.accounts.values() if a.email.lower() == wanted), None)

    # --- workspaces --------------------------------------------------------------------------

    def add_member(
        self, workspace_id: str, user_id: str, role: str, at: datetime | None = None
    ) -> Membership:
        """Put ``user_id`` into the workspace with ``role`` (replacing a previous role)."""
        member = Membership.model_validate(
            {
                "id": f"{workspace_id}:{user_id}",
                "workspace_id": workspace_id,
                "user_id": user_id,
                "role": role,
                "joined_at": at or utcnow(),
            }
        )
        self.memberships[member.id] = member
        self.save(member)
        return member

    def membership(self, workspace_id: str, user_id: str) -> Membership | None:
        """``user_id``'s membership of a live workspace, or None."""
        workspace = self.workspaces.get(workspace_id)
        if workspace is None or workspace.deleted:
            return None
        return self.memberships.get(f"{workspace_id}:{user_id}")

    def members(self, workspace_id: str) -> list[Membership]:
        """The workspace's members, by join time."""
        found = (m for m in self.memberships.values() if m.workspace_id == workspace_id)
        return sorted(found, key=lambda m: m.joined_at)

    def _accept_invitations(self, account: Account) -> None:
        for invitation in self.invitations.values():
            if invitation.status == "pending" and invitation.email.lower() == account.email.lower():
                if self.membership(invitation.workspace_id, account.user_id) is None:
                    self.add_member(invitation.workspace_id, account.user_id, invitation.role)
                invitation.status = "accepted"
                self.save(invitation)

    # --- events ------------------------------------------------------------------------------

    def record_event(
        self,
        user_id: str,
        sub_event_type: str,
        *,
        pod: Pod | None = None,
        actor: dict[str, Any] | None = None,
        from_status: str | None = None,
        to_status: str | None = None,
        reason: str | None = None,
        detail: str | None = None,
        error: str | None = None,
    ) -> Event:
        """Append one event to ``user_id``'s log; ``actor`` None means the platform did it."""
        event = Event(
            id=str(uuid.uuid4()),
            user_id=user_id,
            created_at=utcnow(),
            event_type=sub_event_type.split(".", 1)[0],
            sub_event_type=sub_event_type,
            pod_id=pod.id if pod else None,
            pod_name=pod.pod_name if pod else None,
            actor=actor,
            from_status=from_status,
            to_status=to_status,
            reason=reason,
            detail=detail,
            error=error,
        )
        self.events.append(event)
        self.save(event)
        return event

    def pod_events(self, pod_id: str) -> list[Event]:
        """Events of one pod, oldest first."""
        return [event for event in self.events if event.pod_id == pod_id]

    # --- derived facts -----------------------------------------------------------------------

    def gpus_in_use(self, node_id: str) -> int:
        """GPUs of ``node_id`` held by active pods."""
        return sum(
            p.gpu_count
            for p in self.pods.values()
            if p.executor_id == node_id and p.status in ACTIVE_STATUSES
        )

    def available_gpus(self, node: Node) -> int:
        """GPUs of ``node`` that are free now."""
        return max(0, node.gpu_count - self.gpus_in_use(node.id))

    def volume_holder(self, volume_id: str) -> Pod | None:
        """The active pod the volume is attached to, or None."""
        return next(
            (p for p in self.pods.values() if p.volume_id == volume_id and p.status in ACTIVE_STATUSES), None
        )

    def cluster_members(self, cluster_id: str) -> list[Pod]:
        """The pods of one cluster rental that are not DELETED, in rank order."""
        members = (p for p in self.pods.values() if p.cluster_id == cluster_id and p.status != "DELETED")
        return sorted(members, key=lambda p: p.cluster_node_index or 0)

    def owned_pods(self, user_id: str) -> list[Pod]:
        """Every pod of ``user_id`` (deleted ones too), oldest first."""
        return sorted((p for p in self.pods.values() if p.user_id == user_id), key=lambda p: p.created_at)

    def balance(self, account: Account, now: datetime) -> float:
        """The account's balance in USD: its credit minus what the pods billed to it were billed."""
        spent = sum(
            p.price * billed_seconds(p, now) / 3600
            for p in self.pods.values()
            if (p.billed_user_id or p.user_id) == account.user_id
        )
        return round(account.credit_usd - spent, 6)


def billed_interval(pod: Pod, now: datetime) -> tuple[datetime, datetime] | None:
    """When the pod was billed: from RUNNING until the delete request or BROKEN (or ``now``)."""
    if pod.running_at is None:
        return None
    return pod.running_at, max(pod.running_at, pod.billing_stopped_at or now)


def billed_seconds(pod: Pod, now: datetime) -> float:
    """Seconds the pod was billed for (see ``billed_interval``)."""
    interval = billed_interval(pod, now)
    return 0.0 if interval is None else (interval[1] - interval[0]).total_seconds()


def actor_of(account: Account, api_key: ApiKey | None) -> dict[str, Any]:
    """The ``actor`` object of an event done by ``account`` with ``api_key`` (None: a browser session)."""
    if api_key is None:
        return {"auth": "session", "api_key_id": None, "api_key_name": None, "user_id": account.user_id}
    return {
        "auth": "api_key",
        "api_key_id": api_key.id,
        "api_key_name": api_key.name,
        "user_id": account.user_id,
    }
