"""Install a provider launcher into a Terraform filesystem mirror, so ``terraform init`` works offline.

Terraform finds providers in the implied mirror ``~/.terraform.d/plugins`` (or an explicit
``filesystem_mirror``) laid out as ``<host>/<namespace>/<type>/<version>/<os>_<arch>/terraform-provider-<type>_v<version>``.
The launcher is a two-line shell script that execs the Python interpreter on the provider module.
"""

from __future__ import annotations

import os
import platform
import shlex
from pathlib import Path

DEFAULT_PLUGINS_DIR = Path.home() / ".terraform.d" / "plugins"


def platform_dir() -> str:
    machine = platform.machine().lower()
    arch = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(machine, machine)
    return f"{platform.system().lower()}_{arch}"


def launcher_path(
    plugins_dir: Path, source: str, version: str, hostname: str = "registry.terraform.io"
) -> Path:
    namespace, type_name = source.split("/")
    return (
        plugins_dir / hostname / namespace / type_name / version / platform_dir()
    ) / f"terraform-provider-{type_name}_v{version}"


def write_launcher(plugins_dir: Path, source: str, version: str, command: list[str]) -> Path:
    """Write (or rewrite) the launcher for ``source`` at ``version``; returns its path.

    The content only changes when ``command`` does, so re-installing keeps the lock file's hash valid.
    """
    path = launcher_path(plugins_dir, source, version)
    path.parent.mkdir(parents=True, exist_ok=True)
    script = "#!/bin/sh\nexec " + " ".join(shlex.quote(part) for part in command) + ' "$@"\n'
    if not path.exists() or path.read_text() != script:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(script)
        tmp.chmod(0o755)
        os.replace(tmp, path)
    return path
