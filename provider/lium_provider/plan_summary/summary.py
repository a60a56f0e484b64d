"""The summary itself: read plans, price them, judge the policies, render Markdown or JSON."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from lium_provider.plan_summary import json_format, markdown
from lium_provider.plan_summary.gitops_contract import Policies
from lium_provider.plan_summary.parsing import PlanError, read_source
from lium_provider.plan_summary.policies import PolicyResult, check
from lium_provider.plan_summary.pricing import OfferBook
from lium_provider.plan_summary.report import Report, report_stack


@dataclass(frozen=True)
class Summary:
    """A rendered summary and the policy verdicts behind it (``failed``: a pipeline should stop)."""

    text: str
    results: tuple[PolicyResult, ...]

    @property
    def violations(self) -> list[str]:
        return [v for r in self.results for v in r.violations]

    @property
    def failed(self) -> bool:
        return bool(self.violations)


def stack_name(source: str) -> str:
    """A stack's name in the summary: the plan file's path as given (``-`` is standard input)."""
    return "stdin" if source == "-" else source


def judge(
    plans: Sequence[tuple[str, str]], book: OfferBook, policies: Policies
) -> tuple[Report, tuple[PolicyResult, ...]]:
    """Report ``(stack name, plan JSON text)`` pairs and judge them; PlanError names an unreadable stack."""
    stacks = []
    for name, text in plans:
        try:
            stacks.append(report_stack(name, text, book))
        except PlanError as exc:
            raise PlanError(f"{name}: {exc}" if len(plans) > 1 else str(exc)) from None
    report = Report(tuple(stacks))
    return report, tuple(check(report, policies))


def render(report: Report, results: tuple[PolicyResult, ...], output_format: str) -> Summary:
    """``report`` and its verdicts in ``output_format`` (one of :data:`FORMATS`)."""
    renderer = json_format.render if output_format == "json" else markdown.render
    return Summary(renderer(report, results), results)


def build_summary(
    plans: Sequence[tuple[str, str]], book: OfferBook, policies: Policies, output_format: str
) -> Summary:
    """:func:`judge` then :func:`render`."""
    return render(*judge(plans, book, policies), output_format)


def summarize(text: str, book: OfferBook) -> str:
    """The Markdown summary of one plan JSON ``text``, priced with ``book``; PlanError if it is not a plan."""
    return build_summary([("plan", text)], book, Policies(), "markdown").text


def main_summary(
    sources: str | Sequence[str],
    feed_flag: str | None,
    policies: Policies | None = None,
    output_format: str = "markdown",
) -> Summary:
    """Everything ``lium-tf plan-summary`` does: read each source, price with the resolved feed, judge, render."""
    names = [sources] if isinstance(sources, str) else list(sources)
    plans = [(stack_name(source), read_source(source)) for source in names]
    book = OfferBook.for_environment(feed_flag, os.environ)
    return build_summary(plans, book, policies or Policies(), output_format)
