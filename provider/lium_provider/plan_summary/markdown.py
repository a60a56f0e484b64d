"""The summary as Markdown for a pull-request comment: a headline, a pod table per stack, details collapsed.

The headline says what the plan changes and by how much the hourly and monthly cost moves (with its
percentage), then the cost after apply and the worst case until Lium removes the pods. Each stack gets its
pod table; the per-resource changes sit in a collapsed ``<details>`` block, as in Atlantis' and
Infracost's comments. Every string from the plan or the feed is inside a code span (:func:`code`).
"""

from __future__ import annotations

from collections.abc import Sequence

from lium_provider.plan_summary.parsing import ResourceChange
from lium_provider.plan_summary.policies import PolicyResult, ended_text
from lium_provider.plan_summary.report import (
    HOURS_PER_MONTH,
    Bound,
    Cost,
    PodSpend,
    Report,
    Spend,
    StackReport,
    Total,
)
from lium_provider.plan_summary.values import code, usd

# GitHub refuses comments over 65,536 characters; leave room for what a workflow wraps around the summary.
MAX_MARKDOWN_CHARS = 60_000
_SECTIONS = (
    ("create", "Create"),
    ("update", "Update in place"),
    ("replace", "Replace"),
    ("destroy", "Destroy"),
    ("forget", "Forget (removed from state, left running)"),
)
_HEADLINE_VERBS = ("create", "update", "replace", "destroy")


def signed_usd(amount: float) -> str:
    """``+$0.39`` or ``-$0.39`` (a change, never ``$-0.39``)."""
    return ("-" if amount < 0 else "+") + usd(abs(amount))


def total_text(amount: Total) -> str:
    prefix = "at least " if amount.unknown else ""
    text = f"{prefix}{usd(amount.per_hour)}/h · {prefix}{usd(amount.per_month)}/month"
    return text + (" (estimate)" if amount.estimated else "")


def spend_text(spend: Spend) -> str:
    """The worst case of some pods: ``unbounded``, ``at least $X`` (some unknown) or ``$X``."""
    if not spend.bounded:
        return "unbounded"
    return ("at least " if spend.unknown else "") + usd(spend.usd)


# When the comment is too large even without the collapsed changes, the head (headline, what the plan
# ends, cost, every policy's verdict) keeps this many of its listed items per list.
HEAD_ITEMS_WHEN_CUT = 20


def render(report: Report, policies: Sequence[PolicyResult] = ()) -> str:
    """The Markdown of ``report``, with the verdicts of ``policies``, fitted to one comment.

    The head — the headline, the running work the plan ends, the cost and every policy's verdict — is
    always there; only the stacks' details are shortened: first the changed attributes, then the pod
    tables and change lists, cut outside any collapsed block with a line saying so.
    """
    head = _head(report, policies, None)
    if len(head) > MAX_MARKDOWN_CHARS // 2:
        head = _head(report, policies, HEAD_ITEMS_WHEN_CUT)
    for details in (True, False):
        markdown = head + "\n".join(_stacks(report, details=details, collapsed=True))
        if len(markdown) <= MAX_MARKDOWN_CHARS:
            return markdown
    body = _stacks(report, details=False, collapsed=False)
    budget = MAX_MARKDOWN_CHARS - len(head) - 300
    kept: list[str] = []
    for line in body:
        if budget < len(line) + 1:
            break
        budget -= len(line) + 1
        kept.append(line)
    note = (
        f"**Cut:** {len(body) - len(kept)} more lines of pod tables and changes do not fit in one comment "
        "(the job's `summary.json`, or `lium-tf plan-summary --format json`, has every one)."
    )
    return head + "\n".join([*kept, "", note, ""])


def _counts_text(counts: dict[str, int]) -> str:
    text = ", ".join(f"{counts[v]} to {v}" for v in _HEADLINE_VERBS)
    return text + (f", {counts['forget']} to forget" if counts["forget"] else "")


