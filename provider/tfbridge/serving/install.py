"""Install a provider launcher into a Terraform filesystem mirror, so ``terraform init`` works offline.

Terraform finds providers in the implied mirror ``~/.terraform.d/plugins`` (or an explicit
``filesystem_mirror``) laid out as ``<host>/<namespace>/<type>/<version>/<os>_<arch>/terraform-provider-<type>_v<version>``.
The launcher is a two-line shell script that execs the Python interpreter on the provider module.
OpenTofu reads the same mirror, but a source without a hostname means ``registry.opentofu.org`` to it, so
the launcher is written under both hostnames.
"""

from __future__ import annotations

import os
import platform
import shlex
from pathlib import Path

# What every launcher runs: the standard-library-only script that hands a start to the warm zygote
# (python -I -S LAUNCH_SCRIPT <program>).
LAUNCH_SCRIPT = Path(__file__).resolve().with_name("launch.py")
# What a provider source without a hostname means: to Terraform, and to OpenTofu.
REGISTRY_HOSTNAMES = ("registry.terraform.io", "registry.opentofu.org")


def default_plugins_dir() -> Path:
    """Terraform's implied local mirror of the user running it, read when asked (HOME may change)."""
    return Path.home() / ".terraform.d" / "plugins"


def platform_dir() -> str:
    machine = platform.machine().lower()
    arch = {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(machine, machine)
    return f"{platform.system().lower()}_{arch}"


def executable_name(type_name: str, version: str) -> str:
    """The file Terraform executes in a provider package: ``terraform-provider-<type>_v<version>``."""
    return f"terraform-provider-{type_name}_v{version}"


def launcher_path(
    plugins_dir: Path, source: str, version: str, hostname: str = REGISTRY_HOSTNAMES[0]
) -> Path:
    namespace, type_name = source.split("/")
    return (plugins_dir / hostname / namespace / type_name / version / platform_dir()) / executable_name(
        type_name, version
    )


def write_launcher(
    plugins_dir: Path, source: str, version: str, command: list[str], hostname: str = REGISTRY_HOSTNAMES[0]
) -> Path:
    """Write (or rewrite) the launcher for ``source`` at ``version`` under ``hostname``; returns its path.

    The content only changes when ``command`` does, so re-installing keeps the lock file's hash valid.
    """
    path = launcher_path(plugins_dir, source, version, hostname)
    path.parent.mkdir(parents=True, exist_ok=True)
    script = "#!/bin/sh\nexec " + " ".join(shlex.quote(part) for part in command) + ' "$@"\n'
    if not path.exists() or path.read_text() != script:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(script)
        tmp.chmod(0o755)
        os.replace(tmp, path)
    return path


def cli_configuration(plugins_dir: Path, namespace: str | None) -> str:
    """A Terraform CLI configuration that takes ``namespace``'s providers from ``plugins_dir`` only and
    every other provider from its registry: what ``TF_CLI_CONFIG_FILE`` names for one checkout's own
    mirror, so two checkouts on one machine never use each other's launcher. With no ``namespace``,
    every provider comes from ``plugins_dir`` (an offline configuration)."""
    path = f"    path    = {_hcl_string(str(plugins_dir))}\n"
    if namespace is None:
        return f"provider_installation {{\n  filesystem_mirror {{\n{path}  }}\n}}\n"
    patterns = ", ".join(f'"{hostname}/{namespace}/*"' for hostname in REGISTRY_HOSTNAMES)
    return (
        "provider_installation {\n"
        f"  filesystem_mirror {{\n{path}    include = [{patterns}]\n  }}\n"
        f"  direct {{\n    exclude = [{patterns}]\n  }}\n"
        "}\n"
    )


def _hcl_string(text: str) -> str:
    return (
        '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("${", "$${").replace("%{", "%%{") + '"'
    )
