"""Fleet: three identical GPU pods (``nodes: 0..2``), each with its own template and runner.

npx cdktf deploy --app ".venv/bin/python examples/fleet/main.py"
npx cdktf destroy --app ".venv/bin/python examples/fleet/main.py"
"""

from __future__ import annotations

from constructs import Construct
from lium_constructs import GpuStack, LiumProvider, OfferFilter, cdk, local_state, ssh_public_key_from_env

NODES = 3


class FleetStack(cdk.TerraformStack):
    """``NODES`` pods on the cheapest offers with at least 16 GiB of RAM each."""

    def __init__(self, scope: Construct, id_: str) -> None:
        super().__init__(scope, id_)
        local_state(self)  # terraform.<stack>.tfstate here, by a path that survives moving the project
        LiumProvider(self, "lium")
        GpuStack(
            self,
            "fleet",
            count=NODES,
            image="python:3.11-slim",
            offer=OfferFilter(min_memory_gib=16),
            ssh_public_key=ssh_public_key_from_env(),
        )


def main() -> None:
    app = cdk.App()
    FleetStack(app, "fleet")
    app.synth()


if __name__ == "__main__":
    main()
