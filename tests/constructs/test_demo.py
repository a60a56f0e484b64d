"""``make demo``'s driver, run as ``make demo`` runs it: its own emulator, key pair and cdktf deploy/destroy."""

from __future__ import annotations

import os
import re
import signal
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


def test_an_interrupted_demo_says_so_destroys_and_reports_what_is_left(tmp_path: Path) -> None:
    """Ctrl-C (SIGINT to the terminal's process group) while the deploy creates the pod: the demo says it
    was interrupted, and where, destroys what was deployed and says what is left: nothing."""
    env = {name: value for name, value in os.environ.items() if not name.startswith(("LIUM_", "TF_"))}
    process = subprocess.Popen(
        [sys.executable, str(REPO / "examples" / "demo" / "run_demo.py")],
        env={**env, **QUIET, "TMPDIR": str(tmp_path)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    assert process.stdout is not None
    lines = []
    try:
        for line in process.stdout:
            lines.append(line)
            if "lium_pod." in line and "Creating..." in line:
                os.killpg(process.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
                break
        lines += process.stdout.readlines()
        process.wait(timeout=300)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    out = "".join(lines)
    assert process.returncode == 130, out[-3000:]
    assert "Interrupted during: cdktf deploy" in out, out[-3000:]
    assert "interrupted (Ctrl-C) during: cdktf deploy (quickstart" in out
    assert (
        "cdktf destroy ran; the emulator reports 0 pods, 0 templates, 0 docker credentials, 0 volumes left"
        in out
    )
    assert "result: INTERRUPTED, nothing left" in out
    assert "exited -2" not in out