def _head(report: Report, policies: Sequence[PolicyResult], most: int | None) -> str:
    """The headline, the running work the plan ends, the cost and the policies' verdicts (each list
    shortened to ``most`` items when given)."""
    counts = {verb: sum(s.counts[verb] for s in report.stacks) for verb in report.stacks[0].counts}
    stacks = f"{len(report.stacks)} stacks, " if len(report.stacks) > 1 else ""
    lines = [f"### Lium plan: {stacks}{_counts_text(counts)}", ""]
    lines += _ended_lines(report, most)
    lines += _cost_lines(report.cost, [x for s in report.stacks for x in s.spends])
    if policies:
        lines += _render_policies(policies, most)
    return "\n".join(lines) + "\n"


def _ended_lines(report: Report, most: int | None) -> list[str]:
    """What a reviewer must see first, whatever the money says: the running pods and clusters the plan
    deletes (destroys or replaces), each with its uptime and its price per hour."""
    ends = report.ended
    if not ends:
        return []
    several = len(report.stacks) > 1
    lines = [
        f"**Ends running work: {len(ends)} pod{'s' if len(ends) != 1 else ''} or cluster{'s' if len(ends) != 1 else ''}**",
        "",
    ]
    for stack, ending in ends[:most]:
        where = f" in {code(stack.name)}" if several else ""
        lines.append(f"- {code(ending.pod.change.address)}{where}: {ended_text(ending)}")
    if most is not None and len(ends) > most:
        lines.append(f"- … and {len(ends) - most} more (`summary.json` lists every one)")
    return [*lines, ""]


def _stacks(report: Report, *, details: bool, collapsed: bool) -> list[str]:
    """Each stack's part: its counts and cost (when there are several), pod table and changes (in a
    collapsed block with ``collapsed``; left out without it, as when the comment is cut)."""
    several = len(report.stacks) > 1
    lines: list[str] = []
    for stack in report.stacks:
        if several:
            lines += [f"#### Stack {code(stack.name)}: {_counts_text(stack.counts)}", ""]
            lines += _cost_lines(stack.cost, stack.spends, headline=False)
        lines += _render_stack(stack, details, "#####" if several else "####", collapsed=collapsed)
    return lines


def _cost_lines(cost: Cost, spends: Sequence[PodSpend], *, headline: bool = True) -> list[str]:
    lines: list[str] = []
    if headline:
        percent = cost.change_percent
        relative = "new" if percent is None else f"{percent:+.1f}%"
        if not cost.change_per_hour and percent is None:
            relative = "no GPU cost"
        inexact = ""
        if cost.before.unknown or cost.after.unknown:
            inexact = " (some prices not known yet)"
        elif cost.after.estimated:
            inexact = " (some prices are estimates)"
        lines.append(
            f"**Change: {signed_usd(cost.change_per_hour)}/h ({relative}) · "
            f"{signed_usd(cost.change_per_hour * HOURS_PER_MONTH)}/month**{inexact}"
        )
        lines.append("")
    before = f"before: {usd(cost.before.per_hour)}/h{' + unknown' if cost.before.unknown else ''}"
    lines += [
        f"**GPU cost after apply: {total_text(cost.after)}** ({HOURS_PER_MONTH} h a month; {before})",
        "",
    ]
    if spends:
        unbounded = len(cost.spend.unbounded)
        why = (
            f" ({unbounded} pod{'s have' if unbounded != 1 else ' has'} no `termination_hours`)"
            if unbounded
            else ""
        )
        lines += [f"**Worst case until Lium removes the pods: {spend_text(cost.spend)}**{why}", ""]
    return lines


