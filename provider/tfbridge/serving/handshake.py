"""Serve a tfplugin6 provider to Terraform the way hashicorp/go-plugin serves a Go provider.

Terraform execs the provider, reads one handshake line from its stdout
(``1|6|unix|<socket>|grpc|<server cert>``) and then speaks gRPC over that unix socket, with mutual TLS
when it passed its own certificate in ``PLUGIN_CLIENT_CERT`` (go-plugin's AutoMTLS, terminated by
:mod:`tfbridge.serving.tls_relay`). The services registered there are in :mod:`tfbridge.serving.plugin_services`; how the
process stops, in :mod:`tfbridge.serving.lifecycle`.

Terraform starts a provider process several times per command, so time to the handshake line matters.
The order below keeps everything off that path that can be off it:

1. A forked child creates the server key and certificate (:mod:`tfbridge.serving.tls_certificate`; ``cryptography``
   is slow to import) while the parent imports ``grpc``; both run on separate cores (a zygote's fork gets
   both made ahead by its zygote: :class:`tfbridge.serving.tls_relay.ServerIdentity`).
2. The gRPC server starts with one deferred handler and the handshake line is printed.
3. Only then does a background thread import the generated stubs (:mod:`tfbridge.serving.plugin_services`), fill
   in the handler table and call the servicer factory. Calls that arrive earlier wait for the table;
   Provider calls wait for the servicer.

That is why ``grpc``, :mod:`tfbridge.serving.tls_relay` (``ssl``) and :mod:`tfbridge.serving.plugin_services` are imported
inside functions here, never at the top: this module is imported before the certificate child is forked.
"""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from tfbridge.cancel import abandon_all, held_seconds
from tfbridge.serving.constants import MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE, PROVIDER_PROTOCOL_VERSION
from tfbridge.serving.hosts import Host, TerraformParent, launcher_of_this_process
from tfbridge.serving.lifecycle import Lifecycle
from tfbridge.serving.tls_certificate import CertificateChild

if TYPE_CHECKING:
    import grpc

    from tfbridge.proto import tfplugin6_pb2_grpc
    from tfbridge.serving.tls_relay import ServerIdentity

CORE_PROTOCOL_VERSION = 1

NOT_A_COMMAND_MESSAGE = (
    "This binary is a plugin. These are not meant to be executed directly. Please execute the program "
    "that consumes these plugins, which will load any plugins automatically.\n"
)

# Terraform (and Go providers) accept up to 256 MiB per message; grpcio's default receive limit is 4 MiB.
_MAX_MESSAGE_BYTES = 256 << 20
# Calls served at once. Terraform sends up to -parallelism resource calls at a time (any number the user
# picks; 10 by default) plus its own (Stop, schemas); threads start only as calls need them, so a high
# bound costs nothing at the default. 40 made an apply at -parallelism=50 run 40 pods at a time.
MAX_CONCURRENT_CALLS = 256
# Time in-flight calls get to finish after GRPCController/Shutdown. go-plugin's client SIGKILLs a plugin
# that has not exited 2 s after Shutdown (leaving its sockets behind), so stay well below that.
_SHUTDOWN_GRACE_SECONDS = 1.0
# Time in-flight calls get to undo what they made once the host is gone (``Context.abandoned``), after
# the requests whose outcome they must first learn (``tfbridge.cancel.outliving_the_host``, each bounded);
# the process is killed outright a second later whatever it is doing, so it never outlives its host long.
ABANDON_GRACE_SECONDS = 8.0


