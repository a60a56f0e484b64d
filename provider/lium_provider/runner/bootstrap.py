"""The idempotent runner bootstrap, its health check, the smoke test and the stop.

``ensure_running`` probes the pod first: a supervised runner started with the same configuration is
adopted (a second apply never starts a second runner); one started differently is stopped first. Then
the binary is fetched on the pod (or uploaded), ``launch.sh`` and ``supervise.sh`` are written, and the
supervisor starts — only after every step that can fail on bad input passed, so a bad download URL
leaves no half-started runner.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from lium_provider.runner import scripts
from lium_provider.runner.pod_ssh import CommandResult, NothingListening, PodSSH
from lium_provider.runner.task_api import (
    HttpCall,
    JobOutcome,
    JobUser,
    RunnerAPIError,
    healthcheck_version,
    run_job,
    shell_job,
    stop_job,
)
from tfbridge import Context, TFError

DEFAULT_RUNNER_VERSION = "0.22.5"
DSTACK_DOWNLOAD_URL = (
    "https://dstack-runner-downloads.s3.eu-west-1.amazonaws.com/{version}/binaries/dstack-runner-linux-{arch}"
)
HEALTH_POLL_SECONDS = 0.2
HEALTH_WAIT_SECONDS = 120.0  # a runner starts in seconds; one that never answers is reported, not awaited
LOG_TAIL_LINES = 20
RESTART_WAIT_SECONDS = 30.0
DOWNLOAD_TIMEOUT_SECONDS = 330.0  # curl's own --max-time is 300 s

Outcome = Literal["started", "adopted", "restarted"]


@dataclass(frozen=True)
class RunnerSpec:
    """What a runner is started with."""

    tag: str
    version: str
    download_url: str
    binary_path: Path | None
    authorized_keys: tuple[str, ...]
    environment: Mapping[str, str]


@dataclass(frozen=True)
class PodFacts:
    """What the probe learnt: the image user (PID 1's), the architecture, tools, a supervised runner."""

    arch: str
    user: JobUser
    tools: frozenset[str]
    supervisor: int | None
    runner: int | None
    config_id: str | None
    gave_up: str | None

    @classmethod
    def parse(cls, output: str) -> PodFacts:
        fields = scripts.parse_fields(output)
        supervisor, runner = fields.get("supervisor", ""), fields.get("runner", "")
        return cls(
            arch=fields.get("arch", ""),
            user=JobUser(int(fields.get("uid") or 0), int(fields.get("gid") or 0)),
            tools=frozenset(fields.get("tools", "").split()),
            supervisor=int(supervisor) if supervisor.isdigit() else None,
            runner=int(runner) if runner.isdigit() else None,
            config_id=fields.get("config") or None,
            gave_up=fields.get("gave_up"),
        )


def _checked(result: CommandResult, summary: str) -> CommandResult:
    """``result`` if the command succeeded. The error quotes stderr only: stdout may hold PID 1's environment."""
    if result.status != 0:
        raise TFError(summary, f"Exit status {result.status}: {result.error_text or 'no error output'}")
    return result


def probe(ctx: Context, ssh: PodSSH) -> tuple[PodFacts, list[str]]:
    """What the pod is (the image user, architecture, tools), whether a runner is supervised, and PID 1's
    environment entries."""
    result = _checked(ssh.run(ctx, scripts.probe_command()), "Probing the pod failed")
    text, environ = scripts.split_probe(result.stdout)
    return PodFacts.parse(text), scripts.parse_environ(environ)


def status(ctx: Context, ssh: PodSSH) -> PodFacts:
    """Whether a runner is supervised (and its pid), or the supervisor gave up; nothing else is filled in."""
    return PodFacts.parse(_checked(ssh.run(ctx, scripts.status_command()), "Checking the runner failed").text)


def ensure_running(ctx: Context, ssh: PodSSH, spec: RunnerSpec, on_started: Callable[[], None]) -> Outcome:
    """Make exactly one runner with ``spec`` run on the pod; ``on_started`` once its process exists."""
    facts, image_environment = probe(ctx, ssh)
    if "setsid" not in facts.tools:
        raise TFError(
            "The pod's image has no setsid",
            "The runner is started in its own session with setsid (util-linux or busybox).",
            path=("pod_id",),
        )
    launch = scripts.launch_script(image_environment, spec.environment, spec.tag, spec.authorized_keys)
    try:
        url = scripts.download_url(spec.download_url, spec.version, scripts.go_arch(facts.arch))
    except ValueError as exc:
        raise TFError("Unsupported pod architecture", str(exc), path=("pod_id",)) from None
    source = f"file:{spec.binary_path}" if spec.binary_path else url
    config_id = scripts.config_id(launch, source)
    outcome: Outcome = "started"
    if facts.supervisor is not None:
        if facts.config_id == config_id:
            on_started()
            return "adopted"
        ctx.log.info("a runner started with another configuration runs on the pod: stopping it", tag=spec.tag)
        stop(ctx, ssh, spec.tag)
        outcome = "restarted"
    _install_binary(ctx, ssh, spec, url)
    launch_bytes = launch.encode("utf-8", "surrogateescape")
    _checked(ssh.run(ctx, scripts.start_command(config_id), stdin=launch_bytes), "Starting the runner failed")
    on_started()
    return outcome


def _install_binary(ctx: Context, ssh: PodSSH, spec: RunnerSpec, url: str) -> None:
    if spec.binary_path is not None:
        _checked(ssh.run(ctx, scripts.prepare_upload_command()), "Preparing the runner upload failed")
        ssh.upload(ctx, spec.binary_path, scripts.PARTIAL_BINARY)
        _checked(ssh.run(ctx, scripts.install_uploaded_command()), "Installing the uploaded runner failed")
        return
    result = ssh.run(ctx, scripts.fetch_command(url), timeout=DOWNLOAD_TIMEOUT_SECONDS)
    if result.status != 0:
        raise TFError(
            "The runner could not be downloaded on the pod",
            f"GET {scripts.display_url(url)} failed on the pod (exit status {result.status}): "
            f"{result.error_text or 'no error output'}. Check `runner_download_url` and `runner_version`, "
            "or set `runner_binary_path` to upload the binary over SFTP.",
            path=("runner_download_url",),
        )


def log_tail(ctx: Context, ssh: PodSSH, lines: int = LOG_TAIL_LINES) -> str:
    return ssh.run(ctx, scripts.log_tail_command(lines)).text.rstrip()


def runner_http(ssh: PodSSH) -> HttpCall:
    """The runner's HTTP API through a ``direct-tcpip`` tunnel to its port inside the pod."""

    def call(method: str, path: str, body: bytes | None) -> tuple[int, bytes]:
        return ssh.http(method, path, scripts.HTTP_PORT, body)

    return call


def _version(ssh: PodSSH) -> str | None:
    try:
        return healthcheck_version(runner_http(ssh))
    except NothingListening:
        return None
    except RunnerAPIError as exc:
        raise TFError(
            f"Something other than a dstack runner answers on port {scripts.HTTP_PORT} of the pod",
            str(exc),
            path=("pod_id",),
        ) from None


def wait_healthy(ctx: Context, ssh: PodSSH) -> str:
    """Poll the healthcheck through the tunnel until it answers; the reported version.

    Fails with the runner's last log lines at once when the supervisor gave up or died, and after
    :data:`HEALTH_WAIT_SECONDS` when the runner runs but never answers.
    """
    give_up = time.monotonic() + HEALTH_WAIT_SECONDS
    while True:
        version = _version(ssh)
        if version is not None:
            return version
        if time.monotonic() > give_up:
            raise TFError(
                "The runner does not answer its healthcheck",
                f"Nothing answered on port {scripts.HTTP_PORT} of the pod within {HEALTH_WAIT_SECONDS:g} s. Last "
                f"lines of the runner's log:\n{log_tail(ctx, ssh) or '(empty)'}",
            )
        facts = status(ctx, ssh)
        if facts.supervisor is None:
            why = (
                f"it exited {scripts.QUICK_EXITS_BEFORE_GIVING_UP} times in a row (last status {facts.gave_up})"
                if facts.gave_up
                else "its supervisor died"
            )
            raise TFError(
                "The runner did not start",
                f"{why}. Last lines of its log:\n{log_tail(ctx, ssh) or '(empty)'}",
            )
        ctx.sleep(HEALTH_POLL_SECONDS)


def wait_restarted(ctx: Context, ssh: PodSSH, previous_runner: int | None) -> None:
    """Wait until the supervisor replaced the runner that just ran a job (the stock runner exits after it).

    Bounded: a runner that stays after its job is simply kept.
    """
    waited = 0.0
    while waited < RESTART_WAIT_SECONDS:
        facts = status(ctx, ssh)
        if facts.supervisor is None or facts.runner != previous_runner:
            return
        ctx.sleep(HEALTH_POLL_SECONDS)
        waited += HEALTH_POLL_SECONDS


def health(ctx: Context, ssh: PodSSH, grace_seconds: float) -> str | None:
    """The reported version when the runner is healthy, else None.

    A supervised runner that does not answer gets ``grace_seconds``: it may be between a finished job and
    its restart, which is not drift.
    """
    version = _version(ssh)
    if version is not None:
        return version
    waited = 0.0
    while waited < grace_seconds and status(ctx, ssh).supervisor is not None:
        ctx.sleep(HEALTH_POLL_SECONDS)
        waited += HEALTH_POLL_SECONDS
        version = _version(ssh)
        if version is not None:
            return version
    return None


def smoke_test(
    ctx: Context, ssh: PodSSH, commands: Sequence[str], user: JobUser, run_name: str
) -> JobOutcome:
    """Run ``commands`` once through the runner as ``user``; the job is stopped if we are interrupted."""
    http = runner_http(ssh)
    try:
        return run_job(ctx, http, shell_job(run_name, commands, user))
    except RunnerAPIError as exc:
        raise TFError("The runner refused the smoke test", str(exc), path=("smoke_test",)) from None
    except BaseException:
        try:
            stop_job(http)
        except Exception as exc:  # the interruption is what gets reported, not this cleanup
            ctx.log.warn("stopping the smoke test failed", error=str(exc))
        raise


def stop(ctx: Context, ssh: PodSSH, tag: str) -> None:
    """Stop the supervisor, the runner and everything it started; remove the bootstrap files."""
    _checked(ssh.run(ctx, scripts.stop_command(tag)), "Stopping the runner failed")
