"""``lium-tf gitops plan|apply`` end to end: the pull-request and merge steps of examples/gitops.

Each job is a fresh checkout (a new directory) of the example stack, HCL (``examples/gitops/infra``) or
CDK (``examples/gitops/cdk/main.py``, synthesized first, as CDK pipelines run), planned and applied by
the same command the workflow runs, with real terraform, the ``pg`` backend on a real PostgreSQL and the
emulator. The merge applies the reviewed plan file; a plan of another commit, of a changed configuration
or of a state that moved on is refused with a fresh plan for review, and nothing is applied.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import pytest

from lium_provider.gitops_contract import STALE_PLAN_EXIT_CODE
from lium_provider.plan_summary.json_format import schema
from tests.constructs.apps import QUIET
from tests.support.lium import Account, assert_nothing_left
from tests.support.postgres import PostgresServer, running_postgres
from tests.support.terraform import REPO

pytestmark = pytest.mark.terraform

GITOPS = REPO / "examples" / "gitops"
HCL_STACK = GITOPS / "infra" / "main.tf"
CDK_APP = GITOPS / "cdk" / "main.py"
CDK_STACK = "trainers"
TIMEOUT = 600


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    with running_postgres() as server:
        yield server


@dataclass
class Pipeline:
    """Checkouts of one kind of stack and the ``lium-tf gitops`` steps run on them, as CI would."""

    kind: str
    root: Path
    env: dict[str, str]

    def checkout(self, job: str, trainers: int = 1) -> Path:
        """A fresh checkout for ``job`` with ``trainers`` pods in the configuration; the stack's directory."""
        workdir = self.root / job
        workdir.mkdir(parents=True)
        if self.kind == "hcl":
            stack = workdir / "infra"
            stack.mkdir()
            text = HCL_STACK.read_text()
            if trainers != 1:
                text = text.replace("default     = 1\n", f"default     = {trainers}\n")
                assert f"default     = {trainers}" in text
            (stack / "main.tf").write_text(text)
            return stack
        synth = subprocess.run(
            [sys.executable, str(CDK_APP)],
            cwd=workdir,
            env={**self.env, **QUIET, "CDKTF_OUTDIR": str(workdir / "cdktf.out"), "TRAINERS": str(trainers)},
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
        assert synth.returncode == 0, synth.stderr
        return workdir / "cdktf.out" / "stacks" / CDK_STACK

    def step(
        self, step: str, stack: Path, artifact: Path, commit: str, **env: str
    ) -> subprocess.CompletedProcess[str]:
        command = ["gitops", step, "--dir", str(stack), "--artifact", str(artifact), "--commit", commit]
        return subprocess.run(
            [sys.executable, "-m", "lium_provider.cli", *command, "--lock-timeout", "1m"],
            env={**self.env, **env},
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )

    def plan(self, job: str, commit: str, trainers: int = 1) -> tuple[Path, Path]:
        """The pull-request job: checkout and ``gitops plan``; (stack directory, artifact)."""
        stack = self.checkout(job, trainers)
        artifact = self.root / f"artifact-{commit}"
        result = self.step("plan", stack, artifact, commit)
        assert result.returncode == 0, result.stderr
        assert result.stdout == (artifact / "summary.md").read_text()
        return stack, artifact


@pytest.fixture(params=["hcl", "cdk"])
def pipeline(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    terraform_env: dict[str, str],
    account: Account,
    postgres: PostgresServer,
) -> Iterator[Pipeline]:
    """A pipeline on a fresh state schema; whatever it applied is destroyed afterwards."""
    schema_name = f"gitops_{request.param}_{tmp_path.name[-12:]}".replace("-", "_").lower()
    env = {**os.environ, **terraform_env, **account.env, "PG_CONN_STR": postgres.conn_str}
    env["PG_SCHEMA_NAME"] = schema_name
    pipeline = Pipeline(request.param, tmp_path, env)
    yield pipeline
    cleanup = pipeline.checkout("cleanup")
    for args in (["init", "-input=false"], ["destroy", "-auto-approve", "-input=false"]):
        subprocess.run(["terraform", *args], cwd=cleanup, env=env, capture_output=True, timeout=TIMEOUT)
    assert_nothing_left(account)


def planned_creates(artifact: Path) -> list[str]:
    plan = json.loads((artifact / "plan.json").read_text())
    return sorted(c["address"] for c in plan["resource_changes"] if c["change"]["actions"] == ["create"])


def state_addresses(pipeline: Pipeline, stack: Path) -> list[str]:
    listed = subprocess.run(
        ["terraform", "state", "list"], cwd=stack, env=pipeline.env, capture_output=True, text=True
    )
    assert listed.returncode == 0, listed.stderr
    return sorted(listed.stdout.split())


def test_the_merge_applies_the_reviewed_plan_and_refuses_stale_ones(
    pipeline: Pipeline, account: Account
) -> None:
    # Pull request: the plan, its summary (Markdown on stdout and in the artifact, JSON) and the manifest.
    _, reviewed = pipeline.plan("pr-1", "c1")
    summary = (reviewed / "summary.md").read_text()
    assert summary.startswith("### Lium plan: 2 to create, 0 to update, 0 to replace, 0 to destroy\n")
    document = json.loads((reviewed / "summary.json").read_text())
    jsonschema.validate(document, schema())
    assert [p["action"] for p in document["stacks"][0]["pods"]] == ["create"]
    assert json.loads((reviewed / "manifest.json").read_text())["commit"] == "c1"

    # A merge of another commit does not apply this plan.
    merge = pipeline.checkout("merge-other")
    refused = pipeline.step("apply", merge, reviewed, "c9")
    assert refused.returncode == STALE_PLAN_EXIT_CODE, refused.stderr
    assert "refused: the reviewed plan is of commit c1, not of c9. Nothing was applied." in refused.stderr
    assert refused.stdout.startswith("### Lium plan: 2 to create"), "a fresh plan for review"
    assert (reviewed / "fresh" / "manifest.json").is_file()

    # Nor does a checkout whose configuration differs from the planned one (main moved on: 2 trainers).
    moved = pipeline.checkout("merge-moved", trainers=2)
    refused = pipeline.step("apply", moved, reviewed, "c1")
    assert refused.returncode == STALE_PLAN_EXIT_CODE, refused.stderr
    assert "refused: the configuration changed since the plan was reviewed" in refused.stderr
    creates = 3 if pipeline.kind == "hcl" else 4  # the CDK stack has a template per pod
    assert refused.stdout.startswith(f"### Lium plan: {creates} to create"), "a fresh plan of the checkout"
    assert account.live()["pods"] == [], "nothing was applied"

    # The merge of the reviewed commit applies exactly the reviewed plan, in a fresh checkout.
    merge = pipeline.checkout("merge-1")
    applied = pipeline.step("apply", merge, reviewed, "c1", TF_VAR_trainers="3")
    assert applied.returncode == 0, applied.stderr
    assert "Apply complete! Resources: 2 added, 0 changed, 0 destroyed." in applied.stderr
    assert state_addresses(pipeline, merge) == planned_creates(reviewed)
    assert [p["pod_name"] for p in account.live()["pods"]] == ["trainer-0"], "the plan's one pod, not three"

    # Two pull requests planned against that state; the first merge moves the state on, so the second
    # pull request's plan is stale: Terraform refuses it, and so does the step, with a fresh plan.
    _, first = pipeline.plan("pr-2", "c2", trainers=2)
    _, second = pipeline.plan("pr-3", "c3", trainers=2)
    assert planned_creates(first) == planned_creates(second) != []
    applied = pipeline.step("apply", pipeline.checkout("merge-2", trainers=2), first, "c2")
    assert applied.returncode == 0, applied.stderr
    pods = account.live()["pods"]
    assert sorted(p["pod_name"] for p in pods) == ["trainer-0", "trainer-1"]

    stale = pipeline.step("apply", pipeline.checkout("merge-3", trainers=2), second, "c3")
    assert stale.returncode == STALE_PLAN_EXIT_CODE, stale.stderr
    assert "Saved plan is stale" in stale.stderr
    assert "refused: the state changed since the plan was reviewed (another apply ran)" in stale.stderr
    assert stale.stdout.startswith("### Lium plan: 0 to create, 0 to update, 0 to replace, 0 to destroy\n")
    assert [p["id"] for p in account.live()["pods"]] == [p["id"] for p in pods], (
        "the stale plan rented nothing"
    )


def test_a_violated_policy_fails_the_plan_step_after_writing_the_artifact(pipeline: Pipeline) -> None:
    stack = pipeline.checkout("pr")
    artifact = pipeline.root / "artifact"
    result = pipeline.step("plan", stack, artifact, "c1")
    assert result.returncode == 0, result.stderr
    command = [
        sys.executable,
        "-m",
        "lium_provider.cli",
        "gitops",
        "plan",
        "--dir",
        str(stack),
        "--artifact",
        str(artifact),
        "--commit",
        "c1",
        "--require-termination-hours",
    ]
    failed = subprocess.run(command, env=pipeline.env, capture_output=True, text=True, timeout=TIMEOUT)
    assert failed.returncode == 3, failed.stderr
    pod = "lium_pod.trainer[0]" if pipeline.kind == "hcl" else "lium_pod.trainer_0"
    assert (
        f"lium-tf gitops plan: policy violated: require-termination-hours: `{pod}` has no `termination_hours`"
        in failed.stderr.splitlines()
    )
    assert (
        failed.stdout == (artifact / "summary.md").read_text()
        and "#### Policies: 1 of 1 failed" in failed.stdout
    )
    assert json.loads((artifact / "manifest.json").read_text())["policies_passed"] is False


def test_apply_without_an_artifact_says_so(tmp_path: Path) -> None:
    stack = tmp_path / "stack"
    stack.mkdir()
    shutil.copy(HCL_STACK, stack / "main.tf")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "lium_provider.cli",
            "gitops",
            "apply",
            "--dir",
            str(stack),
            "--artifact",
            str(tmp_path / "missing"),
            "--commit",
            "c1",
        ],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("lium-tf gitops apply: no reviewed plan: ")
    assert "manifest.json does not exist" in result.stderr
