"""The plugin process end to end: the go-plugin handshake, its side services, gRPC over mutual TLS.

Each test execs tests/tfbridge/serve_empty_provider.py the way Terraform execs a provider and talks to it
the way Terraform does; the last one lets Terraform itself do that.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID
from google.protobuf import empty_pb2  # type: ignore[import-untyped]  # types-protobuf is not a dependency

from tests.support.terraform import Terraform, write_cli_config
from tests.tfbridge.plugin_host import ClientIdentity, PluginProcess, plugin_env, stub
from tfbridge.proto import (
    grpc_controller_pb2,
    grpc_controller_pb2_grpc,
    grpc_stdio_pb2_grpc,
    health_pb2,
    health_pb2_grpc,
    tfplugin6_pb2,
    tfplugin6_pb2_grpc,
)
from tfbridge.serving.handshake import NOT_A_COMMAND_MESSAGE
from tfbridge.serving.install import write_launcher
from tfbridge.serving.tls_certificate import self_signed_certificate

HERE = Path(__file__).resolve().parent
SERVE_SCRIPT = HERE / "serve_empty_provider.py"
PLUGIN_COMMAND = [sys.executable, str(SERVE_SCRIPT)]
RPC_TIMEOUT = 10.0
SERVING = health_pb2.HealthCheckResponse.SERVING


@pytest.fixture
def plugin(identity: ClientIdentity, socket_root: Path) -> Iterator[PluginProcess]:
    with PluginProcess(PLUGIN_COMMAND, plugin_env(identity, socket_root)) as process:
        yield process


def health_status(channel: grpc.Channel, service: str = "plugin") -> int:
    request = health_pb2.HealthCheckRequest(service=service)
    status: int = stub(health_pb2_grpc.HealthStub, channel).Check(request, timeout=RPC_TIMEOUT).status
    return status


def shutdown(channel: grpc.Channel) -> None:
    stub(grpc_controller_pb2_grpc.GRPCControllerStub, channel).Shutdown(
        grpc_controller_pb2.Empty(), timeout=RPC_TIMEOUT
    )


def test_handshake_line_has_go_plugin_fields(plugin: PluginProcess, socket_root: Path) -> None:
    handshake = plugin.handshake()

    assert (handshake.core_version, handshake.protocol_version) == (1, 6)
    assert (handshake.network, handshake.protocol) == ("unix", "grpc")
    assert Path(handshake.address).parent.parent == socket_root
    assert Path(handshake.address).is_socket()
    assert handshake.server_cert_der is not None
    server_cert = x509.load_der_x509_certificate(handshake.server_cert_der)
    san = server_cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in san.get_values_for_type(x509.DNSName)


def test_health_reports_serving_for_plugin_and_server(
    plugin: PluginProcess, identity: ClientIdentity
) -> None:
    with plugin.handshake().channel(identity) as channel:
        assert health_status(channel, "plugin") == SERVING
        assert health_status(channel, "") == SERVING
        with pytest.raises(grpc.RpcError) as unknown:
            health_status(channel, "no-such-service")
        assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
        watch = stub(health_pb2_grpc.HealthStub, channel).Watch(
            health_pb2.HealthCheckRequest(service="plugin"), timeout=RPC_TIMEOUT
        )
        assert next(watch).status == SERVING
        watch.cancel()


def test_provider_calls_reach_the_servicer(plugin: PluginProcess, identity: ClientIdentity) -> None:
    with plugin.handshake().channel(identity) as channel:
        provider = stub(tfplugin6_pb2_grpc.ProviderStub, channel)
        schema = provider.GetProviderSchema(tfplugin6_pb2.GetProviderSchema.Request(), timeout=RPC_TIMEOUT)
        assert schema.server_capabilities.get_provider_schema_optional
        assert schema.HasField("provider")
        # RPCs the servicer does not override answer as the generated base class does.
        with pytest.raises(grpc.RpcError) as unimplemented:
            provider.GetFunctions(tfplugin6_pb2.GetFunctions.Request(), timeout=RPC_TIMEOUT)
        assert unimplemented.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_messages_above_grpcio_default_limit_pass(plugin: PluginProcess, identity: ClientIdentity) -> None:
    large_config = tfplugin6_pb2.DynamicValue(msgpack=bytes(6 << 20))  # grpcio's default limit: 4 MiB
    with plugin.handshake().channel(identity) as channel:
        provider = stub(tfplugin6_pb2_grpc.ProviderStub, channel)
        with pytest.raises(grpc.RpcError) as answer:
            provider.ValidateProviderConfig(
                tfplugin6_pb2.ValidateProviderConfig.Request(config=large_config), timeout=RPC_TIMEOUT
            )
        # The empty provider has no ValidateProviderConfig: reaching it proves the message got through.
        assert answer.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_client_with_another_certificate_is_rejected(plugin: PluginProcess, identity: ClientIdentity) -> None:
    handshake = plugin.handshake()
    for stranger in (ClientIdentity.generate(), None):
        with handshake.channel(stranger) as channel, pytest.raises(grpc.RpcError) as rejected:
            health_status(channel)
        assert rejected.value.code() == grpc.StatusCode.UNAVAILABLE
    with handshake.channel(identity) as channel:
        assert health_status(channel) == SERVING


def test_sigint_to_the_process_group_is_ignored(plugin: PluginProcess, identity: ClientIdentity) -> None:
    with plugin.handshake().channel(identity) as channel:
        assert health_status(channel) == SERVING
        plugin.signal_group(signal.SIGINT)
        plugin.signal_group(signal.SIGINT)
        provider = stub(tfplugin6_pb2_grpc.ProviderStub, channel)
        stopped = provider.StopProvider(tfplugin6_pb2.StopProvider.Request(), timeout=RPC_TIMEOUT)
        assert stopped.Error == ""
        assert health_status(channel) == SERVING
        assert plugin.process.poll() is None


# How go-plugin's host reads the end of the stdio stream (grpc_stdio.go, the client's Run loop): EOF,
# UNAVAILABLE and CANCELLED all mean "the plugin has gone", never an error. A Go provider's stream ends
# UNAVAILABLE every time; ours ends cleanly unless the process exits before the client has read the
# trailers, which a loaded machine sometimes shows.
STDIO_ENDS = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)


def stdio_messages_until_the_end(stdio: Iterator[object]) -> list[object]:
    """The stdio stream's messages until it ends the way go-plugin's host accepts; any other error raises."""
    messages: list[object] = []
    try:
        messages.extend(stdio)
    except grpc.RpcError as ended:
        if ended.code() not in STDIO_ENDS:
            raise
    return messages


def test_shutdown_ends_streams_exits_zero_and_removes_sockets(
    plugin: PluginProcess, identity: ClientIdentity
) -> None:
    handshake = plugin.handshake()
    with handshake.channel(identity) as channel:
        stdio = stub(grpc_stdio_pb2_grpc.GRPCStdioStub, channel).StreamStdio(
            empty_pb2.Empty(), timeout=RPC_TIMEOUT
        )
        assert health_status(channel) == SERVING
        shutdown(channel)
        assert stdio_messages_until_the_end(stdio) == []  # the stream ends, without data
    assert plugin.wait() == 0
    assert not Path(handshake.address).parent.exists()


def test_sigterm_exits_promptly_and_removes_sockets(plugin: PluginProcess) -> None:
    socket_dir = Path(plugin.handshake().address).parent
    plugin.process.send_signal(signal.SIGTERM)
    assert plugin.wait(timeout=5) == 128 + signal.SIGTERM
    assert not socket_dir.exists()


def test_handshake_comes_before_the_servicer_and_calls_wait_for_it(
    identity: ClientIdentity, socket_root: Path
) -> None:
    gate = socket_root / "start-gate"
    os.mkfifo(gate)
    command = [*PLUGIN_COMMAND, "--start-gate", str(gate)]
    with (
        PluginProcess(command, plugin_env(identity, socket_root)) as plugin,
        # The factory is blocked on the FIFO, yet the handshake line is out and go-plugin's services answer.
        plugin.handshake().channel(identity) as channel,
    ):
        assert health_status(channel) == SERVING
        provider = stub(tfplugin6_pb2_grpc.ProviderStub, channel)
        pending = provider.GetProviderSchema.future(
            tfplugin6_pb2.GetProviderSchema.Request(), timeout=RPC_TIMEOUT
        )
        assert not pending.done()
        with open(gate, "wb"):  # lets the factory go on
            pass
        assert pending.result().server_capabilities.get_provider_schema_optional


def test_failed_servicer_start_is_reported_on_calls(identity: ClientIdentity, socket_root: Path) -> None:
    command = [*PLUGIN_COMMAND, "--fail-start"]
    with PluginProcess(command, plugin_env(identity, socket_root)) as plugin:
        with plugin.handshake().channel(identity) as channel:
            assert health_status(channel) == SERVING
            provider = stub(tfplugin6_pb2_grpc.ProviderStub, channel)
            with pytest.raises(grpc.RpcError) as failed:
                provider.GetProviderSchema(tfplugin6_pb2.GetProviderSchema.Request(), timeout=RPC_TIMEOUT)
            assert failed.value.code() == grpc.StatusCode.UNAVAILABLE
            assert "refusing to start, as asked" in (failed.value.details() or "")
            shutdown(channel)
        assert plugin.wait() == 0
        assert "RuntimeError: refusing to start, as asked" in plugin.stderr_text()


def test_plaintext_without_client_certificate(socket_root: Path) -> None:
    env = plugin_env(None, socket_root, PLUGIN_PROTOCOL_VERSIONS="5,six,6")
    env.pop("PLUGIN_CLIENT_CERT", None)
    with PluginProcess(PLUGIN_COMMAND, env) as plugin:
        handshake = plugin.handshake()
        assert handshake.server_cert_der is None
        assert handshake.protocol_version == 6
        with handshake.channel(None) as channel:
            assert health_status(channel) == SERVING
            shutdown(channel)
        assert plugin.wait() == 0
        assert "server sent invalid plugin version 'six'" in plugin.stderr_text()


def test_without_magic_cookie_exits_1_with_a_message(socket_root: Path) -> None:
    env = plugin_env(None, socket_root)
    env.pop("TF_PLUGIN_MAGIC_COOKIE")
    result = subprocess.run(PLUGIN_COMMAND, env=env, capture_output=True, timeout=30, check=False)
    assert result.returncode == 1
    assert result.stdout == b""
    assert result.stderr.decode() == NOT_A_COMMAND_MESSAGE
    assert "This binary is a plugin. These are not meant to be executed directly." in NOT_A_COMMAND_MESSAGE
    assert list(socket_root.iterdir()) == []


def test_self_signed_certificate_matches_go_plugin_profile() -> None:
    cert_der, key_pem = self_signed_certificate(now=1_800_000_000.0)
    cert = x509.load_der_x509_certificate(cert_der)
    key = serialization.load_pem_private_key(key_pem, password=None)

    cert_key = cert.public_key()
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    assert isinstance(cert_key, ec.EllipticCurvePublicKey)
    assert isinstance(cert_key.curve, ec.SECP256R1)
    assert key.public_key().public_numbers() == cert_key.public_numbers()
    cert.verify_directly_issued_by(cert)
    assert cert.subject == cert.issuer
    assert cert.not_valid_before_utc.timestamp() == 1_800_000_000 - 30
    extensions = cert.extensions
    assert extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    usage = extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.digital_signature and usage.key_cert_sign and usage.key_encipherment and usage.key_agreement
    extended = extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert set(extended) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
    names = extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]


@pytest.mark.terraform
def test_terraform_loads_the_schema_and_shuts_the_plugin_down(tmp_path: Path) -> None:
    plugins = tmp_path / "plugins"
    write_launcher(plugins, "lium-test/empty", "0.0.1", PLUGIN_COMMAND)
    terraform = Terraform(
        tmp_path / "config",
        {
            "TF_CLI_CONFIG_FILE": str(write_cli_config(tmp_path / "terraformrc", plugins)),
            "CHECKPOINT_DISABLE": "1",
            "TF_IN_AUTOMATION": "1",
        },
        timeout=120,
    )
    terraform.write(
        'terraform {\n  required_providers {\n    empty = { source = "lium-test/empty" }\n  }\n}\n'
    )
    terraform.init()

    terraform.env["TF_LOG"] = "debug"
    result = terraform.run("providers", "schema", "-json")

    assert "registry.terraform.io/lium-test/empty" in json.loads(result.stdout)["provider_schemas"]
    log = result.stderr
    assert "using plugin: version=6" in log
    assert "plugin process exited" in log
    assert "plugin failed to exit gracefully" not in log
