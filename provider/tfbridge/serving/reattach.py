"""A provider started ahead of a Terraform command, for the command to attach to (``TF_REATTACH_PROVIDERS``).

Terraform starts every provider a command needs afresh, and ``terraform show`` of a saved plan starts one
only to read its schema: ~40 ms of a ~75 ms command on a 2-core machine (launcher, fork, handshake, TLS),
on the critical path of a job that shows the plan it has just made. A caller can start that provider
while Terraform still runs the command before, and point the next command at it with
``TF_REATTACH_PROVIDERS``, go-plugin's way of attaching to a provider started outside Terraform
(terraform-plugin-go's debug mode prints the same variable). The provider is the very executable
``terraform init`` installed (:func:`~tfbridge.serving.warm.installed_provider`), started only from a
warm zygote (:mod:`tfbridge.serving.warm`), serving as it serves Terraform except in plaintext:
go-plugin's reattach configuration has no TLS. Its socket is in a private (0700) directory of the user,
as every provider's is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from tfbridge.serving.constants import PROVIDER_PROTOCOL_VERSION
from tfbridge.serving.warm import InstalledProvider, LineReader, start_warm, stop

REATTACH_ENV = "TF_REATTACH_PROVIDERS"
# A plaintext handshake line is ~60 bytes; a longer one is not one this module can use.
_MAX_HANDSHAKE_BYTES = 4096


class ReattachableProvider:
    """A provider process started from its warm zygote, for one Terraform command to attach to."""

    def __init__(self, provider: InstalledProvider, working_dir: Path, environ: Mapping[str, str]) -> None:
        """Start ``provider`` now, without waiting for its handshake. OSError if it cannot be executed."""
        self._address = provider.address
        self._process = start_warm(provider.executable, (), working_dir, environ)
        self._answer: dict[str, str] | None = None
        self._read = False
        self.declined = False
        """True once it ended without a handshake: no warm zygote could serve it."""

    def reattach_environment(self, timeout: float) -> dict[str, str] | None:
        """``{"TF_REATTACH_PROVIDERS": ...}`` naming this provider, once its handshake line is read
        (waiting up to ``timeout`` seconds for it); None when it will not serve (no warm zygote, a
        handshake it cannot be attached by, no line in time)."""
        if not self._read:
            self._read = True
            line = LineReader(self._process).line(timeout, _MAX_HANDSHAKE_BYTES)
            self.declined = line == b""
            self._answer = self._configuration(line.decode(errors="replace")) if line else None
        return self._answer

    def _configuration(self, handshake: str) -> dict[str, str] | None:
        # go-plugin's line: core version | protocol version | network | address | protocol | server cert.
        fields = handshake.split("|")
        if (
            len(fields) < 5
            or fields[1] != str(PROVIDER_PROTOCOL_VERSION)
            or fields[2] != "unix"
            or fields[4] != "grpc"
        ):
            return None
        if len(fields) > 5 and fields[5]:
            return None  # it serves TLS: a reattached client cannot speak it
        config = {
            "Protocol": "grpc",
            "ProtocolVersion": PROVIDER_PROTOCOL_VERSION,
            "Pid": self._process.pid,
            # go-plugin's test mode: Terraform leaves the process running when done; stop() ends it.
            "Test": True,
            "Addr": {"Network": "unix", "String": fields[3]},
        }
        return {REATTACH_ENV: json.dumps({self._address: config})}

    def release(self) -> None:
        """Tell the provider to stop (as after Terraform's Shutdown), without waiting: the command is done."""
        if self._process.poll() is None:
            self._process.terminate()

    def stop(self) -> None:
        """End the provider and reap it."""
        stop(self._process)
