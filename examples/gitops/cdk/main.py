"""The GitOps example's stack as a CDK app: a ``GpuStack`` of trainer pods, its state in PostgreSQL.

    python examples/gitops/cdk/main.py      # synth: cdktf.out/stacks/trainers/cdk.tf.json
    lium-tf gitops plan --dir cdktf.out/stacks/trainers --artifact ... --commit ...

This is how CDK pipelines run: synth, then Terraform plans and applies the synthesized stack (the
workflow in ../.github/workflows/terraform.yml does so beside the HCL stack in ../infra). Terraform's
``pg`` backend reads its connection string from ``PG_CONN_STR`` when it runs, so the synthesized JSON
(which the pipeline hashes and keeps with the plan) never holds it. ``TRAINERS`` sets how many pods
(default 1), as ``var.trainers`` does for the HCL stack; ``TERMINATION_HOURS`` makes Lium remove each pod
that many hours after it started, as ``var.termination_hours`` does (default: the provider's
``default_termination_hours``, else never).
"""

from __future__ import annotations

import os

from constructs import Construct
from lium_constructs import GpuStack, LiumProvider, OfferFilter, cdk

STACK_NAME = "trainers"
SCHEMA = "lium_gitops_cdk"


class TrainersStack(cdk.TerraformStack):
    """``count`` trainer pods of one RTX 4090 each on ``python:3.11-slim``; state in the ``pg`` backend."""

    def __init__(self, scope: Construct, id_: str, count: int, termination_hours: int | None = None) -> None:
        super().__init__(scope, id_)
        # The pg backend without a connection string (it comes from PG_CONN_STR at init), in place of
        # the CDK's default local backend, whose path would differ between checkouts; in a schema of
        # its own, so that it never shares a state with the HCL stack (../infra: lium_gitops_hcl).
        cdk.PgBackend(self, conn_str="from PG_CONN_STR", schema_name=SCHEMA)
        self.add_override("terraform.backend.pg.conn_str", None)
        LiumProvider(self, "lium")
        GpuStack(
            self,
            "trainer",
            image="python:3.11-slim",
            count=count,
            offer=OfferFilter(gpu="RTX 4090", max_price_per_hour=0.8),
            termination_hours=termination_hours,
            runner=None,
        )


def main() -> None:
    app = cdk.App()
    hours = os.environ.get("TERMINATION_HOURS")
    TrainersStack(
        app,
        STACK_NAME,
        count=int(os.environ.get("TRAINERS", "1")),
        termination_hours=int(hours) if hours else None,
    )
    app.synth()


if __name__ == "__main__":
    main()
