"""Wire protocols a provider speaks, as .proto files and the Python stubs generated from them.

- ``tfplugin6``: Terraform's plugin protocol 6.8 (Terraform 1.11), the ``tfplugin6.Provider`` service.
- ``grpc_controller``, ``grpc_stdio``: hashicorp/go-plugin's own services (package ``plugin``).
- ``health``: the standard gRPC health service (package ``grpc.health.v1``).

The ``*_pb2*.py``/``*_pb2.pyi`` files are generated; do not edit them. ``regenerate.sh`` (``make proto``)
rebuilds them with grpcio-tools. Importing them is deferred until after the plugin handshake (see
:mod:`tfbridge.serving.handshake`); keep this package's ``__init__`` free of imports.
"""
