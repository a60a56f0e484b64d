"""Drive the real ``terraform`` CLI in a scratch directory with our providers in a filesystem mirror."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lium_provider import PROVIDER_SOURCE, __version__
from lium_provider.cli import launcher_command
from tfbridge.serving.install import cli_configuration, write_launcher

REPO = Path(__file__).resolve().parents[2]


def install_test_providers(plugins_dir: Path) -> None:
    """Launchers for the bridge test provider and the Lium provider, run with this interpreter."""
    write_launcher(
        plugins_dir,
        "lium-stacks/bridgetest",
        "0.0.1",
        [*launcher_command()[:-1], str(REPO / "tests" / "tfbridge" / "serve_bridgetest.py")],
    )
    write_launcher(plugins_dir, PROVIDER_SOURCE, __version__, launcher_command())


def write_cli_config(path: Path, plugins_dir: Path) -> Path:
    """An offline CLI configuration: every provider from ``plugins_dir``."""
    path.write_text(cli_configuration(plugins_dir, None))
    return path


@dataclass
class Terraform:
    """One working directory and the environment Terraform runs with there."""

    workdir: Path
    env: dict[str, str] = field(default_factory=dict)
    timeout: float = 600.0

    def write(self, main_tf: str, name: str = "main.tf") -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / name).write_text(main_tf)

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.env)
        return env

    def run(
        self, *args: str, check: bool = True, timeout: float | None = None
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            ["terraform", *args],
            cwd=self.workdir,
            env=self._env(),
            capture_output=True,
            text=True,
            timeout=timeout or self.timeout,
            stdin=subprocess.DEVNULL,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"terraform {' '.join(args)} exited {result.returncode}\n--- stdout\n{result.stdout}\n"
                f"--- stderr\n{result.stderr}"
            )
        return result

    def start(self, *args: str, extra_env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        """Start terraform in its own process group, as a shell would, so SIGINT reaches it like Ctrl-C."""
        env = self._env()
        env.update(extra_env or {})
        return subprocess.Popen(
            ["terraform", *args],
            cwd=self.workdir,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    def init(self) -> None:
        self.run("init", "-input=false", "-no-color")

    def apply(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.run("apply", "-auto-approve", "-input=false", "-no-color", *args, check=check)

    def destroy(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.run("destroy", "-auto-approve", "-input=false", "-no-color", *args, check=check)

    def plan_exitcode(self, *args: str) -> tuple[int, str]:
        """``terraform plan -detailed-exitcode``: 0 no changes, 2 changes (1 is an error and raises)."""
        result = self.run("plan", "-input=false", "-no-color", "-detailed-exitcode", *args, check=False)
        if result.returncode not in (0, 2):
            raise AssertionError(f"terraform plan failed:\n{result.stdout}\n{result.stderr}")
        return result.returncode, result.stdout

    def show_json(self, *args: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.run("show", "-json", *args).stdout)
        return data

    def state_file(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.workdir / "terraform.tfstate").read_text())
        return data

    def resources(self) -> list[dict[str, Any]]:
        """Managed resources in the state file (each with ``type``, ``name`` and ``instances``)."""
        path = self.workdir / "terraform.tfstate"
        if not path.exists():
            return []
        return [r for r in self.state_file().get("resources", []) if r.get("mode") == "managed"]


def flat(text: str) -> str:
    """Terraform's wrapped diagnostics on one line (its box-drawing margin and line breaks gone)."""
    return " ".join(text.replace("│", " ").split())


def interrupt(process: subprocess.Popen[str]) -> None:
    """Ctrl-C: SIGINT to terraform's whole process group, as a terminal does."""
    os.killpg(process.pid, signal.SIGINT)


def kill_group(process: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


@contextlib.contextmanager
def reaped(process: subprocess.Popen[str]) -> Iterator[subprocess.Popen[str]]:
    """``process`` (from :meth:`Terraform.start`), its process group killed on the way out if it is
    still running, so a failing test leaves no terraform or provider behind."""
    try:
        yield process
    finally:
        if process.poll() is None:
            kill_group(process)
