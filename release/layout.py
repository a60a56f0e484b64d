"""Names and places of the release artifacts, each declared once (the version comes from lium_provider)."""

from __future__ import annotations

import json
import platform
from pathlib import Path

from lium_provider import PROVIDER_SOURCE, __version__
from tfbridge.serving.install import REGISTRY_HOSTNAMES

REPO = Path(__file__).resolve().parent.parent
VERSION = __version__
PROVIDER_NAMESPACE, PROVIDER_TYPE = PROVIDER_SOURCE.split("/")
# The registry manifest (what the Terraform Registry reads when publishing): the plugin protocols served.
REGISTRY_MANIFEST = REPO / "terraform-registry-manifest.json"
PROTOCOL_VERSIONS: tuple[str, ...] = tuple(
    json.loads(REGISTRY_MANIFEST.read_text())["metadata"]["protocol_versions"]
)
# The registries a provider address without a hostname means: Terraform's and OpenTofu's.
HOSTNAMES = REGISTRY_HOSTNAMES
PREFIX = f"terraform-provider-{PROVIDER_TYPE}_{VERSION}"


def build_platform() -> tuple[str, str]:
    """``(os, arch)`` in Terraform's spelling for this machine: the only platform it can build."""
    machine = platform.machine().lower()
    return platform.system().lower(), {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)


def archive_name(os_name: str, arch: str) -> str:
    return f"{PREFIX}_{os_name}_{arch}.zip"


# The registry protocol's checksum file: the provider archives only, since Terraform records a zh: hash
# in every lock file for each line of it.
PROVIDER_SHA256SUMS = f"{PREFIX}_SHA256SUMS"
# Every artifact of dist/ (wheel, sdist, archives, manifest), for anyone downloading them.
SHA256SUMS = "SHA256SUMS"
SIGNATURE_SUFFIX = ".sig"
MANIFEST = f"{PREFIX}_manifest.json"
SIGNING_KEY = "signing-key.asc"
