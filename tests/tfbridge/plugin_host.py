"""The host side of go-plugin, as Terraform plays it: exec a plugin, read its handshake, connect over mTLS.

Used by the transport tests and by bench/handshake.py. Terraform's client certificate is reproduced the way
go-plugin makes it (self-signed EC P-521 with the CA flag), since that key type is what decides which TLS
stacks can serve it.
"""

from __future__ import annotations

import base64
import datetime
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tfbridge.serving.constants import MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE

HANDSHAKE_DEADLINE_SECONDS = 15.0
StubT = TypeVar("StubT")


def stub(stub_class: Callable[[grpc.Channel], StubT], channel: grpc.Channel) -> StubT:
    """A generated gRPC stub; through this typed call because the generated classes are untyped."""
    return stub_class(channel)


@dataclass(frozen=True)
class ClientIdentity:
    """A client certificate and key (PEM) like the one go-plugin's AutoMTLS passes in PLUGIN_CLIENT_CERT."""

    cert_pem: bytes
    key_pem: bytes

    @classmethod
    def generate(cls) -> ClientIdentity:
        key = ec.generate_private_key(ec.SECP521R1())
        name = x509.Name(
            [
                x509.NameAttribute(NameOID.ORGANIZATION_NAME, "HashiCorp"),
                x509.NameAttribute(NameOID.COMMON_NAME, "localhost"),
            ]
        )
        now = datetime.datetime.now(datetime.UTC)
        usages = x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH, ExtendedKeyUsageOID.SERVER_AUTH])
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(seconds=30))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
            .add_extension(usages, critical=False)
            .sign(key, hashes.SHA512())
        )
        key_pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        return cls(cert.public_bytes(serialization.Encoding.PEM), key_pem)


@dataclass(frozen=True)
class Handshake:
    """The fields of go-plugin's handshake line ``core|protocol|network|address|grpc|server cert``."""

    core_version: int
    protocol_version: int
    network: str
    address: str
    protocol: str
    server_cert_der: bytes | None

    @classmethod
    def parse(cls, line: str) -> Handshake:
        core, protocol_version, network, address, protocol, cert = line.rstrip("\n").split("|")
        # go-plugin encodes with base64.RawStdEncoding: no padding.
        der = base64.b64decode(cert + "=" * (-len(cert) % 4)) if cert else None
        return cls(int(core), int(protocol_version), network, address, protocol, der)

    @property
    def target(self) -> str:
        return f"unix:{self.address}" if self.network == "unix" else self.address

    def channel(self, identity: ClientIdentity | None) -> grpc.Channel:
        """A channel to the plugin: mutual TLS when the plugin sent a certificate, else plaintext."""
        if self.server_cert_der is None:
            return grpc.insecure_channel(self.target)
        server_cert = x509.load_der_x509_certificate(self.server_cert_der)
        credentials = grpc.ssl_channel_credentials(
            root_certificates=server_cert.public_bytes(serialization.Encoding.PEM),
            private_key=identity.key_pem if identity else None,
            certificate_chain=identity.cert_pem if identity else None,
        )
        # Terraform verifies the server certificate for the name "localhost", as go-plugin configures it.
        return grpc.secure_channel(
            self.target, credentials, options=[("grpc.ssl_target_name_override", "localhost")]
        )


def plugin_env(identity: ClientIdentity | None, socket_dir: Path, **extra: str) -> dict[str, str]:
    """The environment Terraform gives a provider process (minus TF_LOG and friends)."""
    env = {
        **os.environ,
        MAGIC_COOKIE_KEY: MAGIC_COOKIE_VALUE,
        "PLUGIN_PROTOCOL_VERSIONS": "5,6",
        "PLUGIN_UNIX_SOCKET_DIR": str(socket_dir),
        **extra,
    }
    if identity is not None:
        env["PLUGIN_CLIENT_CERT"] = identity.cert_pem.decode()
    return env


def read_handshake_line(
    process: subprocess.Popen[bytes], deadline_seconds: float = HANDSHAKE_DEADLINE_SECONDS
) -> str:
    """The plugin's first stdout line; raises if none arrives in time or the plugin exits first."""
    assert process.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    buffered = b""
    deadline = time.monotonic() + deadline_seconds
    try:
        while b"\n" not in buffered:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not selector.select(remaining):
                raise TimeoutError(f"no handshake line from {process.args!r} within {deadline_seconds} s")
            chunk = os.read(process.stdout.fileno(), 4096)
            if not chunk:
                raise RuntimeError(f"{process.args!r} exited before its handshake line: {buffered!r}")
            buffered += chunk
    finally:
        selector.close()
    return buffered.split(b"\n", 1)[0].decode()


class PluginProcess:
    """A plugin process started as Terraform starts one, killed on exit if it is still running.

    The process gets its own process group, so tests can signal the group as Terraform's Ctrl-C does.
    """

    def __init__(self, command: Sequence[str], env: Mapping[str, str], *, cwd: Path | None = None) -> None:
        self.process = subprocess.Popen(
            list(command),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
        )

    def __enter__(self) -> PluginProcess:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.kill()

    def handshake(self) -> Handshake:
        return Handshake.parse(read_handshake_line(self.process))

    def signal_group(self, signum: signal.Signals) -> None:
        os.killpg(self.process.pid, signum)

    def wait(self, timeout: float = HANDSHAKE_DEADLINE_SECONDS) -> int:
        return self.process.wait(timeout=timeout)

    def stderr_text(self) -> str:
        """Everything the plugin wrote to stderr; only call once it has exited."""
        assert self.process.stderr is not None
        return self.process.stderr.read().decode(errors="replace")

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
