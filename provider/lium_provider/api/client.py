"""``LiumClient``: typed calls to the Lium REST API (docs/lium-api.md) over :class:`HttpTransport`.

Each method is one logical call; retries, backoff and error classification live in the transport. Getters
of a single resource return None on 404 and deletes treat 404 as done, because Terraform refreshes and
destroys resources that may already be gone.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Protocol, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from lium_provider.api.api_keys import ApiKeyRow, ApiKeySpec, MintedApiKey, WorkspaceRow
from lium_provider.api.backups import BackupConfigRow, BackupLogRow, BackupSchedule, RestoreLogRow
from lium_provider.api.clusters import ClusterOffer, ClusterRemoval, ClusterRental, ClusterRentRequest
from lium_provider.api.errors import (
    DOCKER_CREDENTIAL_NOT_FOUND,
    POD_NOT_FOUND,
    SSH_KEY_NOT_FOUND,
    TEMPLATE_NOT_FOUND,
    VOLUME_NOT_FOUND,
    InvalidArgument,
    LiumAuthError,
    LiumError,
    LiumNotFound,
    LiumProtocolError,
)
from lium_provider.api.models import (
    AccountSshKey,
    DockerCredential,
    Event,
    Pod,
    RentRequest,
    Template,
    TemplateSpec,
    User,
    Volume,
    parse_list,
    parse_object,
)
from lium_provider.api.retry import RetryPolicy
from lium_provider.api.transport import (
    DEFAULT_CONNECT_TIMEOUT_SECONDS,
    DEFAULT_REQUEST_TIMEOUT_SECONDS,
    Answer,
    HttpTransport,
)

_M = TypeVar("_M", bound=BaseModel)
_Listed = TypeVar("_Listed", bound="_HasId")


class _HasId(Protocol):
    @property
    def id(self) -> str: ...


RENT_IDEMPOTENCY = "rent_idempotency"
MAX_EVENTS_LIMIT = 1000


def default_user_agent() -> str:
    """``lium-stacks/<installed version>``."""
    try:
        return f"lium-stacks/{version('lium-stacks')}"
    except PackageNotFoundError:
        return "lium-stacks/0+unknown"


def _check_http_url(url: str, argument: str, what: str) -> str:
    """``url`` if it is an http(s) URL with a host, else :class:`InvalidArgument` naming ``argument``
    (not echoing credentials in it)."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        parsed = None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.host or parsed.userinfo:
        shown = "" if "@" in url else f", got {url!r}"
        raise InvalidArgument(
            argument, f"{what} must be an http(s) URL with a host and no credentials{shown}"
        )
    return url


def _credential_body(username: str, password: str) -> dict[str, str]:
    """The body of a credential create or update (the password is also passed as a secret)."""
    return {"docker_username": username, "docker_password": password}


def _in_workspace(workspace_id: str | None) -> dict[str, str]:
    """The header that picks the workspace a session's request acts in (none: the personal one)."""
    return {"X-Lium-Workspace-Id": workspace_id} if workspace_id else {}


def _by_id(listing: Iterable[_Listed], object_id: str) -> _Listed | None:
    """The object of a listing whose id is ``object_id``, or None."""
    return next((item for item in listing if item.id == object_id), None)


def _segment(value: str) -> str:
    """One path segment for an id; refuses values that would address another route."""
    if not value or value in (".", ".."):
        raise ValueError(f"invalid resource id {value!r}")
    return quote(value, safe="")


