"""What must hold after any scenario: nothing left, no second paid pod, bounded billing, no secret, no crash,
no stack touching another stack's objects.

Each check takes the account's part of the emulator's inspection report (``Account.report()``), the
captured text of a run, or what each stack's provider sent (:mod:`tests.support.proxy`), and returns
findings as readable strings: an empty list means the check passed.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping
from datetime import datetime, timedelta
from itertools import pairwise
from typing import Any

from lium_provider.domain.stack import parse_lium_pod_name
from tests.chaos.scenarios import STACK_LABEL_VARIABLE
from tests.support.proxy import Exchange

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


def _resource_name(lium_name: str) -> str:
    """The pod's resource as its Lium name tells it: name and stack tag, whatever the rent digest.

    A re-create of one resource with a changed rent gets a new digest; two of its pods billed at once are
    still a second paid pod.
    """
    parsed = parse_lium_pod_name(lium_name)
    return f"{parsed[0]}-{parsed[1]}" if parsed else lium_name


def duplicate_rentals(report: Mapping[str, Any], owners: Mapping[str, str] | None = None) -> list[str]:
    """Second paid pods: two pods of one name billed at the same time (for a cluster's members, of one name
    and rank: a second cluster), or one idempotency key renting twice.

    With ``owners`` (pod id → stack, for several stacks of the same names) names are compared per stack.
    """
    found = []
    by_name: dict[str, list[tuple[datetime, datetime, str]]] = defaultdict(list)
    for pod in report["pods"]:
        interval = _billed_interval(pod)
        if interval is not None:
            owner = (owners or {}).get(pod["id"])
            name = _resource_name(pod["pod_name"])
            if pod.get("cluster_node_index") is not None:  # a cluster's members share its name
                name = f"{name} node {pod['cluster_node_index']}"
            name = f"{name} (stack {owner})" if owner else name
            by_name[name].append((*interval, pod["id"]))
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


# The routes whose requests act on one object: the object's kind and id, from the path (under /api).
_OBJECT_ROUTE = re.compile(r"^/api/(?P<kind>pods|templates|volumes|docker-credentials)/(?P<id>[^/?]+)")
RENT_ROUTE = re.compile(r"^/api/executors/[^/]+/rent$")


def template_owners(report: Mapping[str, Any]) -> dict[str, str]:
    """Template id → the stack label its environment carries, for the account's live templates."""
    return {
        template["id"]: template["environment"][STACK_LABEL_VARIABLE]
        for template in report["templates"]
        if STACK_LABEL_VARIABLE in (template.get("environment") or {})
    }


def stack_owners(report: Mapping[str, Any], exchanges: Mapping[str, list[Exchange]]) -> dict[str, str]:
    """Which stack (a key of ``exchanges``) owns each pod and template of the account.

    A template belongs to the stack whose label its environment carries (``STACK_LABEL_VARIABLE``) or
    whose process received its id from ``POST /templates`` (for templates deleted since); a pod
    to the stack whose process sent the rent with the pod's ``Idempotency-Key`` (each stack's provider talks
    through its own proxy, so the exchange says which stack sent it). Objects no stack can be shown to own
    are left out.
    """
    senders: dict[str, set[str]] = defaultdict(set)
    owners: dict[str, str] = {}
    for stack, sent in exchanges.items():
        for exchange in sent:
            if exchange.method == "POST" and RENT_ROUTE.match(exchange.route):
                senders[exchange.idempotency_key].add(stack)
            created = exchange.response_json
            if exchange.method == "POST" and exchange.route == "/api/templates" and isinstance(created, dict):
                owners[str(created.get("id"))] = stack
    owners |= template_owners(report)
    for pod in report["pods"]:
        renters = senders.get(pod.get("idempotency_key") or "", set())
        if len(renters) == 1:
            owners[pod["id"]] = next(iter(renters))
    return owners


def cross_stack_effects(
    report: Mapping[str, Any], exchanges: Mapping[str, list[Exchange]], templates: Mapping[str, str]
) -> list[str]:
    """Every mutation a stack sent to another stack's object, and every rent key two stacks sent.

    ``exchanges``: per stack, what its provider sent (mutations count whatever their answer: a delete
    that failed was still aimed at the wrong object); ``templates``: :func:`template_owners` of reports
    taken during the run, since the final report no longer lists deleted templates.
    """
    owners = {**templates, **stack_owners(report, exchanges)}
    found = []
    senders: dict[str, set[str]] = defaultdict(set)
    for stack, sent in exchanges.items():
        for exchange in sent:
            if exchange.method == "GET":
                continue
            target = _OBJECT_ROUTE.match(exchange.route)
            if RENT_ROUTE.match(exchange.route):
                senders[exchange.idempotency_key].add(stack)
                body = exchange.request_json if isinstance(exchange.request_json, dict) else {}
                object_id = str(body.get("template_id") or "")
                what = f"rented with template {object_id}"
            elif target is not None:
                object_id = target["id"]
                what = f"sent {exchange.method} {exchange.route}"
            else:
                continue
            owner = owners.get(object_id)
            if owner is not None and owner != stack:
                found.append(f"stack {stack} {what}, stack {owner}'s")
    found += [
        f"stacks {' and '.join(sorted(stacks))} both sent rent key {key}"
        for key, stacks in senders.items()
        if len(stacks) > 1
    ]
    return found
