"""The dstack-runner stand-in, downloaded and started inside a real pod the way dstack's Lium backend does.

dstack SSHes into the pod as root, restores the image environment and working directory from
``/proc/1`` (SSH replaced them), downloads the runner with curl from the emulator, then starts
``dstack-runner --log-level 6 start ...`` under nohup. The job API is then used as dstack's server
uses it: submit, upload_archive, upload_code, run, pull — over the published port and through the
runner's own sshd.
"""

from __future__ import annotations

import base64
import io
import json
import shlex
import tarfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lium_emulator.runner_standin import runner_standin_script
from lium_emulator.sandbox import idmap
from lium_emulator.sandbox.manager import PodSpec, SandboxManager
from tests.emulator.test_sandbox_support import (
    ClientKey,
    check,
    http_server,
    make_client_key,
    manager_at,
    pod_spec,
    poll,
    ssh,
    try_ssh,
)
from tests.support import http

pytestmark = pytest.mark.sandbox  # every test here starts pod sandboxes or an emulator

RUNNER_VERSION = "0.22.5-emu"
RUNNER_PATH = "/runner/0.22.5-emu/binaries/dstack-runner-linux-amd64"
BOOTSTRAP_DIR = "/root/.dstack-lium"
StartRunner = Callable[..., tuple[PodSpec, dict[int, int], httpx.Client]]


@pytest.fixture(scope="module")
def key() -> ClientKey:
    return make_client_key()


@pytest.fixture(scope="module")
def emulator_port() -> Iterator[int]:
    with http_server({RUNNER_PATH: runner_standin_script(RUNNER_VERSION)}) as port:
        yield port


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("runner")


@pytest.fixture(scope="module")
def manager(base: Path, emulator_port: int) -> Iterator[SandboxManager]:
    with manager_at(base / "root", emulator_port) as sandboxes:
        yield sandboxes


def bootstrap(base: Path, pod_id: str, emulator_port: int, key: ClientKey) -> str:
    """dstack's startup command and monitor, written to the pod's /root; returns the SSH command."""
    runner = "/usr/local/bin/dstack-runner"
    arguments = ["--log-level", "6", "start", "--temp-dir", "/tmp/runner", "--http-port", "10999"]
    arguments += ["--ssh-port", "10022", "--ssh-authorized-key", key.public_line]
    runner_command = shlex.join([runner, *arguments])
    startup = " && ".join(
        [
            f"curl --connect-timeout 60 --max-time 240 --retry 1 --output {runner} "
            f"http://127.0.0.1:{emulator_port}{RUNNER_PATH}",
            f"chmod +x {runner}",
            runner_command,
        ]
    )
    monitor = (
        "xargs -0 /bin/sh -c 'cd -P /proc/1/cwd || exit 255; "
        f'exec env -i -- "$@" /bin/sh {BOOTSTRAP_DIR}/runner.sh\' sh < /proc/1/environ\n'
        f"echo $? > {BOOTSTRAP_DIR}/exit-code\n"
    )
    directory = base / "volumes" / pod_id / ".dstack-lium"
    directory.mkdir(parents=True)
    (directory / "runner.sh").write_text(startup + "\n")
    (directory / "monitor.sh").write_text(monitor)
    # As if uploaded by the pod's root (dstack does it over SSH): owned by the pod's host id range.
    idmap.shift_ownership(directory, directory.parent.stat().st_uid)
    return f"nohup /bin/sh {BOOTSTRAP_DIR}/monitor.sh > {BOOTSTRAP_DIR}/log 2>&1 < /dev/null & printf running"


