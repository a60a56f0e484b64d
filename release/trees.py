"""Static trees Terraform (or OpenTofu) installs the provider from, ready to serve as they are.

- ``registry/``: the provider registry protocol. Serve it at the root of an HTTPS host: discovery
  (``/.well-known/terraform.json`` names ``/v1/providers/``), ``…/versions`` and
  ``…/<version>/download/<os>/<arch>`` (JSON, with the archive's SHA-256, the signed ``SHA256SUMS`` and
  the public signing key). Every URL in them is relative, so the tree works on any host name.
- ``mirror/``: the provider network-mirror protocol (``network_mirror { url = ".../mirror/" }``, HTTPS):
  ``<hostname>/<namespace>/<type>/index.json`` and ``<version>.json`` with each archive's ``zh:`` and
  ``h1:`` hashes, the archives beside them.
- ``fs-mirror/``: a filesystem mirror in the packed layout (``filesystem_mirror { path = ... }``):
  ``<hostname>/<namespace>/<type>/<archive>.zip``.

The mirrors hold the provider under every hostname of :data:`release.layout.HOSTNAMES`: Terraform's
registry and OpenTofu's. Archives are hard links to the ones in ``dist/`` (copies across filesystems).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from release import layout
from release.archive import h1_hash, zip_hash


@dataclass(frozen=True)
class Archive:
    """One platform's provider zip."""

    os: str
    arch: str
    path: Path

    @property
    def shasum(self) -> str:
        return zip_hash(self.path).removeprefix("zh:")


def _place(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def _write_json(path: Path, document: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n")


def write_registry(
    root: Path, archives: list[Archive], sums: Path, signature: Path, public_key: str, key_id: str
) -> Path:
    _write_json(root / ".well-known" / "terraform.json", {"providers.v1": "/v1/providers/"})
    provider = root / "v1" / "providers" / layout.PROVIDER_NAMESPACE / layout.PROVIDER_TYPE
    protocols = list(layout.PROTOCOL_VERSIONS)
    _write_json(
        provider / "versions",
        {
            "versions": [
                {
                    "version": layout.VERSION,
                    "protocols": protocols,
                    "platforms": [{"os": a.os, "arch": a.arch} for a in archives],
                }
            ]
        },
    )
    release = provider / layout.VERSION
    for file in (sums, signature, *(a.path for a in archives)):
        _place(file, release / file.name)
    for archive in archives:
        # Relative to .../<version>/download/<os>/<arch>: two levels up is .../<version>/.
        _write_json(
            release / "download" / archive.os / archive.arch,
            {
                "protocols": protocols,
                "os": archive.os,
                "arch": archive.arch,
                "filename": archive.path.name,
                "download_url": f"../../{archive.path.name}",
                "shasums_url": f"../../{sums.name}",
                "shasums_signature_url": f"../../{signature.name}",
                "shasum": archive.shasum,
                "signing_keys": {
                    "gpg_public_keys": [
                        {
                            "key_id": key_id,
                            "ascii_armor": public_key,
                            "trust_signature": "",
                            "source": "lium-stacks",
                        }
                    ]
                },
            },
        )
    return root


def write_network_mirror(root: Path, archives: list[Archive]) -> Path:
    for hostname in layout.HOSTNAMES:
        provider = root / hostname / layout.PROVIDER_NAMESPACE / layout.PROVIDER_TYPE
        _write_json(provider / "index.json", {"versions": {layout.VERSION: {}}})
        _write_json(
            provider / f"{layout.VERSION}.json",
            {
                "archives": {
                    f"{a.os}_{a.arch}": {"url": a.path.name, "hashes": [h1_hash(a.path), zip_hash(a.path)]}
                    for a in archives
                }
            },
        )
        for archive in archives:
            _place(archive.path, provider / archive.path.name)
    return root


def write_filesystem_mirror(root: Path, archives: list[Archive]) -> Path:
    for hostname in layout.HOSTNAMES:
        for archive in archives:
            _place(
                archive.path,
                root / hostname / layout.PROVIDER_NAMESPACE / layout.PROVIDER_TYPE / archive.path.name,
            )
    return root
