"""What every Terraform benchmark sets up, and how it runs Terraform.

A scratch directory with our providers in a filesystem mirror, the environment ``terraform`` runs with
there, and provider zygotes private to the run (stopped at its end, see tfbridge/serving/zygote.py).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.procs import private_zygotes
from tests.support.terraform import install_test_providers, write_cli_config


@contextmanager
def terraform_workspace(prefix: str) -> Iterator[tuple[Path, dict[str, str]]]:
    """``(scratch directory, environment)``; the mirror is ``<scratch>/plugins``."""
    with tempfile.TemporaryDirectory(prefix=prefix) as scratch, private_zygotes(Path(scratch) / "zygotes"):
        base = Path(scratch)
        plugins = base / "plugins"
        install_test_providers(plugins)
        env = {
            **os.environ,
            "TF_CLI_CONFIG_FILE": str(write_cli_config(base / "terraformrc", plugins)),
            "CHECKPOINT_DISABLE": "1",
            "TF_IN_AUTOMATION": "1",
        }
        yield base, env


def terraform(workdir: Path, env: dict[str, str], *args: str) -> str:
    """Run ``terraform args`` in ``workdir``; its stdout. A failure ends the benchmark with its stderr."""
    result = subprocess.run(["terraform", *args], cwd=workdir, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"terraform {' '.join(args)} failed in {workdir}:\n{result.stderr}")
    return result.stdout


def timed_terraform(workdir: Path, env: dict[str, str], *args: str) -> float:
    """Seconds ``terraform args`` took (see :func:`terraform`)."""
    started = time.perf_counter()
    terraform(workdir, env, *args)
    return time.perf_counter() - started
