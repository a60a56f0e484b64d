"""``SecretVariable``: a sensitive, ephemeral Terraform variable for write-only arguments.

A secret written as a literal into a construct would land in ``cdk.tf.json`` (and in every copy of it).
Instead, declare a ``SecretVariable`` and pass its ``string_value`` (a ``${var.name}`` reference); Terraform
reads the value from ``TF_VAR_<name>`` when it plans and applies. Marked ``ephemeral`` (Terraform ≥ 1.10),
the value also stays out of plan files and state; it may only flow into write-only arguments (such as
``lium_docker_credential.password_wo``) and provider configuration.

cdktf 0.21 and cdktn 0.24 have no ``ephemeral`` flag on ``TerraformVariable``, so this class adds it
to both the JSON and the HCL it synthesizes.
"""

from __future__ import annotations

from typing import Any

from constructs import Construct
from lium_constructs._cdk import cdk


class SecretVariable(cdk.TerraformVariable):
    """A string variable marked ``sensitive`` and ``ephemeral``; set it with ``TF_VAR_<name>``."""

    def __init__(
        self, scope: Construct, id_: str, *, name: str | None = None, description: str | None = None
    ) -> None:
        """Declare the variable; ``name`` fixes its Terraform name (default: cdktf's unique id for ``id_``)."""
        super().__init__(scope, id_, type="string", sensitive=True, nullable=False, description=description)
        if name is not None:
            self.override_logical_id(name)

    @property
    def environment_variable(self) -> str:
        """The environment variable Terraform reads the value from."""
        return f"TF_VAR_{self.friendly_unique_id}"

    def to_terraform(self) -> Any:
        synthesized = super().to_terraform()
        for body in synthesized["variable"].values():
            body["ephemeral"] = True
        return synthesized

    def to_hcl_terraform(self) -> Any:
        synthesized = super().to_hcl_terraform()
        for body in synthesized["variable"].values():
            # cdktf's HCL rendering drops `nullable`; restore it so HCL and JSON declare the same variable.
            body["nullable"] = _hcl_boolean(False)
            body["ephemeral"] = _hcl_boolean(True)
        return synthesized


def _hcl_boolean(value: bool) -> dict[str, object]:
    return {"value": value, "isBlock": False, "type": "simple", "storageClassType": "boolean"}
