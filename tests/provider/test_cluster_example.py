"""``examples/cluster``: a two-node cluster with the dstack runner on each node, whose smoke test runs an
all-reduce across the nodes through the runners, applied against the emulator and destroyed, exactly as a
user runs it (environment only, a copy without the committed lock file)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from lium_emulator.launcher import RunningEmulator
from tests.support.examples import initialised_example
from tests.support.lium import PROVIDER_BLOCK, assert_nothing_left, instances, new_account
from tests.support.terraform import REPO, Terraform

pytestmark = pytest.mark.terraform

EXAMPLE = REPO / "examples" / "cluster"


def test_cluster_example_runs_a_collective_through_the_runners_and_destroys(
    emulator: RunningEmulator, make_terraform: Callable[..., Terraform], tmp_path: Path
) -> None:
    account = new_account(emulator, tmp_path)
    tf = initialised_example(EXAMPLE, make_terraform, account.env)
    tf.apply()

    outputs = {name: o["value"] for name, o in json.loads(tf.run("output", "-json").stdout).items()}
    (cluster,) = instances(tf, "lium_cluster")
    runners = instances(tf, "lium_runner")
    assert [r["pod_id"] for r in runners] == [n["pod_id"] for n in cluster["nodes"]]
    assert all(r["healthy"] is True for r in runners)
    assert outputs["rendezvous"] == f"{cluster['nodes'][0]['overlay_ip']}:29500"
    assert outputs["world_size"] == 2
    # 1^2 + 2^2: each node added its own value and checked the sum
    for rank, printed in enumerate(outputs["collective"]):
        assert f"all-reduce ok on rank {rank} of 2: tcp sum 5;" in printed, printed
    assert tf.plan_exitcode()[0] == 0

    tf.destroy()
    assert_nothing_left(account)
    assert tf.resources() == []


GUIDE = REPO / "docs" / "guides" / "clusters.md"


def test_the_clusters_guide_snippets_apply_together_and_destroy(
    emulator: RunningEmulator, make_terraform: Callable[..., Terraform], tmp_path: Path
) -> None:
    """The guide's HCL blocks pasted one after another, after the example's provider block, as its
    text says: the cluster and a runner on every node apply (the runners need the template's 10022)."""
    snippets = [block.split("```")[0] for block in GUIDE.read_text().split("```hcl\n")[1:]]
    assert any("lium_cluster" in s for s in snippets) and any("lium_runner" in s for s in snippets)
    account = new_account(emulator, tmp_path)
    tf = make_terraform(PROVIDER_BLOCK + "\n".join(snippets), **account.env)
    tf.init()
    tf.apply()
    runners = instances(tf, "lium_runner")
    assert len(runners) == 2 and all(r["healthy"] is True for r in runners)
    tf.destroy()
    assert_nothing_left(account)
