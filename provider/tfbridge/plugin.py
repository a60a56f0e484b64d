"""Serve a tfplugin6 provider to Terraform the way hashicorp/go-plugin serves a Go provider.

Terraform execs the provider, reads one handshake line from its stdout
(``1|6|unix|<socket>|grpc|<server cert>``) and then speaks gRPC over that unix socket, with mutual TLS
when it passed its own certificate in ``PLUGIN_CLIENT_CERT`` (go-plugin's AutoMTLS). Next to the
``tfplugin6.Provider`` service, go-plugin serves three services of its own, reproduced here:
``grpc.health.v1.Health`` (SERVING for "" and "plugin"), ``plugin.GRPCController/Shutdown`` (the host's way
to end the process) and ``plugin.GRPCStdio/StreamStdio`` (kept open, carries nothing).

Terraform starts a provider process several times per command, so time to the handshake line matters.
The order below keeps everything off that path that can be off it:

1. A forked child creates the server key and certificate (``cryptography`` is slow to import) while the
   parent imports ``grpc``; both run on separate cores.
2. The gRPC server starts with one deferred handler and the handshake line is printed.
3. Only then does a background thread import the generated stubs, fill in the handler table and call the
   servicer factory. Calls that arrive earlier wait for the table; Provider calls wait for the servicer.

That is why ``grpc`` and the stubs are imported inside functions in this module, never at its top.
"""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

if TYPE_CHECKING:
    import grpc

    from tfbridge.proto import grpc_controller_pb2, grpc_stdio_pb2, health_pb2, tfplugin6_pb2_grpc

MAGIC_COOKIE_KEY = "TF_PLUGIN_MAGIC_COOKIE"
MAGIC_COOKIE_VALUE = "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2"
CORE_PROTOCOL_VERSION = 1
PROVIDER_PROTOCOL_VERSION = 6
HEALTHY_SERVICE_NAMES = frozenset({"", "plugin"})
ZYGOTE_FLAG = "--tfbridge-zygote"  # also spelled out in tfbridge/launch.py, which imports nothing of ours

NOT_A_COMMAND_MESSAGE = (
    "This binary is a plugin. These are not meant to be executed directly. Please execute the program "
    "that consumes these plugins, which will load any plugins automatically.\n"
)

# Terraform (and Go providers) accept up to 256 MiB per message; grpcio's default receive limit is 4 MiB.
_MAX_MESSAGE_BYTES = 256 << 20
# Time in-flight calls get to finish after GRPCController/Shutdown. go-plugin's client SIGKILLs a plugin
# that has not exited 2 s after Shutdown (leaving its sockets behind), so stay well below that.
_SHUTDOWN_GRACE_SECONDS = 1.0
_PARENT_POLL_SECONDS = 1.0
_CERT_LIFETIME_SECONDS = 365 * 24 * 3600
_EC_PUBLIC_KEY = "1.2.840.10045.2.1"
_PRIME256V1 = "1.2.840.10045.3.1.7"
# Written to the wake-up pipe by Shutdown; SIGTERM writes its signal number there (signal.set_wakeup_fd).
_SHUTDOWN_REQUESTED = b"\x00"


def main(
    servicer_factory: Callable[[], tfplugin6_pb2_grpc.ProviderServicer],
    *,
    preload: Callable[[], None],
    packages: tuple[str, ...],
) -> NoReturn:
    """The provider program Terraform runs: serve once, or (``--tfbridge-zygote SOCKET IDLE``, how
    :mod:`tfbridge.launch` starts it) run the warm zygote of :mod:`tfbridge.zygote`.

    ``preload`` imports what ``servicer_factory`` needs; ``packages`` name the provider's top-level
    packages, whose sources the zygote watches for changes.
    """
    if sys.argv[1:2] == [ZYGOTE_FLAG]:
        from tfbridge.zygote import run_zygote

        run_zygote(sys.argv[2:], servicer_factory, preload=preload, packages=packages)
    serve(servicer_factory)


class Host(Protocol):
    """The process Terraform started and watches: how the server learns it is gone, and tells it the end."""

    def wait_gone(self) -> None:
        """Block until Terraform (or whatever stands in for it) can no longer receive answers."""

    def exited(self, exit_code: int) -> None:
        """Called just before the serving process exits with ``exit_code``."""


class TerraformParent:
    """The usual host: Terraform is this process's parent, and is gone when the parent changes."""

    def __init__(self) -> None:
        self._pid = os.getppid()

    def wait_gone(self) -> None:
        while os.getppid() == self._pid:
            time.sleep(_PARENT_POLL_SECONDS)

    def exited(self, exit_code: int) -> None:
        pass


