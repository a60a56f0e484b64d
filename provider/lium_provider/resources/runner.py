"""``lium_runner``: the stock dstack runner running on a ``lium_pod`` — what makes a GPU stack ready.

Create does what dstack's Lium backend does, declaratively (see :mod:`lium_provider.runner`): root SSH
to the pod, refusing any host key but the one ``lium_pod`` pinned; an idempotent bootstrap that adopts a
runner already started with the same settings; the runner started with PID 1's environment and working
directory; the healthcheck through an SSH tunnel; then an optional smoke test through the runner's job
API, as the image user. The state is recorded as soon as the runner process exists, so a failed or
cancelled apply still tracks it. Read checks health: a dead runner becomes ``healthy = false`` and the
next plan replaces the runner, not the pod; a pod that is gone takes the runner with it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from lium_provider.api.models import RUNNING, Pod, is_lium_id
from lium_provider.domain.stack import tag_in_pod_name
from lium_provider.resources.common import api_errors, check_access_on_create
from lium_provider.resources.inputs import LIUM_ID, check_openssh_public_key
from lium_provider.resources.ownership import (
    AdoptedFrom,
    StackTag,
    left_alone_at_delete,
    owns,
    plan_ownership,
    refreshed_ownership,
    refuse_another_stacks_pod,
)
from lium_provider.runner import bootstrap
from lium_provider.runner.output import redacted
from lium_provider.runner.pod_ssh import HostKeyMismatch, LoginRefused, PodSSH, PodUnreachable
from lium_provider.runner.scripts import SSH_PORT
from lium_provider.session import LiumSession, session
from lium_provider.sshkeys import fingerprint, public_key_line
from tfbridge import (
    TIMEOUTS_BLOCK,
    Attribute,
    ConfigView,
    Context,
    Diagnostic,
    PlanChange,
    RequiresReplace,
    Resource,
    TFError,
    Timeouts,
    UseStateForUnknown,
)

_REPLACE = (RequiresReplace(),)
_KEEP = (UseStateForUnknown(),)
SSH_WAIT_SECONDS = 120.0
SSH_RETRY_SECONDS = 1.0
HEALTH_GRACE_SECONDS = 10.0  # a runner restarting after a job is not drift
SMOKE_TEST_RUN_NAME = "lium-smoke-test"
_PLANNED_MARK = "pod_mark"
"""The private record's key for the tag the pod carried when the plan allowed the runner on it."""
_HOST_KEY = re.compile(r"[a-z0-9][a-z0-9@.-]* [A-Za-z0-9+/]+={0,2}")
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _adopted(mark: str | None, tag: str | None) -> str | None:
    """A runner's ``adopted_from``: its pod's mark when that is not the runner's own stack's."""
    return mark if mark not in (None, tag) else None


def _planned_mark(private: bytes) -> str | None:
    """The pod's mark the plan allowed (:data:`_PLANNED_MARK`), from the planned private record."""
    try:
        record = json.loads(private) if private else {}
    except ValueError:
        return None
    mark = record.get(_PLANNED_MARK) if isinstance(record, dict) else None
    return mark if isinstance(mark, str) else None


