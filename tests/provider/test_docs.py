"""The generated reference docs must match the schemas: a stale page fails here."""

from __future__ import annotations

from pathlib import Path

from lium_provider.provider import LiumProvider
from tfbridge.docs import generate

REPO = Path(__file__).resolve().parents[2]


def test_docs_are_current() -> None:
    pages = generate(LiumProvider, REPO / "examples")
    assert {"index.md", "resources/pod.md", "data-sources/offers.md"} <= set(pages)
    stale = [name for name, content in pages.items() if (REPO / "docs" / name).read_text() != content]
    assert not stale, f"regenerate with `.venv/bin/lium-tf docs`: stale {stale}"


def test_docs_describe_write_only_and_replacement() -> None:
    credential = generate(LiumProvider, REPO / "examples")["resources/docker_credential.md"]
    assert "`password_wo` (string, sensitive, write-only)" in credential
    pod = generate(LiumProvider, REPO / "examples")["resources/pod.md"]
    assert "`template_id` (string, forces replacement)" in pod and "## Import" in pod
