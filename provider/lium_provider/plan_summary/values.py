"""How plan values are shown: an HCL-like rendering with sensitive and unknown parts masked, in code spans.

Every string that came from a plan or the nodes feed is shown inside a code span (:func:`code`), so it
cannot inject Markdown into a pull-request comment.
"""

from __future__ import annotations

import json
from typing import Any

UNKNOWN_TEXT = "(known after apply)"
SENSITIVE_TEXT = "(sensitive value)"
MAX_VALUE_CHARS = 120


def child_marks(marks: Any, key: str | int) -> Any:
    """The part of a ``*_sensitive`` / ``after_unknown`` mark structure under ``key`` (``True`` = all of it)."""
    if marks is True:
        return True
    if isinstance(marks, dict):
        return marks.get(key)
    if isinstance(marks, list) and isinstance(key, int) and 0 <= key < len(marks):
        return marks[key]
    return None


def any_marked(marks: Any) -> bool:
    """True when any part of a mark structure is marked."""
    if marks is True:
        return True
    if isinstance(marks, dict):
        return any(any_marked(v) for v in marks.values())
    if isinstance(marks, list):
        return any(any_marked(v) for v in marks)
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
            f"{json.dumps(k, ensure_ascii=False)} = {render_value(value.get(k), child_marks(sensitive, k), child_marks(unknown, k))}"
            for k in keys
        )
        return "{" + ", ".join(items) + "}"
    if isinstance(value, list):
        length = max(len(value), len(unknown) if isinstance(unknown, list) else 0)
        parts = (
            render_value(
                value[i] if i < len(value) else None, child_marks(sensitive, i), child_marks(unknown, i)
            )
            for i in range(length)
        )
        return "[" + ", ".join(parts) + "]"
    return json.dumps(value, ensure_ascii=False)


def code(text: str) -> str:
    """``text`` as a Markdown code span that nothing inside it can close, table-safe and on one line."""
    text = " ".join(text.splitlines()).replace("|", "\\|")
    if len(text) > MAX_VALUE_CHARS:  # cut in the middle: addresses differ at their ends (`["key-0417"]`)
        half = (MAX_VALUE_CHARS - 1) // 2
        text = text[:half] + "…" + text[len(text) - (MAX_VALUE_CHARS - 1 - half) :]
    longest, run = 0, 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    padded = f" {text} " if text.startswith("`") or text.endswith("`") or not text.strip() else text
    return f"{fence}{padded}{fence}"


def usd(amount: float) -> str:
    """Dollars with cents, keeping sub-cent precision where a price has it ($0.39, $0.125, $1,234.50)."""
    text = f"{amount:,.4f}".rstrip("0")
    whole, _, cents = text.partition(".")
    return f"${whole}.{cents.ljust(2, '0')}"


def duration(seconds: float) -> str:
    """A time a reviewer reads at a glance: ``45 s``, ``12 min``, ``3 h 12 min``, ``2 d 4 h``."""
    minutes, hours = int(seconds // 60), int(seconds // 3600)
    if seconds < 60:
        return f"{int(seconds)} s"
    if hours == 0:
        return f"{minutes} min"
    if hours < 48:
        rest = minutes - hours * 60
        return f"{hours} h {rest} min" if rest else f"{hours} h"
    days = hours // 24
    return f"{days} d {hours - days * 24} h" if hours % 24 else f"{days} d"
