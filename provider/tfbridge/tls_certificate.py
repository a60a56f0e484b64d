"""The plugin's TLS server certificate for go-plugin's AutoMTLS: made fresh by every serving process.

Terraform trusts exactly the certificate a plugin prints on its handshake line, so each process makes a
throwaway key and a self-signed certificate for it (:func:`self_signed_certificate`); the TLS front end
(:mod:`tfbridge.tls_relay`) serves it.

``cryptography.x509`` takes about as long to import as ``grpc`` (~50 ms). A cold start therefore makes the
certificate in a forked child (:class:`CertificateChild`) while the parent imports ``grpc``, on the other
core; a zygote's fork has both imported already and makes it inline in a fraction of a millisecond.
"""

from __future__ import annotations

import os
import sys
import time

_CERT_LIFETIME_SECONDS = 365 * 24 * 3600
_BACKDATE_SECONDS = 30  # as go-plugin backdates its own certificate, for clocks a little apart


def self_signed_certificate(now: float | None = None) -> tuple[bytes, bytes]:
    """A fresh EC P-256 key and a self-signed certificate for it, as (certificate DER, key PEM).

    The certificate carries what go-plugin's own server certificate carries, so Terraform's verifier (which
    trusts exactly this certificate and expects the name "localhost") accepts it: CA flag, key usages
    digitalSignature/keyEncipherment/keyAgreement/keyCertSign, extended usages serverAuth and clientAuth, and
    subject alternative names localhost and 127.0.0.1. ``now`` (epoch seconds) fixes the validity's start.
    """
    # Imported here, not at the top: a cold start imports this module before it forks the child that
    # calls this (see the module docstring), and only the child should pay for these imports.
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    issued_at = datetime.datetime.fromtimestamp(time.time() if now is None else now, datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    key_usage = x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=True,
        data_encipherment=False,
        key_agreement=True,
        key_cert_sign=True,
        crl_sign=False,
        encipher_only=False,
        decipher_only=False,
    )
    extended_key_usage = x509.ExtendedKeyUsage(
        [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    )
    alternative_names = x509.SubjectAlternativeName(
        [x509.DNSName("localhost"), x509.IPAddress(ipaddress.IPv4Address("127.0.0.1"))]
    )
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(issued_at - datetime.timedelta(seconds=_BACKDATE_SECONDS))
        .not_valid_after(issued_at + datetime.timedelta(seconds=_CERT_LIFETIME_SECONDS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(key_usage, critical=True)
        .add_extension(extended_key_usage, critical=False)
        .add_extension(alternative_names, critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return certificate.public_bytes(serialization.Encoding.DER), key_pem


class CertificateChild:
    """A forked child that makes the server certificate while the parent imports grpc.

    Forking is safe here: it happens before grpc (and its threads) exist in the process. The child sends
    ``len(cert_der)`` (4 bytes), the DER certificate and the PEM private key through a pipe, then exits.
    """

    def __init__(self, pid: int, read_fd: int) -> None:
        self._pid = pid
        self._read_fd = read_fd

    @classmethod
    def start(cls) -> CertificateChild:
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child
            exit_code = 1
            try:
                os.close(read_fd)
                cert_der, key_pem = self_signed_certificate()
                payload = len(cert_der).to_bytes(4, "big") + cert_der + key_pem
                while payload:
                    payload = payload[os.write(write_fd, payload) :]
                exit_code = 0
            except BaseException:
                import traceback  # only on failure: it costs milliseconds to import

                traceback.print_exc(file=sys.stderr)
            finally:
                os._exit(exit_code)
        os.close(write_fd)
        return cls(pid, read_fd)

    def result(self) -> tuple[bytes, bytes]:
        """The child's (certificate DER, private key PEM); raises if it failed."""
        chunks = []
        while chunk := os.read(self._read_fd, 65536):
            chunks.append(chunk)
        os.close(self._read_fd)
        _, status = os.waitpid(self._pid, 0)
        payload = b"".join(chunks)
        if os.waitstatus_to_exitcode(status) != 0 or len(payload) < 4:
            raise RuntimeError("generating the plugin's TLS server certificate failed")
        cert_length = int.from_bytes(payload[:4], "big")
        return payload[4 : 4 + cert_length], payload[4 + cert_length :]