def serve(
    servicer_factory: Callable[[], tfplugin6_pb2_grpc.ProviderServicer],
    *,
    max_workers: int = 40,
    host: Host | None = None,
    preloaded: bool = False,
) -> NoReturn:
    """Serve the provider built by ``servicer_factory`` until Terraform calls Shutdown, then exit.

    Call this from the main thread of a fresh process, before anything imports ``grpc``, and import the
    provider's own modules inside ``servicer_factory``: the factory runs after the handshake line is out.
    A process forked from a warm parent that imported all that already (:mod:`tfbridge.zygote`) passes
    ``preloaded=True`` and the ``host`` that stands in for Terraform as its parent.
    """
    # Terraform forwards Ctrl-C to the whole process group and then calls StopProvider; the server must
    # keep running so in-flight ApplyResourceChange results still reach Terraform.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Read first: Terraform may be gone by the time the handshake is out.
    host = host if host is not None else TerraformParent()
    if os.environ.get(MAGIC_COOKIE_KEY) != MAGIC_COOKIE_VALUE:
        sys.stderr.write(NOT_A_COMMAND_MESSAGE)
        sys.exit(1)
    report_invalid_protocol_versions(os.environ.get("PLUGIN_PROTOCOL_VERSIONS", ""))
    client_cert_pem = os.environ.get("PLUGIN_CLIENT_CERT", "").encode()
    certificate = _CertificateChild.start() if client_cert_pem and not preloaded else None

    # Imported only now, while the certificate child runs on the other core (see the module docstring).
    from concurrent import futures

    import grpc

    if certificate is not None:
        tls_material: tuple[bytes, bytes] | None = certificate.result()
    else:  # preloaded: cryptography is imported already, so the certificate takes a millisecond here
        tls_material = self_signed_certificate() if client_cert_pem else None
    # Before anything that must be cleaned up: a SIGTERM from here on is handled after the handshake.
    lifecycle = _Lifecycle()
    signal.signal(signal.SIGTERM, _note_signal)
    signal.set_wakeup_fd(lifecycle.wake_write_fd, warn_on_full_buffer=False)
    socket_dir = _make_socket_dir()
    socket_path = os.path.join(socket_dir, "plugin.sock")
    grpc_socket_path = os.path.join(socket_dir, "grpc.sock")
    handlers = _HandlerTable()
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="tfplugin"),
        handlers=[handlers],
        options=[("grpc.max_receive_message_length", _MAX_MESSAGE_BYTES)],
    )
    server_cert_field = ""
    if tls_material is None:
        server.add_insecure_port(f"unix:{socket_path}")
    else:
        cert_der, key_pem = tls_material
        # gRPC listens in plaintext inside the private socket directory; the TLS front end owns the
        # socket Terraform connects to (see tfbridge.tls_relay for why grpcio's own TLS cannot be used).
        from tfbridge.tls_relay import MutualTlsFrontEnd, server_tls_context

        server.add_insecure_port(f"unix:{grpc_socket_path}")
        context = server_tls_context(cert_der, key_pem, certificate_pem(cert_der), client_cert_pem)
        MutualTlsFrontEnd(socket_path, grpc_socket_path, context).start()
        # go-plugin sends the DER leaf in base64 without padding (RawStdEncoding): no newlines on the line.
        server_cert_field = base64.b64encode(cert_der).decode().rstrip("=")
    server.start()

    handshake = "|".join(
        (
            str(CORE_PROTOCOL_VERSION),
            str(PROVIDER_PROTOCOL_VERSION),
            "unix",
            socket_path,
            "grpc",
            server_cert_field,
        )
    )
    sys.stdout.write(handshake + "\n")
    sys.stdout.flush()

    threading.Thread(
        target=_install_services,
        args=(handlers, lifecycle, servicer_factory),
        name="tfplugin-install",
        daemon=True,
    ).start()

    threading.Thread(
        target=_exit_when_gone, args=(lifecycle, host), name="tfplugin-host", daemon=True
    ).start()

    terminated = lifecycle.wait_for_exit_request()
    lifecycle.begin_stopping()
    server.stop(None if terminated else _SHUTDOWN_GRACE_SECONDS).wait()
    for path in (socket_path, grpc_socket_path):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    os.rmdir(socket_dir)
    sys.stdout.flush()
    sys.stderr.flush()
    exit_code = 128 + signal.SIGTERM if terminated else 0
    host.exited(exit_code)
    # os._exit: worker threads may still wait on a servicer that never came; exit must not hang on them.
    os._exit(exit_code)


