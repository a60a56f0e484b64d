"""Concurrent creates of one ``terraform apply`` spread over the cheapest executors, one rent per pod."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from lium_emulator.catalogs.nodes import generate_fleet
from lium_emulator.launcher import RunningEmulator
from tests.support.forked_emulator import launch_forked
from tests.support.lium import (
    FAST_TIMINGS,
    PROVIDER_BLOCK,
    assert_nothing_left,
    instances,
    new_account,
    sleeping_template,
)
from tests.support.terraform import Terraform

pytestmark = pytest.mark.terraform

NODES = generate_fleet(3, 3, "RTX 3090")  # in price order: 3 GPUs each
PODS = 5
STACK = sleeping_template("spread") + (
    f'resource "lium_pod" "p" {{\n  count = {PODS}\n  name = "spread-${{count.index}}"\n'
    "  template_id = lium_template.t.id\n}\n"
)


@pytest.fixture(scope="module")
def small_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningEmulator]:
    catalog = tmp_path_factory.mktemp("catalog") / "nodes.json"
    catalog.write_text(json.dumps({"nodes": [n.model_dump(mode="json") for n in NODES]}))
    with launch_forked([*FAST_TIMINGS, "--nodes", str(catalog)]) as running:
        yield running


@pytest.mark.sandbox  # its own emulator, whose pods are sandboxes
def test_concurrent_creates_rent_once_each_on_the_cheapest_free_gpus(
    small_fleet: RunningEmulator, make_terraform: Callable[..., Terraform], tmp_path: Path
) -> None:
    account = new_account(small_fleet, tmp_path / "account")
    tf = make_terraform(PROVIDER_BLOCK + STACK, **account.env)
    tf.init()
    tf.apply(f"-parallelism={PODS}")
    placed = Counter(pod["executor_id"] for pod in instances(tf, "lium_pod"))
    # The cheapest node's three GPUs, then two of the next one's: the cheapest GPUs overall.
    assert placed == Counter({NODES[0].id: 3, NODES[1].id: 2})
    rents = account.report()["api_requests"].get("POST /executors/{id}/rent", 0)
    assert rents == PODS, f"{rents} rent calls for {PODS} pods: concurrent creates collided"
    tf.destroy(f"-parallelism={PODS}")
    assert_nothing_left(account)
