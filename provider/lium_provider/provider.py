"""The ``lium`` provider: its configuration, and the session every resource receives as ``ctx.provider``."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Annotated

from pydantic import BaseModel, ConfigDict, field_validator

from lium_provider import __version__
from lium_provider.api.client import LiumClient, check_feed_url
from lium_provider.api.endpoints import DEFAULT_ENDPOINT, SESSION_TOKEN_ENV, feed_url_for
from lium_provider.api.errors import InvalidArgument, LiumAuthError, LiumError, LiumProtocolError
from lium_provider.api.models import TerminationHours
from lium_provider.api.transport import DEFAULT_CONNECT_TIMEOUT_SECONDS, DEFAULT_REQUEST_TIMEOUT_SECONDS
from lium_provider.domain.journal import RentJournal
from lium_provider.domain.removal import (
    DEFAULT_TERMINATION_HOURS_ENV,
    TERMINATION_HOURS_RANGE,
    configured_default_hours,
)
from lium_provider.domain.stack import (
    ADOPT_STACKS_ENV,
    STACK_ENV,
    adopted_tags,
    stack_name,
    this_stacks_tag,
)
from lium_provider.resources.api_key import ApiKeyResource
from lium_provider.resources.api_key_data import ApiKeyDataSource
from lium_provider.resources.backup_config import BackupConfigResource
from lium_provider.resources.backups_data import BackupsDataSource
from lium_provider.resources.cluster import ClusterResource
from lium_provider.resources.cluster_offers import ClusterOffersDataSource
from lium_provider.resources.data_sources import (
    OffersDataSource,
    PodDataSource,
    SshKeysDataSource,
    TemplatesDataSource,
)
from lium_provider.resources.docker_credential import DockerCredentialResource
from lium_provider.resources.inputs import PRINTABLE_NAME
from lium_provider.resources.pod import PodResource
from lium_provider.resources.runner import RunnerResource
from lium_provider.resources.ssh_key import SshKeyResource
from lium_provider.resources.template import TemplateResource
from lium_provider.resources.volume import VolumeResource
from lium_provider.session import UNUSABLE_ANSWER, LiumSession, access_error, journal_dir
from lium_provider.sshkeys import load_private_key
from tfbridge import (
    Attribute,
    CancelToken,
    Context,
    Diagnostic,
    Provider,
    TFError,
    current_context,
    parse_duration,
    terraform_command,
)

DEFAULT_REQUEST_TIMEOUT = f"{DEFAULT_REQUEST_TIMEOUT_SECONDS:g}s"
DEFAULT_CONNECT_TIMEOUT = f"{DEFAULT_CONNECT_TIMEOUT_SECONDS:g}s"
REQUEST_TIMEOUT_ENV = "LIUM_REQUEST_TIMEOUT"
CONNECT_TIMEOUT_ENV = "LIUM_CONNECT_TIMEOUT"


WORKSPACE_ENV = "LIUM_WORKSPACE"
"""The environment variable of the provider's ``workspace`` (Lium's own CLI reads it too)."""


class LiumProviderConfig(BaseModel):
    """Lium: GPU pods, templates, registry credentials and volumes on lium.io (or a compatible endpoint)."""

    model_config = ConfigDict(extra="forbid")

    endpoint: Annotated[
        str | None,
        Attribute(
            optional=True,
            description=f"Lium API base URL. Default: env `LIUM_API_URL`, else `{DEFAULT_ENDPOINT}`.",
        ),
    ] = None
    api_key: Annotated[
        str | None,
        Attribute(optional=True, sensitive=True, description="Lium API key. Default: env `LIUM_API_KEY`."),
    ] = None
    session_token: Annotated[
        str | None,
        Attribute(
            optional=True,
            sensitive=True,
            description="A Lium browser-session token, which alone may mint, change and revoke API keys "
            f"(`lium_api_key`; `lium workspaces login` prints one). Default: env `{SESSION_TOKEN_ENV}`. A "
            "provider with only a session token is valid: every request then goes with it.",
        ),
    ] = None
    nodes_feed_url: Annotated[
        str | None,
        Attribute(
            optional=True,
            description="Public nodes feed used to find offers. Default: the public feed on lium.io, or "
            "`<endpoint>/public/v1/nodes` when `endpoint` is not lium.io.",
        ),
    ] = None
    ssh_private_key: Annotated[
        str | None,
        Attribute(
            optional=True,
            sensitive=True,
            description="PEM/OpenSSH private key used to reach pods as root (readiness checks, the runner).",
        ),
    ] = None
    ssh_private_key_file: Annotated[
        str | None,
        Attribute(
            optional=True,
            description="Path of the private key file. Default: env `LIUM_SSH_PRIVATE_KEY_FILE`.",
        ),
    ] = None
    runner_download_url: Annotated[
        str | None,
        Attribute(
            optional=True,
            description="Default download URL of the dstack runner for every `lium_runner` (may contain "
            "`{version}`). Default: env `LIUM_RUNNER_DOWNLOAD_URL`, else dstack's official URL.",
        ),
    ] = None
    request_timeout: Annotated[
        str | None,
        Attribute(
            optional=True,
            description="Longest one Lium API request may take, resends after failed connections and server "
            f"errors included (a duration, e.g. `30s`, `2m`). Default: env `{REQUEST_TIMEOUT_ENV}`, else "
            f"`{DEFAULT_REQUEST_TIMEOUT}`. Waits asked for by a 429 are bounded by the operation's `timeouts`.",
        ),
    ] = None
    connect_timeout: Annotated[
        str | None,
        Attribute(
            optional=True,
            description="Longest wait for a connection to the Lium API to open (a duration). Default: env "
            f"`{CONNECT_TIMEOUT_ENV}`, else `{DEFAULT_CONNECT_TIMEOUT}`.",
        ),
    ] = None

    default_termination_hours: Annotated[
        TerminationHours | None,
        Attribute(
            optional=True,
            description="`termination_hours` of every `lium_pod` that sets none: Lium removes such a "
            f"pod that many hours after it started. Default: env `{DEFAULT_TERMINATION_HOURS_ENV}`, else none "
            "(pods without `termination_hours` run until deleted).",
        ),
    ] = None
    stack: Annotated[
        str | None,
        Attribute(
            optional=True,
            description="Names the stack: its hash tags every object this provider creates (a pod's Lium "
            "name, a template's or volume's description), bounds recovery after a crash to what carries "
            "that tag, and makes the objects of the state this stack's only under that tag (or an adopted "
            f"one). Default: env `{STACK_ENV}`; else the stack is its state: the tag its objects record "
            "travels with it (a moved or re-cloned directory, a migrated backend), and a new state's is "
            'derived from where it lives (docs/design.md, "Stacks: identity, names and ownership").',
        ),
        PRINTABLE_NAME,
    ] = None
    adopt_stacks: Annotated[
        list[str] | None,
        Attribute(
            optional=True,
            description="Stacks (each a `stack` value, or the tag that errors name) whose objects this stack "
            "takes over on purpose: an import of an object that carries one of their tags in Lium, an object "
            "of the state that carries one (a stack named with `stack` whose name changed, or that was given "
            "a name after it made objects: name its old tag), a `lium_runner` on one of their pods. The object is then recorded with this stack's tag, and the tag it carries "
            "in `adopted_from` (a pod keeps its Lium name and a template its description: Lium cannot rename "
            "a pod, and rewriting a template restarts its pods), after which the setting can go. Default: "
            f"env `{ADOPT_STACKS_ENV}` (comma-separated), else none.",
        ),
    ] = None

    workspace: Annotated[
        str | None,
        Attribute(
            optional=True,
            description="The Lium workspace (its name or id) the API key must act in. Every operation, refreshes "
            "and destroys included, first checks it against `GET /users/me` and fails on a key of another "
            "workspace, which would see none of the stack's pods and take each for gone. Default: env "
            f"`{WORKSPACE_ENV}`, else no check.",
        ),
        PRINTABLE_NAME,
    ] = None

    @field_validator("request_timeout", "connect_timeout")
    @classmethod
    def _positive_duration(cls, value: str | None) -> str | None:
        if value is not None:
            positive_seconds(value)
        return value


def positive_seconds(duration: str) -> float:
    """Seconds in a duration such as ``"30s"``; ValueError unless it is one and above zero."""
    seconds = parse_duration(duration)
    if seconds <= 0:
        raise ValueError(f'"{duration}" must be longer than zero')
    return seconds


def configured_seconds(value: str | None, env: str, default: str, attribute: str) -> float:
    """The provider argument, else the environment variable ``env``, else ``default``, in seconds; a bad
    environment value fails naming both."""
    if value is not None:
        return positive_seconds(value)
    text = os.environ.get(env) or default
    try:
        return positive_seconds(text)
    except ValueError as exc:
        raise TFError(f"Invalid {env}", f"{exc} ({env} sets `{attribute}`).", path=(attribute,)) from None


# The provider attribute each LiumClient argument comes from, for errors about a bad value.
_ATTRIBUTE_OF_CLIENT_ARGUMENT = {
    "base_url": "endpoint",
    "api_key": "api_key",
    "session_token": "session_token",
    "feed_url": "nodes_feed_url",
}


def sleep_within_the_operation(cancel: CancelToken) -> Callable[[float], None]:
    """The client's wait between retries (429s, 5xx on reads): woken by Ctrl-C, and never past the
    deadline of the operation that asked (its ``timeouts``): a wait that would end later fails now
    with TimeoutError, instead of holding the apply for the client's own 15-minute 429 budget."""

    def sleep(seconds: float) -> None:
        current = current_context()
        remaining = current.remaining() if current is not None else None
        if remaining is not None and seconds > remaining:
            raise TimeoutError(
                f"Lium asked to wait {seconds:.0f} s, beyond what is left of this operation's timeout"
            )
        cancel.sleep(seconds)

    return sleep


