"""Typed CDKTF constructs for the lium provider (generated from its schema), and the high-level GpuStack.

    from lium_constructs import GpuStack, LiumProvider, cdk

    class Stack(cdk.TerraformStack):
        def __init__(self, scope, id_):
            super().__init__(scope, id_)
            LiumProvider(self, "lium")  # endpoint, key and SSH key from LIUM_* environment variables
            GpuStack(self, "gpu", image="python:3.11-slim")

``cdk`` is cdktf (default) or CDK Terrain's cdktn, chosen by ``LIUM_CDK`` (see :mod:`lium_constructs._cdk`).
"""

from lium_constructs._cdk import CDK_NAME, cdk
from lium_constructs.environment import ssh_public_key_from_env
from lium_constructs.generated import (
    Cluster,
    DataLiumClusterOffers,
    DataLiumOffers,
    DataLiumPod,
    DataLiumSshKeys,
    DataLiumTemplates,
    DockerCredential,
    LiumProvider,
    OfferFilter,
    Pod,
    Runner,
    SshKey,
    Template,
    Volume,
)
from lium_constructs.gpu_stack import GpuStack, RegistryAuth
from lium_constructs.runner_options import RunnerOptions
from lium_constructs.secrets import SecretVariable
from lium_constructs.state import local_state

__all__ = [
    "CDK_NAME",
    "Cluster",
    "DataLiumClusterOffers",
    "DataLiumOffers",
    "DataLiumPod",
    "DataLiumSshKeys",
    "DataLiumTemplates",
    "DockerCredential",
    "GpuStack",
    "LiumProvider",
    "OfferFilter",
    "Pod",
    "RegistryAuth",
    "Runner",
    "RunnerOptions",
    "SecretVariable",
    "SshKey",
    "Template",
    "Volume",
    "cdk",
    "local_state",
    "ssh_public_key_from_env",
]