def _exit_when_gone(lifecycle: _Lifecycle, host: Host) -> None:
    """Stop serving once Terraform is gone without calling Shutdown (it was SIGKILLed, or crashed).

    Nobody can receive this process's answers any more; lingering would only keep half-done work
    running. What a create had started is safe: rents are journalled before they are sent.
    """
    host.wait_gone()
    lifecycle.request_shutdown()


def _make_socket_dir() -> str:
    """A fresh private directory for the sockets, where go-plugin puts its socket: in
    ``PLUGIN_UNIX_SOCKET_DIR`` if set, else in ``$TMPDIR`` or /tmp (Go's os.TempDir)."""
    parent = os.environ.get("PLUGIN_UNIX_SOCKET_DIR") or os.environ.get("TMPDIR") or "/tmp"
    while True:
        path = os.path.join(parent, f"plugin{os.urandom(6).hex()}")
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        return path


def report_invalid_protocol_versions(client_versions: str) -> None:
    """Report malformed entries of ``PLUGIN_PROTOCOL_VERSIONS`` to stderr, as go-plugin does.

    go-plugin answers with the newest version both sides support, or else with its own and leaves the
    client to report the mismatch. This server speaks only version 6, so the answer is always 6.
    """
    for entry in filter(None, client_versions.split(",")):
        if not entry.strip().isdigit():
            sys.stderr.write(f"server sent invalid plugin version {entry!r}\n")


def _note_signal(signum: int, frame: object) -> None:
    """Python-level SIGTERM handler; the wake-up fd carries the signal to the main thread."""


