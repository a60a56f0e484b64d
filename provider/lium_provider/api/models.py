"""Typed views of Lium API bodies (docs/lium-api.md).

Response models ignore unknown fields and accept the variants real servers send (``gpu_count`` and
``price`` as strings, naive UTC timestamps, ids nested in sub-objects); they are strict about the fields
this project relies on, and a body that lacks one raises :class:`LiumProtocolError` naming it.
Request models (:class:`RentRequest`, :class:`TemplateSpec`) forbid unknown fields, so a typo in calling
code fails loudly instead of being silently dropped on the wire.
"""

from __future__ import annotations

import re
import shlex
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from lium_provider.api.errors import LiumProtocolError

RUNNING = "RUNNING"
PENDING = "PENDING"
DELETING = "DELETING"
DELETED = "DELETED"
# A pod listed in one of these states still exists but will never run again (a plan replaces it).
REBOOT_FAILED = "REBOOT_FAILED"
"""A reboot or template switch failed: the container is down, but the pod still holds (and bills) its
node, which a switch or reboot in place can reuse."""
DEAD_POD_STATES: frozenset[str] = frozenset({"STOPPED", "FAILED", "CREATION_FAILED", "BROKEN", REBOOT_FAILED})
# How long a deleted pod may take to be gone before giving up: lium_pod's default delete timeout and
# how long `lium-tf sweep` waits for the pods it deleted.
POD_GONE_TIMEOUT = 900.0
# Ids of pods, executors, templates, credentials and volumes are UUID strings, written in lower case
# (docs/lium-api.md#conventions).
_LIUM_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def is_lium_id(value: str | None) -> bool:
    """Whether ``value`` can be the id of a Lium object, a UUID as Lium writes it: an empty, garbled or
    re-cased one cannot (it would never equal the id Lium answers with)."""
    return bool(value) and _LIUM_ID.fullmatch(value or "") is not None


# dstack's terminal set (docs/lium-api.md#lifecycle): a pod in one of these states will never become usable.
TERMINAL_POD_STATES: frozenset[str] = DEAD_POD_STATES | {DELETING, DELETED}


def _as_utc(value: datetime) -> datetime:
    """Lium sends naive UTC timestamps; make every timestamp timezone-aware UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


UtcDatetime = Annotated[datetime, AfterValidator(_as_utc)]
# How far Lium's clock may be behind this machine's when its timestamps are compared with ours: a search
# for what a request made looks back this much before the request started (dstack uses 1 minute too).
CLOCK_SKEW = timedelta(minutes=1)
NonEmptyStr = Annotated[str, Field(min_length=1)]
# Lium's rent field ``termination_hours`` (docs/lium-api.md#rent): Lium removes the pod that many hours
# after it started. The bound every attribute of that meaning shares (pod, provider default, rent body).
MIN_TERMINATION_HOURS, MAX_TERMINATION_HOURS = 1, 720
TerminationHours = Annotated[int, Field(ge=MIN_TERMINATION_HOURS, le=MAX_TERMINATION_HOURS)]


class ResponseModel(BaseModel):
    """An answer of Lium: unknown fields are ignored, so a newer server does not break the provider."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class RequestModel(BaseModel):
    """A body sent to Lium: exactly the fields declared."""

    model_config = ConfigDict(extra="forbid")


def _lift_nested_id(data: Any, field: str, nested: str) -> Any:
    """Copy ``data[nested]["id"]`` to ``data[field]`` when the flat field is absent."""
    if isinstance(data, dict) and data.get(field) is None and isinstance(data.get(nested), dict):
        return {**data, field: data[nested].get("id")}
    return data


POD_VISIBILITY_OWN = "own"
"""An API key's ``pod_visibility`` under which it sees only the pods it rented itself
(docs/lium-api.md#api-keys): another key's pod answers 404 to it, as a missing one does."""
BUDGET_STOP_REASON = "api_key_budget_exceeded"
"""The ``reason`` of the status event of a pod Lium deleted because the key that rented it spent a budget
(docs/lium-api.md#api-keys)."""


class Workspace(ResponseModel):
    """The workspace an API key acts in, as ``GET /users/me`` names it (docs/lium-api.md#workspaces)."""

    id: NonEmptyStr
    name: str = ""


