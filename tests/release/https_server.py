"""A static HTTPS server on 127.0.0.1 with its own test CA, as a registry or mirror host would be.

Terraform trusts the CA through ``SSL_CERT_FILE`` (Go reads it on Linux). The server runs in a thread of
the test process, outside any clean room, and serves one directory: files without a suffix (the
registry protocol's ``versions`` and ``download/<os>/<arch>`` documents) as JSON.
"""

from __future__ import annotations

import datetime
import functools
import ipaddress
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

HOSTNAME = "localhost"


@dataclass(frozen=True)
class HttpsHost:
    """``https://localhost:<port>``, serving ``root``; ``ca_file`` is the CA to trust."""

    host: str
    root: Path
    ca_file: Path
    requests: list[str]

    @property
    def url(self) -> str:
        return f"https://{self.host}"


def _certificate(
    subject: str, key: ec.EllipticCurvePrivateKey, issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None
) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    issuer_name, issuer_key = issuer or (name, key)
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if issuer is not None:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName(HOSTNAME), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
    return builder.sign(issuer_key, hashes.SHA256())


def write_test_pki(directory: Path) -> tuple[Path, Path, Path]:
    """A fresh CA and a server certificate for localhost: ``(ca.pem, server.pem, server.key)``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, server_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = _certificate("lium-stacks test CA", ca_key, None)
    server = _certificate(HOSTNAME, server_key, (ca.subject, ca_key))
    paths = directory / "ca.pem", directory / "server.pem", directory / "server.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(server.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        server_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return paths


class _Handler(SimpleHTTPRequestHandler):
    requests: list[str]

    def guess_type(self, path: str | Path) -> str:  # type: ignore[override]
        return "application/json" if not Path(path).suffix else super().guess_type(path)

    def log_message(self, format: str, *args: object) -> None:
        self.requests.append(self.path)


@contextmanager
def serve_https(root: Path, pki_dir: Path) -> Iterator[HttpsHost]:
    """Serve ``root`` over HTTPS on an ephemeral port until the block ends."""
    ca_file, cert_file, key_file = write_test_pki(pki_dir)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    requests: list[str] = []
    handler = type("Handler", (_Handler,), {"requests": requests})
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(root)))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield HttpsHost(f"{HOSTNAME}:{server.server_address[1]}", root, ca_file, requests)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
