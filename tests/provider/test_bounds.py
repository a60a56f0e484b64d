"""Input and time bounds below Terraform: the shared field rules, host key fingerprints, and the API
client's request and connect timeouts against real loopback sockets."""

from __future__ import annotations

import base64
import socket
import struct
import subprocess
import time
from contextlib import closing
from pathlib import Path

import pytest
from pydantic import ValidationError

from lium_provider.api.client import LiumClient
from lium_provider.api.errors import LiumUnavailable
from lium_provider.provider import LiumProviderConfig, configured_seconds
from lium_provider.resources.inputs import check_openssh_public_key, refuse_control_characters
from lium_provider.resources.pod import PodModel
from lium_provider.sshkeys import fingerprint
from tfbridge import TFError

# A client on loopback fails a stalled attempt within its timeout; this is the scheduling slack allowed.
SLACK_SECONDS = 2.0
TEMPLATE_ID = "3f1c2b9e-8d4a-4e6f-9a1b-2c3d4e5f6a7b"  # any Lium id: these tests check other fields


def keygen(directory: Path, key_type: str) -> str:
    path = directory / f"id_{key_type}"
    subprocess.run(["ssh-keygen", "-q", "-t", key_type, "-N", "", "-f", str(path)], check=True)
    return path.with_suffix(".pub").read_text().strip()


def ssh_string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def security_key_line(ed25519_line: str) -> str:
    """The ``sk-ssh-ed25519@openssh.com`` public key (as a FIDO token would make) around an ed25519 key."""
    blob = base64.b64decode(ed25519_line.split()[1])
    raw_key = blob[-32:]
    sk_type = b"sk-ssh-ed25519@openssh.com"
    sk_blob = ssh_string(sk_type) + ssh_string(raw_key) + ssh_string(b"ssh:")
    return f"{sk_type.decode()} {base64.b64encode(sk_blob).decode()} token"


@pytest.mark.parametrize("key_type", ["ed25519", "ecdsa", "rsa"])
def test_openssh_public_keys_of_every_type_are_accepted(tmp_path: Path, key_type: str) -> None:
    line = keygen(tmp_path, key_type)
    assert check_openssh_public_key(line) == line
    assert (
        PodModel(name="p", template_id=TEMPLATE_ID, ssh_public_key=line + "\n").ssh_public_key == line + "\n"
    )


def test_a_security_key_public_key_is_accepted(tmp_path: Path) -> None:
    line = security_key_line(keygen(tmp_path, "ed25519"))
    assert check_openssh_public_key(line) == line


@pytest.mark.parametrize(
    "value",
    [
        "garbage",
        "ssh-ed25519 AAAA",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG",  # truncated
        "ssh-foo AAAAC3NzaC1lZDI1NTE5AAAAIGCojPvDXwvbCY+x34+CIMq2avvGBc+6aYopOLhpRrvE",
        "-----BEGIN OPENSSH PRIVATE KEY-----",
    ],
    ids=["garbage", "short", "truncated", "unknown-type", "private-key"],
)
def test_anything_else_is_refused_naming_ssh_public_key(value: str) -> None:
    with pytest.raises(ValidationError) as caught:
        PodModel(name="p", template_id=TEMPLATE_ID, ssh_public_key=value)
    (error,) = caught.value.errors()
    assert error["loc"] == ("ssh_public_key",) and "is not an OpenSSH public key" in error["msg"]


def test_two_key_lines_are_refused(tmp_path: Path) -> None:
    line = keygen(tmp_path, "ed25519")
    with pytest.raises(ValueError, match="single OpenSSH public key line"):
        check_openssh_public_key(f"{line}\n{line}")


@pytest.mark.parametrize("character", ["\n", "\r", "\t", "\x00", "\x1b", "\x7f", "\x9b"])
def test_control_characters_are_refused_in_names(character: str) -> None:
    with pytest.raises(ValueError, match=r"contains a control character .* at position 2"):
        refuse_control_characters(f"ab{character}cd")
    with pytest.raises(ValidationError) as caught:
        PodModel(name=f"ab{character}", template_id=TEMPLATE_ID)
    assert caught.value.errors()[0]["loc"] == ("name",)


def test_printable_unicode_names_pass() -> None:
    assert refuse_control_characters("Ünïcode pod ✓ (gpu) #1") == "Ünïcode pod ✓ (gpu) #1"
    assert refuse_control_characters(None) is None


def test_fingerprint_is_the_one_ssh_keygen_prints(tmp_path: Path) -> None:
    line = keygen(tmp_path, "ed25519")
    printed = subprocess.run(
        ["ssh-keygen", "-lf", str(tmp_path / "id_ed25519.pub")], capture_output=True, text=True, check=True
    ).stdout.split()[1]
    assert fingerprint(line) == f"ssh-ed25519 {printed}"
    assert fingerprint("ssh-ed25519 not*base64") == "ssh-ed25519 (unparsable)"


def me_failure(url: str, timeout: float) -> tuple[LiumUnavailable, float]:
    """The error ``GET /users/me`` at ``url`` ends with under ``timeout``, and the seconds it took."""
    with LiumClient(url, "key", timeout=timeout, connect_timeout=0.5) as client:
        started = time.monotonic()
        with pytest.raises(LiumUnavailable) as caught:
            client.me()
        return caught.value, time.monotonic() - started


def test_request_timeout_bounds_a_request_to_a_silent_endpoint() -> None:
    with closing(socket.socket()) as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)  # the kernel accepts; nothing ever answers
        url = f"http://127.0.0.1:{server.getsockname()[1]}/api"
        error, elapsed = me_failure(url, timeout=1.0)
    assert 1.0 <= elapsed < 1.0 + SLACK_SECONDS, elapsed
    assert f"no answer from {url}/users/me after 1 attempt (timed out: ReadTimeout" in str(error)
    assert error.sent is True  # the request left: a mutation would be uncertain, not resent


def test_request_timeout_bounds_the_resends_to_a_closed_port() -> None:
    with closing(socket.socket()) as holder:
        holder.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused
        url = f"http://127.0.0.1:{holder.getsockname()[1]}/api"
        error, elapsed = me_failure(url, timeout=1.5)
    assert elapsed < 1.5 + SLACK_SECONDS, elapsed
    message = str(error)
    assert f"no answer from {url}/users/me after" in message and "connection failed: ConnectError" in message
    assert error.sent is False


def test_timeouts_come_from_the_argument_then_the_environment_then_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LIUM_REQUEST_TIMEOUT", "2m")
    assert configured_seconds("45s", "LIUM_REQUEST_TIMEOUT", "30s", "request_timeout") == 45.0
    assert configured_seconds(None, "LIUM_REQUEST_TIMEOUT", "30s", "request_timeout") == 120.0
    monkeypatch.delenv("LIUM_REQUEST_TIMEOUT")
    assert configured_seconds(None, "LIUM_REQUEST_TIMEOUT", "30s", "request_timeout") == 30.0
    monkeypatch.setenv("LIUM_REQUEST_TIMEOUT", "-1s")
    with pytest.raises(TFError) as caught:
        configured_seconds(None, "LIUM_REQUEST_TIMEOUT", "30s", "request_timeout")
    assert caught.value.path == ("request_timeout",) and "LIUM_REQUEST_TIMEOUT" in caught.value.detail
    with pytest.raises(ValidationError) as invalid:
        LiumProviderConfig(connect_timeout="0s")
    assert invalid.value.errors()[0]["loc"] == ("connect_timeout",)