class LiumClient:
    """Authenticated client of one Lium API endpoint (``https://lium.io/api`` or the emulator).

    ``sleep`` waits between retries and must return early when ``cancel()`` becomes true (the provider
    passes a cancellable sleep); after every wait the client checks ``cancel`` and raises
    :class:`tfbridge.Cancelled` (not a :class:`LiumError`: a cancelled call failed nowhere). ``rng`` seeds the backoff jitter. ``transport`` replaces httpx's network
    transport (tests only). The API key travels only in the ``X-API-KEY`` header to ``base_url``.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        *,
        session_token: str | None = None,
        timeout: float = DEFAULT_REQUEST_TIMEOUT_SECONDS,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT_SECONDS,
        user_agent: str | None = None,
        sleep: Callable[[float], None] | None = None,
        cancel: Callable[[], bool] | None = None,
        max_retries: int = 5,
        rng: random.Random | None = None,
        max_retry_after: float = 120.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        # One credential: the API key (``X-API-KEY``), else a browser session (``Authorization: Bearer``),
        # which alone reaches ``/keys`` (docs/lium-api.md#api-keys).
        argument, credential = (
            ("session_token", session_token) if session_token and not api_key else ("api_key", api_key)
        )
        if not credential or not all("\x21" <= ch <= "\x7e" for ch in credential):
            # The credential itself must not appear in the message.
            what = "API key" if argument == "api_key" else "session token"
            raise InvalidArgument(
                argument, f"the Lium {what} must be a non-empty string of printable ASCII without spaces"
            )
        self.base_url = _check_http_url(base_url, "base_url", "the Lium API URL").rstrip("/")
        self._api_key = credential
        self._auth = (
            {"X-API-KEY": credential} if argument == "api_key" else {"Authorization": f"Bearer {credential}"}
        )
        self._http = HttpTransport(
            timeout=timeout,
            connect_timeout=connect_timeout,
            user_agent=user_agent or default_user_agent(),
            sleep=sleep,
            cancel=cancel,
            policy=RetryPolicy(max_retries=max_retries, max_retry_after=max_retry_after),
            rng=rng,
            transport=transport,
        )
        self._features: frozenset[str] | None = None
        self._features_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LiumClient({self.base_url!r})"

    @property
    def request_timeout(self) -> float:
        """The longest one call may take (``timeout``), waits asked for by a 429 aside."""
        return self._http.timeout

    def __enter__(self) -> LiumClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def request_count(self) -> int:
        """HTTP requests sent so far (every attempt, retries included)."""
        return self._http.request_count

    @property
    def http(self) -> HttpTransport:
        """The transport, for callers that need its cancellable :meth:`HttpTransport.pause`."""
        return self._http

    def close(self) -> None:
        self._http.close()

    def _call(
        self,
        method: str,
        path: str,
        *,
        json_body: object = None,
        params: Mapping[str, str | int] | None = None,
        headers: Mapping[str, str] | None = None,
        secrets: tuple[str, ...] = (),
        text: bool = False,
    ) -> Answer:
        try:
            return self._http.request(
                method,
                self.base_url + path,
                path=path,
                headers={**self._auth, **(headers or {})},
                json_body=json_body,
                params=params,
                secrets=(self._api_key, *secrets),
                text=text,
            )
        except LiumAuthError as exc:
            exc.by_session = "Authorization" in self._auth
            raise

    def _object(
        self,
        model: type[_M],
        method: str,
        path: str,
        *,
        json_body: object = None,
        secrets: tuple[str, ...] = (),
        headers: Mapping[str, str] | None = None,
    ) -> _M:
        """One call whose answer is one ``model`` object; a bad body is an error naming this request."""
        data = self._call(method, path, json_body=json_body, secrets=secrets, headers=headers).data
        return parse_object(model, data, method=method, path=path)

    def _list(self, model: type[_M], path: str, params: Mapping[str, str | int] | None = None) -> list[_M]:
        """``GET path`` whose answer is an array of ``model`` objects."""
        return parse_list(model, self._call("GET", path, params=params).data, method="GET", path=path)

    # A 404 without Lium's own ``gone_code`` may come from anything on the way (a gateway, a proxy): an
    # object read as gone would be dropped from the state, one deleted so reported gone by a destroy.
    # Given ``listed`` (the object as the account's listing holds it, or None), that listing decides.

    def _get_optional(
        self,
        model: type[_M],
        path: str,
        headers: Mapping[str, str] | None = None,
        *,
        gone_code: str | None = None,
        listed: Callable[[], _M | None] | None = None,
    ) -> _M | None:
        """``GET path`` as one ``model`` object, or None when it is not found (see above)."""
        try:
            return self._object(model, "GET", path, headers=headers)
        except LiumNotFound as e:
            if listed is None or e.code == gone_code:
                return None
        return listed()

    def _delete(
        self,
        path: str,
        headers: Mapping[str, str] | None = None,
        *,
        gone_code: str | None = None,
        listed: Callable[[], object | None] | None = None,
    ) -> None:
        """``DELETE path``; an object Lium does not have is no error (see above: a 404 without
        ``gone_code`` is raised while the listing still holds the object)."""
        try:
            self._call("DELETE", path, headers=headers)
        except LiumNotFound as e:
            if e.code != gone_code and listed is not None and listed() is not None:
                raise

    # --- account ---------------------------------------------------------------------------------------

    def me(self) -> User:
        return self._object(User, "GET", "/users/me")

    def version_features(self) -> frozenset[str]:
        """Feature names from ``GET /version`` (docs/lium-api.md#version), fetched once per client.

        A server that answers without a usable ``features`` list has none. An unreachable server also
        counts as none for this call, but is asked again next time.
        """
        with self._features_lock:
            if self._features is not None:
                return self._features
        try:
            data = self._call("GET", "/version").data
        except LiumError:
            return frozenset()
        raw = data.get("features") if isinstance(data, dict) else None
        features = frozenset(f for f in raw if isinstance(f, str)) if isinstance(raw, list) else frozenset()
        with self._features_lock:
            self._features = features
        return features

    def events(
        self, *, since: datetime | None = None, pod_id: str | None = None, limit: int = 1000
    ) -> list[Event]:
        """The account event log, newest first (docs/lium-api.md#account-events); ``since`` is sent with its UTC offset."""
        if not 1 <= limit <= MAX_EVENTS_LIMIT:
            raise ValueError(f"limit must be within 1..{MAX_EVENTS_LIMIT}, got {limit}")
        params: dict[str, str | int] = {"limit": limit}
        if since is not None:
            aware = since if since.tzinfo is not None else since.replace(tzinfo=UTC)
            params["since"] = aware.astimezone(UTC).isoformat()
        if pod_id is not None:
            params["pod_id"] = pod_id
        return self._list(Event, "/users/me/events", params)

    # --- pods -----------------------------------------------------------------------------------------

    def list_pods(self) -> list[Pod]:
        return self._list(Pod, "/pods")

    def get_pod(self, pod_id: str) -> Pod | None:
        """``GET /pods/{id}``, or None when Lium has no such pod; a 404 without ``pod_not_found`` is
        settled by the account's listing, whose failure is raised."""
        return self._get_optional(
            Pod, f"/pods/{_segment(pod_id)}", gone_code=POD_NOT_FOUND, listed=lambda: self._listed_pod(pod_id)
        )

    def _listed_pod(self, pod_id: str) -> Pod | None:
        return _by_id(self.list_pods(), pod_id)

    def read_pod(self, pod_id: str) -> Pod:
        """``GET /pods/{id}`` with its 404 raised (LiumNotFound), whose ``code`` tells Lium's own "no
        such pod" from a 404 of something on the way."""
        return self._object(Pod, "GET", f"/pods/{_segment(pod_id)}")

    def delete_pod(self, pod_id: str) -> None:
        """``DELETE /pods/{id}``; a pod Lium does not have is no error. A 404 without Lium's
        ``pod_not_found`` code is raised while the account's listing still shows the pod: the request
        may never have reached Lium."""
        self._delete(
            f"/pods/{_segment(pod_id)}",
            gone_code=POD_NOT_FOUND,
            listed=lambda: self._listed_pod(pod_id),
        )

    def pod_logs(self, pod_id: str, tail: int) -> str:
        """``GET /pods/{id}/logs?tail=N``: the last ``tail`` lines the pod's container printed (its PID 1's
        output, as ``docker logs`` shows it), as text (docs/lium-api.md#other-pod-routes)."""
        answer = self._call("GET", f"/pods/{_segment(pod_id)}/logs", params={"tail": tail}, text=True)
        return str(answer.data)

    def follow_pod_logs(self, pod_id: str, tail: int) -> Iterator[str]:
        """``GET /pods/{id}/logs?tail=N&follow=true``: the last ``tail`` lines, then each line the
        container prints, until the pod stops running (docs/lium-api.md#other-pod-routes)."""
        path = f"/pods/{_segment(pod_id)}/logs"
        return self._http.stream_lines(
            "GET",
            self.base_url + path,
            path=path,
            headers={"X-API-KEY": self._api_key},
            params={"tail": tail, "follow": "true"},
            secrets=(self._api_key,),
        )

    def switch_template(self, pod_id: str, template_id: str) -> Pod:
        """``PUT /pods/{id}/switch-template``: the same pod and node get a new container of ``template_id``
        (REBOOT_PENDING, then RUNNING with new ports and host key; volumes kept); the answer is the pod row
        (docs/lium-api.md#other-pod-routes). Not retried after an uncertain outcome: read the pod."""
        return self._object(
            Pod, "PUT", f"/pods/{_segment(pod_id)}/switch-template", json_body={"template_id": template_id}
        )

    def schedule_removal(self, pod_id: str, at: datetime) -> None:
        """``POST /pods/{id}/schedule-removal``: Lium removes the pod at ``at`` (sent with its UTC offset),
        replacing any earlier schedule (docs/lium-api.md#other-pod-routes)."""
        aware = at if at.tzinfo is not None else at.replace(tzinfo=UTC)
        body = {"removal_scheduled_at": aware.astimezone(UTC).isoformat()}
        self._call("POST", f"/pods/{_segment(pod_id)}/schedule-removal", json_body=body)

    def cancel_removal(self, pod_id: str) -> None:
        """``DELETE /pods/{id}/schedule-removal``: the pod runs until deleted (the rent's
        ``termination_hours`` included)."""
        self._call("DELETE", f"/pods/{_segment(pod_id)}/schedule-removal")

    def install_jupyter(self, pod_id: str, internal_port: int) -> None:
        """``POST /pods/{id}/install-jupyter``: Lium starts a notebook server on the pod's internal port
        ``internal_port``; the pod row then says how it went (``jupyter_installation_status``, docs/lium-api.md#notebooks)."""
        body = {"jupyter_internal_port": internal_port}
        self._call("POST", f"/pods/{_segment(pod_id)}/install-jupyter", json_body=body)

    def rent(self, executor_id: str, body: RentRequest, *, idempotency_key: str) -> str:
        """One rent request (429s resent with the same key and body); returns the new pod's id.

        Accepts ``{"pod_id": ...}`` and the older ``{"id": ...}`` answers. Use
        :func:`lium_provider.api.rent.rent_reconciled` rather than calling this directly: it turns an
        uncertain outcome into a known one without ever renting twice.
        """
        if not idempotency_key:
            raise ValueError("an Idempotency-Key is required for a rent")
        path = f"/executors/{_segment(executor_id)}/rent"
        answer = self._call(
            "POST", path, json_body=body.to_body(), headers={"Idempotency-Key": idempotency_key}
        )
        data = answer.data
        pod_id = None
        if isinstance(data, dict):
            pod_id = data.get("pod_id") if data.get("pod_id") is not None else data.get("id")
        if not isinstance(pod_id, str) or not pod_id:
            raise LiumProtocolError(
                "rent answer has no pod_id (or id) string", method="POST", path=path, status=answer.status
            )
        return pod_id

    # --- clusters -------------------------------------------------------------------------------------

    def cluster_offers(self) -> list[ClusterOffer]:
        """``GET /executors/infiniband-clusters``: the fabrics with their free nodes."""
        return self._list(ClusterOffer, "/executors/infiniband-clusters")

    def rent_cluster(self, body: ClusterRentRequest, *, idempotency_key: str) -> ClusterRental:
        """One cluster rental (429s resent with the same key and body); a ``success: false`` answer is a
        refusal (:class:`LiumError` with Lium's message). Nothing else is retried: an uncertain outcome
        is for the caller to reconcile by the pod name every member carries."""
        path = "/executors/cluster/rent"
        data = self._call(
            "POST", path, json_body=body.to_body(), headers={"Idempotency-Key": idempotency_key}
        ).data
        rental = parse_object(ClusterRental, data, method="POST", path=path)
        if not rental.success:
            raise LiumError(
                f"cluster rental refused: {rental.message or 'no reason given'}",
                method="POST",
                path=path,
                status=400,
            )
        return rental

    def delete_cluster(self, cluster_id: str) -> ClusterRemoval | None:
        """``DELETE /clusters/{id}``: every member starts deleting; None when no pod carries the id."""
        try:
            return self._object(ClusterRemoval, "DELETE", f"/clusters/{_segment(cluster_id)}")
        except LiumNotFound:
            return None

    # --- templates ------------------------------------------------------------------------------------

    def create_template(self, body: TemplateSpec) -> Template:
        return self._object(Template, "POST", "/templates", json_body=body.to_body())

    def list_templates(self) -> list[Template]:
        return self._list(Template, "/templates")

    def get_template(self, template_id: str) -> Template | None:
        return self._get_optional(Template, f"/templates/{_segment(template_id)}")

    def update_template(self, template_id: str, body: TemplateSpec) -> Template:
        return self._object(Template, "PUT", f"/templates/{_segment(template_id)}", json_body=body.to_body())

    def delete_template(self, template_id: str) -> None:
        self._delete(
            f"/templates/{_segment(template_id)}",
            gone_code=TEMPLATE_NOT_FOUND,
            listed=lambda: _by_id(self.list_templates(), template_id),
        )

    # --- docker credentials (paths as dstack uses them: POST/GET with a trailing slash) ----------------

    def create_docker_credential(self, username: str, password: str) -> DockerCredential:
        return self._object(
            DockerCredential,
            "POST",
            "/docker-credentials/",
            json_body=_credential_body(username, password),
            secrets=(password,),
        )

    def list_docker_credentials(self) -> list[DockerCredential]:
        return self._list(DockerCredential, "/docker-credentials/")

    def get_docker_credential(self, credential_id: str) -> DockerCredential | None:
        """Lium has no single-credential GET route (docs/lium-api.md#docker-credentials), so this searches the list."""
        return _by_id(self.list_docker_credentials(), credential_id)

    def update_docker_credential(self, credential_id: str, username: str, password: str) -> DockerCredential:
        path = f"/docker-credentials/{_segment(credential_id)}"
        answer = self._call("PUT", path, json_body=_credential_body(username, password), secrets=(password,))
        if answer.data is None:
            found = self.get_docker_credential(credential_id)
            if found is None:
                raise LiumNotFound("credential vanished after update", method="PUT", path=path, status=404)
            return found
        return parse_object(DockerCredential, answer.data, method="PUT", path=path)

    def delete_docker_credential(self, credential_id: str) -> None:
        self._delete(
            f"/docker-credentials/{_segment(credential_id)}",
            gone_code=DOCKER_CREDENTIAL_NOT_FOUND,
            listed=lambda: self.get_docker_credential(credential_id),
        )

    # --- volumes --------------------------------------------------------------------------------------

    def create_volume(self, name: str, description: str | None = None) -> Volume:
        body: dict[str, Any] = {"name": name}
        if description is not None:
            body["description"] = description
        return self._object(Volume, "POST", "/volumes", json_body=body)

    def list_volumes(self) -> list[Volume]:
        return self._list(Volume, "/volumes")

    def get_volume(self, volume_id: str) -> Volume | None:
        return self._get_optional(Volume, f"/volumes/{_segment(volume_id)}")

    def update_volume(
        self, volume_id: str, *, name: str | None = None, description: str | None = None
    ) -> Volume:
        body = {k: v for k, v in (("name", name), ("description", description)) if v is not None}
        return self._object(Volume, "PUT", f"/volumes/{_segment(volume_id)}", json_body=body)

    def delete_volume(self, volume_id: str) -> None:
        self._delete(
            f"/volumes/{_segment(volume_id)}",
            gone_code=VOLUME_NOT_FOUND,
            listed=lambda: _by_id(self.list_volumes(), volume_id),
        )

    # --- account SSH keys (no single-key GET route: docs/lium-api.md#ssh-keys) --------------------------

    def create_ssh_key(self, name: str, public_key: str) -> AccountSshKey:
        body = {"name": name, "public_key": public_key}
        return self._object(AccountSshKey, "POST", "/ssh-keys", json_body=body)

    def list_ssh_keys(self) -> list[AccountSshKey]:
        return self._list(AccountSshKey, "/ssh-keys")

    def get_ssh_key(self, key_id: str) -> AccountSshKey | None:
        """Lium has no single-key GET route, so this searches the list."""
        return _by_id(self.list_ssh_keys(), key_id)

    def update_ssh_key(self, key_id: str, name: str, public_key: str) -> AccountSshKey:
        body = {"name": name, "public_key": public_key}
        return self._object(AccountSshKey, "PUT", f"/ssh-keys/{_segment(key_id)}", json_body=body)

    def delete_ssh_key(self, key_id: str) -> None:
        self._delete(
            f"/ssh-keys/{_segment(key_id)}",
            gone_code=SSH_KEY_NOT_FOUND,
            listed=lambda: self.get_ssh_key(key_id),
        )

    # --- API keys (a browser session's routes, docs/lium-api.md#api-keys) ------------------------------

    def list_api_keys(self, workspace_id: str | None = None) -> list[ApiKeyRow]:
        return parse_list(
            ApiKeyRow,
            self._call("GET", "/keys", headers=_in_workspace(workspace_id)).data,
            method="GET",
            path="/keys",
        )

    def get_api_key(self, key_id: str, workspace_id: str | None = None) -> ApiKeyRow | None:
        """The key of the workspace ``workspace_id`` (None: the personal one); None when it has no such key."""
        return self._get_optional(ApiKeyRow, f"/keys/{_segment(key_id)}", _in_workspace(workspace_id))

    def find_api_key(self, key_id: str) -> ApiKeyRow | None:
        """The key ``key_id`` in whichever of the session's workspaces holds it (a session's ``/keys``
        act in one workspace at a time), or None."""
        found = self.get_api_key(key_id)
        if found is not None:
            return found
        for workspace in self.list_workspaces():
            found = self.get_api_key(key_id, workspace.id)
            if found is not None:
                return found
        return None

    def create_api_key(self, spec: ApiKeySpec, workspace_id: str | None = None) -> MintedApiKey:
        """``POST /keys``: the new key, with its secret this once (kept out of every error and log)."""
        path = "/keys"
        data = self._call("POST", path, json_body=spec.to_body(), headers=_in_workspace(workspace_id)).data
        return parse_object(MintedApiKey, data, method="POST", path=path)

    def update_api_key(
        self, key_id: str, budgets: dict[str, float | None], workspace_id: str | None = None
    ) -> ApiKeyRow:
        """``PATCH /keys/{id}`` in the key's workspace: set (a number) or clear (None) the budgets named."""
        path = f"/keys/{_segment(key_id)}"
        return self._object(ApiKeyRow, "PATCH", path, json_body=budgets, headers=_in_workspace(workspace_id))

    def revoke_api_key(self, key_id: str, workspace_id: str | None = None) -> None:
        """``DELETE /keys/{id}`` in the key's workspace (a key elsewhere reads as not found, so is kept)."""
        self._delete(f"/keys/{_segment(key_id)}", _in_workspace(workspace_id))

    def list_workspaces(self) -> list[WorkspaceRow]:
        return self._list(WorkspaceRow, "/workspaces")

    # --- backups (docs/lium-api.md#backups) --------------------------------------------------------------

    def create_backup_config(self, pod_id: str, schedule: BackupSchedule) -> BackupConfigRow:
        return self._object(BackupConfigRow, "POST", "/backup-configs", json_body=schedule.to_body(pod_id))

    def update_backup_config(self, config_id: str, schedule: BackupSchedule) -> BackupConfigRow:
        path = f"/backup-configs/{_segment(config_id)}"
        return self._object(BackupConfigRow, "PUT", path, json_body=schedule.to_body())

    def list_backup_configs(self) -> list[BackupConfigRow]:
        return self._list(BackupConfigRow, "/backup-configs")

    def delete_backup_config(self, config_id: str) -> None:
        self._delete(f"/backup-configs/{_segment(config_id)}")

    def pod_restores(self, pod_id: str) -> list[RestoreLogRow]:
        """Every restore into the pod, newest first."""
        return self._paged(RestoreLogRow, f"/pods/{_segment(pod_id)}/restore-logs")

    def pod_backups(self, pod_id: str) -> list[BackupLogRow]:
        """Every backup of the pod, newest first (a pod without any: empty)."""
        try:
            return self._paged(BackupLogRow, f"/backup-logs/pod/{_segment(pod_id)}")
        except LiumNotFound:
            return []

    def _paged(self, model: type[_M], path: str) -> list[_M]:
        """Every row of a paged ``GET path`` (``{items, has_next}`` page by page, or one array)."""
        rows: list[_M] = []
        page = 1
        while True:
            data = self._call("GET", path, params={"page": page, "limit": 100}).data
            if isinstance(data, list):  # an unpaged answer
                return parse_list(model, data, method="GET", path=path)
            items = data.get("items") if isinstance(data, dict) else None
            rows += parse_list(model, items if items is not None else [], method="GET", path=path)
            if not (isinstance(data, dict) and data.get("has_next") is True and items):
                return rows
            page += 1

    # --- public feed ----------------------------------------------------------------------------------

    def nodes_feed(self, feed_url: str) -> list[dict[str, object]]:
        """Nodes of the public feed (docs/lium-api.md#nodes-feed), fetched without the API key (it may be another host)."""
        return fetch_nodes_feed(self._http, feed_url, secrets=(self._api_key,))


def check_feed_url(feed_url: str) -> str:
    """``feed_url`` if it can be the nodes feed (an http(s) URL with a host), else :class:`InvalidArgument`."""
    return _check_http_url(feed_url, "feed_url", "the nodes feed URL")


def fetch_nodes_feed(
    http: HttpTransport, feed_url: str, *, secrets: tuple[str, ...] = ()
) -> list[dict[str, object]]:
    """GET the unauthenticated feed ``{"nodes": [...]}``; non-object entries are skipped as gpuhunt does.

    ``secrets`` are kept out of error messages even though none of them is sent.
    """
    url = check_feed_url(feed_url)
    path = httpx.URL(url).path
    data = http.request("GET", url, path=path, secrets=secrets).data
    nodes = data.get("nodes") if isinstance(data, dict) else None
    if not isinstance(nodes, list):
        raise LiumProtocolError('feed is not an object with a "nodes" array', method="GET", path=path)
    return [node for node in nodes if isinstance(node, dict)]
