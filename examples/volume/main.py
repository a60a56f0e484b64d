"""Volume: data written in one rental is read back in the next.

    npx cdktf deploy --app ".venv/bin/python examples/volume/main.py"                          # rental 1
    LIUM_VOLUME_RENTAL=2 npx cdktf deploy --app ".venv/bin/python examples/volume/main.py"     # rental 2
    npx cdktf destroy --app ".venv/bin/python examples/volume/main.py"

The volume is declared outside the GpuStack, so it outlives the pods: rental 2 replaces the pod (a new
name) and mounts the same volume at /mnt.
"""

from __future__ import annotations

import os

from constructs import Construct
from lium_constructs import (
    GpuStack,
    LiumProvider,
    RunnerOptions,
    Volume,
    cdk,
    local_state,
    ssh_public_key_from_env,
)

RENTAL_ENV = "LIUM_VOLUME_RENTAL"
PROOF = "/mnt/proof.txt"
# Rental 1 writes the proof onto the volume; rental 2 fails its deploy unless the proof is still there.
SMOKE_TESTS = {
    1: [f"echo 'written in rental 1' > {PROOF}", f"cat {PROOF}"],
    2: [f"grep -q 'written in rental 1' {PROOF}", f"cat {PROOF}"],
}


class VolumeStack(cdk.TerraformStack):
    """A ``lium_volume`` and one pod of rental ``rental`` mounting it."""

    def __init__(self, scope: Construct, id_: str, *, rental: int) -> None:
        super().__init__(scope, id_)
        local_state(self)  # terraform.<stack>.tfstate here, by a path that survives moving the project
        LiumProvider(self, "lium")
        volume = Volume(self, "datasets", name="datasets", description="kept across rentals")
        GpuStack(
            self,
            "rental",
            name=f"volume-rental-{rental}",
            image="python:3.11-slim",
            volume_id=volume.id,
            ssh_public_key=ssh_public_key_from_env(),
            runner=RunnerOptions(smoke_test=SMOKE_TESTS[rental]),
        )


def main() -> None:
    app = cdk.App()
    rental = int(os.environ.get(RENTAL_ENV, "1"))
    if rental not in SMOKE_TESTS:
        raise SystemExit(f"{RENTAL_ENV} must be 1 or 2, not {rental}")
    VolumeStack(app, "volume", rental=rental)
    app.synth()


if __name__ == "__main__":
    main()
