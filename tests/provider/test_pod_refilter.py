"""Offer-filter changes on a running ``lium_pod``, through real Terraform against the emulator.

A changed filter re-rents only when the running pod no longer satisfies it, and the replacement names
the attribute the user changed; otherwise the plan is an in-place update of the state alone. The
emulator's catalog (emulator/lium_emulator/catalogs/data/nodes.json) has a 1-GPU RTX 4090 in ``us-tx`` at $0.39/h
with about 62 GiB RAM, and other 1-GPU offers for each replacement below to rent: an RTX 4090 in ``ca-on``,
an RTX 3090 at $0.24/h, an A100 with about 124 GiB RAM, a spot RTX A6000, and 2-GPU pods.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from lium_provider.api.endpoints import feed_url_for
from lium_provider.plan_summary import OfferBook, summarize
from tests.support.lium import (
    PROVIDER_BLOCK,
    Account,
    assert_nothing_left,
    instances,
    pod_block,
    sleeping_template,
)
from tests.support.terraform import Terraform

pytestmark = pytest.mark.terraform

TEMPLATE = sleeping_template("refilter")
# Filled in as ``POD % filter_lines``.
POD = pod_block("refilter-0", extra="%s")


def _config(tf: Terraform, filter_lines: str) -> None:
    tf.write(PROVIDER_BLOCK + TEMPLATE + POD % filter_lines)


def _pod_plan(tf: Terraform) -> dict[str, Any]:
    """The plan's change of ``lium_pod.p`` (``actions``, ``replace_paths``), from a saved plan's JSON."""
    tf.run("plan", "-input=false", "-no-color", "-out=tfplan")
    plan = tf.show_json("tfplan")
    (change,) = [c for c in plan["resource_changes"] if c["address"] == "lium_pod.p"]
    result: dict[str, Any] = change["change"]
    result["plan_json"] = json.dumps(plan)
    return result


def test_filter_changes_re_rent_only_when_the_pod_no_longer_qualifies(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    tf = stack(TEMPLATE + POD % 'regions = ["us-tx"]\n  max_price_per_hour = 0.80')
    tf.apply()
    (pod,) = instances(tf, "lium_pod")
    assert (pod["region"], pod["price_per_hour"]) == ("us-tx", 0.39)
    assert pod["gpu"] == "NVIDIA GeForce RTX 4090", "unset, gpu records the GPU Lium says it rented"

    # The same GPU spelled another way: no change at all.
    _config(tf, 'regions = ["us-tx"]\n  max_price_per_hour = 0.80\n  gpu = "rtx4090"')
    code, plan = tf.plan_exitcode()
    assert code == 0, f"a respelled GPU name must plan no change:\n{plan}"

    # A higher price limit still holds for the $0.39 pod: an in-place update of the state, no re-rent.
    _config(tf, 'regions = ["us-tx"]\n  max_price_per_hour = 0.90\n  gpu = "RTX 4090"')
    change = _pod_plan(tf)
    assert change["actions"] == ["update"] and not change.get("replace_paths")
    tf.apply()
    (updated,) = instances(tf, "lium_pod")
    assert updated["id"] == pod["id"] and updated["max_price_per_hour"] == 0.9
    assert [p["id"] for p in account.live()["pods"]] == [pod["id"]]

    # Regions that still hold (the whole country), more memory than asked: still in place.
    _config(tf, 'regions = ["US"]\n  max_price_per_hour = 0.90\n  min_memory_gib = 1\n  spot = false')
    change = _pod_plan(tf)
    assert change["actions"] == ["update"] and not change.get("replace_paths")

    # Each of these no longer holds for the running pod: replaced, naming what the user changed.
    for lines, attribute in [
        ('regions = ["ca"]', "regions"),
        ("max_price_per_hour = 0.30", "max_price_per_hour"),
        ("min_memory_gib = 100", "min_memory_gib"),
        ("spot = true", "spot"),
        ('gpu = "RTX 3090"', "gpu"),
        ("gpu_count = 2", "gpu_count"),
    ]:
        _config(tf, lines)
        change = _pod_plan(tf)
        assert change["actions"] == ["delete", "create"], (attribute, change["actions"])
        assert change["replace_paths"] == [[attribute]], (attribute, change["replace_paths"])
        summary = summarize(change["plan_json"], OfferBook(feed_url_for(account.emulator.api_url, None)))
        assert f"`{attribute}`" in summary and "(forces replacement)" in summary, summary
        assert "`ssh_public_key`" not in summary and "`executor_id`" not in summary, summary
    assert [p["id"] for p in account.live()["pods"]] == [pod["id"]], "plans must not rent anything"
    tf.destroy()
    assert_nothing_left(account)


def test_imported_pod_with_a_matching_config_plans_no_change(
    stack: Callable[[str], Terraform], account: Account
) -> None:
    tf = stack(TEMPLATE + POD % 'regions = ["us-tx"]')
    tf.env["LIUM_STACK"] = "refilter"  # the import below is into a fresh state of the same stack
    tf.apply()
    (pod,) = instances(tf, "lium_pod")
    (template,) = instances(tf, "lium_template")

    other = stack(TEMPLATE + POD % 'gpu = "RTX 4090"\n  gpu_count = 1')
    other.env["LIUM_STACK"] = "refilter"
    other.run("import", "-no-color", "lium_template.t", template["id"])
    other.run("import", "-no-color", "lium_pod.p", pod["id"])
    code, plan = other.plan_exitcode()
    assert code == 0, plan

    # Bounds the imported state cannot know are recorded in place; the pod is kept.
    _config(other, 'gpu = "RTX 4090"\n  max_price_per_hour = 0.80\n  regions = ["us", "ca"]')
    change = _pod_plan(other)
    assert change["actions"] == ["update"] and not change.get("replace_paths")
    # What the import found in the feed (the executor's offer) still decides re-rents.
    for lines, attribute in [('regions = ["ca"]', "regions"), ("min_memory_gib = 100", "min_memory_gib")]:
        _config(other, lines)
        change = _pod_plan(other)
        assert change["actions"] == ["delete", "create"], (attribute, change["actions"])
        assert change["replace_paths"] == [[attribute]], (attribute, change["replace_paths"])
    other.run("state", "rm", "lium_pod.p", "lium_template.t")
    tf.destroy()
    assert_nothing_left(account)
