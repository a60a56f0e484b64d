"""The runner's job API as dstack's server uses it: healthcheck, then submit → upload_code → run → pull
until done, and stop.

Bodies follow dstack 0.22.5's ``SubmitBody.json_for_runner()`` (the fields the runner reads): a task
with a local repo (the code uploaded as a tar, as dstack's server sends a local repo's) or a virtual one
(no code), the job user the runner drops to, the job's argv, its environment and secrets, and the
cluster it is one node of (``cluster_info``, ``job_num``, ``jobs_per_replica``: how dstack gives a
multi-node task its ranks). Pulls are repeated with the last ``last_updated`` until a final job state
arrived and the runner says it has nothing more (``has_more`` false; older runners omit it). The runner
exits after its job; the supervisor on the pod starts a fresh one.

:data:`ROUTES` is every call made here, each one dstack 0.22.5's runner client makes
(``_internal/server/services/runner/client.py``); nothing else is sent to a runner.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lium_provider.runner.scripts import TEMP_DIR
from tfbridge import Context

FINAL_STATES = frozenset({"done", "failed", "terminated", "aborted"})
PULL_INTERVAL_SECONDS = 0.25
ROUTES = frozenset(
    {
        ("GET", "/api/healthcheck"),
        ("POST", "/api/submit"),
        ("POST", "/api/upload_code"),
        ("POST", "/api/run"),
        ("GET", "/api/pull"),
        ("POST", "/api/stop"),
    }
)
"""The (method, path) of every call to a runner: dstack's server makes each of them."""

HttpCall = Callable[[str, str, bytes | None], tuple[int, bytes]]
"""``(method, path, body) -> (status, body)`` against the runner's HTTP API."""


class RunnerAPIError(Exception):
    """The runner answered, but not as a dstack runner does."""


class RunnerBusy(RunnerAPIError):
    """The runner refused a job: it is running another one (``POST /api/submit`` answered 409)."""


@dataclass(frozen=True)
class JobUser:
    """The Unix user a job runs as (dstack's ``UnixUser``; the runner drops root to it)."""

    uid: int
    gid: int


@dataclass(frozen=True)
class ClusterPlace:
    """Where a job runs in a multi-node run: its rank among ``node_ips`` (the overlay addresses, rank
    order; the first is the master), and the GPUs of each node."""

    rank: int
    node_ips: tuple[str, ...]
    gpus_per_node: int = 0

    @property
    def master_ip(self) -> str:
        return self.node_ips[0]


@dataclass(frozen=True)
class JobSpec:
    """One job for one runner."""

    run_name: str
    argv: tuple[str, ...]
    """The job's command line, run as is (``/bin/sh -c SCRIPT`` for shell commands)."""
    user: JobUser
    env: Mapping[str, str] = field(default_factory=dict)
    secrets: Mapping[str, str] = field(default_factory=dict)
    """Environment variables whose values are secrets (dstack's run secrets)."""
    repo_dir: str = ""
    """Where the code goes, and the job's working directory; empty: an empty virtual repo under the
    runner's own directory, and the image's working directory."""
    has_code: bool = False
    """A local repo: its code is uploaded (:meth:`Job.upload_code`) and extracted into ``repo_dir``."""
    cluster: ClusterPlace | None = None


def shell_job(run_name: str, commands: Sequence[str], user: JobUser) -> JobSpec:
    """A task's commands as dstack runs them: ``/bin/sh -c`` with the commands joined by ``&&``, in the
    image's working directory, with no code."""
    return JobSpec(run_name, ("/bin/sh", "-c", " && ".join(commands)), user)


@dataclass
class JobOutcome:
    state: str = ""
    exit_status: int | None = None
    termination_reason: str = ""
    termination_message: str = ""
    output: bytearray = field(default_factory=bytearray)

    @property
    def succeeded(self) -> bool:
        return self.state == "done" and self.exit_status in (0, None)

    def output_tail(self, lines: int) -> str:
        """The last ``lines`` lines of the job's output (a pty's CRLF turned into LF)."""
        text = self.output.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
        return "\n".join(text.rstrip("\n").split("\n")[-lines:]) if text.strip() else ""

    def describe(self) -> str:
        parts = [self.state or "unknown state"]
        if self.exit_status is not None:
            parts.append(f"exit status {self.exit_status}")
        if self.termination_reason:
            parts.append(self.termination_reason)
        if self.termination_message:
            parts.append(self.termination_message)
        return ", ".join(parts)


def _json(status: int, body: bytes, request: str) -> Any:
    _ok(status, body, request)
    try:
        return json.loads(body)
    except ValueError:
        raise RunnerAPIError(f"{request} answered with a body that is not JSON") from None


def _ok(status: int, body: bytes, request: str) -> None:
    if status != 200:
        raise RunnerAPIError(f"{request} answered {status}: {body[:300].decode('utf-8', 'replace')}")


def healthcheck_version(http: HttpCall) -> str:
    """``GET /api/healthcheck``: the version the runner reports."""
    answer = _json(*http("GET", "/api/healthcheck", None), "GET /api/healthcheck")
    if not isinstance(answer, dict) or not isinstance(answer.get("version"), str):
        raise RunnerAPIError("GET /api/healthcheck answered without a version: not a dstack runner")
    version: str = answer["version"]
    return version