@pytest.fixture
def start_runner(
    manager: SandboxManager, base: Path, key: ClientKey, emulator_port: int
) -> Iterator[StartRunner]:
    started: list[tuple[str, httpx.Client]] = []

    def start(pod_id: str, **options: Any) -> tuple[PodSpec, dict[int, int], httpx.Client]:
        spec = pod_spec(base, pod_id, key, internal_ports=[22, 10022, 10999], **options)
        ports = manager.start(spec)
        api = http.client(base_url=f"http://127.0.0.1:{ports[10999]}", timeout=10)
        started.append((pod_id, api))
        with ssh(ports[22], key) as client:
            assert check(client, bootstrap(base, pod_id, emulator_port, key)) == "running"
        health = poll(lambda: healthcheck(api), 20, "runner healthcheck")
        assert health == {"service": "dstack-runner", "version": RUNNER_VERSION}
        return spec, ports, api

    yield start
    for pod_id, api in started:
        api.close()
        manager.stop(pod_id)


def healthcheck(api: httpx.Client) -> dict[str, Any] | None:
    try:
        response = api.get("/api/healthcheck")
    except httpx.TransportError:
        return None
    result: dict[str, Any] = response.json()
    return result


def submit_body(commands: list[str], **job_spec: Any) -> dict[str, Any]:
    """A submit body shaped like dstack 0.22.5's ``SubmitBody.json_for_runner()``."""
    run_spec = {
        "run_name": "emu-run",
        "repo_id": "emu-repo",
        "repo_data": {"repo_type": "virtual"},
        "configuration": {"type": "task", "commands": commands},
        "configuration_path": ".dstack.yml",
    }
    return {
        "run": {"id": str(uuid.uuid4()), "run_spec": run_spec},
        "job_spec": {
            "replica_num": 0,
            "job_num": 0,
            "jobs_per_replica": 1,
            "user": None,
            "commands": ["/bin/sh", "-i", "-c", " && ".join(commands)],
            "env": {},
            "single_branch": None,
            "max_duration": None,
            "ssh_key": None,
            "working_dir": None,
            "repo_dir": "/workflow",
            "repo_data": {"repo_type": "virtual"},
            "repo_exists_action": "error",
            "file_archives": [],
            **job_spec,
        },
        "job_submission": {"id": str(uuid.uuid4())},
        "cluster_info": {
            "job_ips": ["10.0.0.1"],
            "master_job_ip": "10.0.0.1",
            "gpus_per_job": 1,
            "gpus_per_node": [1],
        },
        "secrets": {},
        "repo_credentials": None,
        "log_quota_hour": None,
        "run_spec": run_spec,
    }


