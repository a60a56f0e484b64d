"""The plugin's TLS server certificate for go-plugin's AutoMTLS: made fresh by every serving process.

Terraform trusts exactly the certificate a plugin prints on its handshake line, so each process makes a
throwaway key and a self-signed certificate for it (:func:`self_signed_certificate`); the TLS front end
(:mod:`tfbridge.serving.tls_relay`) serves it. A cold start makes it in a forked child (:class:`CertificateChild`)
while the parent imports ``grpc`` on the other core; a zygote's fork has everything imported already and
makes it inline in a fraction of a millisecond.

The certificate is DER-encoded here, with the ``cryptography`` primitives for the key and the signature
only. ``cryptography.x509`` builds the same certificate, but importing it (with ``serialization``) costs
about 60 ms of CPU, nearly as much as the ``grpc`` import it would run beside: measured on a shared 2-core
machine, the child needed 98 ms of CPU instead of 39 ms (``grpc``'s import: 112 ms), and the handshake
line of a cold start came about 30% later. The tests read the result with ``cryptography.x509``, and
Terraform verifies it in every end-to-end test.
"""

from __future__ import annotations

import base64
import os
import sys
import time

_CERT_LIFETIME_SECONDS = 365 * 24 * 3600
_BACKDATE_SECONDS = 30  # as go-plugin backdates its own certificate, for clocks a little apart
_EC_PUBLIC_KEY = "1.2.840.10045.2.1"
_PRIME256V1 = "1.2.840.10045.3.1.7"
_ECDSA_WITH_SHA256 = "1.2.840.10045.4.3.2"
_COMMON_NAME = "2.5.4.3"
_BASIC_CONSTRAINTS = "2.5.29.19"
_KEY_USAGE = "2.5.29.15"
_EXTENDED_KEY_USAGE = "2.5.29.37"
_SUBJECT_ALT_NAME = "2.5.29.17"
_SERVER_AUTH = "1.3.6.1.5.5.7.3.1"
_CLIENT_AUTH = "1.3.6.1.5.5.7.3.2"


def self_signed_certificate(now: float | None = None) -> tuple[bytes, bytes]:
    """A fresh EC P-256 key and a self-signed certificate for it, as (certificate DER, key PEM).

    The certificate carries what go-plugin's own server certificate carries, so Terraform's verifier (which
    trusts exactly this certificate and expects the name "localhost") accepts it: CA flag, key usages
    digitalSignature/keyEncipherment/keyAgreement/keyCertSign, extended usages serverAuth and clientAuth, and
    subject alternative names localhost and 127.0.0.1. ``now`` (epoch seconds) fixes the validity's start.
    """
    # Imported here, not at the top: a cold start imports this module before it forks the child that
    # calls this (see the module docstring), and only the child should pay for these imports.
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    public = key.public_key().public_numbers()
    public_point = b"\x04" + public.x.to_bytes(32, "big") + public.y.to_bytes(32, "big")
    issued_at = time.time() if now is None else now
    name = _seq(_set(_seq(_oid(_COMMON_NAME), _der(0x0C, b"localhost"))))
    signature_algorithm = _seq(_oid(_ECDSA_WITH_SHA256))
    extensions = _seq(
        _extension(_BASIC_CONSTRAINTS, _seq(_der(0x01, b"\xff")), critical=True),  # CA:TRUE
        # keyUsage bits 0 (digitalSignature), 2 (keyEncipherment), 4 (keyAgreement), 5 (keyCertSign).
        _extension(_KEY_USAGE, _der(0x03, b"\x02\xac"), critical=True),
        _extension(_EXTENDED_KEY_USAGE, _seq(_oid(_SERVER_AUTH), _oid(_CLIENT_AUTH))),
        _extension(_SUBJECT_ALT_NAME, _seq(_der(0x82, b"localhost"), _der(0x87, bytes([127, 0, 0, 1])))),
    )
    tbs_certificate = _seq(
        _der(0xA0, _integer(2)),  # version: v3
        _integer(int.from_bytes(os.urandom(16), "big") >> 1 or 1),  # positive serial number
        signature_algorithm,
        name,
        _seq(_utc_time(issued_at - _BACKDATE_SECONDS), _utc_time(issued_at + _CERT_LIFETIME_SECONDS)),
        name,
        _seq(_seq(_oid(_EC_PUBLIC_KEY), _oid(_PRIME256V1)), _der(0x03, b"\x00" + public_point)),
        _der(0xA3, extensions),
    )
    signature = key.sign(tbs_certificate, ec.ECDSA(hashes.SHA256()))
    cert_der = _seq(tbs_certificate, signature_algorithm, _der(0x03, b"\x00" + signature))
    # RFC 5915 ECPrivateKey (the "EC PRIVATE KEY" PEM that OpenSSL reads).
    private_key_der = _seq(
        _integer(1),
        _der(0x04, key.private_numbers().private_value.to_bytes(32, "big")),
        _der(0xA0, _oid(_PRIME256V1)),
        _der(0xA1, _der(0x03, b"\x00" + public_point)),
    )
    return cert_der, _pem("EC PRIVATE KEY", private_key_der)


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


def _pem(label: str, der: bytes) -> bytes:
    body = base64.b64encode(der)
    lines = b"\n".join(body[i : i + 64] for i in range(0, len(body), 64))
    return b"-----BEGIN %s-----\n%s\n-----END %s-----\n" % (label.encode(), lines, label.encode())


def _der(tag: int, content: bytes) -> bytes:
    """One DER element: tag, definite length, content."""
    length = len(content)
    if length < 0x80:
        return bytes([tag, length]) + content
    length_bytes = length.to_bytes((length.bit_length() + 7) // 8, "big")
    return bytes([tag, 0x80 | len(length_bytes)]) + length_bytes + content


def _seq(*elements: bytes) -> bytes:
    return _der(0x30, b"".join(elements))


def _set(*elements: bytes) -> bytes:
    return _der(0x31, b"".join(elements))


def _integer(value: int) -> bytes:
    # Non-negative only; the extra bit keeps the sign bit clear.
    return _der(0x02, value.to_bytes(value.bit_length() // 8 + 1, "big"))


def _oid(dotted: str) -> bytes:
    first, second, *rest = (int(part) for part in dotted.split("."))
    encoded = bytearray([40 * first + second])
    for arc in rest:
        chunk = [arc & 0x7F]
        arc >>= 7
        while arc:
            chunk.append(0x80 | (arc & 0x7F))
            arc >>= 7
        encoded.extend(reversed(chunk))
    return _der(0x06, bytes(encoded))


def _utc_time(epoch_seconds: float) -> bytes:
    return _der(0x17, time.strftime("%y%m%d%H%M%SZ", time.gmtime(epoch_seconds)).encode())


def _extension(oid: str, value: bytes, *, critical: bool = False) -> bytes:
    flag = _der(0x01, b"\xff") if critical else b""
    return _seq(_oid(oid), flag, _der(0x04, value))
