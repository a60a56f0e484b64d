"""Request bodies of the Lium API routes; a body that does not fit answers 422 (see ``app.py``).

Unknown fields are ignored, as a FastAPI server does by default, so newer clients keep working.
"""

import re
from datetime import datetime
from typing import Annotated, Literal
from uuid import UUID

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from lium_emulator.errors import ApiError

Port = Annotated[int, Field(ge=1, le=65535)]
_VOLUME_NAME = re.compile(r"^[A-Za-z0-9\-_. ,()!?/]{1,100}$")


def pod_path(path: str, what: str) -> str:
    """A directory inside a pod a client names: absolute and without ``..``, else 400 naming ``what``."""
    if not path.startswith("/") or ".." in path.split("/"):
        raise ApiError(400, "invalid_path", f"{what} must be an absolute path without '..'.")
    return path


def _absolute_paths(paths: list[str]) -> list[str]:
    if any(not path.startswith("/") for path in paths):
        raise ValueError("volume paths must be absolute")
    return paths


def _unique_ports(ports: list[int]) -> list[int]:
    if len(set(ports)) != len(ports):
        raise ValueError("internal ports must be unique")
    return ports


def _public_keys(user_public_key: str | list[str]) -> list[str]:
    """The public keys of a rent's ``user_public_key``: a single string or a list, blanks dropped."""
    keys = [user_public_key] if isinstance(user_public_key, str) else user_public_key
    return [key.strip() for key in keys if key.strip()]


def _volume_name(name: str) -> str:
    if not _VOLUME_NAME.match(name):
        raise ValueError("use at most 100 letters, digits, spaces and - _ . , ( ) ! ? /")
    return name


class Body(BaseModel):
    """Base of request bodies."""

    model_config = ConfigDict(extra="ignore")


class RentRequest(Body):
    """``POST /executors/{id}/rent`` (docs/lium-api.md#rent)."""

    pod_name: str = Field(min_length=1, max_length=255)
    template_id: UUID
    user_public_key: str | list[str] = Field(default_factory=list)
    gpu_count: int | None = None
    initial_port_count: int | None = Field(default=None, ge=0, le=200)
    volume_id: UUID | None = None
    enable_volume_encryption: bool = False
    enable_jupyter: bool = False
    enable_backups: bool = True
    termination_hours: int | None = None
    # A backup restored into the new pod once it runs (docs/lium-api.md#backups): both or neither.
    backup_log_id: UUID | None = None
    restore_path: str | None = None

    def authorized_keys(self) -> list[str]:
        """The public keys to authorise for root."""
        return _public_keys(self.user_public_key)


class ClusterRentRequest(Body):
    """``POST /executors/cluster/rent`` (docs/lium-api.md#clusters): whole nodes of one fabric."""

    pod_name: str = Field(min_length=1, max_length=255)
    template_id: UUID
    executor_uuids: list[UUID] = Field(min_length=2, max_length=64)
    user_public_key: str | list[str] = Field(default_factory=list)
    initial_port_count: int | None = Field(default=None, ge=0, le=200)
    enable_volume_encryption: bool | None = None
    enable_backups: bool = True

    def authorized_keys(self) -> list[str]:
        """The public keys to authorise for root on every member."""
        return _public_keys(self.user_public_key)


class DeletePodRequest(Body):
    """Optional body of ``DELETE /pods/{id}``: feedback about the node."""

    feedback_text: str | None = None
    rating: int | None = Field(default=None, ge=1, le=5)
    reason: str | None = None


class TemplateRequest(Body):
    """``POST /templates`` and ``PUT /templates/{id}`` (docs/lium-api.md#templates)."""

    name: str = Field(min_length=1, max_length=255)
    description: str | None = None
    readme: str | None = None
    docker_image: str = Field(min_length=1, max_length=512)
    docker_image_tag: str = Field(default="", max_length=128)
    docker_image_digest: str = Field(default="", max_length=128)
    docker_image_size: int | None = Field(default=None, ge=0)
    category: Literal["DOCKER", "PYTORCH", "NVIDIA", "TENSOR_FLOW", "OPEN_AI", "UBUNTU"] = "DOCKER"
    volumes: Annotated[list[str], AfterValidator(_absolute_paths)] = Field(
        default_factory=lambda: ["/workspace"]
    )
    environment: dict[str, str] = Field(default_factory=dict)
    entrypoint: str = ""
    startup_commands: str = ""
    internal_ports: Annotated[list[Port], AfterValidator(_unique_ports)] = Field(default_factory=lambda: [22])
    is_private: bool = False
    one_time_template: bool = False
    is_temporary: bool = False
    container_start_immediately: bool = True
    docker_credential_id: UUID | None = None
    supports_docker: bool = False
    supports_volume_encryption: bool = False


