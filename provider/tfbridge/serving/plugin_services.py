"""What a go-plugin server registers on its gRPC server: go-plugin's own services and the provider.

Next to ``tfplugin6.Provider``, go-plugin serves three services of its own, reproduced here:
``grpc.health.v1.Health`` (SERVING for "" and "plugin"), ``plugin.GRPCController/Shutdown`` (the host's way
to end the process) and ``plugin.GRPCStdio/StreamStdio`` (kept open, carries nothing). The provider itself
is registered as a proxy that waits for the real servicer, which is built after the handshake.

Importing the generated stubs is slow, so :mod:`tfbridge.serving.handshake` imports this module only once its
handshake line is out, on a background thread.
"""

from __future__ import annotations

import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any, Protocol

import grpc

from tfbridge.proto import (
    grpc_controller_pb2,
    grpc_controller_pb2_grpc,
    grpc_stdio_pb2,
    grpc_stdio_pb2_grpc,
    health_pb2,
    health_pb2_grpc,
    tfplugin6_pb2_grpc,
)
from tfbridge.serving.lifecycle import Lifecycle

HEALTHY_SERVICE_NAMES = frozenset({"", "plugin"})


class MethodRegistry(Protocol):
    """The part of ``grpc.Server`` that the generated ``add_*_to_server`` functions call."""

    def add_generic_rpc_handlers(self, generic_handlers: object) -> None: ...

    def add_registered_method_handlers(self, service_name: str, method_handlers: dict[str, Any]) -> None: ...


class DeferredServicer:
    """The provider servicer, once ``servicer_factory`` has built it; callers wait until then."""

    def __init__(self) -> None:
        self._ready = threading.Event()
        self._servicer: tfplugin6_pb2_grpc.ProviderServicer | None = None
        self._failure = ""

    def start(self, servicer_factory: Callable[[], tfplugin6_pb2_grpc.ProviderServicer]) -> None:
        """Build the servicer; a factory that raises leaves every call answering UNAVAILABLE."""
        try:
            self._servicer = servicer_factory()
        except Exception as error:
            traceback.print_exc(file=sys.stderr)
            self._failure = f"{type(error).__name__}: {error}"
        self._ready.set()

    def get(self, context: grpc.ServicerContext) -> tfplugin6_pb2_grpc.ProviderServicer:
        self._ready.wait()
        if self._servicer is not None:
            return self._servicer
        context.abort(grpc.StatusCode.UNAVAILABLE, f"the provider failed to start: {self._failure}")
        raise AssertionError("context.abort raises")


def provider_proxy(
    deferred: DeferredServicer, servicer_base: type[Any], lifecycle: Lifecycle
) -> SimpleNamespace:
    """An object with every RPC method of ``servicer_base``, each forwarding to the deferred servicer
    while the lifecycle counts it as a running call (:meth:`Lifecycle.serving_call`).

    The method list comes from the generated servicer class, so an RPC added to the protocol cannot be
    forgotten here.
    """

    def forwarder(method_name: str) -> Callable[[Any, grpc.ServicerContext], Any]:
        def forward(request: Any, context: grpc.ServicerContext) -> Any:
            with lifecycle.serving_call():
                return getattr(deferred.get(context), method_name)(request, context)

        forward.__name__ = method_name
        return forward

    rpc_names = [name for name, value in vars(servicer_base).items() if callable(value) and name[0] != "_"]
    return SimpleNamespace(**{name: forwarder(name) for name in rpc_names})


class Health:
    """grpc.health.v1.Health as go-plugin registers it: SERVING for the server ("") and for "plugin"."""

    def __init__(self, lifecycle: Lifecycle) -> None:
        self._lifecycle = lifecycle
        response = health_pb2.HealthCheckResponse
        self._serving = response(status=response.SERVING)
        self._service_unknown = response(status=response.SERVICE_UNKNOWN)

    def Check(
        self, request: health_pb2.HealthCheckRequest, context: grpc.ServicerContext
    ) -> health_pb2.HealthCheckResponse:
        if request.service not in HEALTHY_SERVICE_NAMES:
            context.abort(grpc.StatusCode.NOT_FOUND, "unknown service")
        return self._serving

    def Watch(
        self, request: health_pb2.HealthCheckRequest, context: grpc.ServicerContext
    ) -> Iterator[health_pb2.HealthCheckResponse]:
        yield self._serving if request.service in HEALTHY_SERVICE_NAMES else self._service_unknown
        self._lifecycle.wait_until_stopping_or_cancelled(context)


class Controller:
    """plugin.GRPCController: Shutdown asks the main thread to stop the server and exit 0."""

    def __init__(self, lifecycle: Lifecycle) -> None:
        self._lifecycle = lifecycle
        self._empty = grpc_controller_pb2.Empty()

    def Shutdown(
        self, request: grpc_controller_pb2.Empty, context: grpc.ServicerContext
    ) -> grpc_controller_pb2.Empty:
        # Once the answer is out: stopping the server first could send GOAWAY before it (a caller saw
        # UNAVAILABLE under load). A callback also runs when the call ends without an answer.
        if not context.add_callback(self._lifecycle.request_shutdown):
            self._lifecycle.request_shutdown()  # the call has already ended
        return self._empty


class Stdio:
    """plugin.GRPCStdio: the host opens this stream once; it stays open and empty until shutdown.

    Provider output is not mirrored: stderr goes straight to Terraform, which logs it.
    """

    def __init__(self, lifecycle: Lifecycle) -> None:
        self._lifecycle = lifecycle

    def StreamStdio(
        self, request: object, context: grpc.ServicerContext
    ) -> Iterator[grpc_stdio_pb2.StdioData]:
        self._lifecycle.wait_until_stopping_or_cancelled(context)
        yield from ()


def register_services(server: MethodRegistry, lifecycle: Lifecycle) -> DeferredServicer:
    """Register go-plugin's services and the provider proxy on ``server``; returns the servicer to start."""
    deferred = DeferredServicer()
    # The generated add_*_to_server functions are untyped; this table gives them a type.
    registrations: list[tuple[Callable[[object, MethodRegistry], None], object]] = [
        (health_pb2_grpc.add_HealthServicer_to_server, Health(lifecycle)),
        (grpc_controller_pb2_grpc.add_GRPCControllerServicer_to_server, Controller(lifecycle)),
        (grpc_stdio_pb2_grpc.add_GRPCStdioServicer_to_server, Stdio(lifecycle)),
        (
            tfplugin6_pb2_grpc.add_ProviderServicer_to_server,
            provider_proxy(deferred, tfplugin6_pb2_grpc.ProviderServicer, lifecycle),
        ),
    ]
    for add_to_server, servicer in registrations:
        add_to_server(servicer, server)
    return deferred
