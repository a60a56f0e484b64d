"""``make demo``'s driver, run as ``make demo`` runs it: its own emulator, key pair and cdktf deploy/destroy."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.constructs.apps import QUIET
from tests.support.terraform import REPO

pytestmark = pytest.mark.terraform


def test_demo_deploys_uses_destroys_and_leaves_nothing(tmp_path: Path) -> None:
    env = {name: value for name, value in os.environ.items() if not name.startswith(("LIUM_", "TF_"))}
    result = subprocess.run(
        [sys.executable, str(REPO / "examples" / "demo" / "run_demo.py")],
        env={**env, **QUIET, "TMPDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-3000:]
    out = result.stdout
    assert "the emulator reports 0 pods, 0 templates, 0 docker credentials, 0 volumes left" in out
    assert "result: deployed, used and destroyed; nothing left" in out
    assert re.search(r"\n\S+: Linux .*, \d+ CPUs, Python 3\.\d+", out), "the SSH command's output is missing"
    billed = re.search(r"cost: 1 pod\(s\), ([\d.]+) billed pod-seconds = \$([\d.]+)", out)
    assert billed and float(billed.group(1)) > 0 and float(billed.group(2)) > 0, out[-2000:]
    assert list(tmp_path.iterdir()) == [], "the demo's temporary directory must be removed"
    # Readable in a log or a pipe: no terminal escape sequences, and the outputs printed once.
    assert "\x1b" not in out + result.stderr, "the demo printed ANSI escape sequences"
    assert out.count('"stack_price_per_hour"') == 1 and "stack_price_per_hour =" not in out, out[-3000:]
    assert "Apply complete! Resources: 3 added" in out and "Destroy complete! Resources: 3 destroyed" in out
