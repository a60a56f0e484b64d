"""Where a stack keeps its local Terraform state: a path that survives copying or moving the project.

cdktf's default local backend writes the absolute path ``<cwd>/terraform.<stack>.tfstate`` into
``cdk.tf.json``, and Terraform records the backend configuration in ``cdktf.out/stacks/<stack>/.terraform``.
Copy or move the project and the next deploy stops with "Backend configuration changed". Terraform runs
in ``<outdir>/stacks/<stack>``, so the same file named relative to that directory is the same state file
wherever the project lives.
"""

from __future__ import annotations

import os
from pathlib import Path

from lium_constructs._cdk import cdk

# cdktf synthesizes each stack into <outdir>/stacks/<stack id>/ and runs Terraform there.
STACKS_FOLDER = "stacks"


def local_state(stack: cdk.TerraformStack) -> cdk.LocalBackend:
    """Declare ``stack``'s local backend at ``terraform.<stack id>.tfstate`` in the directory the app runs
    in (cdktf's default file), by a path relative to the directory Terraform runs in."""
    stack_id = stack.node.id
    outdir = Path(cdk.App.of(stack).outdir).absolute()
    state_file = Path.cwd() / f"terraform.{stack_id}.tfstate"
    return cdk.LocalBackend(stack, path=os.path.relpath(state_file, outdir / STACKS_FOLDER / stack_id))
