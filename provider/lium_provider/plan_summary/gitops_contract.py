"""What pipelines rely on from ``lium-tf plan-summary`` and ``lium-tf gitops``: formats, exit codes, files.

Kept in a module of its own, importing nothing of the project, so that the command line can name them
without loading the summary's pricing code; and no ``dataclasses`` (~5 ms with ``inspect``): the
pull-request job imports this before ``terraform init``, and its start is on the job's path.
"""

from __future__ import annotations

from typing import Any, NamedTuple

FORMATS = ("markdown", "json")
"""``plan-summary --format`` values."""

DEFAULT_LOCK_TIMEOUT = "15m"
"""How long ``gitops`` lets Terraform wait for another run's state lock."""

PLAN_ERROR_EXIT_CODE = 1
"""The input is not a readable plan, or Terraform failed."""
USAGE_EXIT_CODE = 2
"""A missing or unreadable artifact or setting (argparse uses 2 for bad flags too)."""
POLICY_EXIT_CODE = 3
"""A policy was violated; the summary was still printed."""
STALE_PLAN_EXIT_CODE = 4
"""``gitops apply`` refused a plan that is not what would be applied now; a fresh plan was made instead."""

PLAN_FILE = "plan.bin"
PLAN_JSON_FILE = "plan.json"
SUMMARY_MARKDOWN_FILE = "summary.md"
SUMMARY_JSON_FILE = "summary.json"
MANIFEST_FILE = "manifest.json"
FRESH_PLAN_DIR = "fresh"
"""Where ``gitops apply`` puts the fresh plan it makes when it refuses a stale one (inside the artifact)."""


class Policies(NamedTuple):
    """The policies asked for (the ``--max-*`` flags); None (or False) leaves a policy out. Amounts are USD.
    ``max_destroyed`` counts the running pods and clusters a plan deletes; ``forbid_destroy`` allows none."""

    max_hourly_increase: float | None = None
    max_hourly_total: float | None = None
    max_spend: float | None = None
    require_termination_hours: bool = False
    strict_prices: bool = False
    forbid_destroy: bool = False
    max_destroyed: int | None = None
    within_key_budget: dict[str, Any] | None = None
    """The facts of the key that will apply (:func:`~lium_provider.plan_summary.key_budget.read_key_budgets`),
    read once where the command runs; None leaves the policy out."""
