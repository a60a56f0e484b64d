"""Reading ``terraform show -json <planfile>`` (Terraform's plan representation, format 1.x) into changes.

Only managed resources are changes; data sources are reads. A :class:`ResourceChange` knows which of its
values are sensitive (``before_sensitive`` / ``after_sensitive``) or unknown (``after_unknown``), and
renders them masked (:mod:`lium_provider.plan_summary.values`).
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lium_provider.plan_summary.values import any_marked, child_marks, code, render_value

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
    configured: frozenset[str] = frozenset()
    """The arguments the resource's configuration sets (``configuration`` of the plan), known or not."""

    @property
    def action(self) -> str:
        """``create``, ``update``, ``replace``, ``destroy``, ``keep``, ``read``, ``forget``, or the raw list."""
        return _ACTIONS.get(self.actions, "+".join(self.actions))

    @property
    def label(self) -> str:
        """The address as a code span, with what a reviewer should know (deposed, imported, tainted)."""
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
        return any_marked(child_marks(self.after_unknown, key))

    def sensitive(self, side: str, key: str) -> bool:
        """True when (part of) attribute ``key`` of that side is sensitive."""
        return any_marked(
            child_marks(self.before_sensitive if side == "before" else self.after_sensitive, key)
        )

    def shown(self, side: str, key: str) -> str:
        """Attribute ``key`` rendered with its sensitive and unknown parts masked."""
        sensitive = child_marks(self.before_sensitive if side == "before" else self.after_sensitive, key)
        unknown = child_marks(self.after_unknown, key) if side == "after" else None
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


# A saved plan (`terraform plan -out`) is a zip archive.
SAVED_PLAN_MAGIC = b"PK\x03\x04"


def read_source(source: str) -> str:
    """The text of ``source``: a file path, or ``-`` for standard input."""
    try:
        data = sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
    except OSError as exc:
        raise PlanError(f"cannot read {_where(source)}: {exc.strerror or type(exc).__name__}") from None
    if data[:4] == SAVED_PLAN_MAGIC:
        shown = "<plan file>" if source == "-" else source
        raise PlanError(
            f"{_where(source)} is a saved Terraform plan, not its JSON: run "
            f"`terraform show -json {shown} > plan.json` and pass plan.json"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise PlanError(
            f"{_where(source)} is not UTF-8 text: pass the JSON of `terraform show -json <plan file>`"
        ) from None


def _where(source: str) -> str:
    return "standard input" if source == "-" else repr(source)


@dataclass(frozen=True)
class PlanDocument:
    """What a summary reads of a plan: its managed-resource changes and when it was made."""

    changes: list[ResourceChange]
    timestamp: datetime | None
    """The plan's ``timestamp`` (Terraform writes it into every plan); None when absent or unreadable."""


def parse_plan(text: str) -> list[ResourceChange]:
    """The managed-resource changes of a ``terraform show -json`` plan (data sources are reads, not changes)."""
    return parse_plan_document(text).changes


def parse_plan_document(text: str) -> PlanDocument:
    """The :class:`PlanDocument` of a ``terraform show -json`` plan; PlanError when it is not one."""
    try:
        plan = json.loads(text)
    except json.JSONDecodeError as exc:
        if text.lstrip().startswith(_UI_STREAM_START):
            raise PlanError(_UI_STREAM_MESSAGE) from None
        raise PlanError(f"not JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    if isinstance(plan, dict) and "@level" in plan:
        raise PlanError(_UI_STREAM_MESSAGE)
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
    if plan.get("errored") is True:
        raise PlanError(
            "the plan is incomplete: `terraform plan` failed while making it (`errored`), so it may leave out "
            "what it would change; fix the errors terraform plan printed and plan again"
        )
    entries = plan.get("resource_changes") or []
    if not isinstance(entries, list):
        raise PlanError('"resource_changes" is not a list')
    configured = _configured_arguments(plan.get("configuration"))
    changes = [_resource_change(i, entry, configured) for i, entry in enumerate(entries)]
    return PlanDocument([c for c in changes if c is not None], parse_timestamp(plan.get("timestamp")))


def parse_timestamp(value: Any) -> datetime | None:
    """An RFC 3339 time as Terraform and Lium write them (UTC when it carries no offset); None otherwise."""
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


_UI_STREAM_START = '{"@level"'  # each line of Terraform's machine-readable UI starts so
_UI_STREAM_MESSAGE = (
    "this is the log stream of `terraform plan -json`, not a plan: save the plan with "
    "`terraform plan -out=<plan file>` and pass the output of `terraform show -json <plan file>`"
)
_INSTANCE_KEY = re.compile(r"\[[^\]]*\]")


def _configured_arguments(configuration: Any) -> dict[str, frozenset[str]]:
    """The arguments each resource block sets, by its address without instance keys
    (``module.gpu.lium_pod.this``): the plan's values cannot tell a configured argument Terraform
    knows only after apply from a computed one the configuration leaves out."""
    found: dict[str, frozenset[str]] = {}
    modules: list[tuple[str, Any]] = [
        ("", configuration.get("root_module") if isinstance(configuration, dict) else None)
    ]
    while modules:
        prefix, module = modules.pop()
        if not isinstance(module, dict):
            continue
        for resource in module.get("resources") or []:
            if isinstance(resource, dict) and isinstance(resource.get("address"), str):
                expressions = resource.get("expressions")
                found[prefix + resource["address"]] = frozenset(
                    expressions if isinstance(expressions, dict) else ()
                )
        calls = module.get("module_calls")
        for name, call in calls.items() if isinstance(calls, dict) else ():
            modules.append(
                (f"{prefix}module.{name}.", call.get("module") if isinstance(call, dict) else None)
            )
    return found


def _resource_change(index: int, entry: Any, configured: dict[str, frozenset[str]]) -> ResourceChange | None:
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
        configured=configured.get(_INSTANCE_KEY.sub("", address), frozenset()),
    )
