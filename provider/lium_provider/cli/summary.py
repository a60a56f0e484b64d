"""The ``plan-summary`` and ``gitops`` subcommands of ``lium-tf``: their flags and handlers.

Importing this module is cheap: the summary's pricing code (and the provider it imports) loads only when
one of these commands runs, so ``lium-tf install`` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from lium_provider.plan_summary.gitops_contract import (
    DEFAULT_LOCK_TIMEOUT,
    FORMATS,
    PLAN_ERROR_EXIT_CODE,
    POLICY_EXIT_CODE,
    STALE_PLAN_EXIT_CODE,
    USAGE_EXIT_CODE,
)

if TYPE_CHECKING:
    from lium_provider.plan_summary import Policies


def usd_amount(text: str) -> float:
    """An argparse type: a non-negative, finite amount of US dollars (``1.5`` or ``$1.5``)."""
    try:
        amount = float(text.removeprefix("$"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an amount of USD: {text!r}") from None
    if not 0 <= amount < float("inf"):
        raise argparse.ArgumentTypeError(f"an amount of USD must be 0 or more: {text!r}")
    return amount


def count_of_objects(text: str) -> int:
    """An argparse type: a whole number of objects, 0 or more."""
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if count < 0:
        raise argparse.ArgumentTypeError(f"a number of objects must be 0 or more: {text!r}")
    return count


def policies_from(args: argparse.Namespace) -> Policies:
    """The policies the ``--max-*``, ``--require-termination-hours`` and ``--forbid-destroy`` flags ask for."""
    from lium_provider.plan_summary import Policies
    from lium_provider.plan_summary.key_budget import read_key_budgets

    return Policies(
        max_hourly_increase=args.max_hourly_increase,
        max_hourly_total=args.max_hourly_total,
        max_spend=args.max_spend,
        require_termination_hours=args.require_termination_hours,
        strict_prices=args.strict_prices,
        forbid_destroy=args.forbid_destroy,
        max_destroyed=args.max_destroyed,
        within_key_budget=read_key_budgets() if args.within_key_budget else None,
    )


def cmd_plan_summary(args: argparse.Namespace) -> int:
    from lium_provider.plan_summary import PlanError, main_summary

    try:
        summary = main_summary(args.plan_json, args.nodes_feed_url, policies_from(args), args.format)
    except PlanError as exc:
        print(f"lium-tf plan-summary: {exc}", file=sys.stderr)
        return PLAN_ERROR_EXIT_CODE
    sys.stdout.write(summary.text)
    for violation in summary.violations:
        print(f"lium-tf plan-summary: policy violated: {violation}", file=sys.stderr)
    return POLICY_EXIT_CODE if summary.failed else 0


def cmd_gitops(args: argparse.Namespace) -> int:
    from lium_provider.plan_summary import PlanError, gitops

    settings = gitops.Settings(
        stack_dir=Path(args.dir),
        artifact_dir=Path(args.artifact),
        commit=args.commit,
        lock_timeout=args.lock_timeout,
        nodes_feed_url=args.nodes_feed_url,
    )
    if not settings.stack_dir.is_dir():
        print(f"lium-tf gitops {args.step}: --dir {args.dir!r} is not a directory", file=sys.stderr)
        return USAGE_EXIT_CODE
    try:
        if args.step == "plan":
            return gitops.plan(settings, policies_from(args))
        return gitops.apply(settings)
    except gitops.ArtifactError as exc:
        print(f"lium-tf gitops {args.step}: {exc}", file=sys.stderr)
        return USAGE_EXIT_CODE
    except (gitops.GitopsError, PlanError) as exc:
        print(f"lium-tf gitops {args.step}: {exc}", file=sys.stderr)
        return PLAN_ERROR_EXIT_CODE


def add_summary_options(parser: argparse.ArgumentParser) -> None:
    """The feed and policy flags, shared by ``plan-summary`` and ``gitops plan``."""
    parser.add_argument(
        "--nodes-feed-url",
        help="Lium nodes feed for prices (default: env LIUM_NODES_FEED_URL, else <LIUM_API_URL>/public/v1/nodes, "
        "else lium.io's public feed)",
    )
    policies = parser.add_argument_group(
        "policies",
        f"a violated policy exits {POLICY_EXIT_CODE} after the summary, one line per violation on stderr",
    )
    policies.add_argument(
        "--max-hourly-increase", type=usd_amount, metavar="USD", help="most the plans may add per hour"
    )
    policies.add_argument(
        "--max-hourly-total",
        type=usd_amount,
        metavar="USD",
        help="most the pods may cost per hour after apply",
    )
    policies.add_argument(
        "--max-spend",
        type=usd_amount,
        metavar="USD",
        help="most the pods may cost until Lium removes them (price times termination_hours; a pod without "
        "termination_hours is unbounded and violates it)",
    )
    policies.add_argument(
        "--strict-prices",
        action="store_true",
        help="the --max-* policies refuse an estimated price (a pod whose gpu or other filter field is "
        "chosen at apply) instead of checking the estimate",
    )
    policies.add_argument(
        "--require-termination-hours",
        action="store_true",
        help="every pod after apply must have termination_hours (one not known at plan fails too)",
    )
    policies.add_argument(
        "--forbid-destroy",
        action="store_true",
        help="the plans may end no running pod or cluster (destroy or replace it); a `removed` block "
        "that keeps it running is not a destroy",
    )
    policies.add_argument(
        "--within-key-budget",
        action="store_true",
        help="the key that will apply the plans (LIUM_API_KEY) can afford them in each of its budget windows: "
        "what the pods can cost in the window against what is left, read with LIUM_SESSION_TOKEN (without "
        "one, or a key it cannot read, the policy fails saying it cannot know)",
    )
    policies.add_argument(
        "--max-destroyed",
        type=count_of_objects,
        metavar="N",
        help="the plans may end at most N running pods and clusters (destroy or replace them)",
    )


def _add_gitops_step(
    steps: argparse._SubParsersAction[argparse.ArgumentParser], step: str, text: str
) -> argparse.ArgumentParser:
    parser = steps.add_parser(step, help=text, description=text)
    parser.add_argument(
        "--dir", default=".", help="the stack: an HCL root module or a synthesized CDK stack (default: .)"
    )
    parser.add_argument(
        "--artifact", required=True, help="the plan artifact directory (keep it outside --dir)"
    )
    parser.add_argument("--commit", required=True, help="the commit the stack is checked out at")
    parser.add_argument(
        "--lock-timeout",
        default=DEFAULT_LOCK_TIMEOUT,
        help=f"Terraform's state-lock wait (default: {DEFAULT_LOCK_TIMEOUT})",
    )
    parser.set_defaults(handler=cmd_gitops, step=step)
    return parser


def add_summary_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``plan-summary`` and ``gitops`` to ``lium-tf``'s subcommands."""
    summary = commands.add_parser(
        "plan-summary",
        help="summarise `terraform show -json <planfile>` as Markdown or JSON: changes, GPU cost, policies",
        description="Print a summary of saved plans for a pull-request comment (Markdown) or for other tools "
        "(JSON, see docs/plan-summary.md): what is created, updated, replaced and destroyed, each pod's GPU, "
        "count and price per hour now, the change in cost, and the worst case until Lium removes the pods. "
        "Several plan files give one table per stack.",
    )
    summary.add_argument(
        "plan_json", metavar="PLAN_JSON", nargs="+", help="output of `terraform show -json`; - reads stdin"
    )
    summary.add_argument(
        "--format", choices=FORMATS, default=FORMATS[0], help="output format (default: markdown)"
    )
    add_summary_options(summary)
    summary.set_defaults(handler=cmd_plan_summary)

    gitops = commands.add_parser(
        "gitops",
        help="the pull-request and merge steps of a pipeline: plan into an artifact, apply exactly that plan",
        description="`plan` (pull request): terraform init and plan -out into --artifact, with the summary "
        "(Markdown on stdout, summary.md, summary.json) and a manifest of the commit and configuration. "
        "`apply` (merge): apply that plan file; a plan of another commit, of another configuration or of "
        f"an older state is refused (exit {STALE_PLAN_EXIT_CODE}) and a fresh plan for review is made in "
        "<artifact>/fresh.",
    )
    steps = gitops.add_subparsers(dest="step", required=True, help="the pipeline step to run")
    add_summary_options(_add_gitops_step(steps, "plan", "plan the stack into the artifact and summarise it"))
    apply = _add_gitops_step(steps, "apply", "apply the artifact's reviewed plan, or refuse a stale one")
    apply.add_argument(
        "--nodes-feed-url", help="Lium nodes feed for the fresh plan's prices when a stale plan is refused"
    )
