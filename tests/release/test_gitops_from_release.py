"""``examples/gitops`` as its workflow runs it, from the release artifacts alone.

The workflow's own install step (taken from the YAML by Terraform's ``yamldecode``) runs with
``LIUM_STACKS_REQUIREMENT`` naming the wheel in ``dist/`` and ``LIUM_PROVIDER_MIRROR`` the network
mirror served over HTTPS, on a fresh venv's ``python`` (what ``actions/setup-python`` gives); then the
plan job's and apply job's commands run in a copy of ``infra/``, its committed lock file included, with
the ``pg`` backend on a real PostgreSQL, against the emulator. No checkout's launcher is involved:
``lium-tf`` comes from the wheel, the provider from the mirror, verified against the committed lock.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from lium_emulator.launcher import RunningEmulator
from release.locks import LOCK_FILE
from tests.provider.test_gitops import GITOPS, parse_workflow
from tests.release.https_server import serve_https
from tests.support.lium import assert_nothing_left, new_account
from tests.support.postgres import PostgresServer, running_postgres
from tests.support.terraform import Terraform

pytestmark = [pytest.mark.terraform, pytest.mark.release]

INSTALL_STEP = "Install lium-tf, and the Lium provider's mirror"
STACK_DIR = GITOPS / "infra"


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    with running_postgres() as server:
        yield server


def test_gitops_workflow_plans_and_applies_from_release_artifacts(
    terraform_env: dict[str, str],
    release_dist: Path,
    wheel_venv: Path,
    postgres: PostgresServer,
    emulator: RunningEmulator,
    tmp_path: Path,
) -> None:
    workflow = parse_workflow(terraform_env, tmp_path / "workflow")
    plan_job, apply_job = workflow["jobs"]["plan"], workflow["jobs"]["apply"]
    (install,) = [s["run"] for s in plan_job["steps"] if s.get("name") == INSTALL_STEP]
    assert [s["run"] for s in apply_job["steps"] if s.get("name") == INSTALL_STEP] == [install]
    (wheel,) = release_dist.glob("lium_stacks-*.whl")
    runner_temp, github_env = tmp_path / "runner-temp", tmp_path / "github-env"
    runner_temp.mkdir()
    account = new_account(emulator, tmp_path)
    with serve_https(release_dist / "mirror", tmp_path / "pki") as mirror:
        env = {
            "PATH": f"{wheel_venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(tmp_path),
            "RUNNER_TEMP": str(runner_temp),
            "GITHUB_ENV": str(github_env),
            "LIUM_STACKS_REQUIREMENT": str(wheel),
            "LIUM_PROVIDER_MIRROR": f"{mirror.url}/",
            "SSL_CERT_FILE": str(mirror.ca_file),
            "TF_IN_AUTOMATION": "1",
            "TF_INPUT": "0",
            "CHECKPOINT_DISABLE": "1",
            "PG_CONN_STR": postgres.conn_str,
            **account.env,
        }
        step = subprocess.run(
            ["bash", "-e", "-c", install], env=env, capture_output=True, text=True, check=False
        )
        assert step.returncode == 0, step.stderr
        env.update(line.split("=", 1) for line in github_env.read_text().splitlines())
        assert Path(env["TF_CLI_CONFIG_FILE"]).parent == runner_temp

        tf = Terraform(tmp_path / "infra", env)
        shutil.copytree(STACK_DIR, tf.workdir)
        # The plan job's commands, then the apply job's (a fresh plan, applied).
        tf.run("init", "-input=false")
        assert any(path.endswith(".zip") for path in mirror.requests), mirror.requests
    # The stack's committed lock verified the mirror's archive, and init left it as it was.
    assert (tf.workdir / LOCK_FILE).read_text() == (STACK_DIR / LOCK_FILE).read_text()
    tf.run("plan", "-input=false", "-lock-timeout=60s", "-out=plan.bin")
    (tf.workdir / "plan.json").write_text(tf.run("show", "-json", "plan.bin").stdout)
    summary = subprocess.run(
        ["lium-tf", "plan-summary", "plan.json"],
        cwd=tf.workdir,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert summary.stdout.startswith("### Lium plan: ") and "to create" in summary.stdout
    tf.run("apply", "-input=false", "-lock-timeout=60s", "plan.bin")
    addresses = tf.run("state", "list").stdout.split()  # the state is in PostgreSQL
    assert "lium_pod.trainer[0]" in addresses, addresses

    tf.destroy("-lock-timeout=60s")
    assert tf.run("state", "list").stdout.split() == []
    assert_nothing_left(account)