class User(ResponseModel):
    """``GET /users/me``: the account, and the key that asked (its id, scopes, visibility, workspace);
    a server without keys or workspaces leaves those out."""

    id: NonEmptyStr
    email: str | None = None
    balance: float | None = None
    api_key_id: str | None = None
    api_key_name: str | None = None
    pod_visibility: str | None = None
    workspace: Workspace | None = None

    @field_validator("workspace", mode="before")
    @classmethod
    def _workspace_or_none(cls, value: Any) -> Any:
        # An odd workspace object must not make the account unreadable: it reads as "no workspaces".
        return value if isinstance(value, dict) and isinstance(value.get("id"), str) and value["id"] else None

    @property
    def sees_only_own_pods(self) -> bool:
        return self.pod_visibility == POD_VISIBILITY_OWN

    def key_label(self) -> str:
        """The key as an error names it: ``'name' (id)``, or what of it the server said."""
        return key_label(self.api_key_id, self.api_key_name) or "this API key"


def key_label(key_id: str | None, name: str | None = None) -> str | None:
    """An API key as messages name it: ``'ci' (3f2…)``, the id alone, or None when neither is known."""
    if name and key_id:
        return f"'{name}' ({key_id})"
    return key_id or (f"'{name}'" if name else None)


class Pod(ResponseModel):
    """A row of ``GET /pods`` or ``GET /pods/{id}``."""

    id: NonEmptyStr
    pod_name: str
    executor_id: str | None = None
    status: str
    ssh_connect_cmd: str | None = None
    ports_mapping: dict[str, int] | None = None
    gpu_name: str | None = None
    gpu_count: Annotated[int, Field(ge=0)]
    price: float | None = None
    template_id: str | None = None
    volume_id: str | None = None
    created_at: UtcDatetime | None = None
    updated_at: UtcDatetime | None = None
    # Lium's own estimate while PENDING; the pod watcher times its next listing by it.
    estimated_ready_seconds: float | None = None
    # When Lium removes the pod (docs/lium-api.md#pod-row): from the rent's termination_hours, counted from
    # RUNNING, or from POST /pods/{id}/schedule-removal. termination_hours stays the rent's value.
    removal_scheduled_at: UtcDatetime | None = None
    termination_hours: int | None = None
    # The public keys authorised for root, one OpenSSH line each (docs/lium-api.md#pod-row).
    ssh_keys: tuple[str, ...] = ()
    # A member of a multi-node cluster (docs/lium-api.md#clusters): the rental, the rank, the overlay address.
    cluster_id: str | None = None
    cluster_node_index: Annotated[int, Field(ge=0)] | None = None
    cluster_overlay_ip: str | None = None
    # Who rented the pod and where (docs/lium-api.md#pod-row): the API key (``api_key_id``, else the row's
    # ``created_by_api_key_id``) and the workspace. None on a server without them, or for a session's rent.
    api_key_id: str | None = None
    api_key_name: str | None = None
    workspace_id: str | None = None
    # The pod's notebook server (docs/lium-api.md#notebooks): None until one was asked for; the URL carries
    # the notebook's token.
    jupyter_installation_status: str | None = None
    jupyter_url: str | None = Field(default=None, repr=False)
    jupyter_error: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _flatten(cls, data: Any) -> Any:
        for field, nested in (
            ("executor_id", "executor"),
            ("template_id", "template"),
            ("volume_id", "volume"),
        ):
            data = _lift_nested_id(data, field, nested)
        if isinstance(data, dict) and data.get("api_key_id") is None and data.get("created_by_api_key_id"):
            data = {**data, "api_key_id": data["created_by_api_key_id"]}
        if isinstance(data, dict) and isinstance(data.get("status"), str):
            data = {**data, "status": data["status"].strip().upper()}
        return data

    @field_validator("termination_hours", mode="before")
    @classmethod
    def _hours_or_none(cls, value: Any) -> int | None:
        # Informational (the schedule itself is removal_scheduled_at): an odd value must not break the row.
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None

    @field_validator("ssh_keys", mode="before")
    @classmethod
    def _key_lines(cls, value: Any) -> tuple[str, ...]:
        # Lines, or objects holding one (the account's key rows say ``public_key``): anything else is
        # left out rather than making the row unreadable.
        items = value if isinstance(value, list) else []
        lines = (item.get("public_key") if isinstance(item, dict) else item for item in items)
        return tuple(line.strip() for line in lines if isinstance(line, str) and line.strip())

    @field_validator("estimated_ready_seconds", mode="before")
    @classmethod
    def _estimate_or_none(cls, value: Any) -> float | None:
        # Only a hint: a missing or odd estimate must not make the pod row unreadable.
        if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < 1e9:
            return float(value)
        return None

    @property
    def is_running(self) -> bool:
        return self.status == RUNNING

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_POD_STATES

    def ssh_host_port(self) -> tuple[str, int] | None:
        """``(host, port)`` parsed from ``ssh_connect_cmd`` (``ssh root@HOST -p PORT``), else None.

        Only parsed, never executed. ``-p`` is optional (port 22); IPv6 hosts may be bracketed. Anything
        that does not look like that command (no ``ssh``, no ``user@host``, a bad port) gives None.
        """
        if not self.ssh_connect_cmd:
            return None
        try:
            words = shlex.split(self.ssh_connect_cmd)
        except ValueError:
            return None
        if not words or words[0] != "ssh":
            return None
        target: str | None = None
        port_text = "22"
        rest = iter(words[1:])
        for word in rest:
            if word == "-p":
                port_text = next(rest, "")
            elif word.startswith("-p"):
                port_text = word[2:]
            elif "@" in word and not word.startswith("-") and target is None:
                target = word
        if target is None or not port_text.isdigit():
            return None
        host = target.rsplit("@", 1)[1].strip("[]")
        port = int(port_text)
        if not host or any(ch.isspace() or ch in "/@" for ch in host) or not 1 <= port <= 65535:
            return None
        return host, port


