"""Quickstart: one GPU pod on ``python:3.11-slim``, the cheapest offer, with the dstack runner and a smoke test.

    npx cdktf deploy      # from the repository root (cdktf.json runs this file)
    npx cdktf destroy
    LIUM_CDK=cdktn npx cdktn deploy   # the same with CDK Terrain (on the Node 22 in node_modules)

The provider reads LIUM_API_URL, LIUM_API_KEY and LIUM_SSH_PRIVATE_KEY_FILE when Terraform runs; this
program only reads the public key next to the private one (``<path>.pub``).
"""

from __future__ import annotations

from constructs import Construct
from lium_constructs import GpuStack, LiumProvider, RunnerOptions, cdk, local_state, ssh_public_key_from_env

# Run once through the dstack runner, as the image user, after the runner is healthy.
SMOKE_TEST = ["python3 --version", "python3 -c 'import os; print(\"hello from\", os.uname().nodename)'"]


class QuickstartStack(cdk.TerraformStack):
    """One pod, its template and runner; outputs the SSH command and what it costs per hour."""

    def __init__(self, scope: Construct, id_: str) -> None:
        super().__init__(scope, id_)
        local_state(self)  # terraform.<stack>.tfstate here, by a path that survives moving the project
        LiumProvider(self, "lium")
        GpuStack(
            self,
            "quickstart",
            image="python:3.11-slim",
            ssh_public_key=ssh_public_key_from_env(),
            runner=RunnerOptions(smoke_test=SMOKE_TEST),
        )


def main() -> None:
    app = cdk.App()
    QuickstartStack(app, "quickstart")
    app.synth()


if __name__ == "__main__":
    main()
