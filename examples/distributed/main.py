"""Distributed: a two-node GPU cluster (``GpuStack(nodes=2)``) with the dstack runner on each node, whose
smoke test runs an all-reduce across the nodes through the runners before the deploy is done.

npx cdktf deploy --app ".venv/bin/python examples/distributed/main.py"
npx cdktf destroy --app ".venv/bin/python examples/distributed/main.py"

The collective is ``examples/cluster/allreduce.py`` (the HCL example's), sent to every node in its smoke
test; the stack gives each runner ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT``.
"""

from __future__ import annotations

import base64
from pathlib import Path

from constructs import Construct
from lium_constructs import GpuStack, LiumProvider, RunnerOptions, cdk, local_state, ssh_public_key_from_env

NODES = 2
CLUSTER_IMAGE = "daturaai/lium-cluster:1.2.0"
ALL_REDUCE = Path(__file__).resolve().parent.parent / "cluster" / "allreduce.py"


def all_reduce_smoke_test() -> list[str]:
    """The collective as one shell command: the script travels base64-encoded, so no quoting can break it."""
    encoded = base64.b64encode(ALL_REDUCE.read_bytes()).decode()
    return [f"echo {encoded} | base64 -d > /tmp/allreduce.py && python3 /tmp/allreduce.py"]


class DistributedStack(cdk.TerraformStack):
    """``NODES`` whole nodes of one fabric, ready for ``torchrun`` once the deploy is done."""

    def __init__(self, scope: Construct, id_: str) -> None:
        super().__init__(scope, id_)
        local_state(self)
        LiumProvider(self, "lium")
        GpuStack(
            self,
            "distributed",
            nodes=NODES,
            image=CLUSTER_IMAGE,
            ssh_public_key=ssh_public_key_from_env(),
            termination_hours=6,
            runner=RunnerOptions(smoke_test=all_reduce_smoke_test()),
        )


def main() -> None:
    app = cdk.App()
    DistributedStack(app, "distributed")
    app.synth()


if __name__ == "__main__":
    main()