class Template(ResponseModel):
    """A template as returned by ``/templates`` routes."""

    id: NonEmptyStr
    name: str
    user_id: str | None = None
    description: str | None = None
    docker_image: str | None = None
    docker_image_tag: str | None = None
    docker_image_digest: str | None = None
    category: str | None = None
    volumes: list[str] | None = None
    environment: dict[str, str] | None = None
    entrypoint: str | None = None
    startup_commands: str | None = None
    internal_ports: list[int] | None = None
    is_private: bool | None = None
    docker_credential_id: str | None = None
    status: str | None = None
    created_at: UtcDatetime | None = None
    updated_at: UtcDatetime | None = None


class TemplateSpec(RequestModel):
    """Body of ``POST /templates`` and ``PUT /templates/{id}`` (the PUT takes the full body).

    With ``docker_image_tag=""`` Lium splits a full image reference itself (docs/lium-api.md#templates).
    """

    name: NonEmptyStr
    docker_image: NonEmptyStr
    docker_image_tag: str = ""
    docker_image_digest: str = ""
    description: str | None = None
    category: str = "DOCKER"
    volumes: list[str] = Field(default_factory=lambda: ["/workspace"])
    environment: dict[str, str] = Field(default_factory=dict)  # PUT rejects null, so never send it
    entrypoint: str = ""
    startup_commands: str = ""
    internal_ports: list[Annotated[int, Field(ge=1, le=65535)]] = Field(default_factory=lambda: [22])
    is_private: bool = True
    docker_credential_id: str | None = None
    supports_docker: bool = False
    supports_volume_encryption: bool = False
    container_start_immediately: bool = True

    def to_body(self) -> dict[str, Any]:
        return self.model_dump(mode="json")


