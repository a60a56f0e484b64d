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
from lium_constructs import GpuStack, LiumProvider, Volume, cdk, ssh_public_key_from_env

RENTAL_ENV = "LIUM_VOLUME_RENTAL"


class VolumeStack(cdk.TerraformStack):
    """A ``lium_volume`` and one pod of rental ``rental`` mounting it."""

    def __init__(self, scope: Construct, id_: str, *, rental: int) -> None:
        super().__init__(scope, id_)
        LiumProvider(self, "lium")
        volume = Volume(self, "datasets", name="datasets", description="kept across rentals")
        GpuStack(
            self,
            "rental",
            name=f"volume-rental-{rental}",
            image="python:3.11-slim",
            volume_id=volume.id,
            ssh_public_key=ssh_public_key_from_env(),
        )


def main() -> None:
    app = cdk.App()
    VolumeStack(app, "volume", rental=int(os.environ.get(RENTAL_ENV, "1")))
    app.synth()


if __name__ == "__main__":
    main()
