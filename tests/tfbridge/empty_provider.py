"""A minimal tfplugin6 provider for transport tests: an empty schema, and StopProvider."""

from __future__ import annotations

import threading

import grpc

from tfbridge.proto import tfplugin6_pb2, tfplugin6_pb2_grpc


class EmptyProvider(tfplugin6_pb2_grpc.ProviderServicer):
    """Serves an empty provider schema; every RPC it does not override answers UNIMPLEMENTED."""

    def __init__(self) -> None:
        self.stop_requested = threading.Event()

    def GetProviderSchema(
        self, request: tfplugin6_pb2.GetProviderSchema.Request, context: grpc.ServicerContext
    ) -> tfplugin6_pb2.GetProviderSchema.Response:
        return tfplugin6_pb2.GetProviderSchema.Response(
            provider=tfplugin6_pb2.Schema(block=tfplugin6_pb2.Schema.Block()),
            server_capabilities=tfplugin6_pb2.ServerCapabilities(get_provider_schema_optional=True),
        )

    def StopProvider(
        self, request: tfplugin6_pb2.StopProvider.Request, context: grpc.ServicerContext
    ) -> tfplugin6_pb2.StopProvider.Response:
        self.stop_requested.set()
        return tfplugin6_pb2.StopProvider.Response()
