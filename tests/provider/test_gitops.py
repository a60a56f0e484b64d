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
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from lium_provider.plan_summary.gitops import config_digest
from lium_provider.plan_summary.gitops_contract import STALE_PLAN_EXIT_CODE
from lium_provider.plan_summary.json_format import schema
from tests.constructs.apps import QUIET
from tests.support.lium import Account, assert_nothing_left, name_in_state
from tests.support.postgres import PostgresServer, running_postgres
from tests.support.terraform import REPO

pytestmark = pytest.mark.terraform

GITOPS = REPO / "examples" / "gitops"
HCL_STACK = GITOPS / "infra" / "main.tf"
CDK_APP = GITOPS / "cdk" / "main.py"
WORKFLOW = GITOPS / ".github" / "workflows" / "terraform.yml"
ATLANTIS = GITOPS / "atlantis.yaml"
TIMEOUT = 600


@pytest.fixture(scope="module")
def postgres() -> Iterator[PostgresServer]:
    with running_postgres() as server:
        yield server


def parse_workflow(terraform_env: dict[str, str], directory: Path) -> dict[str, Any]:
    """The workflow file parsed by Terraform's own YAML decoder (``yamldecode`` in ``terraform console``)."""
    return parse_yaml(terraform_env, WORKFLOW, directory)


