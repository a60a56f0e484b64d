"""``lium_runner`` through real Terraform against the emulator: real sandboxes, real sshd, the runner stand-in.

What is checked on the pod is read there over root SSH (``/proc`` of the runner process), not taken from
the provider's state.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shlex
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import paramiko
import pytest

from lium_emulator.catalogs.images import image_catalog
from lium_emulator.launcher import launch
from lium_emulator.runner_standin import runner_standin_script
from lium_provider.api.models import Pod
from lium_provider.runner.scripts import BINARY, BOOTSTRAP_DIR, SUPERVISOR_SCRIPT, TAG_VARIABLE
from lium_provider.sshkeys import fetch_host_key, fingerprint
from tests.emulator.testkit import api_client, wait_ssh_ready, wait_until
from tests.support.lium import (
    FAST_TIMINGS,
    PROVIDER_BLOCK,
    Account,
    assert_nothing_left,
    instances,
    new_account,
    pod_block,
    rotate_host_keys,
    sleeping_template,
    ssh_keypair,
    ssh_run,
)
from tests.support.terraform import Terraform, interrupt, reaped

pytestmark = pytest.mark.terraform

# Filled in as ``TEMPLATE % image``.
TEMPLATE = sleeping_template("runner-template", image="%s") + pod_block("runner-pod")
RUNNER = """
resource "lium_runner" "r" {
  pod_id       = lium_pod.p.id
  ssh_host_key = lium_pod.p.ssh_host_key
  %s
}
"""
PYTHON_IMAGE = "python:3.11-slim"
# Live processes of the pod as JSON (zombies, which a `sleep infinity` PID 1 never reaps, have no cmdline).
PROCESSES = shlex.join(
    [
        "python3",
        "-c",
        """import json, os
found = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        cmdline = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")[:-1]
        if not cmdline:
            continue
        environ = open(f"/proc/{pid}/environ", "rb").read().split(b"\\0")
        found.append({
            "pid": int(pid),
            "cmdline": [arg.decode() for arg in cmdline],
            "cwd": os.readlink(f"/proc/{pid}/cwd"),
            "uid": os.stat(f"/proc/{pid}").st_uid,
            "environ": dict(entry.decode().split("=", 1) for entry in environ if b"=" in entry),
        })
    except OSError:
        pass
