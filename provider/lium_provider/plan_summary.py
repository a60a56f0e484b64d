"""``lium-tf plan-summary``: a saved Terraform plan as Markdown for a pull-request comment.

Input is ``terraform show -json <planfile>`` (Terraform's plan representation, format 1.x). The summary
says what the plan creates, updates, replaces and destroys (every resource type, by address), and what the
stack's GPU pods cost: a pod that is kept costs its known ``price_per_hour``; a pod that will be rented
costs what Lium asks *now* (the chosen executor's offer, or the cheapest offer matching the pod's filter,
found in the public nodes feed exactly as ``lium_pod`` chooses at apply time).

Values are shown only where the plan says they are neither sensitive (``before_sensitive`` /
``after_sensitive``) nor unknown (``after_unknown``, shown as "(known after apply)"). Every string that
came from the plan or the feed is shown inside a code span, so it cannot inject Markdown into the comment.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lium_provider.api.errors import LiumError
from lium_provider.api.offers import Offer, find_offers, matches
from lium_provider.endpoints import DEFAULT_ENDPOINT, feed_url_for
from lium_provider.offer_filter import OfferFilter

HOURS_PER_MONTH = 730
POD_TYPE = "lium_pod"
UNKNOWN_TEXT = "(known after apply)"
SENSITIVE_TEXT = "(sensitive value)"
# GitHub refuses comments over 65,536 characters; leave room for what a workflow wraps around the summary.
MAX_MARKDOWN_CHARS = 60_000
MAX_VALUE_CHARS = 120

# Terraform's action lists (json-format "change representation") → the verb this summary uses.
_ACTIONS: dict[tuple[str, ...], str] = {
    ("create",): "create",
    ("update",): "update",
    ("delete", "create"): "replace",
    ("create", "delete"): "replace",
    ("delete",): "destroy",
    ("no-op",): "keep",
    ("read",): "read",
    ("forget",): "forget",
}
# The action reasons worth a word in a review (json-format lists more; unknown ones are ignored).
_REASONS = {
    "replace_because_tainted": "tainted",
    "replace_by_request": "replacement requested",
    "delete_because_no_resource_config": "no longer in the configuration",
}
_SECTIONS = (
    ("create", "Create"),
    ("update", "Update in place"),
    ("replace", "Replace"),
    ("destroy", "Destroy"),
    ("forget", "Forget (removed from state, left running)"),
)


class PlanError(ValueError):
    """The input is not a readable Terraform plan; ``str()`` is one line and never quotes the input."""


@dataclass(frozen=True)
class ResourceChange:
    """One entry of ``resource_changes``: a managed resource instance and what the plan does to it."""

    address: str
    type: str
    actions: tuple[str, ...]
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    after_unknown: Any
    before_sensitive: Any
    after_sensitive: Any
    replace_paths: tuple[tuple[str | int, ...], ...]
    deposed: str | None = None
    importing: bool = False
    reason: str | None = None  # Terraform's ``action_reason``, a display hint

    @property
    def action(self) -> str:
        """``create``, ``update``, ``replace``, ``destroy``, ``keep``, ``read``, ``forget``, or the raw list."""
        return _ACTIONS.get(self.actions, "+".join(self.actions))

    @property
    def label(self) -> str:
        extra = [f"deposed object {self.deposed}"] if self.deposed else []
        extra += ["imported"] if self.importing else []
        extra += [_REASONS[self.reason]] if self.reason in _REASONS else []
        return code(self.address) + (f" ({', '.join(extra)})" if extra else "")

    def value(self, side: str, key: str) -> Any:
        """Attribute ``key`` of ``before`` or ``after`` as the plan has it (None when absent or unknown)."""
        values = self.before if side == "before" else self.after
        return values.get(key) if isinstance(values, dict) else None

    def unknown(self, key: str) -> bool:
        """True when (part of) attribute ``key`` of ``after`` is only known after apply."""
        return _any_true(_child(self.after_unknown, key))

    def sensitive(self, side: str, key: str) -> bool:
        """True when (part of) attribute ``key`` of that side is sensitive."""
        return _any_true(_child(self.before_sensitive if side == "before" else self.after_sensitive, key))

    def shown(self, side: str, key: str) -> str:
        """Attribute ``key`` rendered with its sensitive and unknown parts masked."""
        sensitive = _child(self.before_sensitive if side == "before" else self.after_sensitive, key)
        unknown = _child(self.after_unknown, key) if side == "after" else None
        return render_value(self.value(side, key), sensitive, unknown)

    def text(self, side: str, key: str) -> str:
        """Like :meth:`shown`, but a plain string value is shown as is, without quotes."""
        value = self.value(side, key)
        if (
            isinstance(value, str)
            and not self.sensitive(side, key)
            and not (side == "after" and self.unknown(key))
        ):
            return value
        return self.shown(side, key)

    def changed_attributes(self) -> list[str]:
        """Top-level attributes whose value differs or becomes unknown, in the plan's key order."""
        before = self.before or {}
        after = self.after or {}
        unknown = self.after_unknown if isinstance(self.after_unknown, dict) else {}
        keys = list(dict.fromkeys([*before, *after, *unknown]))
        return [k for k in keys if before.get(k) != after.get(k) or self.unknown(k)]