def parse_yaml(terraform_env: dict[str, str], source: Path, directory: Path) -> dict[str, Any]:
    """``source`` (a YAML mapping) copied into ``directory`` and parsed there by Terraform's ``yamldecode``."""
    directory.mkdir(parents=True, exist_ok=True)
    shutil.copy(source, directory / source.name)
    result = subprocess.run(
        ["terraform", "console"],
        input=f'jsonencode(yamldecode(file("{source.name}")))\n',
        cwd=directory,
        env={**os.environ, **terraform_env},
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert result.returncode == 0, result.stderr
    parsed: dict[str, Any] = json.loads(json.loads(result.stdout))
    return parsed


@pytest.fixture(scope="module")
def workflow(terraform_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return parse_workflow(terraform_env, tmp_path_factory.mktemp("workflow"))


def step_script(workflow: dict[str, Any], job: str, name: str) -> str:
    (step,) = [s for s in workflow["jobs"][job]["steps"] if s.get("name") == name]
    script: str = step["run"]
    return script


EXAMPLE_SCHEMAS = {"hcl": 'schema_name = "lium_gitops_hcl"', "cdk": 'SCHEMA = "lium_gitops_cdk"'}
"""How each stack of the example names its state's schema: a test's checkout may name another."""


@dataclass
class Pipeline:
    """Checkouts of one stack and the workflow's own step scripts run on them, as a runner would; with
    ``schema``, each checkout keeps its state in that schema instead of the example's own."""

    kind: str
    root: Path
    env: dict[str, str]
    workflow: dict[str, Any]
    schema: str | None = None

    def _source(self, text: str) -> str:
        """The example's file as this pipeline checks it out (its schema named ``schema``)."""
        if self.schema is None:
            return text
        example = EXAMPLE_SCHEMAS[self.kind]
        assert example in text, f"the {self.kind} example no longer names its schema as {example}"
        return text.replace(example, example.replace(example.split('"')[1], self.schema))

    @property
    def matrix(self) -> dict[str, str]:
        (entry,) = [
            m
            for m in self.workflow["jobs"]["plan"]["strategy"]["matrix"]["include"]
            if m["stack"] == self.kind
        ]
        return entry

    def checkout(self, job: str, trainers: int = 1, **synth_env: str) -> Path:
        """A fresh checkout for ``job`` with ``trainers`` pods in the configuration (synthesized for CDK,
        with ``synth_env`` too)."""
        workdir = self.root / job
        (workdir / "runner-temp").mkdir(parents=True)
        if self.kind == "hcl":
            text = self._source(HCL_STACK.read_text())
            if trainers != 1:
                text = text.replace("default     = 1\n", f"default     = {trainers}\n")
                assert f"default     = {trainers}" in text
            (workdir / "infra").mkdir()
            (workdir / "infra" / "main.tf").write_text(text)
        else:
            (workdir / "cdk").mkdir()
            (workdir / "cdk" / "main.py").write_text(self._source(CDK_APP.read_text()))
            synth = self.run_step(
                workdir, "plan", "Synthesize the CDK stack", TRAINERS=str(trainers), **synth_env
            )
            assert synth.returncode == 0, synth.stderr
        return workdir

    def run_step(self, workdir: Path, job: str, name: str, **env: str) -> subprocess.CompletedProcess[str]:
        """The workflow step ``name`` of ``job``, run by bash as GitHub runs it, in checkout ``workdir``."""
        script = workdir / f"{job}-{name.split()[0].lower()}.sh"
        script.write_text(step_script(self.workflow, job, name))
        runner = {
            **{k: str(v) for k, v in self.workflow["env"].items()},
            "STACK": self.kind,
            "STACK_DIR": self.matrix["dir"],
            "RUNNER_TEMP": str(workdir / "runner-temp"),
            "GITHUB_STEP_SUMMARY": str(workdir / "step-summary.md"),
            "GITHUB_ENV": str(workdir / "github-env"),
            "PATH": f"{Path(sys.executable).parent}:{self.env['PATH']}",
        }
        return subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
            cwd=workdir,
            env={**self.env, **QUIET, **runner, **env},
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )

    def plan(self, job: str, commit: str, trainers: int = 1) -> Path:
        """The pull-request job: checkout, its plan step; the artifact it keeps (what upload-artifact takes)."""
        workdir = self.checkout(job, trainers)
        result = self.run_step(workdir, "plan", "Plan (lium-tf gitops plan)", HEAD_SHA=commit)
        assert result.returncode == 0, result.stderr
        artifact = workdir / "runner-temp" / "lium-plan"
        summary = (artifact / "summary.md").read_text()
        assert (workdir / "runner-temp" / "summary.md").read_text() == summary
        assert (workdir / "step-summary.md").read_text() == summary
        return artifact

    def apply(
        self, job: str, artifact: Path, commit: str, trainers: int = 1, **env: str
    ) -> tuple[Path, subprocess.CompletedProcess[str]]:
        """The merge job: checkout, the artifact downloaded (copied) into it, its apply step."""
        workdir = self.checkout(job, trainers)
        shutil.copytree(artifact, workdir / "runner-temp" / "lium-plan")
        result = self.run_step(
            workdir, "apply", "Apply the reviewed plan (lium-tf gitops apply)", HEAD_SHA=commit, **env
        )
        return workdir, result

    def stack_dir(self, workdir: Path) -> Path:
        return workdir / self.matrix["dir"]


@pytest.fixture(params=["hcl", "cdk"])
def pipeline(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    terraform_env: dict[str, str],
    account: Account,
    postgres: PostgresServer,
    workflow: dict[str, Any],
) -> Iterator[Pipeline]:
    """A pipeline on a fresh state schema; whatever it applied is destroyed afterwards."""
    env = {**os.environ, **terraform_env, **account.env, "PG_CONN_STR": postgres.conn_str}
    schema = f"gitops_{request.param}_{tmp_path.name[-12:]}".replace("-", "_").lower()
    pipeline = Pipeline(request.param, tmp_path, env, workflow, schema)
    yield pipeline
    cleanup = pipeline.stack_dir(pipeline.checkout("cleanup"))
    for args in (["init", "-input=false"], ["destroy", "-auto-approve", "-input=false"]):
        subprocess.run(["terraform", *args], cwd=cleanup, env=env, capture_output=True, timeout=TIMEOUT)
    assert_nothing_left(account)


def planned_creates(artifact: Path) -> list[str]:
    plan = json.loads((artifact / "plan.json").read_text())
    return sorted(c["address"] for c in plan["resource_changes"] if c["change"]["actions"] == ["create"])


def state_addresses(pipeline: Pipeline, workdir: Path) -> list[str]:
    listed = subprocess.run(
        ["terraform", "state", "list"],
        cwd=pipeline.stack_dir(workdir),
        env=pipeline.env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert listed.returncode == 0, listed.stderr
    return sorted(listed.stdout.split())


def secret_key_lines(account: Account) -> list[bytes]:
    """The lines of the SSH private key that are secret (all but its BEGIN/END markers)."""
    lines = account.key_file.read_bytes().splitlines()
    return [line for line in lines if line and not line.startswith(b"-----")]


def fresh_plan(workdir: Path) -> str:
    """What the apply step showed for review after refusing: the fresh plan's summary."""
    summary = (workdir / "runner-temp" / "fresh-summary.md").read_text()
    assert summary == (workdir / "runner-temp" / "lium-plan" / "fresh" / "summary.md").read_text()
    assert "**The reviewed plan was stale and was not applied.**" in (workdir / "step-summary.md").read_text()
    return summary


def test_the_merge_applies_the_reviewed_plan_and_refuses_stale_ones(
    pipeline: Pipeline, account: Account
) -> None:
    # Pull request: the plan, its summary (Markdown on stdout and in the artifact, JSON) and the manifest.
    reviewed = pipeline.plan("pr-1", "c1")
    summary = (reviewed / "summary.md").read_text()
    assert summary.startswith("### Lium plan: 2 to create, 0 to update, 0 to replace, 0 to destroy\n")
    assert "#### Policies: all passed" in summary, "the workflow's policies were checked"
    document = json.loads((reviewed / "summary.json").read_text())
    jsonschema.validate(document, schema())
    assert [p["action"] for p in document["stacks"][0]["pods"]] == ["create"]
    assert json.loads((reviewed / "manifest.json").read_text())["commit"] == "c1"

    # A merge of another commit does not apply this plan.
    merge, refused = pipeline.apply("merge-other", reviewed, "c9")
    assert refused.returncode == STALE_PLAN_EXIT_CODE, refused.stderr
    assert "refused: the reviewed plan is of commit c1, not of c9. Nothing was applied." in refused.stderr
    assert fresh_plan(merge).startswith("### Lium plan: 2 to create")

    # Nor does a checkout whose configuration differs from the planned one (main moved on: 2 trainers).
    moved, refused = pipeline.apply("merge-moved", reviewed, "c1", trainers=2)
    assert refused.returncode == STALE_PLAN_EXIT_CODE, refused.stderr
    assert "refused: the configuration changed since the plan was reviewed" in refused.stderr
    creates = 3 if pipeline.kind == "hcl" else 4  # the CDK stack has a template per pod
    assert fresh_plan(moved).startswith(f"### Lium plan: {creates} to create"), "a fresh plan of the checkout"
    assert account.live()["pods"] == [], "nothing was applied"

    # The merge of the reviewed commit applies exactly the reviewed plan, whatever the job's variables say.
    merge, applied = pipeline.apply("merge-1", reviewed, "c1", TF_VAR_trainers="3")
    assert applied.returncode == 0, applied.stderr
    assert "Apply complete! Resources: 2 added, 0 changed, 0 destroyed." in applied.stderr
    assert state_addresses(pipeline, merge) == planned_creates(reviewed)
    assert [name_in_state(p["pod_name"]) for p in account.live()["pods"]] == ["trainer-0"], (
        "the plan's one pod, not three"
    )

    # Two pull requests planned against that state; the first merge moves the state on, so the second
    # pull request's plan is stale: Terraform refuses it, and so does the step, with a fresh plan.
    first = pipeline.plan("pr-2", "c2", trainers=2)
    second = pipeline.plan("pr-3", "c3", trainers=2)
    assert planned_creates(first) == planned_creates(second) != []
    _, applied = pipeline.apply("merge-2", first, "c2", trainers=2)
    assert applied.returncode == 0, applied.stderr
    pods = account.live()["pods"]
    assert sorted(name_in_state(p["pod_name"]) for p in pods) == ["trainer-0", "trainer-1"]

    merge, stale = pipeline.apply("merge-3", second, "c3", trainers=2)
    assert stale.returncode == STALE_PLAN_EXIT_CODE, stale.stderr
    assert "Saved plan is stale" in stale.stderr
    assert "refused: the state changed since the plan was reviewed (another apply ran)" in stale.stderr
    fresh_summary = fresh_plan(merge)
    assert fresh_summary.startswith("### Lium plan: 0 to create, 0 to update, 0 to replace, 0 to destroy\n")
    assert "#### Policies: all passed" in fresh_summary, "judged by the reviewed plan's policies"
    assert [p["id"] for p in account.live()["pods"]] == [p["id"] for p in pods], (
        "the stale plan rented nothing"
    )

    # The fresh plan is one to review and apply: from a new checkout of the same commit it applies.
    fresh = merge / "runner-temp" / "lium-plan" / "fresh"
    _, applied = pipeline.apply("merge-3-fresh", fresh, "c3", trainers=2)
    assert applied.returncode == 0, applied.stderr
    assert "Apply complete! Resources: 0 added, 0 changed, 0 destroyed." in applied.stderr

    # The API key and the SSH private key reached no artifact, summary or log of any job.
    secrets = [account.api_key.encode(), *secret_key_lines(account)]
    leaked = [
        p
        for p in pipeline.root.rglob("*")
        if p.is_file()
        and not p.is_relative_to(account.key_file.parent)  # the account's own key pair
        and any(x in p.read_bytes() for x in secrets)
    ]
    assert leaked == []
    for output in (refused, applied, stale):
        assert not any(x.decode() in output.stdout + output.stderr for x in secrets)


def test_a_violated_policy_fails_the_plan_step_and_blocks_the_apply(
    pipeline: Pipeline, account: Account
) -> None:
    workdir = pipeline.checkout("pr")
    failed = pipeline.run_step(
        workdir,
        "plan",
        "Plan (lium-tf gitops plan)",
        HEAD_SHA="c1",
        POLICY_FLAGS="--require-termination-hours",
    )
    assert failed.returncode == 3, failed.stderr
    pod = "lium_pod.trainer[0]" if pipeline.kind == "hcl" else "lium_pod.trainer_0"
    assert (
        f"lium-tf gitops plan: policy violated: require-termination-hours: `{pod}` has no `termination_hours`"
        in failed.stderr.splitlines()
    )
    artifact = workdir / "runner-temp" / "lium-plan"
    # Terraform's own hint would apply the refused plan around the policy gate: it is never printed.
    assert "terraform apply" not in failed.stderr and "terraform apply" not in failed.stdout, failed.stderr
    assert "violates the policies above; `lium-tf gitops apply` refuses it." in failed.stderr
    summary = (artifact / "summary.md").read_text()
    assert "#### Policies: 1 of 1 failed" in summary
    assert (workdir / "step-summary.md").read_text() == summary, "the summary is still shown"
    assert json.loads((artifact / "manifest.json").read_text())["policies_passed"] is False

    # Such a plan is never applied, even where no CI stops the merge job (Atlantis, a laptop).
    merge = pipeline.checkout("merge")
    shutil.copytree(artifact, merge / "runner-temp" / "lium-plan")
    refused = pipeline.run_step(
        merge, "apply", "Apply the reviewed plan (lium-tf gitops apply)", HEAD_SHA="c1"
    )
    assert refused.returncode == 3, refused.stderr
    assert (
        "refused: the reviewed plan violated a policy (see its summary.md). Nothing was applied."
        in refused.stderr
    )
    assert account.live()["pods"] == []


@pytest.mark.parametrize("where", ["provider default", "each pod"])
def test_the_termination_hours_policy_passes_when_every_pod_has_a_deadline(
    pipeline: Pipeline, account: Account, where: str
) -> None:
    # The provider's default (LIUM_DEFAULT_TERMINATION_HOURS) is planned into each pod's termination_hours,
    # so the plan JSON shows it and the policy and the worst case count it, as they count a pod's own
    # (var.termination_hours of the HCL stack, GpuStack(termination_hours=...) of the CDK app).
    own = {"TERMINATION_HOURS": "24"} if where == "each pod" and pipeline.kind == "cdk" else {}
    workdir = pipeline.checkout("pr", **own)
    if where == "provider default":
        deadline = {"LIUM_DEFAULT_TERMINATION_HOURS": "24"}
    else:
        deadline = {"TF_VAR_termination_hours": "24"} if pipeline.kind == "hcl" else {}
    passed = pipeline.run_step(
        workdir,
        "plan",
        "Plan (lium-tf gitops plan)",
        HEAD_SHA="c1",
        POLICY_FLAGS="--require-termination-hours --max-spend 100",
        **deadline,
    )
    assert passed.returncode == 0, passed.stderr
    artifact = workdir / "runner-temp" / "lium-plan"
    assert "#### Policies: all passed" in (artifact / "summary.md").read_text()
    (pod,) = json.loads((artifact / "summary.json").read_text())["stacks"][0]["pods"]
    assert (pod["termination_hours"], pod["lifetime"]) == (24, "bounded"), pod
    assert pod["worst_case_spend_usd"] == pytest.approx(24 * pod["price_per_hour_after"]), pod
    assert account.live()["pods"] == [], "a plan rents nothing"


def test_both_stacks_of_the_matrix_on_one_postgres_never_touch_each_other(
    tmp_path: Path,
    terraform_env: dict[str, str],
    account: Account,
    postgres: PostgresServer,
    workflow: dict[str, Any],
) -> None:
    """The workflow's matrix plans and applies the HCL and the CDK stack with one ``PG_CONN_STR``: each
    keeps its state in its own schema, so once both are applied neither plan touches the other's pods."""
    env = {**os.environ, **terraform_env, **account.env, "PG_CONN_STR": postgres.conn_str}
    pipelines = [Pipeline(kind, tmp_path / kind, env, workflow) for kind in ("hcl", "cdk")]
    try:
        for pipeline in pipelines:
            _, applied = pipeline.apply("merge", pipeline.plan("pr", "c1"), "c1")
            assert applied.returncode == 0, applied.stderr
        assert len(account.live()["pods"]) == 2
        for pipeline in pipelines:
            summary = (pipeline.plan("pr-again", "c2") / "summary.md").read_text()
            assert summary.startswith(
                "### Lium plan: 0 to create, 0 to update, 0 to replace, 0 to destroy\n"
            ), f"the {pipeline.kind} stack's plan touches the other stack:\n{summary}"
    finally:
        for pipeline in pipelines:
            cleanup = pipeline.stack_dir(pipeline.checkout("cleanup"))
            for args in (["init", "-input=false"], ["destroy", "-auto-approve", "-input=false"]):
                subprocess.run(
                    ["terraform", *args], cwd=cleanup, env=env, capture_output=True, timeout=TIMEOUT
                )
    assert_nothing_left(account)


def test_apply_without_an_artifact_says_so(tmp_path: Path) -> None:
    stack = tmp_path / "stack"
    stack.mkdir()
    shutil.copy(HCL_STACK, stack / "main.tf")
    command = [
        "gitops",
        "apply",
        "--dir",
        str(stack),
        "--artifact",
        str(tmp_path / "missing"),
        "--commit",
        "c1",
    ]
    result = subprocess.run(
        [sys.executable, "-m", "lium_provider.cli", *command], capture_output=True, text=True, timeout=TIMEOUT
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("lium-tf gitops apply: no reviewed plan: ")
    assert "manifest.json does not exist" in result.stderr


def test_example_workflow_plans_comments_and_applies_the_artifact(
    workflow: dict[str, Any], tmp_path: Path
) -> None:
    assert workflow["on"]["pull_request"]["branches"] == ["main"]
    assert "closed" in workflow["on"]["pull_request"]["types"] and "push" not in workflow["on"]
    plan, apply = workflow["jobs"]["plan"], workflow["jobs"]["apply"]
    assert plan["if"] == "github.event.action != 'closed'"
    assert apply["if"] == "github.event.action == 'closed' && github.event.pull_request.merged"
    assert plan["strategy"]["matrix"] == apply["strategy"]["matrix"]
    assert plan["permissions"]["pull-requests"] == "write" and apply["permissions"]["actions"] == "read"
    assert apply["concurrency"]["cancel-in-progress"] is False
    for job in (plan, apply):
        assert job["env"]["LIUM_API_KEY"] == "${{ secrets.LIUM_API_KEY }}"
        assert job["env"]["PG_CONN_STR"] == "${{ secrets.PG_CONN_STR }}"
        assert job["env"]["HEAD_SHA"] == "${{ github.event.pull_request.head.sha }}"
    (plan_checkout,) = [s for s in plan["steps"] if s.get("uses", "").startswith("actions/checkout@")]
    assert plan_checkout["with"]["ref"] == "${{ github.event.pull_request.head.sha }}", (
        "plan the reviewed commit"
    )
    (upload,) = [s for s in plan["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert upload["with"]["name"] == "lium-plan-${{ matrix.stack }}-${{ github.event.pull_request.head.sha }}"
    assert "lium-plan-$STACK-$HEAD_SHA" in step_script(workflow, "apply", "Fetch the reviewed plan")

    plan_runs = "\n".join(step.get("run", "") for step in plan["steps"])
    apply_runs = "\n".join(step.get("run", "") for step in apply["steps"])
    assert "lium-tf gitops plan" in plan_runs and "terraform apply" not in plan_runs + apply_runs
    assert "lium-tf gitops apply" in apply_runs and "LIUM_SSH_PRIVATE_KEY" not in json.dumps(plan)
    assert "LIUM_SSH_PRIVATE_KEY_FILE" in apply_runs

    (comment,) = [s for s in plan["steps"] if s.get("uses", "").startswith("actions/github-script@")]
    assert "summary.md" in comment["with"]["script"] and "updateComment" in comment["with"]["script"]
    steps = [s for job in workflow["jobs"].values() for s in job["steps"]]
    for step in steps:
        # Expressions are substituted into scripts before they run: secrets and PR data go through env.
        assert "${{" not in step.get("run", "") + step.get("with", {}).get("script", ""), step
    for index, step in enumerate(s for s in steps if "run" in s):
        (tmp_path / f"{index}.sh").write_text(step["run"])
        syntax = subprocess.run(["bash", "-n", str(tmp_path / f"{index}.sh")], capture_output=True, text=True)
        assert syntax.returncode == 0, (step["run"], syntax.stderr)
    node = shutil.which("node")
    assert node is not None, "node (installed for cdktf) checks the github-script syntax"
    wrapped = tmp_path / "comment.js"
    wrapped.write_text("async function comment(github, context) {\n" + comment["with"]["script"] + "\n}\n")
    syntax = subprocess.run([node, "--check", str(wrapped)], capture_output=True, text=True)
    assert syntax.returncode == 0, syntax.stderr

    readme = (GITOPS / "README.md").read_text()
    secrets = set(re.findall(r"secrets\.([A-Z_]+)", WORKFLOW.read_text()))
    assert secrets == {"LIUM_API_KEY", "PG_CONN_STR", "LIUM_SSH_PRIVATE_KEY"}
    assert all(f"`{name}`" in readme for name in secrets), "every secret the workflow reads is documented"


def test_atlantis_workflows_run_the_same_steps(terraform_env: dict[str, str], tmp_path: Path) -> None:
    config = parse_yaml(terraform_env, ATLANTIS, tmp_path)
    assert config["version"] == 3
    assert {p["workflow"] for p in config["projects"]} == set(config["workflows"]) == {"lium-hcl", "lium-cdk"}
    for workflow in config["workflows"].values():
        (plan,) = [s["run"] for s in workflow["plan"]["steps"]]
        (apply,) = [s["run"] for s in workflow["apply"]["steps"]]
        assert "lium-tf gitops plan" in plan and '--commit "$HEAD_COMMIT"' in plan and "$PLANFILE" in plan
        assert "lium-tf gitops apply" in apply and '--commit "$HEAD_COMMIT"' in apply
        for script in (plan, apply):
            syntax = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
            assert syntax.returncode == 0, (script, syntax.stderr)


def test_the_configuration_digest_covers_configuration_only(tmp_path: Path) -> None:
    stack = tmp_path / "stack"
    (stack / "modules" / "m").mkdir(parents=True)
    (stack / "main.tf").write_text('module "m" {\n  source = "./modules/m"\n}\n')
    (stack / "modules" / "m" / "main.tf").write_text("# a module\n")
    digest = config_digest(stack)
    # What init, plan and Atlantis leave in the directory is not configuration.
    (stack / ".terraform" / "providers").mkdir(parents=True)
    (stack / ".terraform" / "providers" / "x").write_text("binary")
    (stack / ".terraform.lock.hcl").write_text("# lock\n")
    (stack / "terraform.tfstate").write_text("{}")
    (stack / "default.tfplan").write_text("plan")
    (stack / "artifact").mkdir()
    (stack / "artifact" / "plan.json").write_text("{}")
    assert config_digest(stack, (stack / "artifact",)) == digest
    assert config_digest(stack) != digest, "an artifact that is not excluded counts"
    # Every other file does, in any module, by name and by content.
    (stack / "modules" / "m" / "main.tf").write_text("# a changed module\n")
    changed = config_digest(stack, (stack / "artifact",))
    assert changed != digest
    (stack / "modules" / "m" / "main.tf").rename(stack / "modules" / "m" / "other.tf")
    assert config_digest(stack, (stack / "artifact",)) not in (digest, changed)