class DockerCredentialRequest(Body):
    """``POST /docker-credentials/`` and ``PUT /docker-credentials/{id}`` (docs/lium-api.md#docker-credentials)."""

    docker_username: str = Field(min_length=1, max_length=255)
    docker_password: str = Field(min_length=1, max_length=4096)


class VolumeCreateRequest(Body):
    """``POST /volumes`` (docs/lium-api.md#volumes)."""

    name: Annotated[str, AfterValidator(_volume_name)]
    description: str | None = Field(default=None, max_length=1000)


class VolumeUpdateRequest(Body):
    """``PUT /volumes/{id}``."""

    name: Annotated[str, AfterValidator(_volume_name)] | None = None
    description: str | None = Field(default=None, max_length=1000)


class SshKeyRequest(Body):
    """``POST /ssh-keys`` and ``PUT /ssh-keys/{id}`` (docs/lium-api.md#ssh-keys)."""

    name: str = Field(min_length=1, max_length=255)
    public_key: str = Field(min_length=1, max_length=16384)


class AccountCreateRequest(BaseModel):
    """``POST /_emulator/accounts``: add an account for another API key."""

    model_config = ConfigDict(extra="forbid")

    api_key: str = Field(min_length=8, max_length=512)
    balance: float | None = None
    # for ``POST /users/login``; an existing account keeps its e-mail, a password given (re)sets its own
    email: str | None = Field(default=None, min_length=3, max_length=320, pattern=r"^[^@\s]+@[^@\s]+$")
    password: str | None = Field(default=None, min_length=1, max_length=1024)


class AccountUpdateRequest(BaseModel):
    """``PATCH /_emulator/accounts/{user_id}``: set the account's balance."""

    model_config = ConfigDict(extra="forbid")

    balance: float


class ExecutorFilters(BaseModel):
    """Query of ``GET /executors``: the filters Lium's SDK sends (docs/lium-api.md#executors).

    ``lat``/``lon``/``max_distance_mile`` filter only together (a radius around a point). Unknown
    parameters are ignored: ``page``/``size`` (every row fits one answer), ``reliable_only`` (no node
    has frequent rent failures). ``view`` is validated; both views return the full row.
    """

    model_config = ConfigDict(extra="ignore")

    view: Literal["summary", "full"] = "summary"
    machine_names: str | None = Field(default=None, description="comma-separated machine names")
    gpu_count_gte: int | None = Field(default=None, ge=0)
    gpu_count_lte: int | None = Field(default=None, ge=0)
    nvlink: bool | None = None
    min_download_mbps: float | None = Field(default=None, ge=0)
    lat: float | None = Field(default=None, ge=-90, le=90)
    lon: float | None = Field(default=None, ge=-180, le=180)
    max_distance_mile: float | None = Field(default=None, gt=0)

    def wanted_machines(self) -> set[str] | None:
        """The machine names asked for, or None for any."""
        if self.machine_names is None:
            return None
        return {name.strip() for name in self.machine_names.split(",") if name.strip()}


class QuoteQuery(BaseModel):
    """Query of ``GET /executors/{id}/quote``."""

    model_config = ConfigDict(extra="ignore")

    hours: float = Field(gt=0, le=24 * 365)
    gpu_count: int | None = Field(default=None, ge=1)
    volume_gb: float = Field(default=0.0, ge=0)
    backup_gb: float = Field(default=0.0, ge=0)


class ScheduleRemovalRequest(Body):
    """``POST /pods/{id}/schedule-removal``: when the platform removes the pod."""

    removal_scheduled_at: datetime


class RebootRequest(Body):
    """Optional body of ``POST /pods/{id}/reboot``: a network volume to attach to the new container."""

    volume_id: UUID | None = None


class SwitchTemplateRequest(Body):
    """``PUT /pods/{id}/switch-template``: the template the pod's new container runs."""

    template_id: UUID
