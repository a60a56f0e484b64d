"""The emulator's stored records: accounts, pods, templates, credentials, volumes, SSH keys, events,
idempotency records.

They are pydantic models so that the SQLite store (``store.py``) can keep each one as a JSON document
and read it back unchanged. What clients see is rendered from them in ``views.py``.
"""

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

PodStatus = Literal[
    "PENDING",
    "RUNNING",
    "REBOOT_PENDING",
    "REBOOT_FAILED",
    "CREATION_FAILED",
    "BROKEN",
    "DELETING",
    "DELETED",
]

# Statuses in which a pod holds its GPUs and its network volume.
ACTIVE_STATUSES: frozenset[str] = frozenset(
    {"PENDING", "RUNNING", "REBOOT_PENDING", "REBOOT_FAILED", "DELETING", "BROKEN"}
)
# Statuses in which a pod row is listed and readable; DELETED rows only remain for inspection.
VISIBLE_STATUSES: frozenset[str] = ACTIVE_STATUSES | {"CREATION_FAILED"}


class Record(BaseModel):
    """Base of every stored record: mutable, and strict about unknown fields on reload."""

    model_config = ConfigDict(extra="forbid", validate_assignment=False)


class Account(Record):
    """A user: own user id, e-mail and balance. Its API keys are ``ApiKey`` records (``access.py``);
    ``api_key_id``, ``api_key_name`` and ``key_sha256`` name the key the account was made for (its first)."""

    user_id: str
    api_key_id: str
    api_key_name: str
    key_sha256: str  # the key itself is never stored
    email: str
    credit_usd: float  # starting balance; the balance is credit minus billed usage
    created_at: datetime
    password_sha256: str | None = None  # for ``POST /users/login``; None: no password login


class Template(Record):
    """A pod template (docs/lium-api.md#templates); ``user_id`` None marks a public, platform template."""

    id: str
    user_id: str | None
    name: str
    description: str | None = None
    readme: str | None = None
    docker_image: str
    docker_image_tag: str
    docker_image_digest: str = ""
    docker_image_size: int | None = None
    category: str = "DOCKER"
    volumes: list[str] = Field(default_factory=lambda: ["/workspace"])
    environment: dict[str, str] = Field(default_factory=dict)
    entrypoint: str = ""
    startup_commands: str = ""
    internal_ports: list[int] = Field(default_factory=lambda: [22])
    is_private: bool = False
    one_time_template: bool = False
    is_temporary: bool = False
    container_start_immediately: bool = True
    docker_credential_id: str | None = None
    supports_docker: bool = False
    supports_volume_encryption: bool = False
    status: str = "CREATED"
    verification_logs: str | None = None
    created_at: datetime
    updated_at: datetime


class DockerCredential(Record):
    """A private-registry login; only a SHA-256 of the password is kept."""

    id: str
    user_id: str
    username: str
    password_sha256: str
    created_at: datetime
    updated_at: datetime


class Volume(Record):
    """A network volume: a directory on the host, mounted at /mnt of the pod it is attached to."""

    id: str
    user_id: str
    name: str
    description: str | None = None
    created_at: datetime
    updated_at: datetime


class SshKey(Record):
    """An account-level SSH public key (docs/lium-api.md#ssh-keys); not added to pods automatically."""

    id: str
    user_id: str
    name: str
    public_key: str
    created_at: datetime
    updated_at: datetime


class PodFaults(Record):
    """Faults the fault plan attached to a pod when it was rented (see ``faults.py``)."""

    stuck_pending_rule: str | None = None
    creation_failed: str | None = None
    ssh_late_seconds: float = 0.0
    slow_deleting_seconds: float = 0.0


class Pod(Record):
    """A rented pod, from rent to DELETED (rows are kept after deletion for inspection)."""

    id: str
    user_id: str  # the owning workspace (a personal workspace's id is its user's id)
    api_key_id: str | None  # the key that rented it; None for a browser session's rental
    pod_name: str
    executor_id: str
    status: PodStatus
    gpu_name: str
    cpu_name: str
    gpu_count: int
    price: float  # USD per hour
    cpu_count: int
    memory_gib: int
    local_volume_gb: int
    storage_quota_gb: int
    template: Template  # the template as it was at rent time
    volume_id: str | None
    authorized_keys: list[str]
    initial_port_count: int | None
    enable_volume_encryption: bool
    enable_jupyter: bool
    enable_backups: bool
    termination_hours: int | None
    idempotency_key: str | None
    faults: PodFaults = Field(default_factory=PodFaults)
    ports_mapping: dict[int, int] | None = None
    ssh_ready: bool = False
    created_at: datetime
    updated_at: datetime
    running_at: datetime | None = None
    billing_stopped_at: datetime | None = None
    failed_at: datetime | None = None
    deleting_at: datetime | None = None
    deleted_at: datetime | None = None
    removal_scheduled_at: datetime | None = None
    reboot_requested_at: datetime | None = None
    failure_reason: str | None = None
    failure_detail: str | None = None
    delete_reason: str | None = None
    # A member of a multi-node cluster (docs/lium-api.md#clusters): the rental's id, the member's rank
    # and its address on the cluster's overlay.
    cluster_id: str | None = None
    cluster_node_index: int | None = None
    cluster_overlay_ip: str | None = None
    # Whose balance pays: the workspace's billing owner at rent time (None: ``user_id``, as before).
    billed_user_id: str | None = None
    # Its notebook server (docs/lium-api.md#notebooks): none until install-jupyter; cleared with the container.
    jupyter_port: int | None = None
    jupyter_installation_status: str | None = None
    jupyter_url: str | None = None
    jupyter_error: str | None = None
    # The backup its rent restores once it runs, and where (docs/lium-api.md#backups).
    restore_backup_id: str | None = None
    restore_path: str | None = None


class Event(Record):
    """One entry of an account's event log (docs/lium-api.md#events)."""

    id: str
    user_id: str
    created_at: datetime
    event_type: str
    sub_event_type: str
    pod_id: str | None = None
    pod_name: str | None = None
    actor: dict[str, Any] | None = None
    from_status: str | None = None
    to_status: str | None = None
    reason: str | None = None
    detail: str | None = None
    error: str | None = None


class IdempotencyRecord(Record):
    """What became of one ``Idempotency-Key`` of one account (docs/lium-api.md#idempotency)."""

    user_id: str
    key: str
    request_sha256: str
    state: Literal["in_flight", "pending", "completed"]
    created_at: datetime
    status_code: int | None = None
    body: dict[str, Any] | None = None