class LiumProvider(Provider[LiumProviderConfig]):
    type_name = "lium"
    model = LiumProviderConfig
    # The Registry index page (docs/index.md) shows this, so it links the API reference next to it.
    description = f"{LiumProviderConfig.__doc__} The Lium API it relies on: [docs/lium-api.md](lium-api.md)."
    resources = (
        PodResource,
        ClusterResource,
        TemplateResource,
        DockerCredentialResource,
        VolumeResource,
        RunnerResource,
        SshKeyResource,
        ApiKeyResource,
        BackupConfigResource,
    )
    data_sources = (
        OffersDataSource,
        ClusterOffersDataSource,
        PodDataSource,
        TemplatesDataSource,
        SshKeysDataSource,
        ApiKeyDataSource,
        BackupsDataSource,
    )

    def configure(self, ctx: Context, config: LiumProviderConfig) -> LiumSession:
        endpoint = config.endpoint or os.environ.get("LIUM_API_URL") or DEFAULT_ENDPOINT
        api_key = config.api_key or os.environ.get("LIUM_API_KEY")
        session_token = config.session_token or os.environ.get(SESSION_TOKEN_ENV) or None
        if not api_key and not session_token:
            raise TFError(
                "Missing Lium API key",
                "Set `api_key` in the provider block or the environment variable LIUM_API_KEY (or, for a "
                f"stack of `lium_api_key` only, `session_token` or {SESSION_TOKEN_ENV}).",
                path=("api_key",),
            )
        key_file = config.ssh_private_key_file or os.environ.get("LIUM_SSH_PRIVATE_KEY_FILE")
        private_key = config.ssh_private_key or (
            load_private_key(key_file, "ssh_private_key_file") if key_file else None
        )
        request_timeout = configured_seconds(
            config.request_timeout, REQUEST_TIMEOUT_ENV, DEFAULT_REQUEST_TIMEOUT, "request_timeout"
        )
        connect_timeout = configured_seconds(
            config.connect_timeout, CONNECT_TIMEOUT_ENV, DEFAULT_CONNECT_TIMEOUT, "connect_timeout"
        )
        try:
            default_hours = configured_default_hours(config.default_termination_hours)
        except ValueError as exc:
            raise TFError(
                f"Invalid {DEFAULT_TERMINATION_HOURS_ENV}",
                f"{exc} ({DEFAULT_TERMINATION_HOURS_ENV} sets `default_termination_hours`, "
                f"{TERMINATION_HOURS_RANGE}).",
                path=("default_termination_hours",),
            ) from None
        try:

            def client_of(key: str | None, token: str | None) -> LiumClient:
                return LiumClient(
                    endpoint,
                    key,
                    session_token=token,
                    timeout=request_timeout,
                    connect_timeout=connect_timeout,
                    user_agent=f"lium-stacks-terraform/{__version__}",
                    sleep=sleep_within_the_operation(ctx.cancel),
                    # Once abandoned, requests still go out (a create deletes what it rented); waits end.
                    cancel=lambda: ctx.cancel.cancelled and not ctx.cancel.abandoned,
                )

            client = client_of(api_key, session_token)
            session_client = client_of(None, session_token) if session_token else None
            # After the client: a feed derived from a bad endpoint is the endpoint's fault.
            feed_url = check_feed_url(feed_url_for(endpoint, config.nodes_feed_url))
        except InvalidArgument as exc:
            attribute = _ATTRIBUTE_OF_CLIENT_ARGUMENT[exc.argument]
            raise TFError("Invalid provider configuration", str(exc), path=(attribute,)) from None
        return LiumSession(
            client=client,
            feed_url=feed_url,
            ssh_private_key=private_key,
            runner_download_url=config.runner_download_url or os.environ.get("LIUM_RUNNER_DOWNLOAD_URL"),
            journal=RentJournal(journal_dir()),
            stack_tag=this_stacks_tag(config.stack, command=terraform_command()),
            stack_name=stack_name(config.stack),
            adopt_tags=adopted_tags(config.adopt_stacks),
            default_termination_hours=default_hours,
            workspace=config.workspace or os.environ.get(WORKSPACE_ENV) or None,
            session_client=session_client,
        )

    def diagnose(self, error: Exception) -> list[Diagnostic] | None:
        if isinstance(error, LiumAuthError):
            return access_error(error).diagnostics()
        if isinstance(error, LiumProtocolError):
            return [Diagnostic.error(UNUSABLE_ANSWER, str(error))]
        if isinstance(error, LiumError):
            return [Diagnostic.error("A Lium API request failed", str(error))]
        return None