def _render_stack(stack: StackReport, details: bool, heading: str, *, collapsed: bool = True) -> list[str]:
    lines: list[str] = []
    if not any(stack.counts.values()):
        lines += ["No changes: the infrastructure matches the configuration.", ""]
    if stack.feed_error is not None:
        lines += [
            f"> **Warning:** prices of new pods are unknown: the nodes feed could not be read ({code(stack.feed_error)}).",
            "",
        ]
    lines += _render_pods(stack)
    changed = [c for c in stack.changes if c.action not in ("keep", "read")]
    if not changed or not collapsed:
        return lines
    lines += ["<details>", f"<summary>Changes ({len(changed)})</summary>", ""]
    for verb, title in _SECTIONS:
        selected = [c for c in stack.changes if c.action == verb]
        if selected:
            lines += [f"{heading} {title} ({len(selected)})", ""]
            lines += [line for c in selected for line in _render_change(c, details)]
            lines.append("")
    others = [c for c in changed if c.action not in stack.counts]
    if others:
        lines += [f"{heading} Other actions ({len(others)})", ""]
        lines += [f"- {c.label}: {code(c.action)}" for c in others]
        lines.append("")
    lines += ["</details>", ""]
    return lines


def _until_removal(spend: PodSpend | None) -> str:
    if spend is None:
        return "—"
    if spend.bound is Bound.UNBOUNDED:
        return "unbounded"
    if spend.bound is Bound.UNKNOWN or spend.termination_hours is None:
        return "? (hours known after apply)"
    amount = spend.usd
    return f"{'?' if amount is None else usd(amount)} ({spend.termination_hours:g} h)"


def _render_pods(stack: StackReport) -> list[str]:
    if not stack.pods:
        return ["No `lium_pod` or `lium_cluster` in this plan: no GPU cost.", ""]
    after = stack.cost.after
    lines: list[str] = []
    if after.unknown:
        lines += [
            f"{after.unknown} pod price{'s are' if after.unknown != 1 else ' is'} not known yet (see below).",
            "",
        ]
    lines += [
        "| Pod | Name | Action | GPU | GPUs | USD/h | Until removal | Price |",
        "| --- | --- | --- | --- | ---: | ---: | ---: | --- |",
    ]
    spends = {id(s.pod): s for s in stack.spends}
    for pod in stack.pods:
        shown = pod.price_after if pod.exists_after else pod.price_before
        price = "?" if shown is None else usd(shown)
        if pod.estimate and pod.exists_after:
            price += " (estimate)"
        if not pod.exists_after:
            price = f"~~{price}~~"
        basis = pod.basis
        if pod.change.action == "replace" and pod.price_before is not None:
            basis += f"; was {usd(pod.price_before)}/h"
        cells = [
            code(pod.change.address),
            code(pod.name),
            pod.change.action,
            code(pod.gpu),
            code(pod.gpu_count),
            price,
            _until_removal(spends.get(id(pod))),
            basis,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    return lines


def _render_change(change: ResourceChange, details: bool) -> list[str]:
    lines = [f"- {change.label}"]
    if not details or change.action not in ("update", "replace"):
        return lines
    # Replacing: the attributes that force it, those the configuration changed before those merely
    # re-chosen. Without such paths (a tainted object, -replace) every changed attribute is listed.
    forcing = sorted(dict.fromkeys(str(p[0]) for p in change.replace_paths if p), key=change.unknown)
    keys = forcing or change.changed_attributes()
    for key in keys:
        forces = " (forces replacement)" if key in forcing else ""
        lines.append(
            f"  - {code(key)}: {code(change.shown('before', key))} → {code(change.shown('after', key))}{forces}"
        )
    return lines


def _render_policies(results: Sequence[PolicyResult], most: int | None = None) -> list[str]:
    failed = sum(1 for r in results if not r.passed)
    verdict = f"{failed} of {len(results)} failed" if failed else "all passed"
    lines = [f"#### Policies: {verdict}", ""]
    for result in results:
        limit = "" if result.limit is None else f" {_limit_text(result)}"
        lines.append(f"- `{result.policy}`{limit}: {'passed' if result.passed else '**failed**'}")
        lines += [f"  - {violation}" for violation in result.violations[:most]]
        if most is not None and len(result.violations) > most:
            lines.append(f"  - … and {len(result.violations) - most} more (on the job's stderr)")
    lines.append("")
    return lines


def _limit_text(result: PolicyResult) -> str:
    """A policy's bound: a count for ``max-destroyed``, else an amount of USD."""
    limit = result.limit or 0
    return str(int(limit)) if result.policy == "max-destroyed" else usd(limit)
