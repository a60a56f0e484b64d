"""What ``lium-tf gitops plan`` gets ready while Terraform plans: a provider for ``terraform show`` to
attach to, and the summary made in the provider's zygote. Each gives exactly what the job makes without
it, each is used only when a warm zygote serves it, and anything else falls back without a trace.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lium_provider import PROVIDER_SOURCE, __version__
from lium_provider.plan_summary.gitops_contract import Policies
from lium_provider.plan_summary.parsing import PlanError
from lium_provider.plan_summary.pricing import OfferBook, resolve_feed_url
from lium_provider.plan_summary.summary import judge, render
from lium_provider.plan_summary.warm_summary import RenderedSummary, WarmSummary, greeting
from tests.support.lium import Account
from tests.support.procs import children, cmdline, python_program
from tests.support.terraform import REPO, Terraform
from tfbridge.serving.reattach import ReattachableProvider
from tfbridge.serving.warm import InstalledProvider, installed_provider
from tfbridge.serving.zygote import process_running as running

pytestmark = pytest.mark.terraform

QUICKSTART = (REPO / "examples" / "hcl" / "main.tf").read_text()
POLICIES = Policies(max_hourly_total=0.01)  # violated: the verdicts travel too


@pytest.fixture
def planned(make_terraform: Callable[..., Terraform], account: Account) -> tuple[Terraform, Path]:
    """The quickstart, initialised and planned into ``plan.bin`` (which warms the provider's zygote)."""
    tf = make_terraform(QUICKSTART, **account.env)
    tf.init()
    tf.run("plan", "-input=false", "-no-color", "-out=plan.bin")
    return tf, tf.workdir / "plan.bin"


@pytest.fixture
def job_environment(account: Account, monkeypatch: pytest.MonkeyPatch) -> None:
    """This process's environment is a job's: the helpers start with it, and the feed both sides price
    with is the emulator's (never Lium's default endpoint)."""
    for key, value in account.env.items():
        monkeypatch.setenv(key, value)


def environment(tf: Terraform) -> dict[str, str]:
    return {**os.environ, **tf.env}


def provider_of(tf: Terraform) -> InstalledProvider:
    installed = installed_provider(tf.workdir, PROVIDER_SOURCE, environment(tf))
    assert installed is not None and installed.executable.is_file()
    return installed


def comparable(plan_json: str) -> dict[str, Any]:
    """A plan's JSON without what differs between two renderings of one plan file: the time of the
    rendering, and the order of ``relevant_attributes`` (Terraform walks a map to list them)."""
    plan: dict[str, Any] = json.loads(plan_json)
    plan.pop("timestamp")
    plan["relevant_attributes"] = sorted(plan.get("relevant_attributes", []), key=json.dumps)
    return plan


def test_show_attached_to_a_provider_started_ahead_shows_the_same_plan(
    planned: tuple[Terraform, Path],
) -> None:
    tf, plan_file = planned
    provider = ReattachableProvider(provider_of(tf), tf.workdir, environment(tf))
    try:
        attached = provider.reattach_environment(timeout=30)
        assert attached is not None and not provider.declined
        shown = subprocess.run(
            ["terraform", "show", "-json", str(plan_file)],
            cwd=tf.workdir,
            env={**environment(tf), **attached, "TF_LOG": "debug"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert shown.returncode == 0, shown.stderr
        assert "starting plugin" not in shown.stderr, "terraform started a provider of its own"
        assert comparable(shown.stdout) == comparable(tf.run("show", "-json", str(plan_file)).stdout)
    finally:
        provider.stop()


@pytest.mark.usefixtures("job_environment")
def test_the_summary_made_in_the_zygote_is_the_one_made_here(planned: tuple[Terraform, Path]) -> None:
    tf, plan_file = planned
    plan_json = tf.run("show", "-json", str(plan_file)).stdout
    (tf.workdir / "plan.json").write_text(plan_json)
    report, results = judge([("stack", plan_json)], OfferBook(resolve_feed_url(None, os.environ)), POLICIES)
    markdown = render(report, results, "markdown")
    here = RenderedSummary(markdown.text, render(report, results, "json").text, tuple(markdown.violations))
    assert here.failed and "$0." in here.markdown and "could not be read" not in here.markdown
    warm = WarmSummary(provider_of(tf), None)
    try:
        assert warm.greeted(), "the zygote, warm from the plan, must run the command"
        assert warm.summarize("stack", tf.workdir / "plan.json", POLICIES) == here
    finally:
        warm.close()


def test_another_version_of_the_provider_is_not_asked(planned: tuple[Terraform, Path]) -> None:
    tf, _ = planned
    installed = provider_of(tf)
    other = InstalledProvider(installed.address, "0.0.0-other", installed.executable)
    warm = WarmSummary(other, None)
    assert not warm.greeted()
    assert warm.summarize("stack", tf.workdir / "absent.json", Policies()) is None
    warm.close()


def test_a_provider_that_does_not_know_the_command_is_left_alone(tmp_path: Path) -> None:
    # An older provider serves Terraform whatever its arguments: it answers with a handshake line.
    pid_file = tmp_path / "pid"
    executable = python_program(
        tmp_path / "terraform-provider-lium_v0.1.0",
        f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "print('1|6|unix|/tmp/x.sock|grpc|', flush=True)\ntime.sleep(600)\n",
    )
    address = f"registry.terraform.io/{PROVIDER_SOURCE}"
    warm = WarmSummary(InstalledProvider(address, __version__, executable), None)
    assert not warm.greeted()
    started = int(pid_file.read_text())  # written before the line greeted() read
    assert running(started)
    assert warm.summarize("stack", tmp_path / "plan.json", Policies()) is None
    warm.close()
    assert not running(started), "the provider started for the summary must be stopped"


FAKE_SUMMARY_COMMAND = """import sys
print({greeting!r}, flush=True)
sys.stdin.readline()
print('{{"markdown": "m", "json": "j", "violations": []}}', flush=True)
"""


@pytest.mark.parametrize("build", ["this build", "another build"])
def test_only_this_very_build_makes_the_summary(tmp_path: Path, build: str) -> None:
    # Another checkout or virtualenv at this version greets as another build, and is not asked.
    this = greeting().decode()
    greeted = this if build == "this build" else f"{this.rsplit(' ', 1)[0]} {'0' * 32}"
    executable = python_program(
        tmp_path / "terraform-provider-lium_v0.1.0", FAKE_SUMMARY_COMMAND.format(greeting=greeted)
    )
    address = f"registry.terraform.io/{PROVIDER_SOURCE}"
    warm = WarmSummary(InstalledProvider(address, __version__, executable), None)
    try:
        summary = warm.summarize("stack", tmp_path / "plan.json", Policies())
        assert summary == (RenderedSummary("m", "j", ()) if build == "this build" else None)
    finally:
        warm.close()


def test_summary_code_from_elsewhere_than_the_bridge_is_another_build(tmp_path: Path) -> None:
    # One installation, but lium_provider taken from a copy (PYTHONPATH): its summaries are the copy's.
    shutil.copytree(REPO / "provider" / "lium_provider", tmp_path / "lium_provider")
    copy = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, lium_provider.plan_summary.warm_summary as w; "
            "sys.stdout.write(w.greeting().decode() + ' ' + w.lium_provider.__file__)",
        ],
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split()
    assert copy[-1].startswith(str(tmp_path)), "the copy was not the code imported"
    assert " ".join(copy[:-1]) != greeting().decode()


@pytest.mark.usefixtures("job_environment")
def test_a_file_that_is_no_plan_fails_warm_as_it_fails_here(planned: tuple[Terraform, Path]) -> None:
    tf, _ = planned
    not_a_plan = tf.workdir / "not-a-plan.json"
    not_a_plan.write_text('{"format_version": "1.2"}')
    with pytest.raises(PlanError) as here:
        judge([("stack", not_a_plan.read_text())], OfferBook(resolve_feed_url(None, os.environ)), Policies())
    warm = WarmSummary(provider_of(tf), None)
    try:
        assert warm.greeted()
        with pytest.raises(PlanError) as warmly:
            warm.summarize("stack", not_a_plan, Policies())
        assert str(warmly.value) == str(here.value)
    finally:
        warm.close()


@pytest.mark.usefixtures("job_environment")
def test_the_summary_runs_where_the_job_runs(
    planned: tuple[Terraform, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    tf, _ = planned
    elsewhere = tmp_path / "job-directory"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # relative settings (SSL_CERT_FILE=ca.pem) mean what they mean here
    warm = WarmSummary(provider_of(tf), None)
    try:
        assert warm.greeted()
        (command,) = [pid for pid in children(os.getpid()) if "plan-summary" in cmdline(pid)]
        assert Path(f"/proc/{command}/cwd").resolve() == elsewhere.resolve()
    finally:
        warm.close()


@pytest.mark.usefixtures("job_environment")
def test_without_a_warm_zygote_nothing_is_started(
    make_terraform: Callable[..., Terraform], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cold = tmp_path / "no-zygotes"
    cold.mkdir(mode=0o700)
    monkeypatch.setenv("TFBRIDGE_ZYGOTE_DIR", str(cold))
    tf = make_terraform(QUICKSTART)
    tf.init()  # installs the provider; no start of it yet, so no zygote
    provider = ReattachableProvider(provider_of(tf), tf.workdir, environment(tf))
    assert provider.reattach_environment(timeout=30) is None and provider.declined
    provider.stop()
    warm = WarmSummary(provider_of(tf), None)
    assert not warm.greeted()
    warm.close()
    assert not list(cold.glob("*.lock")), "a warm-only start must not start a zygote"


def job(tf: Terraform, name: str, **env: str) -> Path:
    artifact = tf.workdir.parent / f"{name}-artifact"
    command = [sys.executable, "-m", "lium_provider.cli", "gitops", "plan", "--dir", str(tf.workdir)]
    result = subprocess.run(
        [*command, "--artifact", str(artifact), "--commit", "c0ffee", "--max-hourly-total", "0.01"],
        env={**environment(tf), **env},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 3, result.stderr  # the policy is violated, and said so
    assert "policy violated" in result.stderr
    return artifact


def test_the_job_publishes_the_same_artifact_warm_or_cold(
    terraform_env: dict[str, str], account: Account, tmp_path: Path
) -> None:
    # Two checkouts of one stack (the summary names it by its directory), planned by the job.
    warm, cold = (
        Terraform(tmp_path / kind / "stack", {**terraform_env, **account.env}) for kind in ("warm", "cold")
    )
    for tf in (warm, cold):
        tf.write(QUICKSTART)
    warm.init()
    warm.run("plan", "-input=false")  # the zygote is warm for the job's helpers
    warm_artifact = job(warm, "warm")
    cold_artifact = job(cold, "cold", TFBRIDGE_ZYGOTE="0")
    for name in ("summary.md", "summary.json"):
        assert (warm_artifact / name).read_text() == (cold_artifact / name).read_text(), name
    for tf, artifact in ((warm, warm_artifact), (cold, cold_artifact)):  # show's JSON, attached or not
        assert comparable((artifact / "plan.json").read_text()) == comparable(
            tf.run("show", "-json", str(artifact / "plan.bin")).stdout
        )
