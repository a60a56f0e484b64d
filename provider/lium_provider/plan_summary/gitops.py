"""``lium-tf gitops plan|apply``: a pull request's reviewed plan is what the merge applies, or nothing is.

``plan`` (the pull-request job) runs ``terraform init`` and ``terraform plan -out`` in a stack directory
(an HCL root module, or a synthesized CDK stack such as ``cdktf.out/stacks/<name>``), and writes an
*artifact* directory: the binary plan, ``terraform show -json`` of it, the summary as Markdown and JSON,
and a manifest naming the commit and a digest of the configuration as checked out.

``apply`` (the merge job) applies exactly that plan file, and refuses it when it is no longer what was
reviewed: the artifact is for another commit, the configuration differs from the one planned, or the
state changed since (Terraform itself refuses such a plan: "Saved plan is stale"). On a refusal it makes
a fresh plan for review in ``<artifact>/fresh`` and prints its summary, and exits
:data:`~lium_provider.plan_summary.gitops_contract.STALE_PLAN_EXIT_CODE`.

Terraform's own output goes to standard error, as it runs; standard output carries only the summary.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from lium_provider import PROVIDER_SOURCE
from lium_provider.plan_summary.gitops_contract import (
    DEFAULT_LOCK_TIMEOUT,
    FRESH_PLAN_DIR,
    MANIFEST_FILE,
    PLAN_FILE,
    PLAN_JSON_FILE,
    POLICY_EXIT_CODE,
    STALE_PLAN_EXIT_CODE,
    SUMMARY_JSON_FILE,
    SUMMARY_MARKDOWN_FILE,
    Policies,
)
from lium_provider.plan_summary.show import PlanShow
from lium_provider.plan_summary.warm_summary import Summarizer
from tfbridge.serving.warm import installed_provider

MANIFEST_VERSION = 1
# What a stack directory holds besides its configuration: Terraform's working data, the provider lock file
# `init` writes when none is committed (Terraform checks the plan's providers against it on apply anyway),
# local state, and saved plans (Atlantis keeps `<workspace>.tfplan` in the stack's directory).
_NOT_CONFIGURATION = (
    ".terraform",
    ".terraform.lock.hcl",
    "terraform.tfstate",
    "terraform.tfstate.backup",
    ".terraform.tfstate.lock.info",
)
_NOT_CONFIGURATION_SUFFIXES = (".tfplan",)
_STALE_PLAN_MARKER = "Saved plan is stale"


class GitopsError(RuntimeError):
    """A step failed (Terraform did); ``str()`` is one line for the job log."""


class Cancelled(GitopsError):
    """The job was sent SIGINT or SIGTERM while Terraform ran; Terraform has stopped, and so does the job."""


class ArtifactError(GitopsError):
    """The artifact to apply is missing or is not one ``gitops plan`` wrote."""


class Settings(NamedTuple):
    """What both commands need: where the stack is, the commit it is checked out at, Terraform's lock wait."""

    stack_dir: Path
    artifact_dir: Path
    commit: str
    lock_timeout: str = DEFAULT_LOCK_TIMEOUT
    nodes_feed_url: str | None = None
    not_configuration: tuple[Path, ...] = ()
    """More directories the configuration digest leaves out (a fresh plan's: the artifact it is in)."""

    def digest(self) -> str:
        """:func:`config_digest` of the stack, without the artifact (when it is inside the stack)."""
        return config_digest(self.stack_dir, (self.artifact_dir, *self.not_configuration))


