"""go-plugin's AutoMTLS, server side: terminate Terraform's mutual TLS and relay plaintext to gRPC.

grpcio's own TLS (BoringSSL) cannot do it: Terraform's client certificate has an EC P-521 key,
BoringSSL does not list ecdsa_secp521r1_sha512 among the signature algorithms of its certificate
request, so Go's TLS 1.3 client sends no certificate and a server that requires one fails the
handshake (PEER_DID_NOT_RETURN_A_CERTIFICATE). OpenSSL, behind Python's ``ssl``, accepts it. So the
gRPC server listens in plaintext inside the plugin's private socket directory, and this front end owns
the socket Terraform connects to.

Every RPC crosses the relay twice, so it is kept cheap: one thread per connection moves bytes between
a non-blocking ``SSLSocket`` and the plaintext socket with ``select`` (encryption and copying happen in
C). An asyncio relay cost about 0.2 ms more per call. One thread owns each ``SSLSocket``: OpenSSL
objects must not be read and written from two threads at once.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import ssl
import threading

from tfbridge.serving.tls_certificate import self_signed_certificate

_CHUNK_BYTES = 256 * 1024
_HIGH_WATER_BYTES = 4 << 20  # stop reading a side while this much waits to be written to the other
_HANDSHAKE_TIMEOUT_SECONDS = 30.0


def _own_certificate_context(cert_der: bytes, key_pem: bytes) -> ssl.SSLContext:
    """A server context holding our certificate and key that requires a client certificate but trusts
    none yet: every handshake fails until Terraform's certificate is loaded."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.verify_mode = ssl.CERT_REQUIRED
    context.set_alpn_protocols(["h2"])
    context.num_tickets = 0  # one connection per process: session resumption never happens
    # load_cert_chain reads only files; an anonymous memory file keeps the private key off the disk.
    key_file = os.memfd_create("plugin-tls", os.MFD_CLOEXEC)
    try:
        os.write(key_file, ssl.DER_cert_to_PEM_cert(cert_der).encode() + key_pem)
        context.load_cert_chain(f"/proc/self/fd/{key_file}")
    finally:
        os.close(key_file)
    return context


class ServerIdentity:
    """A fresh server certificate and the TLS context that holds it and its key, made ahead of a start.

    A zygote makes the next fork's identity while it waits (:mod:`tfbridge.serving.zygote`), so a start neither
    generates a key nor builds an ``SSLContext`` (in a fork: 4.5 ms at load 3, 13 to 16 ms at load 6); the
    forked server only adds Terraform's certificate (:meth:`trust_only`). Each identity serves exactly
    one process: the zygote replaces it after every fork.
    """

    def __init__(self, cert_der: bytes, key_pem: bytes) -> None:
        self.cert_der = cert_der
        self._context = _own_certificate_context(cert_der, key_pem)

    @classmethod
    def create(cls) -> ServerIdentity:
        return cls(*self_signed_certificate())

    def trust_only(self, client_cert_pem: bytes) -> ssl.SSLContext:
        """The context, now trusting only ``client_cert_pem`` (Terraform's ``PLUGIN_CLIENT_CERT``)."""
        self._context.load_verify_locations(cadata=client_cert_pem.decode())
        return self._context


class MutualTlsFrontEnd:
    """Accepts Terraform's TLS connections on ``listen_path``; relays each to ``grpc_socket_path``."""

    def __init__(self, listen_path: str, grpc_socket_path: str, context: ssl.SSLContext) -> None:
        self._grpc_socket_path = grpc_socket_path
        self._context = context
        # Listening before the handshake line is printed; the accept thread takes from the backlog.
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(listen_path)
        self._listener.listen(16)

    def start(self) -> None:
        threading.Thread(target=self._accept_forever, name="tfplugin-tls", daemon=True).start()

    def _accept_forever(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(
                target=self._serve_connection, args=(client,), name="tfplugin-tls-relay", daemon=True
            ).start()

    def _serve_connection(self, client: socket.socket) -> None:
        try:
            client.settimeout(_HANDSHAKE_TIMEOUT_SECONDS)
            tls = self._context.wrap_socket(client, server_side=True)
        except (OSError, ssl.SSLError):
            client.close()
            return
        with tls, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as plain:
            try:
                plain.connect(self._grpc_socket_path)
            except OSError:
                return
            relay(tls, plain)


def relay(tls: ssl.SSLSocket, plain: socket.socket) -> None:
    """Copy both ways until either side ends (what is still buffered for the other side is dropped:
    go-plugin never half-closes a connection).

    Writes are tried at once, without asking ``select`` first (sockets are nearly always writable), so
    a message costs one ``select`` and two system calls per direction.
    """
    tls.setblocking(False)
    plain.setblocking(False)
    to_plain = bytearray()
    to_tls = bytearray()
    tls_read_needs_write = False  # OpenSSL must write before it can read on (a TLS 1.3 key update)
    while True:
        readers: list[socket.socket] = [
            s for s, backlog in ((tls, to_plain), (plain, to_tls)) if len(backlog) < _HIGH_WATER_BYTES
        ]
        writers: list[socket.socket] = [
            s for s, waiting in ((plain, to_plain), (tls, to_tls or tls_read_needs_write)) if waiting
        ]
        readable: list[socket.socket]
        writable: list[socket.socket]
        if tls.pending() and tls in readers:
            readable, writable = [tls], []  # decrypted bytes wait inside OpenSSL: the kernel cannot tell
        else:
            readable, writable, _ = select.select(readers, writers, [])
        try:
            if tls in readable or (tls_read_needs_write and tls in writable):
                tls_read_needs_write = False
                try:
                    data = tls.recv(_CHUNK_BYTES)
                    if not data:
                        return
                    to_plain += data
                except ssl.SSLWantReadError:
                    pass  # only part of a TLS record has arrived
                except ssl.SSLWantWriteError:
                    tls_read_needs_write = True
            if plain in readable:
                data = plain.recv(_CHUNK_BYTES)
                if not data:
                    return
                to_tls += data
            if to_plain:
                with contextlib.suppress(BlockingIOError):
                    del to_plain[: plain.send(to_plain)]
            if to_tls:
                with contextlib.suppress(ssl.SSLWantWriteError, ssl.SSLWantReadError):
                    del to_tls[: tls.send(to_tls)]
        except OSError:  # includes ssl.SSLError: a broken connection ends the relay like a close
            return
