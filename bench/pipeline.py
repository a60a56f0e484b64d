"""Pipeline time: a pull-request job from checkout to summary, against plain ``terraform plan``, in one run.

For the quickstart (one pod with its runner) and a 50-pod fleet, each as HCL and as a CDK app, a round is:
a fresh checkout (a new directory), synth where there is one, then ``lium-tf gitops plan`` (init, plan
-out, show -json, summary, manifest): the pull-request job of examples/gitops. Beside it, in the same
round, plain ``terraform init`` + ``terraform plan`` of the same configuration in its own fresh checkout
(for a CDK app, of its synthesized stack, the synth not counted): what the job adds is the rest. The
emulator serves Lium; the fleet's state is in the ``pg`` backend on a real PostgreSQL, as in the example.
Prints medians over the rounds (after one unmeasured warm-up round), the ratio of the pipeline to the
plain plan, and what the job adds to synth (CDK) and the plain plan.

Run from the repository root: ``.venv/bin/python -m bench.pipeline [--rounds 3] [--reference COMMIT]
[--cold]``; ``--reference`` runs the job a second time in each round with ``lium-tf`` as of an earlier
commit (its ``provider/`` packages on ``PYTHONPATH``; Terraform's provider stays this checkout's), side by
side. ``--cold`` gives every job and every plain plan a zygote directory of its own, so that each starts
the provider cold at first, as on a fresh CI runner (by default the provider's zygote stays warm across
the rounds, as on a persistent runner or an Atlantis server).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.workspace import terraform, terraform_workspace
from lium_emulator.launcher import launch
from tests.support.lium import FAST_TIMINGS, new_account
from tests.support.postgres import running_postgres
from tests.support.procs import private_zygotes
from tests.support.terraform import REPO

FLEET_SIZE = 50
QUIET = {"JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20", "CHECKPOINT_DISABLE": "1", "CI": "1"}


@dataclass(frozen=True)
class Case:
    """One stack of one kind: how a checkout of it is laid out, and where Terraform then runs."""

    stack: str
    kind: str  # "hcl" or "cdk"
    checkout: Callable[[Path, dict[str, str]], Path]
    """Lay out a checkout in the directory (synth included for CDK); return the stack directory."""


def _hcl(source: Path, replace: tuple[str, str] | None = None) -> Callable[[Path, dict[str, str]], Path]:
    def checkout(workdir: Path, env: dict[str, str]) -> Path:
        text = source.read_text()
        if replace is not None:
            assert replace[0] in text, replace
            text = text.replace(*replace)
        workdir.mkdir(parents=True)
        (workdir / "main.tf").write_text(text)
        return workdir

    return checkout


def _cdk(app: Path, stack_name: str, extra_env: dict[str, str]) -> Callable[[Path, dict[str, str]], Path]:
    def checkout(workdir: Path, env: dict[str, str]) -> Path:
        workdir.mkdir(parents=True)
        run_env = {**env, **QUIET, **extra_env, "CDKTF_OUTDIR": str(workdir / "cdktf.out")}
        result = subprocess.run(
            [sys.executable, str(app)], cwd=workdir, env=run_env, capture_output=True, text=True
        )
        if result.returncode != 0:
            raise SystemExit(f"synth of {app} failed:\n{result.stderr}")
        return workdir / "cdktf.out" / "stacks" / stack_name

    return checkout


QUICKSTART_HCL = _hcl(REPO / "examples" / "hcl" / "main.tf")
FLEET_HCL = _hcl(
    REPO / "examples" / "gitops" / "infra" / "main.tf", ("default     = 1\n", f"default     = {FLEET_SIZE}\n")
)
CASES = (
    Case("quickstart", "hcl", QUICKSTART_HCL),
    Case("quickstart", "cdk", _cdk(REPO / "examples" / "quickstart" / "main.py", "quickstart", {})),
    Case(f"fleet of {FLEET_SIZE}", "hcl", FLEET_HCL),
    Case(
        f"fleet of {FLEET_SIZE}",
        "cdk",
        _cdk(REPO / "examples" / "gitops" / "cdk" / "main.py", "trainers", {"TRAINERS": str(FLEET_SIZE)}),
    ),
)


def reference_sources(commit: str, scratch: Path) -> Path:
    """The ``provider/`` packages of ``commit`` (lium-tf's code as it was), extracted under ``scratch``:
    a ``PYTHONPATH`` entry that runs that commit's ``lium-tf`` beside this checkout's."""
    target = scratch / "reference"
    target.mkdir()
    archive = subprocess.run(
        ["git", "archive", "--format=tar", commit, "provider"], cwd=REPO, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target / "provider"


def gitops_plan(stack_dir: Path, artifact: Path, env: dict[str, str]) -> None:
    command = [sys.executable, "-m", "lium_provider.cli", "gitops", "plan", "--dir", str(stack_dir)]
    command += ["--artifact", str(artifact), "--commit", "bench"]
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"lium-tf gitops plan failed in {stack_dir}:\n{result.stderr[-4000:]}")


def pipeline_round(
    case: Case, base: Path, env: dict[str, str], job_env: dict[str, str]
) -> tuple[float, float]:
    """(synth seconds, seconds of the whole job) of one fresh checkout of ``case``: synthesized with this
    checkout's constructs (``env``), planned and summarized by ``lium-tf`` in ``job_env``."""
    started = time.perf_counter()
    stack_dir = case.checkout(base / "checkout", env)
    synthesized = time.perf_counter()
    gitops_plan(stack_dir, base / "artifact", job_env)
    done = time.perf_counter()
    return synthesized - started if case.kind == "cdk" else 0.0, done - started


def plain_round(case: Case, base: Path, env: dict[str, str]) -> float:
    """Seconds of plain ``terraform init`` + ``terraform plan`` of the case's configuration in a fresh
    checkout: the HCL as it is, a CDK app's synthesized stack (the synth is not counted)."""
    stack_dir = case.checkout(base / "checkout", env)
    started = time.perf_counter()
    terraform(stack_dir, env, "init", "-input=false", "-no-color")
    terraform(stack_dir, env, "plan", "-input=false", "-no-color")
    return time.perf_counter() - started


_zygote_directories = itertools.count()


@contextlib.contextmanager
def provider_starts(env: dict[str, str], scratch: Path, cold: bool) -> Iterator[dict[str, str]]:
    """``env`` for one job or plain plan: as it is, or (``cold``) with a zygote directory of its own,
    whose zygote is stopped afterwards."""
    if not cold:
        yield env
        return
    with private_zygotes(scratch / f"zygotes-{next(_zygote_directories)}") as directory:
        yield {**env, "TFBRIDGE_ZYGOTE_DIR": str(directory)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--reference",
        metavar="COMMIT",
        help="also run the job with lium-tf as of COMMIT, side by side in each round",
    )
    parser.add_argument(
        "--cold", action="store_true", help="start every job and plain plan with no warm provider zygote"
    )
    args = parser.parse_args()
    synth: dict[tuple[str, str], list[float]] = {}
    jobs: dict[tuple[str, str], list[float]] = {}
    reference_jobs: dict[tuple[str, str], list[float]] = {}
    plain: dict[tuple[str, str], list[float]] = {}
    with (
        terraform_workspace("bench-pipeline-") as (scratch, tf_env),
        launch(FAST_TIMINGS) as emulator,
        running_postgres() as postgres,
    ):
        account = new_account(emulator, scratch / "account")
        env = {**tf_env, **account.env, "PG_CONN_STR": postgres.conn_str}
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
        variants = {"job": (env, jobs)}
        if args.reference:
            variants["reference"] = (
                {**env, "PYTHONPATH": str(reference_sources(args.reference, scratch))},
                reference_jobs,
            )
        # Round 0 is not measured: it warms the page cache, the provider's zygote and the CDK for all alike.
        for round_number in range(args.rounds + 1):
            for case in CASES:
                for variant, (variant_env, timings) in variants.items():
                    with (
                        tempfile.TemporaryDirectory(dir=scratch) as base,
                        provider_starts(variant_env, scratch, args.cold) as job_env,
                    ):
                        seconds_synth, seconds_job = pipeline_round(case, Path(base), env, job_env)
                    if round_number:
                        timings.setdefault((case.stack, case.kind), []).append(seconds_job)
                        if variant == "job":
                            synth.setdefault((case.stack, case.kind), []).append(seconds_synth)
                with (
                    tempfile.TemporaryDirectory(dir=scratch) as base,
                    provider_starts(env, scratch, args.cold) as plain_env,
                ):
                    seconds_plain = plain_round(case, Path(base), plain_env)
                if round_number:
                    plain.setdefault((case.stack, case.kind), []).append(seconds_plain)
        shutil.rmtree(scratch / "account", ignore_errors=True)
    starts = "every job and plain plan with a cold provider" if args.cold else "the provider's zygote warm"
    print(f"medians of {args.rounds} rounds, {starts}, load average {os.getloadavg()[0]:.2f}")
    reference = (
        f" | reference job ({args.reference}) | its extra | extra / its extra" if args.reference else ""
    )
    print(
        "| stack | kind | synth | PR job (checkout → summary) | plain terraform init + plan | job / plain "
        f"| job's extra over synth + plain{reference} |"
    )
    print("| --- " * (10 if args.reference else 7) + "|")
    for case in CASES:
        key = (case.stack, case.kind)
        job, base_plan = statistics.median(jobs[key]), statistics.median(plain[key])
        seconds_synth = statistics.median(synth[key])
        synth_text = f"{seconds_synth:.2f} s" if case.kind == "cdk" else "—"
        extra = job - seconds_synth - base_plan
        row = (
            f"| {case.stack} | {case.kind} | {synth_text} | {job:.2f} s | {base_plan:.2f} s | {job / base_plan:.2f} "
            f"| {extra:.2f} s"
        )
        if args.reference:
            reference_job = statistics.median(reference_jobs[key])
            reference_extra = reference_job - seconds_synth - base_plan
            ratio = f"{extra / reference_extra:.2f}" if reference_extra > 0 else "—"
            row += f" | {reference_job:.2f} s | {reference_extra:.2f} s | {ratio}"
        print(row + " |")


if __name__ == "__main__":
    main()