def _child(marks: Any, key: str | int) -> Any:
    """The part of a ``*_sensitive`` / ``after_unknown`` mark structure under ``key`` (``True`` = all of it)."""
    if marks is True:
        return True
    if isinstance(marks, dict):
        return marks.get(key)
    if isinstance(marks, list) and isinstance(key, int) and 0 <= key < len(marks):
        return marks[key]
    return None


def _any_true(marks: Any) -> bool:
    if marks is True:
        return True
    if isinstance(marks, dict):
        return any(_any_true(v) for v in marks.values())
    if isinstance(marks, list):
        return any(_any_true(v) for v in marks)
    return False


def render_value(value: Any, sensitive: Any = None, unknown: Any = None) -> str:
    """A compact, HCL-like rendering of ``value`` with sensitive and unknown leaves replaced by markers."""
    if sensitive is True:
        return SENSITIVE_TEXT
    if unknown is True:
        return UNKNOWN_TEXT
    if isinstance(value, dict):
        keys = list(dict.fromkeys([*value, *(unknown if isinstance(unknown, dict) else {})]))
        items = (
            f"{json.dumps(k, ensure_ascii=False)} = {render_value(value.get(k), _child(sensitive, k), _child(unknown, k))}"
            for k in keys
        )
        return "{" + ", ".join(items) + "}"
    if isinstance(value, list):
        length = max(len(value), len(unknown) if isinstance(unknown, list) else 0)
        parts = (
            render_value(value[i] if i < len(value) else None, _child(sensitive, i), _child(unknown, i))
            for i in range(length)
        )
        return "[" + ", ".join(parts) + "]"
    return json.dumps(value, ensure_ascii=False)


def code(text: str) -> str:
    """``text`` as a Markdown code span that nothing inside it can close, table-safe and on one line."""
    text = " ".join(text.splitlines()).replace("|", "\\|")
    if len(text) > MAX_VALUE_CHARS:
        text = text[: MAX_VALUE_CHARS - 1] + "…"
    longest, run = 0, 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    padded = f" {text} " if text.startswith("`") or text.endswith("`") or not text.strip() else text
    return f"{fence}{padded}{fence}"


# -- reading the plan ----------------------------------------------------------------------------------


def read_source(source: str) -> str:
    """The text of ``source``: a file path, or ``-`` for standard input."""
    try:
        if source == "-":
            return sys.stdin.read()
        return Path(source).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise PlanError(f"{_where(source)} is not UTF-8 text") from None
    except OSError as exc:
        raise PlanError(f"cannot read {_where(source)}: {exc.strerror or type(exc).__name__}") from None


def _where(source: str) -> str:
    return "standard input" if source == "-" else repr(source)