class RunnerModel(BaseModel):
    """The stock dstack runner on a `lium_pod`: started as the image would run it, supervised, health-checked."""

    model_config = ConfigDict(extra="forbid")

    id: Annotated[
        str | None, Attribute(computed=True, plan=_KEEP, description="The pod id (one runner per pod).")
    ] = None
    pod_id: Annotated[
        str,
        Attribute(
            required=True,
            plan=_REPLACE,
            description="`lium_pod` to run on. Its template must publish port 10022 (the default `internal_ports`).",
        ),
        LIUM_ID,
    ] = Field(min_length=1)
    ssh_host_key: Annotated[
        str,
        Attribute(
            required=True,
            plan=_REPLACE,
            description="The pod's pinned host key, `lium_pod.<name>.ssh_host_key`. Any other key is refused "
            "before a command runs.",
        ),
    ]
    runner_version: Annotated[
        str | None,
        Attribute(
            optional=True,
            computed=True,
            default=bootstrap.DEFAULT_RUNNER_VERSION,
            plan=_REPLACE,
            description="dstack runner release; the apply fails unless the runner reports exactly this version.",
        ),
    ] = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")
    runner_download_url: Annotated[
        str | None,
        Attribute(
            optional=True,
            computed=True,
            plan=_KEEP,
            description="Where the pod downloads the runner; `{version}` and `{arch}` are filled in. Default: the "
            "provider's `runner_download_url`, else dstack's official URL.",
        ),
    ] = Field(default=None, pattern=r"^https?://")
    runner_binary_path: Annotated[
        str | None,
        Attribute(
            optional=True,
            plan=_REPLACE,
            description="A local runner binary to upload over SFTP instead of downloading it on the pod.",
        ),
    ] = None
    authorized_keys: Annotated[
        list[str] | None,
        Attribute(
            optional=True,
            plan=_REPLACE,
            description="Extra public keys for the runner's own sshd (port 10022); the provider's key is always "
            "authorised.",
        ),
    ] = None
    environment: Annotated[
        dict[str, str] | None,
        Attribute(
            optional=True,
            sensitive=True,
            plan=_REPLACE,
            description="Extra environment variables for the runner and its jobs, over the image's.",
        ),
    ] = None
    smoke_test: Annotated[
        list[str] | None,
        Attribute(
            optional=True,
            description="Commands run once through the runner when it is healthy, joined by `&&`, as the image "
            "user in its WORKDIR. A failure fails the apply and shows the last output lines; a change runs them "
            "again.",
        ),
    ] = None
    smoke_test_output: Annotated[
        str | None,
        Attribute(
            computed=True,
            description="The last lines the smoke test printed, every value of `environment` redacted.",
        ),
    ] = None
    runner_ssh_port: Annotated[
        int | None,
        Attribute(
            computed=True, plan=_KEEP, description="External port of the runner's sshd (the pod's 10022)."
        ),
    ] = None
    healthy: Annotated[
        bool | None,
        Attribute(
            computed=True,
            description="The runner answered its healthcheck at the last refresh; `false` plans its replacement.",
        ),
    ] = None
    stack_tag: StackTag = None
    adopted_from: AdoptedFrom = None
    timeouts: Annotated[Timeouts | None, TIMEOUTS_BLOCK] = None

    @field_validator("ssh_host_key")
    @classmethod
    def _host_key(cls, value: str) -> str:
        if not _HOST_KEY.fullmatch(value.strip()):
            raise ValueError(
                "is not an SSH host key: expected `<type> <base64>`, e.g. lium_pod.<name>.ssh_host_key"
            )
        return value

    @field_validator("authorized_keys")
    @classmethod
    def _public_keys(cls, value: list[str] | None) -> list[str] | None:
        for key in value or []:
            check_openssh_public_key(key)
        return value

    @field_validator("environment")
    @classmethod
    def _variable_names(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        for name in value or {}:
            if not _VARIABLE.fullmatch(name):
                raise ValueError(f"{name!r} is not an environment variable name")
        return value

    @field_validator("smoke_test")
    @classmethod
    def _commands(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and (not value or any(not command.strip() for command in value)):
            raise ValueError("needs at least one command, and no empty ones")
        return value


def _default_download_url(s: LiumSession) -> str:
    """The provider's default (``LIUM_RUNNER_DOWNLOAD_URL``), else dstack's official download."""
    return s.runner_download_url or bootstrap.DSTACK_DOWNLOAD_URL


def _open(host: str, port: int, host_key: str, private_key: str) -> PodSSH:
    """One connection attempt; :class:`PodUnreachable` or :class:`HostKeyMismatch` for the caller to
    decide on, a diagnostic for a refused login or an unusable pinned key."""
    try:
        return PodSSH.connect(host, port, host_key, private_key)
    except LoginRefused as exc:
        raise TFError(
            "The pod refused root SSH",
            f"{exc}. The pod's `ssh_public_key` must be the public half of the provider's private key.",
            path=("pod_id",),
        ) from None
    except ValueError as exc:
        raise TFError("Invalid pinned host key", str(exc), path=("ssh_host_key",)) from None


def _connect(host: str, port: int, host_key: str, private_key: str) -> PodSSH:
    """One connection attempt; :class:`PodUnreachable` when it may pass, a diagnostic when it will not."""
    try:
        return _open(host, port, host_key, private_key)
    except HostKeyMismatch as exc:
        raise TFError(
            "The pod's SSH host key changed",
            f"{host}:{port} offered {exc.offered}, but lium_pod pinned {host_key.strip()}. Nothing was run on it. "
            "Either the pod was replaced or rebooted, or something intercepts the connection (a man in the "
            "middle). Check the pod in Lium; if it was replaced or rebooted, re-apply the pod to pin its new key "
            "(`terraform apply -replace=<the lium_pod>`).",
            path=("ssh_host_key",),
        ) from None


def _key_change(address: tuple[str, int], offered: str, pinned: str) -> str:
    """The sentence naming both host keys by fingerprint, for warnings about a changed key."""
    return (
        f"{address[0]}:{address[1]} offered the host key {fingerprint(offered)}, but lium_pod pinned "
        f"{fingerprint(pinned)}."
    )


class RunnerResource(Resource[RunnerModel]):
    type_name = "lium_runner"
    model = RunnerModel
    description = (
        "The stock dstack runner on a `lium_pod`, started over root SSH with the environment, working directory "
        "and user of the image (as dstack's Lium backend does), kept running by a supervisor and health-checked "
        "on every refresh: a dead runner is replaced on the next apply. An optional smoke test runs through it "
        "before the apply is done."
    )
    default_timeouts = {"create": 900.0, "read": 120.0, "update": 600.0, "delete": 300.0}

    # -- plan ------------------------------------------------------------------------------------

    def validate_config(self, config: ConfigView[RunnerModel]) -> list[Diagnostic]:
        if not config.is_null("runner_binary_path") and not config.is_null("runner_download_url"):
            return [
                Diagnostic.error(
                    "Choose either runner_binary_path or runner_download_url",
                    "`runner_binary_path` uploads a local binary; `runner_download_url` downloads one on the pod.",
                    ("runner_binary_path",),
                )
            ]
        return []

    def modify_plan(self, ctx: Context, change: PlanChange[RunnerModel]) -> None:
        prior = change.prior
        if prior is not None and not is_lium_id(prior.pod_id):
            raise TFError(
                "lium_runner has no usable pod_id in the state",
                f"The state holds the pod id {prior.pod_id!r}, which names no Lium pod (a hand-edited or "
                "damaged state). Remove it with `terraform state rm`, then apply; `terraform destroy` "
                "forgets it without calling Lium.",
                path=("pod_id",),
            )
        plan_ownership(ctx, change, self.type_name)
        check_access_on_create(ctx, change)
        if prior is None and change.is_unknown("pod_id"):
            change.set_unknown("adopted_from")  # the pod's mark, known once the pod is
        elif prior is None and isinstance(ctx.provider, LiumSession):
            s = ctx.provider
            with api_errors("reading the pod", path=("pod_id",)):
                pod = s.client.get_pod(change.planned.pod_id)
            if pod is not None:
                mark = tag_in_pod_name(pod.pod_name)
                refuse_another_stacks_pod(ctx, self.type_name, pod.id, mark)
                change.set_planned("adopted_from", _adopted(mark, change.planned.stack_tag))
                ctx.private = json.dumps({_PLANNED_MARK: mark}).encode()
        if prior is None:
            if change.is_unknown("runner_download_url") and change.config_is_null("runner_download_url"):
                if not change.config_is_null("runner_binary_path"):
                    change.set_planned("runner_download_url", None)
                elif isinstance(ctx.provider, LiumSession):  # so the plan shows where the runner comes from
                    change.set_planned("runner_download_url", _default_download_url(ctx.provider))
            return
        if prior.healthy is False:
            # The runner died (read found no healthy runner): replace it, on the same pod.
            change.set_unknown("healthy")
            change.require_replace("healthy")

    # -- create ----------------------------------------------------------------------------------

    def create(self, ctx: Context, plan: RunnerModel, config: RunnerModel) -> RunnerModel:
        s = session(ctx)
        private_key = s.require_ssh_key("lium_runner")
        binary = Path(plan.runner_binary_path).expanduser() if plan.runner_binary_path else None
        if binary is not None and not binary.is_file():
            raise TFError(
                "The runner binary does not exist", f"{binary} is not a file.", path=("runner_binary_path",)
            )
        pod, host, port = self._pod_address(ctx, s, plan.pod_id)
        mark = tag_in_pod_name(pod.pod_name)
        if mark not in (plan.stack_tag, _planned_mark(ctx.private)):  # what the plan saw and allowed
            refuse_another_stacks_pod(ctx, self.type_name, pod.id, mark)
        runner_port = (pod.ports_mapping or {}).get(str(SSH_PORT))
        if runner_port is None:
            raise TFError(
                f"Pod {pod.id} publishes no port {SSH_PORT}",
                f"The runner's sshd listens on {SSH_PORT}; the pod's template publishes "
                f"{sorted(pod.ports_mapping or {}) or 'no ports'}. Add {SSH_PORT} to the template's "
                "`internal_ports` (the default is [22, 10022]) and replace the pod.",
                path=("pod_id",),
            )
        download_url = None if binary else plan.runner_download_url or _default_download_url(s)
        spec = bootstrap.RunnerSpec(
            tag=pod.id,
            version=plan.runner_version or bootstrap.DEFAULT_RUNNER_VERSION,
            download_url=download_url or "",
            binary_path=binary,
            authorized_keys=(public_key_line(private_key), *(k.strip() for k in plan.authorized_keys or [])),
            environment=dict(plan.environment or {}),
        )
        state = plan.model_copy(
            update={
                "id": pod.id,
                "runner_version": spec.version,
                "runner_download_url": download_url,
                "runner_ssh_port": runner_port,
                "healthy": False,
                "smoke_test_output": None,
                "adopted_from": _adopted(mark, plan.stack_tag),
            }
        )
        with self._ssh(ctx, host, port, plan.ssh_host_key, private_key) as ssh:
            outcome = bootstrap.ensure_running(ctx, ssh, spec, on_started=lambda: ctx.record(state))
            ctx.log.info("runner bootstrap", pod=pod.id, outcome=outcome)
            state = self._healthy(ctx, ssh, state, spec.version)
            ctx.record(state)
            if plan.smoke_test:
                state = self._smoke_test(ctx, ssh, state, plan.smoke_test, spec.version)
        return state

    def _healthy(self, ctx: Context, ssh: PodSSH, state: RunnerModel, version: str) -> RunnerModel:
        reported = bootstrap.wait_healthy(ctx, ssh)
        if reported != version:
            raise TFError(
                "The runner reports another version",
                f"The runner from {state.runner_download_url or state.runner_binary_path} reports version "
                f"{reported}, not {version}. Set `runner_version` to the version that URL serves.",
                path=("runner_version",),
            )
        return state.model_copy(update={"healthy": True})

    def _smoke_test(
        self, ctx: Context, ssh: PodSSH, state: RunnerModel, commands: list[str], version: str
    ) -> RunnerModel:
        facts, _ = bootstrap.probe(ctx, ssh)
        user = facts.user
        outcome = bootstrap.smoke_test(ctx, ssh, commands, user, SMOKE_TEST_RUN_NAME)
        # Kept in the state and shown in plans: no value of the runner's environment may stay in it.
        tail = redacted(outcome.output_tail(bootstrap.LOG_TAIL_LINES), (state.environment or {}).values())
        if not outcome.succeeded:
            raise TFError(
                "The smoke test failed",
                f"It ended {outcome.describe()} (as uid {user.uid}). Last lines of its output:\n{tail or '(none)'}",
                path=("smoke_test",),
            )
        # The runner exits after a job; its supervisor starts a fresh one, ready for the next.
        bootstrap.wait_restarted(ctx, ssh, facts.runner)
        return self._healthy(ctx, ssh, state, version).model_copy(update={"smoke_test_output": tail})

    # -- SSH -------------------------------------------------------------------------------------

    def _pod_address(self, ctx: Context, s: LiumSession, pod_id: str) -> tuple[Pod, str, int]:
        """The RUNNING pod and its SSH address, waiting for it (Lium publishes it a little after RUNNING)."""
        while True:
            with api_errors("reading the pod", path=("pod_id",)):
                pod = s.client.get_pod(pod_id)
            if pod is None or pod.is_terminal:
                raise TFError(f"Pod {pod_id} is gone", "The runner needs a running pod.", path=("pod_id",))
            address = pod.ssh_host_port() if pod.status == RUNNING else None
            if address is not None:
                return pod, address[0], address[1]
            ctx.sleep(SSH_RETRY_SECONDS)

    @contextmanager
    def _ssh(self, ctx: Context, host: str, port: int, host_key: str, private_key: str) -> Iterator[PodSSH]:
        """A root session verified against the pinned key; retries while the pod's sshd does not answer."""
        waited = 0.0
        while True:
            ctx.check()
            try:
                connection = _connect(host, port, host_key, private_key)
                break
            except PodUnreachable as exc:
                if waited >= SSH_WAIT_SECONDS:
                    raise TFError(
                        f"Cannot reach the pod over SSH ({host}:{port})", str(exc), path=("pod_id",)
                    ) from None
                ctx.log.info("the pod's sshd does not answer yet", host=host, port=port, error=str(exc))
                ctx.sleep(SSH_RETRY_SECONDS)
                waited += SSH_RETRY_SECONDS
        try:
            yield connection
        except PodUnreachable as exc:
            raise TFError(
                f"Lost the SSH connection to the pod ({host}:{port})", str(exc), path=("pod_id",)
            ) from None
        finally:
            connection.close()

    # -- read / update / delete ------------------------------------------------------------------

    def read(self, ctx: Context, state: RunnerModel) -> RunnerModel | None:
        if not is_lium_id(state.pod_id) or not is_lium_id(state.id):
            return state  # names no pod: the plan refuses it, a destroy forgets it
        s = session(ctx)
        with api_errors("reading the pod", path=("pod_id",)):
            pod = s.client.get_pod(state.pod_id)
        if pod is None or pod.is_terminal:
            return None  # the pod is gone, and the runner with it
        mark = tag_in_pod_name(pod.pod_name)
        refreshed = state.model_copy(
            update={
                "runner_ssh_port": (pod.ports_mapping or {}).get(str(SSH_PORT), state.runner_ssh_port),
                **refreshed_ownership(ctx, self.type_name, state, mark),
            }
        )
        if not owns(s, refreshed, mark):
            return (
                refreshed  # another stack's runner (a destroy refreshes it): not even its health is checked
            )
        private_key = s.require_ssh_key("lium_runner")
        address = pod.ssh_host_port() if pod.status == RUNNING else None
        if address is None:
            return refreshed.model_copy(update={"healthy": False})
        try:
            with _open(*address, state.ssh_host_key, private_key) as ssh:
                version = bootstrap.health(ctx, ssh, HEALTH_GRACE_SECONDS)
        except PodUnreachable as exc:
            ctx.log.info("the runner's pod does not answer SSH", pod=pod.id, error=str(exc))
            version = None
        except HostKeyMismatch as exc:
            # A refresh that failed here would block `destroy` and `apply -replace` of the pod: the
            # runner counts as unhealthy instead, and the warning says why.
            ctx.warn(
                f"Pod {pod.id}'s SSH host key changed: the runner's health is unknown",
                f"{_key_change(address, exc.offered, state.ssh_host_key)} Nothing was sent to it. Until the "
                "pod is re-applied (`terraform apply -replace=<the lium_pod>`), the runner is planned for "
                "replacement and its creation is refused.",
                path=("ssh_host_key",),
            )
            version = None
        return refreshed.model_copy(
            update={"healthy": version is not None, "runner_version": version or state.runner_version}
        )

    def update(self, ctx: Context, prior: RunnerModel, plan: RunnerModel, config: RunnerModel) -> RunnerModel:
        """In place: a new smoke test runs; other in-place changes (download URL, timeouts) are recorded."""
        s = session(ctx)
        private_key = s.require_ssh_key("lium_runner")
        _, host, port = self._pod_address(ctx, s, prior.pod_id)
        state = plan.model_copy(
            update={
                "id": prior.id,
                "runner_version": prior.runner_version,
                "runner_ssh_port": prior.runner_ssh_port,
                "runner_download_url": plan.runner_download_url or prior.runner_download_url,
                "smoke_test_output": prior.smoke_test_output if plan.smoke_test else None,
            }
        )
        version = state.runner_version or bootstrap.DEFAULT_RUNNER_VERSION
        with self._ssh(ctx, host, port, prior.ssh_host_key, private_key) as ssh:
            state = self._healthy(ctx, ssh, state, version)
            if plan.smoke_test and plan.smoke_test != prior.smoke_test:
                state = self._smoke_test(ctx, ssh, state, plan.smoke_test, version)
        return state

    def delete(self, ctx: Context, state: RunnerModel) -> None:
        """Stop the runner over SSH; never blocked by SSH. When the pod cannot be reached, or offers
        another host key than the pinned one, nothing is sent to it: the delete succeeds with a warning,
        as the runner ends when its pod is deleted (the usual reason to delete a runner)."""
        s = session(ctx)
        if not is_lium_id(state.pod_id):
            ctx.warn(
                "Forgot a lium_runner without a usable pod_id",
                f"The state held the pod id {state.pod_id!r}, which names no Lium pod: nothing was sent to "
                "any pod.",
            )
            return
        if left_alone_at_delete(ctx, self.type_name, state, lambda: self._pod_tag_in_lium(s, state)):
            return
        private_key = s.require_ssh_key("lium_runner")
        with api_errors("reading the pod", path=("pod_id",)):
            pod = s.client.get_pod(state.pod_id)
        if pod is None or pod.is_terminal:
            return  # the runner went with its pod
        address = pod.ssh_host_port() if pod.status == RUNNING else None
        if address is None:
            self._left_running(
                ctx,
                pod.id,
                f"Lium gives no SSH address for it (status {pod.status}), so nothing was sent to it.",
            )
            return
        host, port = address
        try:
            ssh = PodSSH.connect(host, port, state.ssh_host_key, private_key)
        except HostKeyMismatch as exc:
            why = _key_change(address, exc.offered, state.ssh_host_key)
            self._left_running(ctx, pod.id, f"{why} Nothing was sent to it.")
            return
        except (PodUnreachable, LoginRefused) as exc:
            self._left_running(ctx, pod.id, f"SSH to {host}:{port} failed ({exc}); nothing was sent to it.")
            return
        with ssh:
            try:
                bootstrap.stop(ctx, ssh, state.id or state.pod_id)
            except PodUnreachable as exc:
                self._left_running(ctx, pod.id, f"The SSH connection to {host}:{port} broke ({exc}).")

    def _pod_tag_in_lium(self, s: LiumSession, state: RunnerModel) -> str | None:
        with api_errors("reading the pod", path=("pod_id",)):
            pod = s.client.get_pod(state.pod_id)
        return tag_in_pod_name(pod.pod_name) if pod else None

    def _left_running(self, ctx: Context, pod_id: str, why: str) -> None:
        ctx.warn(
            f"The runner on pod {pod_id} was not stopped",
            f"{why} lium_runner is removed from the state all the same: the runner ends when the pod is "
            "deleted; if the pod stays, stop the runner there yourself.",
            path=("pod_id",),
        )

    def import_state(self, ctx: Context, import_id: str) -> dict[str, Any]:
        raise TFError(
            "lium_runner cannot be imported",
            "Declare the lium_runner with the pod's id and host key and apply: the bootstrap adopts a runner "
            "already running there when it was started with the same settings, and never starts a second one.",
        )
