"""Private registry: a pod from a private image, logged in with a temporary, write-only credential.

    export TF_VAR_registry_password=...   # read by Terraform on every plan, apply and destroy; never stored
    export TF_INPUT=0                     # without the password, fail at once instead of waiting at a prompt
    npx cdktf deploy --app ".venv/bin/python examples/private-registry/main.py" --auto-approve --skip-provider-lock
    npx cdktf destroy --app ".venv/bin/python examples/private-registry/main.py" --auto-approve --skip-provider-lock

The image and user default to the Lium emulator's private image; set LIUM_PRIVATE_IMAGE and
LIUM_REGISTRY_USERNAME for your own registry.
"""

from __future__ import annotations

import os

from constructs import Construct
from lium_constructs import (
    GpuStack,
    LiumProvider,
    RegistryAuth,
    RunnerOptions,
    cdk,
    local_state,
    ssh_public_key_from_env,
)

DEFAULT_IMAGE = "registry.lium-emulator.local/team/private-trainer:1.0"
DEFAULT_USERNAME = "trainer-bot"
# The private image's own environment reaches the runner's jobs.
SMOKE_TEST = ['test -n "$TRAINER_HOME"', 'echo "TRAINER_HOME=$TRAINER_HOME"']


class PrivateRegistryStack(cdk.TerraformStack):
    """One pod from a private image; the credential and template live and die with the pod."""

    def __init__(self, scope: Construct, id_: str) -> None:
        super().__init__(scope, id_)
        local_state(self)  # terraform.<stack>.tfstate here, by a path that survives moving the project
        LiumProvider(self, "lium")
        GpuStack(
            self,
            "trainer",
            name="private-trainer",
            image=os.environ.get("LIUM_PRIVATE_IMAGE", DEFAULT_IMAGE),
            registry=RegistryAuth(username=os.environ.get("LIUM_REGISTRY_USERNAME", DEFAULT_USERNAME)),
            ssh_public_key=ssh_public_key_from_env(),
            runner=RunnerOptions(smoke_test=SMOKE_TEST),
        )


def main() -> None:
    app = cdk.App()
    PrivateRegistryStack(app, "private-registry")
    app.synth()


if __name__ == "__main__":
    main()
