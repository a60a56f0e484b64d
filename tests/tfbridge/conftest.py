"""Fixtures of the plugin-process tests: Terraform's client identity and a short socket directory."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.tfbridge.plugin_host import ClientIdentity


@pytest.fixture(scope="module")
def identity() -> ClientIdentity:
    return ClientIdentity.generate()


@pytest.fixture
def socket_root() -> Iterator[Path]:
    # Not pytest's tmp_path: unix socket paths must stay under 108 bytes.
    root = Path(tempfile.mkdtemp(prefix="tfb-"))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)