print(json.dumps(found))""",
    ]
)


def processes(account: Account, pod: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = json.loads(ssh_run(account, pod, PROCESSES))
    return found


def runners(account: Account, pod: dict[str, Any]) -> list[dict[str, Any]]:
    """The runner processes on the pod (the stand-in is a script: python3 runs it with BINARY as argv[1])."""
    return [p for p in processes(account, pod) if BINARY in p["cmdline"][:2] and "start" in p["cmdline"]]


def supervisors(account: Account, pod: dict[str, Any]) -> list[int]:
    return [p["pid"] for p in processes(account, pod) if SUPERVISOR_SCRIPT in p["cmdline"]]


def tagged(account: Account, pod: dict[str, Any]) -> list[dict[str, Any]]:
    """Every process the runner started (they inherit its tag)."""
    return [p for p in processes(account, pod) if TAG_VARIABLE in p["environ"]]


def bootstrap_dir_exists(account: Account, pod: dict[str, Any]) -> bool:
    return ssh_run(account, pod, f"test -d {BOOTSTRAP_DIR} && echo yes || echo no").strip() == "yes"


def runner_sshd_run(port: int, key_file: Path, command: str) -> str:
    """Run a command through the runner's own sshd (its port 10022, published), as dstack's server does."""
    client = paramiko.SSHClient()
    # The runner generates its sshd host keys when it starts; nothing pinned them.
    client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
    client.connect(
        "127.0.0.1",
        port=port,
        username="root",
        key_filename=str(key_file),
        look_for_keys=False,
        allow_agent=False,
    )
    try:
        _, stdout, _ = client.exec_command(command, timeout=30)
        output: str = stdout.read().decode()
        return output
    finally:
        client.close()


def the_runner(tf: Terraform) -> dict[str, Any]:
    (runner,) = instances(tf, "lium_runner")
    return runner


def the_pod(tf: Terraform) -> dict[str, Any]:
    (pod,) = instances(tf, "lium_pod")
    return pod


def kill_runner_out_of_band(account: Account, pod: dict[str, Any]) -> None:
    """SIGKILL the supervisor's session: the supervisor, the runner and the runner's sshd."""
    ssh_run(account, pod, f"kill -KILL -- -$(cat {BOOTSTRAP_DIR}/supervisor.pid)")


def test_runner_on_python_image_adopts_drifts_and_recovers(
    stack: Callable[[str], Terraform], account: Account, tmp_path: Path
) -> None:
    extra_key = ssh_keypair(tmp_path / "extra")
    extra_public = extra_key.with_suffix(".pub").read_text().strip()
    body = TEMPLATE % PYTHON_IMAGE + RUNNER % (
        f'authorized_keys = ["{extra_public}"]\n  environment = {{ STACK = "tf-runner" }}\n'
        "  smoke_test = [\"python3 -c 'print(6 * 7)'\"]"
    )
    tf = stack(body)
    tf.apply()
    runner, pod = the_runner(tf), the_pod(tf)
    assert runner["healthy"] is True and runner["runner_version"] == "0.22.5"
    assert runner["runner_ssh_port"] == pod["ports"]["10022"] and runner["id"] == pod["id"]
    assert runner["smoke_test_output"].splitlines()[-1] == "42"

    # On the pod: one runner, with PID 1's environment plus ours, in the image's WORKDIR.
    (process,) = runners(account, pod)
    pid1 = next(p for p in processes(account, pod) if p["pid"] == 1)
    image = next(i for i in image_catalog() if i.reference == PYTHON_IMAGE)
    assert image.env.items() <= pid1["environ"].items()
    assert process["environ"] == {**pid1["environ"], "STACK": "tf-runner", TAG_VARIABLE: pod["id"]}
    assert process["cwd"] == image.workdir == "/" and process["uid"] == 0
    # The healthcheck answers through the runner's own sshd, reached with the extra authorised key.
    health = runner_sshd_run(
        runner["runner_ssh_port"], extra_key, "curl -fsS http://127.0.0.1:10999/api/healthcheck"
    )
    assert json.loads(health) == {"service": "dstack-runner", "version": "0.22.5"}
    assert tf.plan_exitcode()[0] == 0, "a fresh apply must plan no changes"

    # Applying again, with the runner forgotten by Terraform so the bootstrap runs again, never starts a
    # second runner: the
    # bootstrap adopts the supervised one (the smoke test runs again, and the runner restarts after it).
    (supervisor,) = supervisors(account, pod)
    tf.run("state", "rm", "lium_runner.r")
    tf.apply()
    assert supervisors(account, pod) == [supervisor], "the running runner is adopted"
    assert len(runners(account, pod)) == 1 and the_runner(tf)["healthy"] is True

    # Killed out of band: drift. The plan replaces the runner, not the pod; the apply restores it.
    kill_runner_out_of_band(account, pod)
    code, plan = tf.plan_exitcode()
    assert code == 2 and "lium_runner.r must be replaced" in plan, plan
    assert (
        "Plan: 1 to add, 0 to change, 1 to destroy." in plan
        and "lium_pod.p" not in plan.split("Terraform will")[1]
    )
    tf.apply()
    (restored,) = runners(account, pod)
    assert restored["pid"] != process["pid"] and the_runner(tf)["healthy"] is True
    assert the_pod(tf)["id"] == pod["id"]

    tf.destroy()
    assert_nothing_left(account)


def test_non_root_image_smoke_test_runs_as_the_image_user(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    image = next(i for i in image_catalog() if i.user != "root" and not i.private)
    smoke = '["id -un", "pwd", "echo home=$HOME app=$APP_ENV", "touch proof"]'
    tf = stack(TEMPLATE % image.reference + RUNNER % f"smoke_test = {smoke}")
    tf.apply()
    runner, pod = the_runner(tf), the_pod(tf)
    assert runner["smoke_test_output"].splitlines()[-3:] == [
        image.user,
        image.workdir,
        f"home={image.user_home} app={image.env['APP_ENV']}",
    ]
    owner = ssh_run(account, pod, f"stat -c %u:%g {image.workdir}/proof").strip()
    assert owner == f"{image.user_uid}:{image.user_gid}", "the job ran as the image user, not root"
    (process,) = runners(account, pod)
    assert process["uid"] == 0 and process["cwd"] == image.workdir
    assert image.env.items() <= process["environ"].items()

    # A new smoke test is run in place, through the same supervised runner.
    (supervisor,) = supervisors(account, pod)
    tf.write(PROVIDER_BLOCK + TEMPLATE % image.reference + RUNNER % 'smoke_test = ["id -u"]')
    code, plan = tf.plan_exitcode()
    assert code == 2 and "Plan: 0 to add, 1 to change, 0 to destroy." in plan, plan
    tf.apply()
    assert the_runner(tf)["smoke_test_output"].splitlines()[-1] == str(image.user_uid)
    assert supervisors(account, pod) == [supervisor] and the_runner(tf)["healthy"] is True
    tf.destroy()
    assert_nothing_left(account)


def test_failing_smoke_test_fails_the_apply_and_destroy_cleans_up(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    tf = stack(TEMPLATE % PYTHON_IMAGE + RUNNER % 'smoke_test = ["echo checking the GPU", "exit 1"]')
    failed = tf.apply(check=False)
    assert failed.returncode == 1
    assert "The smoke test failed" in failed.stderr and "exit status 1" in failed.stderr, failed.stderr
    assert "checking the GPU" in failed.stderr, "the error shows the smoke test's last output lines"
    (pod_resource,) = [r for r in tf.resources() if r["type"] == "lium_pod"]
    assert pod_resource["instances"][0].get("status") != "tainted", "the pod stays, untainted"
    (runner_resource,) = [r for r in tf.resources() if r["type"] == "lium_runner"]
    assert runner_resource["instances"][0].get("status") == "tainted"
    pod = the_pod(tf)
    tf.run("destroy", "-auto-approve", "-no-color", "-target=lium_runner.r")
    assert tagged(account, pod) == [] and not bootstrap_dir_exists(account, pod)
    tf.destroy()
    assert_nothing_left(account)


def test_uploaded_runner_and_a_changed_host_key_refused_before_any_command(
    stack: Callable[[str], Terraform], account: Account, tmp_path: Path
) -> None:
    binary = tmp_path / "dstack-runner"
    binary.write_bytes(runner_standin_script("0.22.5"))
    tf = stack(TEMPLATE % PYTHON_IMAGE + RUNNER % f'runner_binary_path = "{binary}"')
    tf.apply()
    pod, runner = the_pod(tf), the_runner(tf)
    assert runner["healthy"] is True and runner["runner_download_url"] is None
    uploaded = ssh_run(account, pod, f"sha256sum {BINARY}").split()[0]
    assert uploaded == hashlib.sha256(binary.read_bytes()).hexdigest(), "the runner came over SFTP"
    # The pod's pinned key changes under the runner, as if the pod were replaced behind Terraform's back.
    other_key = " ".join(account.key_file.with_suffix(".pub").read_text().split()[:2])
    state = json.loads(tf.run("state", "pull").stdout)
    (pod_resource,) = [r for r in state["resources"] if r["type"] == "lium_pod"]
    pod_resource["instances"][0]["attributes"]["ssh_host_key"] = other_key
    state["serial"] += 1
    (tf.workdir / "edited.tfstate").write_text(json.dumps(state))
    tf.run("state", "push", "edited.tfstate")

    failed = tf.apply(check=False)
    assert failed.returncode == 1
    error = " ".join(failed.stderr.split())
    assert "The pod's SSH host key changed" in error and "Nothing was run on it" in error, failed.stderr
    assert "man in the middle" in error and "re-apply the pod" in error and "ssh_host_key" in error
    # The old runner was stopped with the real key; the refused bootstrap left nothing on the pod.
    assert tagged(account, pod) == [] and not bootstrap_dir_exists(account, pod)
    assert [r["type"] for r in tf.resources()].count("lium_runner") == 0
    tf.destroy()
    assert_nothing_left(account)


def test_bad_inputs_name_the_attribute_and_leave_no_runner(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    body = (
        TEMPLATE % PYTHON_IMAGE
        + sleeping_template("ssh-only", extra="internal_ports = [22]", label="no_runner_port")
        + """
