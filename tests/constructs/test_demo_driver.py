"""The demo driver's own checks, with a stand-in CDK CLI: a run that did nothing is a failure."""

from __future__ import annotations

import importlib.util
import stat
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.terraform import REPO

# What the pinned cdktn CLI prints when it cannot ask for approval, before it exits 0.
NO_TTY_STOP = "Approval required but stdin is not a TTY. Re-run with --auto-approve. Stopping."


@pytest.fixture
def driver(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``examples/demo/run_demo.py`` as a module (registered while the test runs: its dataclasses need it)."""
    spec = importlib.util.spec_from_file_location("run_demo", REPO / "examples" / "demo" / "run_demo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "run_demo", module)
    spec.loader.exec_module(module)
    return module


def fake_cli(directory: Path, output: str) -> Path:
    script = directory / "cdktf"
    script.write_text(f"#!/bin/sh\nprintf '%s\\n' '{output}'\nexit 0\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_the_pinned_cli_still_says_it_stopped_that_way() -> None:
    bundle = REPO / "node_modules" / "cdktn-cli" / "bundle" / "bin" / "cmds" / "handlers.js"
    assert NO_TTY_STOP.split(" Re-run")[0] in bundle.read_text(encoding="utf-8")


def test_a_deploy_that_stopped_for_approval_fails_the_demo(
    driver: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(driver, "CDKTF", fake_cli(tmp_path, NO_TTY_STOP))
    with pytest.raises(driver.CdkDidNothing, match="it did nothing"):
        driver._cdktf(tmp_path, {"PATH": "/usr/bin:/bin"}, "deploy")


def test_a_deploy_that_applied_passes(
    driver: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(driver, "CDKTF", fake_cli(tmp_path, "Apply complete! Resources: 3 added"))
    driver._cdktf(tmp_path, {"PATH": "/usr/bin:/bin"}, "deploy")
    assert driver.FINISHED["deploy"] == "Apply complete!"
