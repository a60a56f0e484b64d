"""The provider ``terraform init`` installed, started outside Terraform: only when a warm zygote serves it.

Some work around a Terraform command needs the provider itself, ahead of or beside Terraform's own
starts of it: a provider for ``terraform show`` to attach to (:mod:`tfbridge.serving.reattach`), or a
side command of the provider program (:mod:`tfbridge.serving.commands`). It is only worth doing when
it costs a fork, so :func:`start_warm` starts the executable with :data:`WARM_ONLY_ENV`: without a
warm zygote its launcher exits at once, writing nothing, and nothing else starts. The launcher watches
the process that started it, which stands for Terraform: if that process dies, what it started stops.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tfbridge.serving.constants import MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE, WARM_ONLY_ENV

PROVIDER_PROTOCOL = "6"


@dataclass(frozen=True)
class InstalledProvider:
    """A provider as ``terraform init`` installed it in a working directory."""

    address: str
    """Its name in Terraform (``registry.terraform.io/<namespace>/<type>``), as in TF_REATTACH_PROVIDERS."""
    version: str
    executable: Path


def installed_provider(
    working_dir: Path, source: str, environ: Mapping[str, str]
) -> InstalledProvider | None:
    """The one provider ``namespace/type`` (``source``) that ``terraform init`` installed for
    ``working_dir``; None when there is none, or more than one (another hostname, another version).

    Terraform's layout: ``<data dir>/providers/<hostname>/<namespace>/<type>/<version>/<os>_<arch>/
    terraform-provider-<type>_v<version>``, the data directory being ``TF_DATA_DIR`` (relative to the
    working directory) or ``.terraform``.
    """
    namespace, type_name = source.split("/")
    # Absolute: the executable is started in ``working_dir``, where a relative path would mean another file.
    providers = (working_dir / environ.get("TF_DATA_DIR", ".terraform") / "providers").absolute()
    pattern = f"*/{namespace}/{type_name}/*/*/terraform-provider-{type_name}_v*"
    found = [path for path in providers.glob(pattern) if os.access(path, os.X_OK)]
    if len(found) != 1:
        return None
    hostname, _, _, version = found[0].relative_to(providers).parts[:4]
    return InstalledProvider(f"{hostname}/{source}", version, found[0])


def start_warm(
    executable: Path, args: Sequence[str], working_dir: Path, environ: Mapping[str, str]
) -> subprocess.Popen[bytes]:
    """Start ``executable args`` as Terraform would (go-plugin's cookie, protocol 6, but no client
    certificate: whatever it serves is plaintext), from a warm zygote only; pipes for stdin and stdout,
    stderr discarded. OSError if it cannot be executed."""
    environment = {key: value for key, value in environ.items() if key != "PLUGIN_CLIENT_CERT"}
    environment |= {
        MAGIC_COOKIE_KEY: MAGIC_COOKIE_VALUE,
        "PLUGIN_PROTOCOL_VERSIONS": PROVIDER_PROTOCOL,
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
        with selectors.DefaultSelector() as selector:
            selector.register(self._fd, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                if self._closed:
                    return b"" if not self._buffer else None
                if len(self._buffer) >= limit or not selector.select(max(0.0, deadline - time.monotonic())):
                    return None
                chunk = os.read(self._fd, 1 << 16)
                self._closed = not chunk
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line if len(line) <= limit else None


def stop(process: subprocess.Popen[bytes]) -> None:
    """End ``process`` (SIGTERM, which its launcher passes on) and reap it."""
    if process.poll() is None:
        process.terminate()
    for stream in (process.stdin, process.stdout):
        if stream is not None:
            stream.close()
    process.wait()
