"""The provider's Registry reference pages (``docs/index.md``, ``docs/resources``, ``docs/data-sources``),
generated from its schemas by :mod:`tfbridge.docs` with the checkout's examples."""

from __future__ import annotations

from pathlib import Path

from lium_provider.provider import LiumProvider
from tfbridge.docs import generate, write

REPO = Path(__file__).resolve().parent.parent
# The Terraform Registry's navigation groups of the reference pages (front matter `subcategory`).
DOCS_SUBCATEGORIES = {
    "lium_pod": "Compute",
    "lium_runner": "Compute",
    "lium_offers": "Compute",
    "lium_template": "Images",
    "lium_templates": "Images",
    "lium_docker_credential": "Images",
    "lium_volume": "Storage",
    "lium_ssh_key": "Access",
    "lium_ssh_keys": "Access",
}


def reference_pages(examples_dir: Path) -> dict[str, str]:
    """The generated pages of ``docs/`` (index, resources, data sources), keyed by their relative path."""
    return generate(LiumProvider, examples_dir, DOCS_SUBCATEGORIES)


def write_reference_pages(examples_dir: Path, docs_dir: Path) -> list[Path]:
    """Write the pages under ``docs_dir``; the paths written."""
    return write(reference_pages(examples_dir), docs_dir)