def submit_body(spec: JobSpec) -> dict[str, Any]:
    """The ``POST /api/submit`` body of ``spec``."""
    repo_data: dict[str, Any] = (
        {"repo_type": "local", "repo_dir": spec.repo_dir} if spec.has_code else {"repo_type": "virtual"}
    )
    run_spec = {
        "run_name": spec.run_name,
        "repo_id": spec.run_name,
        "repo_data": repo_data,
        "configuration": {"type": "task", "commands": list(spec.argv), "nodes": _nodes(spec)},
        "configuration_path": None,
    }
    place = spec.cluster
    return {
        "run": {"id": str(uuid.uuid4()), "run_spec": run_spec},
        "job_spec": {
            "replica_num": 0,
            "job_num": place.rank if place else 0,
            "jobs_per_replica": _nodes(spec),
            "user": {"uid": spec.user.uid, "gid": spec.user.gid, "username": None, "groupname": None},
            "commands": list(spec.argv),
            "env": dict(spec.env),
            "single_branch": None,
            "max_duration": None,
            "ssh_key": None,
            "working_dir": spec.repo_dir or None,  # None: the image's WORKDIR, the runner's own directory
            # An empty virtual repo is kept out of the image's tree.
            "repo_dir": spec.repo_dir or f"{TEMP_DIR}/{spec.run_name}",
            "repo_data": repo_data,
            # A run's code directory is its own: never run in what another run left there.
            "repo_exists_action": "error" if spec.has_code else None,
            "file_archives": [],
        },
        "job_submission": {"id": str(uuid.uuid4())},
        "cluster_info": {
            "job_ips": list(place.node_ips) if place else [],
            "master_job_ip": place.master_ip if place else "",
            "gpus_per_job": place.gpus_per_node if place else 0,
        },
        "secrets": dict(spec.secrets),
        "repo_credentials": None,
        "log_quota_hour": None,
        "run_spec": run_spec,
    }


def _nodes(spec: JobSpec) -> int:
    return len(spec.cluster.node_ips) if spec.cluster else 1


class Job:
    """One job on one runner, driven as dstack's server drives it."""

    def __init__(self, http: HttpCall, spec: JobSpec) -> None:
        self._http = http
        self.spec = spec

    def submit(self) -> None:
        """``POST /api/submit``; :class:`RunnerBusy` when the runner runs another job."""
        status, answer = self._http("POST", "/api/submit", json.dumps(submit_body(self.spec)).encode())
        if status == 409:
            raise RunnerBusy("the runner is busy with another job (POST /api/submit answered 409)")
        _ok(status, answer, "POST /api/submit")

    def upload_code(self, archive: bytes) -> None:
        """``POST /api/upload_code``: the repo's code, a tar the runner extracts into ``repo_dir``."""
        _ok(*self._http("POST", "/api/upload_code", archive), "POST /api/upload_code")

    def start(self) -> None:
        """``POST /api/run``."""
        _ok(*self._http("POST", "/api/run", None), "POST /api/run")

    def follow(
        self,
        sleep: Callable[[float], None],
        on_output: Callable[[bytes], None] = lambda _: None,
        keep_output: bool = True,
    ) -> JobOutcome:
        """Pull until the runner handed over the final state and every log; ``on_output`` gets each
        piece of output as it comes (``keep_output``: also kept in the outcome)."""
        outcome = JobOutcome()
        timestamp = 0
        while True:
            pulled = _json(*self._http("GET", f"/api/pull?timestamp={timestamp}", None), "GET /api/pull")
            if not isinstance(pulled, dict):
                raise RunnerAPIError("GET /api/pull answered something other than an object")
            for event in pulled.get("job_logs") or []:
                piece = _log_bytes(event)
                if keep_output:
                    outcome.output.extend(piece)
                if piece:
                    on_output(piece)
            for event in pulled.get("job_states") or []:
                if isinstance(event, dict) and event.get("state") in FINAL_STATES:
                    outcome.state = str(event["state"])
                    exit_status = event.get("exit_status")
                    outcome.exit_status = exit_status if isinstance(exit_status, int) else None
                    outcome.termination_reason = str(event.get("termination_reason") or "")
                    outcome.termination_message = str(event.get("termination_message") or "")
            timestamp = int(pulled.get("last_updated") or timestamp)
            if outcome.state and not pulled.get("has_more"):
                return outcome
            sleep(PULL_INTERVAL_SECONDS)

    def stop(self) -> None:
        """``POST /api/stop``: the job is interrupted; its final state is still pulled."""
        self._http("POST", "/api/stop", None)


def run_job(ctx: Context, http: HttpCall, spec: JobSpec) -> JobOutcome:
    """Submit and run one job without code, following it until the runner handed over its final state
    and logs."""
    job = Job(http, spec)
    job.submit()
    job.start()
    return job.follow(ctx.sleep)


def stop_job(http: HttpCall) -> None:
    """``POST /api/stop``: best effort, for a job abandoned by Ctrl-C or a timeout."""
    http("POST", "/api/stop", None)


def _log_bytes(event: object) -> bytes:
    if not isinstance(event, dict) or not isinstance(event.get("message"), str):
        return b""
    try:
        return base64.b64decode(event["message"])
    except (ValueError, binascii.Error):
        return b""