class DockerCredential(ResponseModel):
    """A private-registry credential. The password is never kept, even when the server echoes it."""

    id: NonEmptyStr
    username: str | None = None
    user_id: str | None = None
    created_at: UtcDatetime | None = None
    updated_at: UtcDatetime | None = None

    @model_validator(mode="before")
    @classmethod
    def _username(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("username") is None and "docker_username" in data:
            return {**data, "username": data["docker_username"]}
        return data


class Volume(ResponseModel):
    """A network (S3-backed) volume (docs/lium-api.md#volumes)."""

    id: NonEmptyStr
    name: str
    description: str | None = None
    current_size_bytes: int | None = None
    current_file_count: int | None = None
    created_at: UtcDatetime | None = None
    updated_at: UtcDatetime | None = None


class AccountSshKey(ResponseModel):
    """A public key registered on the account (``/ssh-keys``, docs/lium-api.md#ssh-keys). Lium adds none
    to pods by itself: a rent authorises the keys its ``user_public_key`` lists."""

    id: NonEmptyStr
    name: str = ""
    public_key: str = ""
    created_at: UtcDatetime | None = None
    updated_at: UtcDatetime | None = None


class Event(ResponseModel):
    """An entry of the account event log ``GET /users/me/events`` (docs/lium-api.md#account-events)."""

    id: str | None = None
    created_at: UtcDatetime | None = None
    event_type: str | None = None
    sub_event_type: str | None = None
    pod_id: str | None = None
    pod_name: str | None = None
    from_status: str | None = None
    to_status: str | None = None
    reason: str | None = None
    detail: str | None = None
    error: str | None = None

    @field_validator("detail", "error", mode="before")
    @classmethod
    def _text_only(cls, value: Any) -> Any:
        """``detail`` and ``error`` are free-form and sometimes objects: keep them only as text."""
        return value if isinstance(value, str) else None

    @property
    def marks_deletion(self) -> bool:
        """True for the events dstack reads as "this pod was deleted"."""
        return self.to_status == DELETED or self.sub_event_type == "pod-delete.success"


class RentRequest(RequestModel):
    """Body of ``POST /executors/{id}/rent`` (docs/lium-api.md#rent), as dstack sends it."""

    pod_name: Annotated[str, Field(min_length=1, max_length=63)]
    template_id: NonEmptyStr
    user_public_key: NonEmptyStr | list[NonEmptyStr]
    gpu_count: Annotated[int, Field(ge=1)] | None = None
    initial_port_count: Annotated[int, Field(ge=0, le=200)] | None = None
    volume_id: str | None = None
    enable_volume_encryption: bool = False
    enable_jupyter: bool = False
    # Always sent: Lium's default is to back up every new pod's volume, which the pod must ask for.
    enable_backups: bool = False
    backup_log_id: str | None = None
    restore_path: str | None = None
    termination_hours: TerminationHours | None = None

    def to_body(self) -> dict[str, Any]:
        """The JSON body; unset optional fields are omitted (``gpu_count`` absent = all free GPUs)."""
        return self.model_dump(mode="json", exclude_none=True)


_M = TypeVar("_M", bound=BaseModel)


def parse_object(model: type[_M], data: object, *, method: str, path: str) -> _M:
    """Validate one JSON object into ``model``; raise :class:`LiumProtocolError` naming the bad field."""
    if not isinstance(data, dict):
        raise LiumProtocolError(f"expected a JSON object, got {_json_type(data)}", method=method, path=path)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise LiumProtocolError(_describe(exc, model, None), method=method, path=path) from None


def parse_list(model: type[_M], data: object, *, method: str, path: str) -> list[_M]:
    """Validate a JSON array of objects into ``model`` instances (docs/lium-api.md#conventions: lists are arrays)."""
    if not isinstance(data, list):
        raise LiumProtocolError(f"expected a JSON array, got {_json_type(data)}", method=method, path=path)
    items: list[_M] = []
    for index, item in enumerate(data):
        if not isinstance(item, dict):
            raise LiumProtocolError(
                f"item {index}: expected a JSON object, got {_json_type(item)}", method=method, path=path
            )
        try:
            items.append(model.model_validate(item))
        except ValidationError as exc:
            raise LiumProtocolError(_describe(exc, model, index), method=method, path=path) from None
    return items


def _describe(exc: ValidationError, model: type[BaseModel], index: int | None) -> str:
    """Name the first offending field and what was expected, never the value that was received."""
    first = exc.errors(include_url=False, include_input=False, include_context=False)[0]
    # Dict keys in the location come from the server and could be anything: show only our field names.
    field = ".".join(
        str(part) if isinstance(part, int) or part in model.model_fields else "*" for part in first["loc"]
    )
    field = field or "(object)"
    where = f"item {index}: " if index is not None else ""
    return f"{where}{model.__name__} field '{field}': {first['msg']}"


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"