def parse_plan(text: str) -> list[ResourceChange]:
    """The managed-resource changes of a ``terraform show -json`` plan (data sources are reads, not changes)."""
    try:
        plan = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlanError(f"not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    if not isinstance(plan, dict) or "format_version" not in plan:
        raise PlanError(
            "not a Terraform JSON document: expected the output of `terraform show -json <planfile>`"
        )
    version = str(plan["format_version"])
    if version.split(".", 1)[0] != "1":
        raise PlanError(f"unsupported plan format_version {version[:20]!r}: this reads format 1.x")
    if "planned_values" not in plan and "resource_changes" not in plan:
        raise PlanError(
            "this is a state, not a plan: run `terraform show -json` on a file saved by `plan -out`"
        )
    entries = plan.get("resource_changes") or []
    if not isinstance(entries, list):
        raise PlanError('"resource_changes" is not a list')
    changes = [_resource_change(i, entry) for i, entry in enumerate(entries)]
    return [c for c in changes if c is not None]


def _resource_change(index: int, entry: Any) -> ResourceChange | None:
    where = f"resource_changes[{index}]"
    if not isinstance(entry, dict) or not isinstance(entry.get("change"), dict):
        raise PlanError(f"{where} is not an object with a change")
    if entry.get("mode", "managed") != "managed":
        return None
    change = entry["change"]
    address, type_name, actions = entry.get("address"), entry.get("type"), change.get("actions")
    if not isinstance(address, str) or not isinstance(type_name, str):
        raise PlanError(f"{where} has no address or type")
    if not isinstance(actions, list) or not actions or not all(isinstance(a, str) for a in actions):
        raise PlanError(f"{where}.change.actions is not a list of action names")
    before, after = change.get("before"), change.get("after")
    if not isinstance(before, dict | None) or not isinstance(after, dict | None):
        raise PlanError(f"{where}.change.before/after are not objects")
    paths = change.get("replace_paths") or []
    if not isinstance(paths, list) or not all(isinstance(p, list) for p in paths):
        raise PlanError(f"{where}.change.replace_paths is not a list of paths")
    deposed, reason = entry.get("deposed"), entry.get("action_reason")
    return ResourceChange(
        address=address,
        type=type_name,
        actions=tuple(actions),
        before=before,
        after=after,
        after_unknown=change.get("after_unknown"),
        before_sensitive=change.get("before_sensitive"),
        after_sensitive=change.get("after_sensitive"),
        replace_paths=tuple(tuple(p) for p in paths),
        deposed=deposed if isinstance(deposed, str) else None,
        importing=bool(change.get("importing")),
        reason=reason if isinstance(reason, str) else None,
    )


# -- pricing pods ----------------------------------------------------------------------------------------


def resolve_feed_url(flag: str | None, environ: Mapping[str, str]) -> str:
    """``--nodes-feed-url``, else ``LIUM_NODES_FEED_URL``, else the feed of ``LIUM_API_URL`` (the provider's rule)."""
    return feed_url_for(
        environ.get("LIUM_API_URL") or DEFAULT_ENDPOINT, flag or environ.get("LIUM_NODES_FEED_URL")
    )


@dataclass
class OfferBook:
    """Offers from the nodes feed, fetched at most once per GPU count; a failed fetch is remembered."""

    feed_url: str
    error: str | None = None
    _by_count: dict[int, list[Offer]] = field(default_factory=dict)

    def offers(self, gpu_count: int) -> list[Offer] | None:
        """Every offer of ``gpu_count`` GPUs, cheapest first; None when the feed cannot be read."""
        if self.error is not None:
            return None
        if gpu_count not in self._by_count:
            try:
                self._by_count[gpu_count] = find_offers(self.feed_url, OfferFilter(gpu_count=gpu_count))
            except (LiumError, ValueError) as exc:
                self.error = str(exc)
                return None
        return self._by_count[gpu_count]


_KEPT_BASIS = {
    "keep": "current rental",
    "update": "current rental",
    "destroy": "destroyed",
    "forget": "forgotten: still billed, no longer managed",
}


@dataclass(frozen=True)
class PodCost:
    """One ``lium_pod`` instance in the summary: what runs after the plan and what it costs per hour.

    ``gpu``, ``gpu_count`` and ``name`` are display text; ``basis`` is Markdown saying where the price
    comes from. ``price_after`` is None when the price is not known now.
    """

    change: ResourceChange
    gpu: str
    gpu_count: str
    price_after: float | None
    basis: str

    @property
    def name(self) -> str:
        return self.change.text("after" if self.change.after is not None else "before", "name")

    @property
    def price_before(self) -> float | None:
        return known_price(self.change)

    @property
    def exists_after(self) -> bool:
        return self.change.action in ("create", "update", "replace", "keep")

    @property
    def existed_before(self) -> bool:
        return self.change.before is not None


def known_price(change: ResourceChange) -> float | None:
    """The ``price_per_hour`` the pod the plan starts from is billed (None for a new pod or if not shown)."""
    value = change.value("before", "price_per_hour")
    if change.sensitive("before", "price_per_hour") or isinstance(value, bool):
        return None
    return float(value) if isinstance(value, int | float) else None


def price_pod(change: ResourceChange, book: OfferBook) -> PodCost:
    """What ``change`` leaves running and at what price: a kept pod its own, a new rental today's offer."""
    if change.action not in ("create", "replace"):
        price = known_price(change) if change.action in ("keep", "update") else None
        basis = _KEPT_BASIS.get(change.action, change.action)
        return PodCost(change, change.text("before", "gpu"), change.text("before", "gpu_count"), price, basis)
    gpu = change.text("after", "gpu")
    count = change.value("after", "gpu_count")
    if change.unknown("gpu_count") or not isinstance(count, int) or isinstance(count, bool):
        return PodCost(change, gpu, change.shown("after", "gpu_count"), None, "GPU count known after apply")
    if change.sensitive("after", "gpu_count"):
        return PodCost(change, gpu, SENSITIVE_TEXT, None, "GPU count is sensitive")
    executor = change.value("after", "executor_id")
    if change.sensitive("after", "executor_id"):
        return PodCost(change, gpu, str(count), None, "`executor_id` is sensitive")
    if isinstance(executor, str) and not change.unknown("executor_id"):
        return _price_on_executor(change, book, count, executor)
    return _price_by_filter(change, book, count)


def _price_on_executor(change: ResourceChange, book: OfferBook, count: int, executor: str) -> PodCost:
    gpu = change.text("after", "gpu")
    offers = book.offers(count)
    if offers is None:
        return PodCost(change, gpu, str(count), None, "nodes feed unavailable")
    offer = next((o for o in offers if o.executor_id == executor), None)
    if offer is None:
        return PodCost(
            change, gpu, str(count), None, f"executor {code(executor)} offers no {count}-GPU pod now"
        )
    basis = f"executor {code(executor)} now ({code(offer.region)})"
    return PodCost(change, offer.gpu_model, str(count), offer.price_per_hour, basis)


def _price_by_filter(change: ResourceChange, book: OfferBook, count: int) -> PodCost:
    gpu = change.text("after", "gpu")
    values: dict[str, Any] = {"gpu_count": count}
    for attribute in OfferFilter.search_fields():
        if change.unknown(attribute):
            return PodCost(change, gpu, str(count), None, f"filter {code(attribute)} known after apply")
        if change.sensitive("after", attribute):
            return PodCost(change, gpu, str(count), None, f"filter {code(attribute)} is sensitive")
        values[attribute] = change.value("after", attribute)
    try:
        flt = OfferFilter.of(values)
    except ValueError:
        return PodCost(change, gpu, str(count), None, "the offer filter is invalid")
    offers = book.offers(count)
    if offers is None:
        return PodCost(change, gpu, str(count), None, "nodes feed unavailable")
    matching = [o for o in offers if matches(o, flt)]
    if not matching:
        return PodCost(change, gpu, str(count), None, "no offer matches the filter now")
    cheapest = matching[0]
    plural = "s" if len(matching) != 1 else ""
    basis = (
        f"cheapest of {len(matching)} matching offer{plural} now "
        f"(executor {code(cheapest.executor_id)}, {code(cheapest.region)})"
    )
    return PodCost(change, cheapest.gpu_model, str(count), cheapest.price_per_hour, basis)


# -- rendering ---------------------------------------------------------------------------------------------


def usd(amount: float) -> str:
    """Dollars with cents, keeping sub-cent precision where a price has it ($0.39, $0.125, $1,234.50)."""
    text = f"{amount:,.4f}".rstrip("0")
    whole, _, cents = text.partition(".")
    return f"${whole}.{cents.ljust(2, '0')}"


@dataclass(frozen=True)
class Total:
    """A sum of pod prices; ``unknown`` pods were left out because their price is not known yet."""

    per_hour: float
    unknown: int

    def text(self) -> str:
        prefix = "at least " if self.unknown else ""
        return f"{prefix}{usd(self.per_hour)}/h · {prefix}{usd(self.per_hour * HOURS_PER_MONTH)}/month"


def total(prices: list[float | None]) -> Total:
    return Total(sum(p for p in prices if p is not None), sum(1 for p in prices if p is None))


def summarize(text: str, book: OfferBook) -> str:
    """The Markdown summary of plan JSON ``text``, priced with ``book``; PlanError if it is not a plan."""
    changes = parse_plan(text)
    pods = [
        price_pod(c, book) for c in changes if c.type == POD_TYPE and c.action != "read" and not c.deposed
    ]
    markdown = _render(changes, pods, book, details=True)
    if len(markdown) > MAX_MARKDOWN_CHARS:
        markdown = _render(changes, pods, book, details=False)
    if len(markdown) > MAX_MARKDOWN_CHARS:
        cut = markdown.rfind("\n", 0, MAX_MARKDOWN_CHARS)
        markdown = markdown[:cut] + "\n\n_(truncated: the plan is too large for one comment)_\n"
    return markdown


def _render(changes: list[ResourceChange], pods: list[PodCost], book: OfferBook, *, details: bool) -> str:
    counts = {verb: sum(1 for c in changes if c.action == verb) for verb, _ in _SECTIONS}
    headline = ", ".join(f"{counts[v]} to {v}" for v in ("create", "update", "replace", "destroy"))
    if counts["forget"]:
        headline += f", {counts['forget']} to forget"
    lines = [f"### Lium plan: {headline}", ""]
    if not any(counts.values()):
        lines += ["No changes: the infrastructure matches the configuration.", ""]
    if book.error is not None:
        lines += [
            f"> **Warning:** prices of new pods are unknown: the nodes feed could not be read ({code(book.error)}).",
            "",
        ]
    lines += _render_pods(pods)
    for verb, title in _SECTIONS:
        selected = [c for c in changes if c.action == verb]
        if selected:
            lines += [f"#### {title} ({len(selected)})", ""]
            lines += [line for c in selected for line in _render_change(c, details)]
            lines.append("")
    others = [c for c in changes if c.action not in counts and c.action not in ("keep", "read")]
    if others:
        lines += [f"#### Other actions ({len(others)})", ""]
        lines += [f"- {c.label}: {code(c.action)}" for c in others]
        lines.append("")
    return "\n".join(lines)


def _render_pods(pods: list[PodCost]) -> list[str]:
    if not pods:
        return ["No `lium_pod` in this plan: no GPU cost.", ""]
    after = total([p.price_after for p in pods if p.exists_after])
    before = total([p.price_before for p in pods if p.existed_before])
    lines = [
        f"**GPU cost after apply: {after.text()}** ({HOURS_PER_MONTH} h a month; "
        f"before: {usd(before.per_hour)}/h{' + unknown' if before.unknown else ''})",
        "",
    ]
    if after.unknown:
        lines += [
            f"{after.unknown} pod price{'s are' if after.unknown != 1 else ' is'} not known yet (see below).",
            "",
        ]
    lines += [
        "| Pod | Name | Action | GPU | GPUs | USD/h | Price |",
        "| --- | --- | --- | --- | ---: | ---: | --- |",
    ]
    for pod in pods:
        shown = pod.price_after if pod.exists_after else pod.price_before
        price = "?" if shown is None else usd(shown)
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
        ]
        lines.append("| " + " | ".join([*cells, price, basis]) + " |")
    lines.append("")
    return lines


def _render_change(change: ResourceChange, details: bool) -> list[str]:
    lines = [f"- {change.label}"]
    if not details:
        return lines
    if change.action not in ("update", "replace"):
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


def main_summary(source: str, feed_flag: str | None) -> str:
    """Everything ``lium-tf plan-summary`` does: read, price with the resolved feed, render."""
    return summarize(read_source(source), OfferBook(resolve_feed_url(feed_flag, os.environ)))
