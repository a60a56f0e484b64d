"""The provider ``terraform init`` installed, started outside Terraform: only when a warm zygote serves it.

Some work around a Terraform command needs the provider itself, ahead of or beside Terraform's own
starts of it: a provider for ``terraform show`` to attach to (:mod:`tfbridge.serving.reattach`), or a
side command of the provider program (:mod:`tfbridge.serving.commands`). It is only worth doing when
it costs a fork, so :func:`start_warm` starts the executable with :data:`WARM_ONLY_ENV`: without a
warm zygote its launcher exits at once, writing nothing, and nothing else starts. The launcher watches
the process that started it, which stands for Terraform: if that process dies, what it started stops.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from tfbridge.serving.constants import (
    MAGIC_COOKIE_KEY,
    MAGIC_COOKIE_VALUE,
    PROVIDER_PROTOCOL_VERSION,
    WARM_ONLY_ENV,
)

_TERRAFORM_VERSION_TIMEOUT_SECONDS = 30.0


class InstalledProvider(NamedTuple):
    """A provider as ``terraform init`` installed it in a working directory."""

    address: str
    """Its name in Terraform (``registry.terraform.io/<namespace>/<type>``), as in TF_REATTACH_PROVIDERS."""
    version: str
    executable: Path


def installed_provider(
    working_dir: Path, source: str, environ: Mapping[str, str]
) -> InstalledProvider | None:
    """The provider ``namespace/type`` (``source``) that ``terraform init`` installed for ``working_dir``
    and Terraform uses there; None when that is not known for sure.

    Terraform's layout: ``<data dir>/providers/<hostname>/<namespace>/<type>/<version>/<os>_<arch>/
    terraform-provider-<type>_v<version>``, the data directory being ``TF_DATA_DIR`` (relative to the
    working directory) or ``.terraform``. An upgrade leaves the older versions there: when there are
    several, the one Terraform selects (its dependency lock file says which) is the one.
    """
    namespace, type_name = source.split("/")
    # Absolute: the executable is started in ``working_dir``, where a relative path would mean another file.
    providers = (working_dir / (environ.get("TF_DATA_DIR") or ".terraform") / "providers").absolute()
    pattern = f"*/{namespace}/{type_name}/*/*/terraform-provider-{type_name}_v*"
    found = [
        InstalledProvider(f"{parts[0]}/{source}", parts[3], path)
        for path in providers.glob(pattern)
        if os.access(path, os.X_OK) and (parts := path.relative_to(providers).parts)
    ]
    if len(found) > 1:  # rare (an upgrade): ask Terraform, ~0.03 s
        selected = _selected_versions(working_dir, environ)
        found = [provider for provider in found if selected.get(provider.address) == provider.version]
    return found[0] if len(found) == 1 else None


def _selected_versions(working_dir: Path, environ: Mapping[str, str]) -> dict[str, str]:
    """The version Terraform selects for each provider address in ``working_dir`` (``terraform version
    -json``, from the dependency lock file); empty when Terraform cannot say."""
    try:
        result = subprocess.run(
            ["terraform", "version", "-json"],
            cwd=working_dir,
            env=dict(environ),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=_TERRAFORM_VERSION_TIMEOUT_SECONDS,
        )
        selections = json.loads(result.stdout).get("provider_selections", {})
    except (OSError, subprocess.TimeoutExpired, ValueError, AttributeError):
        return {}
    return {str(address): str(version) for address, version in selections.items()}


def start_warm(
    executable: Path, args: Sequence[str], working_dir: Path, environ: Mapping[str, str]
) -> subprocess.Popen[bytes]:
    """Start ``executable args`` as Terraform would (go-plugin's cookie, protocol 6, but no client
    certificate: whatever it serves is plaintext), from a warm zygote only; pipes for stdin and stdout,
    stderr discarded. OSError if it cannot be executed."""
    environment = {key: value for key, value in environ.items() if key != "PLUGIN_CLIENT_CERT"}
    environment |= {
        MAGIC_COOKIE_KEY: MAGIC_COOKIE_VALUE,
        "PLUGIN_PROTOCOL_VERSIONS": str(PROVIDER_PROTOCOL_VERSION),
        WARM_ONLY_ENV: "1",
    }
    return subprocess.Popen(
        [str(executable), *args],
        cwd=working_dir,
        env=environment,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )


class LineReader:
    """Reads whole lines from a started process's stdout with a deadline, keeping what follows a line."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        self._fd = process.stdout.fileno()
        self._buffer = b""
        self._closed = False

    def line(self, timeout: float, limit: int) -> bytes | None:
        """The next line (without its newline): b"" when the process closed its output before writing
        one (a warm-only start that found no zygote), None when no whole line came within ``timeout``
        seconds or within ``limit`` bytes."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            if self._closed:
                return b"" if not self._buffer else None
            if len(self._buffer) >= limit or not self._wait_readable(deadline):
                return None
            try:
                chunk = os.read(self._fd, 1 << 16)
            except OSError:  # closed under it by another thread: the process was stopped
                chunk = b""
            self._closed = not chunk
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line if len(line) <= limit else None

    def _wait_readable(self, deadline: float) -> bool:
        try:
            with selectors.DefaultSelector() as selector:
                selector.register(self._fd, selectors.EVENT_READ)
                return bool(selector.select(max(0.0, deadline - time.monotonic())))
        except (OSError, ValueError):  # closed under it: reading it says so
            return True


def stop(process: subprocess.Popen[bytes]) -> None:
    """End ``process`` (SIGTERM, which its launcher passes on) and reap it."""
    if process.poll() is None:
        process.terminate()
    for stream in (process.stdin, process.stdout):
        if stream is not None:
            stream.close()
    process.wait()
