"""What ``lium-tf run`` and ``lium-tf logs`` know of a stack: its state, as ``terraform show -json`` gives it.

Terraform reads the state from wherever its backend keeps it (a local file, PostgreSQL, S3), so a job
can be started from any checkout or CI runner that ran ``terraform init`` for the stack; a CDK stack's
directory is ``cdktf.out/stacks/<stack>``. Only what the state holds is used: the runners' pods and pinned
host keys, and the values of their ``environment``, which every output is redacted of.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class StackError(Exception):
    """The stack cannot be read, or holds nothing that the command needs; the message says what to do."""


@dataclass(frozen=True)
class StateResource:
    """One resource instance of the state."""

    address: str
    type: str
    values: Mapping[str, Any]


@dataclass(frozen=True)
class StackState:
    """The managed resource instances of one state, in Terraform's order, child modules included."""

    directory: Path
    resources: tuple[StateResource, ...]

    def of_type(self, type_name: str) -> list[StateResource]:
        return [r for r in self.resources if r.type == type_name]

    def selected(self, type_name: str, targets: Sequence[str] = ()) -> list[StateResource]:
        """The ``type_name`` instances ``targets`` name as ``-target`` does (all without one): an address,
        or an address it is the prefix of (``lium_runner.node`` names every instance; ``module.gpu`` all
        in it)."""
        found = self.of_type(type_name)
        if not targets:
            return found
        return [r for r in found if any(r.address == t or _under(r.address, t) for t in targets)]

    def secret_values(self) -> list[str]:
        """Every value of every runner's ``environment``: what no output may show."""
        return [
            str(value)
            for runner in self.of_type("lium_runner")
            for value in (runner.values.get("environment") or {}).values()
            if value
        ]


def _under(address: str, target: str) -> bool:
    return address.startswith(target + ".") or address.startswith(target + "[")


def read_state(directory: Path, environ: Mapping[str, str] | None = None) -> StackState:
    """The state of the stack Terraform manages in ``directory`` (``terraform show -json``)."""
    terraform = shutil.which("terraform")
    if terraform is None:
        raise StackError(
            "terraform is not on PATH: it reads the stack's state, wherever its backend keeps it"
        )
    if not directory.is_dir():
        raise StackError(f"{directory} is not a directory: pass the stack's directory with --dir")
    try:
        shown = subprocess.run(
            [terraform, f"-chdir={directory}", "show", "-json", "-no-color"],
            capture_output=True,
            text=True,
            env={**(environ if environ is not None else os.environ), "TF_IN_AUTOMATION": "1"},
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except OSError as exc:
        raise StackError(f"terraform could not be started: {exc}") from None
    if shown.returncode != 0:
        said = " ".join(shown.stderr.split())[:600]
        raise StackError(
            f"`terraform show -json` failed in {directory} ({said}): run `terraform init` there first, "
            "or pass the stack's directory with --dir (a CDK stack's is cdktf.out/stacks/<stack>)"
        )
    try:
        document = json.loads(shown.stdout)
    except ValueError:
        raise StackError("`terraform show -json` printed something other than JSON") from None
    if not document.get("values"):
        raise StackError(
            f"no Terraform state in {directory}: apply the stack there first (after `terraform init`), or "
            "pass its directory with --dir (a CDK stack's is cdktf.out/stacks/<stack>)"
        )
    root = (document.get("values") or {}).get("root_module") or {}
    return StackState(directory, tuple(_resources(root)))


def _resources(module: Mapping[str, Any]) -> Iterator[StateResource]:
    for resource in module.get("resources") or []:
        if resource.get("mode") == "managed" and isinstance(resource.get("values"), dict):
            yield StateResource(str(resource["address"]), str(resource["type"]), resource["values"])
    for child in module.get("child_modules") or []:
        yield from _resources(child)