def tar_of(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def pull_until_finished(api: httpx.Client) -> tuple[list[dict[str, Any]], str, str]:
    """Pull like dstack's server (advancing ``timestamp``) until the job ends; states, job log, runner log."""
    states: list[dict[str, Any]] = []
    job_log: list[bytes] = []
    runner_log: list[bytes] = []
    timestamp = 0

    def step() -> bool:
        nonlocal timestamp
        response = api.get("/api/pull", params={"timestamp": timestamp})
        assert response.status_code == 200
        body = response.json()
        states.extend(body["job_states"])
        job_log.extend(base64.b64decode(event["message"]) for event in body["job_logs"])
        runner_log.extend(base64.b64decode(event["message"]) for event in body["runner_logs"])
        assert body["last_updated"] >= timestamp
        timestamp = body["last_updated"]
        return body["has_more"] is False

    poll(step, 30, "job to finish", interval=0.1)
    return states, b"".join(job_log).decode(), b"".join(runner_log).decode()


def test_runner_runs_a_job_with_the_image_environment(
    start_runner: StartRunner, base: Path, key: ClientKey
) -> None:
    spec, ports, api = start_runner("runner-root", environment={"TEMPLATE_VAR": "from-template"})
    # dstack's server reaches the API through the runner's own sshd (port 10022 in the pod).
    client = poll(lambda: try_ssh(ports[10022], key), 10, "runner sshd")
    try:
        channel = client.get_transport().open_channel("direct-tcpip", ("127.0.0.1", 10999), ("127.0.0.1", 0))
        channel.sendall(b"GET /api/healthcheck HTTP/1.0\r\n\r\n")
        reply = b"".join(iter(lambda: channel.recv(4096), b""))
        assert json.loads(reply.split(b"\r\n\r\n", 1)[1]) == {
            "service": "dstack-runner",
            "version": RUNNER_VERSION,
        }
    finally:
        client.close()

    archive_id = str(uuid.uuid4())
    commands = [
        'echo "python=$PYTHON_VERSION template=$TEMPLATE_VAR job=$JOB_VAR run=$DSTACK_RUN_NAME"',
        "echo cwd=$(pwd) user=$(id -un) home=$HOME",
        "cat /workflow/hello.txt ~/files/data.txt",
        "test -t 1 && echo on-a-tty",
    ]
    body = submit_body(
        commands, env={"JOB_VAR": "from-job"}, file_archives=[{"id": archive_id, "path": "~/files"}]
    )
    assert api.post("/api/submit", json=body).status_code == 200
    upload = api.post(
        "/api/upload_archive", files={"archive": (archive_id, tar_of({"data.txt": "archived\n"}))}
    )
    assert upload.status_code == 200
    assert api.post("/api/upload_code", content=tar_of({"hello.txt": "code\n"})).status_code == 200
    run = api.post("/api/run")
    assert run.status_code == 200
    assert run.json() == {"working_dir": "/", "username": "root"}  # python:3.11-slim: WORKDIR /, USER root

    states, job_log, runner_log = pull_until_finished(api)
    assert [s["state"] for s in states] == ["running", "done"]
    assert states[-1]["exit_status"] == 0
    assert "python=3.11.2 template=from-template job=from-job run=emu-run" in job_log
    assert "cwd=/ user=root home=/root" in job_log
    assert "code\r\narchived\r\n" in job_log
    assert "on-a-tty" in job_log
    assert "Job state changed: done" in runner_log
    # Its final state pulled, the runner exits; its logs stay under --temp-dir.
    exit_code = base / "volumes" / spec.pod_id / ".dstack-lium" / "exit-code"
    assert poll(lambda: exit_code.exists() and exit_code.read_text().strip(), 15, "runner exit") == "0"
    with ssh(ports[22], key) as pod:
        assert "on-a-tty" in check(pod, "cat /tmp/runner/job.log")
        assert "Job state changed: running" in check(pod, "cat /tmp/runner/runner.log")


def test_runner_drops_to_the_image_user_and_reports_failure(start_runner: StartRunner) -> None:
    _, _, api = start_runner("runner-app", image_ref="lium-emulator/nonroot-python:3.11")
    # dstack sends the image's USER as the job user.
    body = submit_body(["echo user=$(id -un) home=$HOME cwd=$(pwd)", "exit 7"], user={"username": "app"})
    assert api.post("/api/submit", json=body).status_code == 200
    run = api.post("/api/run")
    assert run.json() == {"working_dir": "/home/app", "username": "app"}
    assert api.post("/api/run").status_code == 409  # one job per runner
    states, job_log, _ = pull_until_finished(api)
    assert [(s["state"], s["exit_status"]) for s in states] == [("running", None), ("failed", 7)]
    assert "user=app home=/home/app cwd=/home/app" in job_log


def test_runner_stop_terminates_the_job(start_runner: StartRunner) -> None:
    _, _, api = start_runner("runner-stop")
    assert api.post("/api/submit", json=submit_body(["echo started", "sleep 600"])).status_code == 200
    assert api.post("/api/run").status_code == 200

    def running() -> bool:
        return any(s["state"] == "running" for s in api.get("/api/pull").json()["job_states"])

    poll(running, 10, "job running")
    assert api.post("/api/stop").status_code == 200
    states, job_log, _ = pull_until_finished(api)
    assert [s["state"] for s in states] == ["running", "terminated"]
    assert "started" in job_log