def config_digest(stack_dir: Path, excluded: tuple[Path, ...] = ()) -> str:
    """SHA-256 over every configuration file under ``stack_dir`` (names and contents, in a stable order).

    Terraform's working data (``.terraform`` and the lock file ``init`` writes), local state, saved plans
    and the ``excluded`` directories (an artifact kept inside the stack) are not configuration: left out.
    """
    digest = hashlib.sha256()
    skipped = [e.resolve() for e in excluded]
    for path in sorted(p for p in stack_dir.rglob("*") if p.is_file()):
        relative = path.relative_to(stack_dir)
        if (
            any(part in _NOT_CONFIGURATION for part in relative.parts)
            or path.suffix in _NOT_CONFIGURATION_SUFFIXES
        ):
            continue
        if any(path.resolve().is_relative_to(e) for e in skipped):
            continue
        digest.update(relative.as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


# Terraform's closing hint after `plan -out`: a command that applies the plan, skipping the policies
# this job judges it by. `gitops plan` says instead how the plan may be applied, once it is judged.
_APPLY_HINT = "To perform exactly these actions, run the following command to apply:"


def _without_apply_hint() -> Callable[[str], bool]:
    """A filter of Terraform's output lines that drops its apply hint (the line and the command after it)."""
    dropping = False

    def shown(line: str) -> bool:
        nonlocal dropping
        if line.startswith(_APPLY_HINT):
            dropping = True
            return False
        if dropping and line.strip().startswith("terraform apply"):
            dropping = False
            return False
        return True

    return shown


def terraform(
    stack_dir: Path,
    *args: str,
    started: Callable[[], None] | None = None,
    shown: Callable[[str], bool] | None = None,
) -> tuple[int, str]:
    """Run ``terraform args`` in ``stack_dir``, its output copied to our stderr as it comes; (code, output).

    Terraform runs in a process group of its own, and SIGINT and SIGTERM sent to this process are
    passed on to it, each as received: a cancelled CI job (a signal to the job's process, or to its
    whole group) reaches Terraform once per signal, which then stops as it does on its own (the state
    lock released, what it applied recorded; a second Ctrl-C still abandons it at once). Once it has
    exited, the job stops too (:class:`Cancelled`), whatever Terraform's exit status. ``started`` is
    called once Terraform runs: what the job starts there gets ready while Terraform works. ``shown``
    picks the lines copied to stderr (all of them are returned).
    """
    try:
        process = subprocess.Popen(
            ["terraform", *args],
            cwd=stack_dir,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            process_group=0,
        )
    except OSError as exc:
        raise GitopsError(f"cannot run terraform: {exc.strerror or type(exc).__name__}") from None
    assert process.stdout is not None
    lines = []
    received: list[int] = []

    def pass_on(number: int, frame: object) -> None:
        received.append(number)
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(number)

    previous = {number: signal.signal(number, pass_on) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        with process:  # on an error, its output closes and it is waited for: never left behind
            if started is not None:
                started()
            for line in process.stdout:
                if shown is None or shown(line):
                    sys.stderr.write(line)
                lines.append(line)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    if received:
        raise Cancelled(f"cancelled by {signal.Signals(received[0]).name} during terraform {args[0]}")
    return process.returncode, "".join(lines)


def _terraform_checked(
    stack_dir: Path,
    *args: str,
    started: Callable[[], None] | None = None,
    shown: Callable[[str], bool] | None = None,
) -> str:
    code, output = terraform(stack_dir, *args, started=started, shown=shown)
    if code != 0:
        raise GitopsError(f"terraform {args[0]} failed (exit {code}); its output is above")
    return output


def _init(settings: Settings) -> None:
    _terraform_checked(settings.stack_dir, "init", "-input=false", "-no-color")


def plan(settings: Settings, policies: Policies) -> int:
    """The pull-request step: plan into the artifact, summarise it, judge the policies.

    Prints the Markdown summary and returns 0, or :data:`POLICY_EXIT_CODE` after printing each violation.
    """
    artifact = settings.artifact_dir
    artifact.mkdir(parents=True, exist_ok=True)
    # An older manifest goes first: if this plan fails half-way, the artifact is no longer applicable.
    (artifact / MANIFEST_FILE).unlink(missing_ok=True)
    digest = settings.digest()
    _init(settings)
    plan_file = artifact.resolve() / PLAN_FILE
    show = PlanShow(settings.stack_dir)
    summarizer = Summarizer(settings.nodes_feed_url)

    def get_ready() -> None:  # both, from the provider `init` installed, while Terraform plans
        provider = installed_provider(settings.stack_dir, PROVIDER_SOURCE, os.environ)
        show.start(provider)
        summarizer.start(provider)

    try:
        _terraform_checked(
            settings.stack_dir,
            "plan",
            "-input=false",
            "-no-color",
            f"-lock-timeout={settings.lock_timeout}",
            f"-out={plan_file}",
            started=get_ready,
            shown=_without_apply_hint(),
        )
        code, plan_json = show.json(plan_file)
        if code != 0:
            raise GitopsError(f"terraform show -json failed (exit {code})")
        (artifact / PLAN_JSON_FILE).write_text(plan_json, encoding="utf-8")
        stack_name = settings.stack_dir.resolve().name  # `--dir .` names the directory, not ""
        summary = summarizer.summaries(stack_name, artifact / PLAN_JSON_FILE, policies)
    finally:
        show.close()
        summarizer.close()
    (artifact / SUMMARY_MARKDOWN_FILE).write_text(summary.markdown, encoding="utf-8")
    (artifact / SUMMARY_JSON_FILE).write_text(summary.json, encoding="utf-8")
    manifest = {
        "manifest_version": MANIFEST_VERSION,
        "commit": settings.commit,
        "config_sha256": digest,
        "policies": policies._asdict(),
        "policies_passed": not summary.failed,
    }
    (artifact / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    sys.stdout.write(summary.markdown)
    for violation in summary.violations:
        print(f"lium-tf gitops plan: policy violated: {violation}", file=sys.stderr)
    if summary.failed:
        print(
            f"lium-tf gitops plan: the plan in {artifact} violates the policies above; "
            "`lium-tf gitops apply` refuses it.",
            file=sys.stderr,
        )
        return POLICY_EXIT_CODE
    print(
        f"lium-tf gitops plan: apply exactly this plan with `lium-tf gitops apply --artifact {artifact} "
        f"--commit {settings.commit}` once it is reviewed.",
        file=sys.stderr,
    )
    return 0


def read_manifest(artifact: Path) -> dict[str, Any]:
    """The artifact's manifest; GitopsError when it is missing or not one of ours."""
    path = artifact / MANIFEST_FILE
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ArtifactError(
            f"no reviewed plan: {path} does not exist (run `lium-tf gitops plan` first)"
        ) from None
    except (OSError, ValueError) as exc:
        raise ArtifactError(f"cannot read {path}: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("manifest_version") != MANIFEST_VERSION:
        raise ArtifactError(f"{path} is not a lium-tf gitops manifest of version {MANIFEST_VERSION}")
    policies = manifest.get("policies")
    if not isinstance(policies, dict) or not set(policies) <= set(Policies._fields):
        raise ArtifactError(f"{path} does not say which policies the plan was reviewed under")
    if not (artifact / PLAN_FILE).is_file():
        raise ArtifactError(f"no reviewed plan: {artifact / PLAN_FILE} does not exist")
    return manifest


def stale_reason(settings: Settings, manifest: dict[str, Any]) -> str | None:
    """Why the artifact's plan is not for this checkout (another commit, another configuration), or None."""
    planned = str(manifest.get("commit"))
    if planned != settings.commit:
        return f"the reviewed plan is of commit {planned[:12]}, not of {settings.commit[:12]}"
    if manifest.get("config_sha256") != settings.digest():
        return "the configuration changed since the plan was reviewed"
    return None


def apply(settings: Settings) -> int:
    """The merge step: apply the reviewed plan file, or refuse it and plan afresh for review.

    Returns 0 when applied, :data:`STALE_PLAN_EXIT_CODE` when refused as stale (after the fresh plan's
    summary), :data:`POLICY_EXIT_CODE` when the plan violated a policy at review.
    """
    manifest = read_manifest(settings.artifact_dir)
    if manifest.get("policies_passed") is not True:
        print(
            "lium-tf gitops apply: refused: the reviewed plan violated a policy (see its summary.md). "
            "Nothing was applied.",
            file=sys.stderr,
        )
        return POLICY_EXIT_CODE
    reason = stale_reason(settings, manifest)
    if reason is None:
        _init(settings)
        plan_file = settings.artifact_dir.resolve() / PLAN_FILE
        code, output = terraform(
            settings.stack_dir,
            "apply",
            "-input=false",
            "-no-color",
            f"-lock-timeout={settings.lock_timeout}",
            str(plan_file),
        )
        if code == 0:
            return 0
        if _STALE_PLAN_MARKER not in output:
            raise GitopsError(f"terraform apply failed (exit {code}); its output is above")
        reason = "the state changed since the plan was reviewed (another apply ran)"
    return _refuse(settings, reason, Policies(**manifest["policies"]))


def _refuse(settings: Settings, reason: str, policies: Policies) -> int:
    """Say why nothing was applied, and plan afresh for review under the reviewed plan's policies."""
    fresh = settings.artifact_dir / FRESH_PLAN_DIR
    print(f"lium-tf gitops apply: refused: {reason}. Nothing was applied.", file=sys.stderr)
    print(
        f"lium-tf gitops apply: a fresh plan of {settings.commit[:12]} for review is in {fresh}:",
        file=sys.stderr,
    )
    fresh_settings = settings._replace(
        artifact_dir=fresh, not_configuration=(settings.artifact_dir, *settings.not_configuration)
    )
    plan(fresh_settings, policies)
    print(
        f"lium-tf gitops apply: review it, then apply it with `lium-tf gitops apply --artifact {fresh} "
        f"--commit {settings.commit}`",
        file=sys.stderr,
    )
    return STALE_PLAN_EXIT_CODE