class _Lifecycle:
    """Shutdown coordination between gRPC worker threads, signals and the main thread."""

    def __init__(self) -> None:
        self.wake_read_fd, self.wake_write_fd = os.pipe()
        # signal.set_wakeup_fd requires a non-blocking descriptor.
        os.set_blocking(self.wake_write_fd, False)
        self._lock = threading.Lock()
        self._stopping = False
        self._stop_callbacks: list[Callable[[], None]] = []

    def request_shutdown(self) -> None:
        os.write(self.wake_write_fd, _SHUTDOWN_REQUESTED)

    def wait_for_exit_request(self) -> bool:
        """Block until Shutdown is called or SIGTERM arrives; True for SIGTERM."""
        while True:
            byte = os.read(self.wake_read_fd, 1)
            if byte == _SHUTDOWN_REQUESTED:
                return False
            if byte == bytes([signal.SIGTERM]):
                return True

    def call_when_stopping(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` when the server begins to stop (at once if it already has)."""
        with self._lock:
            if not self._stopping:
                self._stop_callbacks.append(callback)
                return
        callback()

    def begin_stopping(self) -> None:
        with self._lock:
            self._stopping = True
            callbacks, self._stop_callbacks = self._stop_callbacks, []
        for callback in callbacks:
            callback()

    def wait_until_stopping_or_cancelled(self, context: grpc.ServicerContext) -> None:
        """Hold a server stream open until the server stops or the client goes away."""
        ended = threading.Event()
        if not context.add_callback(ended.set):
            return
        self.call_when_stopping(ended.set)
        ended.wait()


class _HandlerTable:
    """The server's only generic handler: method handlers appear in it after the handshake line.

    It also stands in for the ``grpc.Server`` argument of the generated ``add_*_to_server`` functions,
    which hand it their method handlers. ``service`` runs on grpcio's polling thread; it blocks only until
    the stubs are imported, which is the first thing done after the handshake.
    """

    def __init__(self) -> None:
        self._by_method: dict[str, Any] = {}
        self.installed = threading.Event()

    def add_generic_rpc_handlers(self, generic_handlers: object) -> None:
        """Part of the ``grpc.Server`` interface the generated code calls; the same handlers also arrive
        through ``add_registered_method_handlers``, which names each method."""

    def add_registered_method_handlers(self, service_name: str, method_handlers: dict[str, Any]) -> None:
        self._by_method.update({f"/{service_name}/{name}": h for name, h in method_handlers.items()})

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> Any:
        self.installed.wait()
        return self._by_method.get(handler_call_details.method)


class _DeferredServicer:
    """The provider servicer, once ``servicer_factory`` has built it; callers wait until then."""

    def __init__(self) -> None:
        self._ready = threading.Event()
        self._servicer: tfplugin6_pb2_grpc.ProviderServicer | None = None
        self._failure = ""

    def set(self, servicer: tfplugin6_pb2_grpc.ProviderServicer) -> None:
        self._servicer = servicer
        self._ready.set()

    def fail(self, failure: str) -> None:
        self._failure = failure
        self._ready.set()

    def get(self, context: grpc.ServicerContext) -> tfplugin6_pb2_grpc.ProviderServicer:
        self._ready.wait()
        if self._servicer is not None:
            return self._servicer
        import grpc

        context.abort(grpc.StatusCode.UNAVAILABLE, f"the provider failed to start: {self._failure}")
        raise AssertionError("context.abort raises")


def provider_proxy(deferred: _DeferredServicer, servicer_base: type[Any]) -> SimpleNamespace:
    """An object with every RPC method of ``servicer_base``, each forwarding to the deferred servicer.

    The method list comes from the generated servicer class, so an RPC added to the protocol cannot be
    forgotten here.
    """

    def forwarder(method_name: str) -> Callable[[Any, grpc.ServicerContext], Any]:
        def forward(request: Any, context: grpc.ServicerContext) -> Any:
            return getattr(deferred.get(context), method_name)(request, context)

        forward.__name__ = method_name
        return forward

    rpc_names = [name for name, value in vars(servicer_base).items() if callable(value) and name[0] != "_"]
    return SimpleNamespace(**{name: forwarder(name) for name in rpc_names})


class _Health:
    """grpc.health.v1.Health as go-plugin registers it: SERVING for the server ("") and for "plugin"."""

    def __init__(self, lifecycle: _Lifecycle) -> None:
        from tfbridge.proto import health_pb2

        self._lifecycle = lifecycle
        response = health_pb2.HealthCheckResponse
        self._serving = response(status=response.SERVING)
        self._service_unknown = response(status=response.SERVICE_UNKNOWN)

    def Check(
        self, request: health_pb2.HealthCheckRequest, context: grpc.ServicerContext
    ) -> health_pb2.HealthCheckResponse:
        if request.service not in HEALTHY_SERVICE_NAMES:
            import grpc

            context.abort(grpc.StatusCode.NOT_FOUND, "unknown service")
        return self._serving

    def Watch(
        self, request: health_pb2.HealthCheckRequest, context: grpc.ServicerContext
    ) -> Iterator[health_pb2.HealthCheckResponse]:
        yield self._serving if request.service in HEALTHY_SERVICE_NAMES else self._service_unknown
        self._lifecycle.wait_until_stopping_or_cancelled(context)


class _Controller:
    """plugin.GRPCController: Shutdown asks the main thread to stop the server and exit 0."""

    def __init__(self, lifecycle: _Lifecycle) -> None:
        from tfbridge.proto import grpc_controller_pb2

        self._lifecycle = lifecycle
        self._empty = grpc_controller_pb2.Empty()

    def Shutdown(
        self, request: grpc_controller_pb2.Empty, context: grpc.ServicerContext
    ) -> grpc_controller_pb2.Empty:
        self._lifecycle.request_shutdown()
        return self._empty


class _Stdio:
    """plugin.GRPCStdio: the host opens this stream once; it stays open and empty until shutdown.

    Provider output is not mirrored: stderr goes straight to Terraform, which logs it.
    """

    def __init__(self, lifecycle: _Lifecycle) -> None:
        self._lifecycle = lifecycle

    def StreamStdio(
        self, request: object, context: grpc.ServicerContext
    ) -> Iterator[grpc_stdio_pb2.StdioData]:
        self._lifecycle.wait_until_stopping_or_cancelled(context)
        yield from ()


def _install_services(
    handlers: _HandlerTable,
    lifecycle: _Lifecycle,
    servicer_factory: Callable[[], tfplugin6_pb2_grpc.ProviderServicer],
) -> None:
    """Background start-up after the handshake: import the stubs, fill the handler table, build the
    provider servicer."""
    deferred = _DeferredServicer()
    try:
        from tfbridge.proto import (
            grpc_controller_pb2_grpc,
            grpc_stdio_pb2_grpc,
            health_pb2_grpc,
            tfplugin6_pb2_grpc,
        )

        # The generated add_*_to_server functions are untyped; this table gives them a type.
        registrations: list[tuple[Callable[[object, _HandlerTable], None], object]] = [
            (health_pb2_grpc.add_HealthServicer_to_server, _Health(lifecycle)),
            (grpc_controller_pb2_grpc.add_GRPCControllerServicer_to_server, _Controller(lifecycle)),
            (grpc_stdio_pb2_grpc.add_GRPCStdioServicer_to_server, _Stdio(lifecycle)),
            (
                tfplugin6_pb2_grpc.add_ProviderServicer_to_server,
                provider_proxy(deferred, tfplugin6_pb2_grpc.ProviderServicer),
            ),
        ]
        for add_to_server, servicer in registrations:
            add_to_server(servicer, handlers)
    finally:
        # Unblock waiting calls even if the stubs failed to import: they then end as UNIMPLEMENTED.
        handlers.installed.set()
    try:
        deferred.set(servicer_factory())
    except Exception as error:
        import traceback

        traceback.print_exc(file=sys.stderr)
        deferred.fail(f"{type(error).__name__}: {error}")


class _CertificateChild:
    """A forked child that makes the server certificate while the parent imports grpc.

    Forking is safe here: it happens before grpc (and its threads) exist in the process. The child sends
    ``len(cert_der)`` (4 bytes), the DER certificate and the PEM private key through a pipe, then exits.
    """

    def __init__(self, pid: int, read_fd: int) -> None:
        self._pid = pid
        self._read_fd = read_fd

    @classmethod
    def start(cls) -> _CertificateChild:
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
                import traceback

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


def self_signed_certificate(now: float | None = None) -> tuple[bytes, bytes]:
    """A fresh EC P-256 key and a self-signed certificate for it, as (certificate DER, key PEM).

    The certificate carries what go-plugin's own server certificate carries, so Terraform's verifier (which
    trusts exactly this certificate and expects the name "localhost") accepts it: CA flag, key usages
    digitalSignature/keyEncipherment/keyAgreement/keyCertSign, extended usages serverAuth and clientAuth, and
    subject alternative names localhost and 127.0.0.1. Certificate and key are DER-encoded here: importing
    ``cryptography.x509`` or ``cryptography...serialization`` takes longer than all the rest of the start.
    """
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    public = key.public_key().public_numbers()
    public_point = b"\x04" + public.x.to_bytes(32, "big") + public.y.to_bytes(32, "big")
    issued_at = time.time() if now is None else now
    name = _seq(_set(_seq(_oid("2.5.4.3"), _der(0x0C, b"localhost"))))
    ecdsa_with_sha256 = _seq(_oid("1.2.840.10045.4.3.2"))
    extensions = _seq(
        _extension("2.5.29.19", _seq(_der(0x01, b"\xff")), critical=True),  # basicConstraints CA:TRUE
        # keyUsage bits 0 (digitalSignature), 2 (keyEncipherment), 4 (keyAgreement), 5 (keyCertSign).
        _extension("2.5.29.15", _der(0x03, b"\x02\xac"), critical=True),
        _extension("2.5.29.37", _seq(_oid("1.3.6.1.5.5.7.3.1"), _oid("1.3.6.1.5.5.7.3.2"))),
        _extension("2.5.29.17", _seq(_der(0x82, b"localhost"), _der(0x87, bytes([127, 0, 0, 1])))),
    )
    tbs_certificate = _seq(
        _der(0xA0, _integer(2)),  # version: v3
        _integer(int.from_bytes(os.urandom(16), "big") >> 1 or 1),  # positive serial number
        ecdsa_with_sha256,
        name,
        _seq(_utc_time(issued_at - 30), _utc_time(issued_at + _CERT_LIFETIME_SECONDS)),
        name,
        _seq(_seq(_oid(_EC_PUBLIC_KEY), _oid(_PRIME256V1)), _der(0x03, b"\x00" + public_point)),
        _der(0xA3, extensions),
    )
    signature = key.sign(tbs_certificate, ec.ECDSA(hashes.SHA256()))
    cert_der = _seq(tbs_certificate, ecdsa_with_sha256, _der(0x03, b"\x00" + signature))
    # RFC 5915 ECPrivateKey (the "EC PRIVATE KEY" PEM that OpenSSL reads).
    private_key_der = _seq(
        _integer(1),
        _der(0x04, key.private_numbers().private_value.to_bytes(32, "big")),
        _der(0xA0, _oid(_PRIME256V1)),
        _der(0xA1, _der(0x03, b"\x00" + public_point)),
    )
    return cert_der, _pem("EC PRIVATE KEY", private_key_der)


def certificate_pem(cert_der: bytes) -> bytes:
    return _pem("CERTIFICATE", cert_der)


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