resource "lium_pod" "ssh_only" {
  name        = "ssh-only"
  template_id = lium_template.no_runner_port.id
}
resource "lium_runner" "no_port" {
  pod_id       = lium_pod.ssh_only.id
  ssh_host_key = lium_pod.ssh_only.ssh_host_key
}
resource "lium_runner" "bad_url" {
  pod_id              = lium_pod.p.id
  ssh_host_key        = lium_pod.p.ssh_host_key
  runner_download_url = "http://127.0.0.1:9/nothing/{version}/dstack-runner"
}
"""
    )
    tf = stack(body)
    failed = tf.apply(check=False)
    assert failed.returncode == 1
    errors = failed.stderr
    assert "publishes no port 10022" in errors and 'resource "lium_runner" "no_port"' in errors, errors
    assert "The runner could not be downloaded on the pod" in errors and "runner_download_url" in errors
    assert "http://127.0.0.1:9/nothing/0.22.5/dstack-runner" in errors
    assert "lium_runner" not in [r["type"] for r in tf.resources()]
    for pod in instances(tf, "lium_pod"):
        assert tagged(account, pod) == [] and runners(account, pod) == []
        assert ssh_run(account, pod, f"ls {BOOTSTRAP_DIR} 2>/dev/null").split() == []
    tf.destroy()
    assert_nothing_left(account)


def test_invalid_runner_configs_fail_validation_naming_the_attribute(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    runners_tf = "".join(
        RUNNER.replace('"r"', f'"{name}"') % setting
        for name, setting in [
            (
                "both_sources",
                'runner_binary_path = "/bin/true"\n  runner_download_url = "https://x/{version}"',
            ),
            ("bad_key", 'authorized_keys = ["not a key"]'),
            ("bad_variable", 'environment = { "NOT-A-NAME" = "x" }'),
            ("no_commands", "smoke_test = []"),
            ("bad_url", 'runner_download_url = "ftp://x/{version}"'),
        ]
    )
    tf = stack(TEMPLATE % PYTHON_IMAGE + runners_tf)
    result = tf.run("validate", "-no-color", check=False)
    errors = " ".join(result.stderr.split())
    assert result.returncode == 1
    assert "Choose either runner_binary_path or runner_download_url" in errors, errors
    for name, attribute in [
        ("bad_key", "authorized_keys"),
        ("bad_variable", "environment"),
        ("no_commands", "smoke_test"),
        ("bad_url", "runner_download_url"),
    ]:
        assert f'resource "lium_runner" "{name}"' in errors and attribute in errors, (name, errors)
    assert "is not an OpenSSH public key line" in errors and "is not an environment variable name" in errors
    assert account.live()["pods"] == []


def test_ctrl_c_during_the_bootstrap_then_destroy_leaves_nothing(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    tf = stack(TEMPLATE % PYTHON_IMAGE + RUNNER % 'smoke_test = ["touch /tmp/smoke-started", "sleep 120"]')
    with reaped(tf.start("apply", "-auto-approve", "-no-color")) as process:
        pod = wait_for_smoke_test(account, process)
        interrupt(process)
        output, _ = process.communicate(timeout=60)
    assert process.returncode != 0, output
    (runner_resource,) = [r for r in tf.resources() if r["type"] == "lium_runner"]
    assert runner_resource["instances"][0].get("status") == "tainted", "the started runner is tracked"
    assert runners(account, pod), "Ctrl-C leaves the runner to destroy, not to leak"

    tf.run("destroy", "-auto-approve", "-no-color", "-target=lium_runner.r")
    assert tagged(account, pod) == [], "the runner, its sshd and the smoke test's job are gone"
    assert not bootstrap_dir_exists(account, pod)
    tf.destroy()
    assert_nothing_left(account)


def wait_for_smoke_test(account: Account, process: subprocess.Popen[str]) -> dict[str, Any]:
    """The pod (address and host key) once the smoke test runs on it, i.e. mid-bootstrap."""
    deadline = time.monotonic() + 90
    while True:
        assert process.poll() is None, process.stdout.read() if process.stdout else ""
        assert time.monotonic() < deadline, "the smoke test never started"
        with account.api() as api:
            rows = api.get("/pods").json()
        address = Pod.model_validate(rows[0]).ssh_host_port() if rows else None
        if address is not None:
            host_key = fetch_host_key(*address)
            pod = {"ssh_host": address[0], "ssh_port": address[1], "ssh_host_key": host_key}
            if host_key and ssh_run(account, pod, "test -f /tmp/smoke-started && echo started").strip():
                return pod
        time.sleep(0.2)


# A changed host key or an unreachable pod never blocks the runner's delete.
STOP_SSHD = "kill -TERM $(cat /run/sshd.pid)"


def warnings_of(result: subprocess.CompletedProcess[str]) -> str:
    return " ".join((result.stdout + result.stderr).split())


def test_destroy_and_replace_proceed_when_the_pods_host_key_changed(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    tf = stack(TEMPLATE % PYTHON_IMAGE + RUNNER % "")
    tf.apply()
    pod = the_pod(tf)
    offered = rotate_host_keys(account, pod)
    pinned_print, offered_print = (fingerprint(pod["ssh_host_key"]), fingerprint(offered))

    # `apply -replace` of the pod: the refresh warns instead of failing, the old runner's delete sends
    # nothing to the pod and warns, a new pod and a runner pinned to its key replace them.
    replaced = tf.apply("-replace=lium_pod.p")
    output = warnings_of(replaced)
    assert f"Pod {pod['id']}'s SSH host key changed" in output, output
    assert f"The runner on pod {pod['id']} was not stopped" in output, output
    assert pinned_print in output and offered_print in output, output
    new_pod, runner = the_pod(tf), the_runner(tf)
    assert new_pod["id"] != pod["id"] and runner["pod_id"] == new_pod["id"] and runner["healthy"] is True
    assert [p["id"] for p in account.live()["pods"]] == [new_pod["id"]]

    # `destroy` in the same situation, default refresh included.
    offered = rotate_host_keys(account, new_pod)
    destroyed = tf.destroy()
    output = warnings_of(destroyed)
    assert f"The runner on pod {new_pod['id']} was not stopped" in output, output
    assert fingerprint(new_pod["ssh_host_key"]) in output and fingerprint(offered) in output, output
    assert tf.resources() == []
    assert_nothing_left(account)


def test_destroy_without_refresh_proceeds_when_the_pods_sshd_is_down(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    tf = stack(TEMPLATE % PYTHON_IMAGE + RUNNER % "")
    tf.apply()
    pod = the_pod(tf)
    ssh_run(account, pod, STOP_SSHD)  # the listener only: this session's own sshd child lives on
    assert fetch_host_key(pod["ssh_host"], pod["ssh_port"], timeout=5.0) is None, "sshd must be down"
    destroyed = tf.destroy("-refresh=false")
    output = warnings_of(destroyed)
    assert f"The runner on pod {pod['id']} was not stopped" in output and "SSH to" in output, output
    assert tf.resources() == []
    assert_nothing_left(account)


@pytest.mark.sandbox  # two emulators of its own, whose pods are sandboxes
def test_after_an_emulator_restart_a_pod_keeps_its_host_key_and_port_and_its_runner_comes_back(
    make_terraform: Callable[..., Terraform], tmp_path: Path
) -> None:
    """A restart is the emulator's own event, not one a Lium pod lives through: a RUNNING pod comes back
    with its SSH host key and (free here) its SSH port, so its state stays true; only the runner, whose
    process went with the old sandbox, is replaced by the next apply."""
    args = [*FAST_TIMINGS, "--state-dir", str(tmp_path / "emulator")]
    with launch(args) as first:
        account = new_account(first, tmp_path)
        tf = make_terraform(PROVIDER_BLOCK + TEMPLATE % PYTHON_IMAGE + RUNNER % "", **account.env)
        tf.init()
        tf.apply()
        pod = the_pod(tf)
    with launch(args) as second:
        account = dataclasses.replace(account, emulator=second)
        tf.env.update(account.env)
        with api_client(second, account.api_key) as client:
            recovered = Pod.model_validate(wait_ssh_ready(client, pod["id"]))
        address = recovered.ssh_host_port()
        assert address is not None and address[1] == pod["ssh_port"], (address, pod["ssh_port"])
        offered = wait_until(lambda: fetch_host_key(*address, timeout=5.0), what="the recovered pod's sshd")
        assert offered == pod["ssh_host_key"], "the recovered pod offers another host key"
        code, plan = tf.plan_exitcode()
        assert code == 2 and "lium_runner.r must be replaced" in plan, plan
        assert "Plan: 1 to add, 0 to change, 1 to destroy." in plan, "the pod itself changed"
        tf.apply()
        assert tf.plan_exitcode()[0] == 0
        tf.destroy()
        assert tf.resources() == []
        assert_nothing_left(account)
