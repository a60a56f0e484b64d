#!/usr/bin/env bash
# Regenerates the checked-in Python stubs (*_pb2.py, *_pb2.pyi, *_pb2_grpc.py) from the .proto files here.
# The include root is provider/, so generated imports read `from tfbridge.proto import ...`.
set -euo pipefail
repo_root="$(cd "$(dirname "$0")/../../.." && pwd)"
python="${PYTHON:-$repo_root/.venv/bin/python}"
cd "$repo_root/provider"
"$python" -m grpc_tools.protoc -I . --python_out=. --pyi_out=. --grpc_python_out=. tfbridge/proto/*.proto
