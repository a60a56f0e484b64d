"""``GpuStack(nodes=...)`` refuses, at synth and naming the argument, what its plan would refuse or what
would silently not be the cluster asked for."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from lium_constructs import GpuStack, LiumProvider, OfferFilter
from lium_constructs._cdk import cdk
from tests.constructs.test_constructs import synth

IMAGE = "daturaai/lium-cluster:1.2.0"


@pytest.fixture
def stack(tmp_path: Path) -> cdk.TerraformStack:
    return cdk.TerraformStack(cdk.App(outdir=str(tmp_path)), "s")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"nodes": 2.5}, "nodes must be a whole number from 2 to 64, got 2.5"),
        ({"nodes": "2"}, "nodes must be a whole number from 2 to 64, got '2'"),
        ({"nodes": True}, "nodes must be a whole number"),
        ({"nodes": 1}, "nodes must be a whole number from 2 to 64, got 1"),
        ({"nodes": 65}, "nodes must be a whole number from 2 to 64, got 65"),
        ({"nodes": 2, "rendezvous_port": 0}, "rendezvous_port must be a TCP port"),
        ({"nodes": 2, "rendezvous_port": 70000}, "rendezvous_port must be a TCP port"),
        ({"nodes": 2, "rendezvous_port": "29500"}, "rendezvous_port must be a TCP port"),
        ({"nodes": 2, "image": "daturaai/lium-cluster-dev:1"}, "image must be Lium's cluster image"),
        ({"nodes": 2, "image": "python:3.11-slim"}, "image must be Lium's cluster image"),
    ],
)
def test_misuse_fails_with_a_value_error_naming_the_argument(
    stack: cdk.TerraformStack, arguments: dict[str, Any], message: str
) -> None:
    LiumProvider(stack, "lium")
    with pytest.raises(ValueError, match=re.escape(message)):
        GpuStack(stack, "gpu", **{"image": IMAGE, **arguments})


def test_an_offer_for_nodes_of_eight_gpus_is_kept_and_the_pod_default_means_any_size(
    stack: cdk.TerraformStack,
) -> None:
    LiumProvider(stack, "lium")
    GpuStack(stack, "eight", image=IMAGE, nodes=2, offer=OfferFilter(gpu="H100", gpu_count=8))
    GpuStack(stack, "any", image=IMAGE, nodes=2, offer=OfferFilter(gpu="H100"), output_prefix="any_")
    clusters = synth(stack)["resource"]["lium_cluster"]
    assert clusters["eight"]["gpu_count"] == 8 and clusters["eight"]["gpu"] == "H100"
    assert "gpu_count" not in clusters["any"], "one GPU is a pod's default, not a node size"
