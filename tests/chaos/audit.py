"""What must hold after any scenario: nothing left, no second paid pod, bounded billing, no secret, no crash.

Each check takes the account's part of the emulator's inspection report (``Account.report()``) or the
captured text of a run, and returns findings as readable strings: an empty list means the check passed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any

# What a Python traceback or an unexpected provider exception looks like in Terraform's output.
CRASH_MARKERS = ("Traceback", "internal provider error", "Terraform crashed")
_OVERLAP_TOLERANCE = timedelta(milliseconds=10)
_MIN_LINE = 16  # shorter lines of a multi-line secret are too common to mean anything on their own


def secret_needles(secret: str) -> list[str]:
    """The secret itself and each line of it (the body lines of a PEM key), without the armour lines.

    ``-----BEGIN ... KEY-----`` lines are the same for every key and may legitimately appear in a help
    text; every other line of a key is key material.
    """
    lines = [line.strip() for line in secret.splitlines()]
    body = [line for line in lines if len(line) >= _MIN_LINE and not line.startswith("-----")]
    return [secret.strip(), *body] if len(lines) > 1 else [secret.strip()]


def find_secrets(texts: Mapping[str, str], secrets: Mapping[str, str]) -> list[str]:
    """``"<secret> in <where>"`` for every secret (or line of one) found in any captured text."""
    found = []
    for secret_name, secret in secrets.items():
        needles = secret_needles(secret)
        for where, text in texts.items():
            if any(needle in text for needle in needles):
                found.append(f"{secret_name} in {where}")
    return found


def find_crashes(texts: Mapping[str, str]) -> list[str]:
    """``"<marker> in <where>"`` for every traceback or internal-error marker in the captured output."""
    return [
        f"{marker!r} in {where}"
        for where, text in texts.items()
        for marker in CRASH_MARKERS
        if marker in text
    ]


def leftovers(report: Mapping[str, Any]) -> list[str]:
    """Every pod that is not DELETED, and every template, credential and volume the account still holds."""
    found = [
        f"pod {p['pod_name']} ({p['id']}) is {p['status']}"
        for p in report["pods"]
        if p["status"] != "DELETED"
    ]
    for kind, label in (("templates", "name"), ("docker_credentials", "username"), ("volumes", "name")):
        found += [f"{kind[:-1]} {item.get(label)} ({item['id']})" for item in report[kind]]
    return found


def _billed_interval(pod: Mapping[str, Any]) -> tuple[datetime, datetime] | None:
    if not pod.get("running_at"):
        return None
    start = datetime.fromisoformat(pod["running_at"])
    return start, start + timedelta(seconds=float(pod["billed_seconds"]))


def duplicate_rentals(report: Mapping[str, Any]) -> list[str]:
    """Second paid pods: two pods of one name billed at the same time, or one idempotency key renting twice."""
    found = []
    by_name: dict[str, list[tuple[datetime, datetime, str]]] = defaultdict(list)
    for pod in report["pods"]:
        interval = _billed_interval(pod)
        if interval is not None:
            by_name[pod["pod_name"]].append((*interval, pod["id"]))
    for name, intervals in by_name.items():
        intervals.sort()
        for (_, end, first), (start, _, second) in pairwise(intervals):
            if start < end - _OVERLAP_TOLERANCE:
                found.append(f"pods {first} and {second} named {name} were billed at the same time")
    found += [
        f"idempotency key {k['key']} rented {k['rent_count']} pods"
        for k in report["idempotency_keys"]
        if k["rent_count"] > 1
    ]
    return found


def overbilled(report: Mapping[str, Any], wall_seconds: float) -> list[str]:
    """Pods billed longer than the scenario lasted (the bound every scenario must keep)."""
    return [
        f"pod {p['pod_name']} billed {p['billed_seconds']} s in a {wall_seconds:.1f} s scenario"
        for p in report["pods"]
        if float(p["billed_seconds"]) > wall_seconds
    ]
