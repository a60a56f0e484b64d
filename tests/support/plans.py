"""Saved plans read back as resource changes: ``terraform plan -out``, then ``terraform show -json``.

The changes are parsed by the provider's own plan reader (:func:`lium_provider.plan_summary.parse_plan`),
whose ``action`` verbs are ``keep`` (Terraform's ``no-op``), ``update``, ``replace`` (``delete``+``create``
in either order), ``create`` and ``destroy``.
"""

from __future__ import annotations

from dataclasses import dataclass

from lium_provider.plan_summary import ResourceChange, parse_plan
from tests.chaos.audit import CRASH_MARKERS
from tests.support.terraform import Terraform

PLAN_FILE = "saved.tfplan"
# What Terraform says when a provider broke the protocol rather than refusing with a diagnostic of its own:
# a plan it found invalid, a result inconsistent with the plan, a provider process that died mid-call.
PROTOCOL_ERRORS = (
    "Provider produced invalid",
    "Provider produced inconsistent",
    "Plugin did not respond",
    "The plugin encountered an error",
)


@dataclass(frozen=True)
class SavedPlan:
    """One ``terraform plan -out`` run: its exit status and output, and its changes when it succeeded."""

    returncode: int
    stdout: str
    stderr: str
    changes: dict[str, ResourceChange]
    """Managed resource changes by address; empty when the plan failed."""

    @property
    def crashes(self) -> list[str]:
        """The crash markers (the chaos audit's, and :data:`PROTOCOL_ERRORS`) in the plan's output."""
        output = self.stdout + self.stderr
        return [marker for marker in (*CRASH_MARKERS, *PROTOCOL_ERRORS) if marker in output]

    @property
    def errors(self) -> str:
        """Terraform's error diagnostics (its stderr), or a note that there were none."""
        return self.stderr.strip() or "(no error output)"


def saved_plan(tf: Terraform, *args: str) -> SavedPlan:
    """Plan into a file and read it back with ``terraform show -json``; a failed plan is returned, not raised."""
    result = tf.run("plan", "-input=false", "-no-color", f"-out={PLAN_FILE}", *args, check=False)
    if result.returncode != 0:
        return SavedPlan(result.returncode, result.stdout, result.stderr, {})
    changes = parse_plan(tf.run("show", "-json", "-no-color", PLAN_FILE).stdout)
    return SavedPlan(0, result.stdout, result.stderr, {c.address: c for c in changes})