def serve(
    servicer_factory: Callable[[], tfplugin6_pb2_grpc.ProviderServicer],
    *,
    max_workers: int = MAX_CONCURRENT_CALLS,
    host: Host | None = None,
    identity: ServerIdentity | None = None,
) -> NoReturn:
    """Serve the provider built by ``servicer_factory`` until Terraform calls Shutdown, then exit.

    Call this from the main thread of a fresh process, before anything imports ``grpc``, and import the
    provider's own modules inside ``servicer_factory``: the factory runs after the handshake line is out.
    A process forked from a warm parent that imported all that already (:mod:`tfbridge.serving.zygote`) passes
    the server ``identity`` (certificate and TLS context) its parent made for it ahead of the start, and
    the ``host`` that stands in for Terraform as its parent.
    """
    # Terraform forwards Ctrl-C to the whole process group and then calls StopProvider; the server must
    # keep running so in-flight ApplyResourceChange results still reach Terraform.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Read first: Terraform may be gone by the time the handshake is out.
    host = host if host is not None else (launcher_of_this_process() or TerraformParent())
    if os.environ.get(MAGIC_COOKIE_KEY) != MAGIC_COOKIE_VALUE:
        sys.stderr.write(NOT_A_COMMAND_MESSAGE)
        sys.exit(1)
    report_invalid_protocol_versions(os.environ.get("PLUGIN_PROTOCOL_VERSIONS", ""))
    client_cert_pem = os.environ.get("PLUGIN_CLIENT_CERT", "").encode()
    certificate = CertificateChild.start() if client_cert_pem and identity is None else None

    # Imported only now, while the certificate child runs on the other core (see the module docstring).
    from concurrent import futures

    import grpc

    from tfbridge.serving.tls_relay import MutualTlsFrontEnd, ServerIdentity

    if certificate is not None:
        identity = ServerIdentity(*certificate.result())
    # Before anything that must be cleaned up: a SIGTERM from here on is handled after the handshake.
    lifecycle = Lifecycle()
    lifecycle.catch_sigterm()
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
    if not client_cert_pem or identity is None:
        server.add_insecure_port(f"unix:{socket_path}")
    else:
        # gRPC listens in plaintext inside the private socket directory; the TLS front end owns the
        # socket Terraform connects to (see tfbridge.serving.tls_relay for why grpcio's own TLS cannot be used).
        server.add_insecure_port(f"unix:{grpc_socket_path}")
        MutualTlsFrontEnd(socket_path, grpc_socket_path, identity.trust_only(client_cert_pem)).start()
        # go-plugin sends the DER leaf in base64 without padding (RawStdEncoding): no newlines on the line.
        server_cert_field = base64.b64encode(identity.cert_der).decode().rstrip("=")
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
    grace = lifecycle.abandon_grace if lifecycle.abandoned else _SHUTDOWN_GRACE_SECONDS
    stopping_since = time.monotonic()
    server.stop(None if terminated else grace).wait()
    if lifecycle.abandoned:
        # gRPC's stop returned at once: Terraform's connection is gone, so to gRPC its calls are over.
        # Their handlers are not: a create is deleting what it rented, and must finish that first.
        lifecycle.wait_for_calls(grace - (time.monotonic() - stopping_since))
    for path in (socket_path, grpc_socket_path):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    os.rmdir(socket_dir)
    with contextlib.suppress(OSError, ValueError):  # Terraform's end of the pipes may be gone
        sys.stdout.flush()
        sys.stderr.flush()
    exit_code = 128 + signal.SIGTERM if terminated else 0
    host.exited(exit_code)
    # os._exit: worker threads may still wait on a servicer that never came; exit must not hang on them.
    os._exit(exit_code)


def _exit_when_gone(lifecycle: Lifecycle, host: Host) -> None:
    """Stop serving once Terraform is gone without calling Shutdown (it was SIGKILLed, or crashed).

    Nobody can receive this process's answers any more, so nothing an in-flight create made can ever
    reach a state: every operation is abandoned (:attr:`tfbridge.Context.abandoned`) and gets
    :data:`ABANDON_GRACE_SECONDS` to undo it, after the requests it must first hear back from
    (:func:`tfbridge.cancel.held_seconds`); a watchdog kills the process a second after that.
    """
    host.wait_gone()
    grace = held_seconds() + ABANDON_GRACE_SECONDS
    watchdog = threading.Timer(grace + 1.0, os.kill, (os.getpid(), signal.SIGKILL))
    watchdog.daemon = True
    watchdog.start()
    abandon_all()
    lifecycle.abandon(grace)


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


class _HandlerTable:
    """The server's only generic handler: method handlers appear in it after the handshake line.

    It also stands in for the ``grpc.Server`` argument of the generated ``add_*_to_server`` functions
    (a :class:`tfbridge.serving.plugin_services.MethodRegistry`), which hand it their method handlers. ``service``
    runs on grpcio's polling thread; it blocks only until the stubs are imported, which is the first thing
    done after the handshake.
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


def _install_services(
    handlers: _HandlerTable,
    lifecycle: Lifecycle,
    servicer_factory: Callable[[], tfplugin6_pb2_grpc.ProviderServicer],
) -> None:
    """Background start-up after the handshake: import the stubs, fill the handler table, build the
    provider servicer."""
    try:
        from tfbridge.serving.plugin_services import register_services

        provider = register_services(handlers, lifecycle)
    finally:
        # Unblock waiting calls even if the stubs failed to import: they then end as UNIMPLEMENTED.
        handlers.installed.set()
    provider.start(servicer_factory)
