"""The runner's job API as dstack's server uses it: healthcheck, then submit → run → pull until done.

Bodies follow dstack 0.22.5's ``SubmitBody.json_for_runner()`` (the fields the runner reads): a task
with a virtual repo, the job user the runner drops to, and the commands as the job's argv. Pulls are
repeated with the last ``last_updated`` until a final job state arrived and the runner says it has
nothing more (``has_more`` false; older runners omit it). The runner exits after its job; the
supervisor on the pod starts a fresh one.
"""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lium_provider.runner.scripts import TEMP_DIR
from tfbridge import Context

FINAL_STATES = frozenset({"done", "failed", "terminated", "aborted"})
PULL_INTERVAL_SECONDS = 0.25

HttpCall = Callable[[str, str, bytes | None], tuple[int, bytes]]
"""``(method, path, body) -> (status, body)`` against the runner's HTTP API."""


class RunnerAPIError(Exception):
    """The runner answered, but not as a dstack runner does."""


@dataclass(frozen=True)
class JobUser:
    """The Unix user a job runs as (dstack's ``UnixUser``; the runner drops root to it)."""

    uid: int
    gid: int


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
    if status != 200:
        raise RunnerAPIError(f"{request} answered {status}: {body[:300].decode('utf-8', 'replace')}")
    try:
        return json.loads(body)
    except ValueError:
        raise RunnerAPIError(f"{request} answered with a body that is not JSON") from None


def healthcheck_version(http: HttpCall) -> str:
    """``GET /api/healthcheck``: the version the runner reports."""
    answer = _json(*http("GET", "/api/healthcheck", None), "GET /api/healthcheck")
    if not isinstance(answer, dict) or not isinstance(answer.get("version"), str):
        raise RunnerAPIError("GET /api/healthcheck answered without a version: not a dstack runner")
    version: str = answer["version"]
    return version


def submit_body(run_name: str, commands: Sequence[str], user: JobUser) -> dict[str, Any]:
    """A task job: ``/bin/sh -c`` with the commands joined by ``&&``, as dstack runs a task's commands."""
    script = " && ".join(commands)
    run_spec = {
        "run_name": run_name,
        "repo_id": run_name,
        "repo_data": {"repo_type": "virtual"},
        "configuration": {"type": "task", "commands": list(commands)},
        "configuration_path": None,
    }
    return {
        "run": {"id": str(uuid.uuid4()), "run_spec": run_spec},
        "job_spec": {
            "replica_num": 0,
            "job_num": 0,
            "jobs_per_replica": 1,
            "user": {"uid": user.uid, "gid": user.gid, "username": None, "groupname": None},
            "commands": ["/bin/sh", "-c", script],
            "env": {},
            "single_branch": None,
            "max_duration": None,
            "ssh_key": None,
            "working_dir": None,  # the image's WORKDIR: the runner's own directory
            "repo_dir": f"{TEMP_DIR}/{run_name}",  # an empty virtual repo, kept out of the image's tree
            "repo_data": {"repo_type": "virtual"},
            "repo_exists_action": None,
            "file_archives": [],
        },
        "job_submission": {"id": str(uuid.uuid4())},
        "cluster_info": {"job_ips": [], "master_job_ip": "", "gpus_per_job": 0},
        "secrets": {},
        "repo_credentials": None,
        "log_quota_hour": None,
        "run_spec": run_spec,
    }


def run_job(
    ctx: Context, http: HttpCall, run_name: str, commands: Sequence[str], user: JobUser
) -> JobOutcome:
    """Submit and run one job, following it until the runner handed over its final state and logs."""
    body = json.dumps(submit_body(run_name, commands, user)).encode()
    status, answer = http("POST", "/api/submit", body)
    if status == 409:
        raise RunnerAPIError("POST /api/submit answered 409: the runner is already busy with another job")
    if status != 200:
        raise RunnerAPIError(f"POST /api/submit answered {status}: {answer[:300].decode('utf-8', 'replace')}")
    status, answer = http("POST", "/api/run", None)
    if status != 200:
        raise RunnerAPIError(f"POST /api/run answered {status}: {answer[:300].decode('utf-8', 'replace')}")
    outcome = JobOutcome()
    timestamp = 0
    while True:
        pulled = _json(*http("GET", f"/api/pull?timestamp={timestamp}", None), "GET /api/pull")
        if not isinstance(pulled, dict):
            raise RunnerAPIError("GET /api/pull answered something other than an object")
        for event in pulled.get("job_logs") or []:
            outcome.output.extend(_log_bytes(event))
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
        ctx.sleep(PULL_INTERVAL_SECONDS)


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
