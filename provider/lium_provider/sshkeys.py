"""SSH identities and host keys: loading the user's key, deriving its public half, pinning a pod's host key."""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import socket
from pathlib import Path
from typing import TYPE_CHECKING

from tfbridge import TFError

if TYPE_CHECKING:  # paramiko costs ~180 ms to import: only operations that use SSH load it
    import paramiko


def load_private_key(path: str, attribute: str) -> str:
    try:
        return Path(path).expanduser().read_text()
    except OSError as exc:
        raise TFError(
            "Cannot read the SSH private key file", f"{path}: {exc.strerror}", path=(attribute,)
        ) from None


def parse_private_key(text: str) -> paramiko.PKey:
    """The paramiko key of a PEM/OpenSSH private key; the error never quotes the key."""
    import paramiko

    key_classes: tuple[type[paramiko.PKey], ...] = (paramiko.Ed25519Key, paramiko.ECDSAKey, paramiko.RSAKey)
    for key_class in key_classes:
        try:
            return key_class.from_private_key(io.StringIO(text))
        except (paramiko.SSHException, ValueError, IndexError):
            continue
    raise TFError(
        "The SSH private key cannot be parsed",
        "Use an unencrypted OpenSSH or PEM key (ed25519, ecdsa or rsa).",
        path=("ssh_private_key",),
    )


def public_key_line(private_key: str) -> str:
    """``ssh-ed25519 AAAA...`` for the given private key (what Lium installs in the pod)."""
    key = parse_private_key(private_key)
    return f"{key.get_name()} {key.get_base64()}"


def same_public_key(a: str, b: str) -> bool:
    """True when two OpenSSH public key lines hold the same key (type and key; comments aside)."""
    return a.split()[:2] == b.split()[:2]


def fetch_host_key(host: str, port: int, timeout: float = 10.0) -> str | None:
    """The server's host key as ``<type> <base64>``, or None if nothing answers SSH there yet.

    No authentication happens: only the key exchange, which is where the server proves its key.
    """
    import paramiko

    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError:
        return None
    transport = paramiko.Transport(sock)
    try:
        transport.banner_timeout = timeout
        transport.start_client(timeout=timeout)
        key = transport.get_remote_server_key()
        return f"{key.get_name()} {key.get_base64()}"
    except (paramiko.SSHException, OSError, EOFError):
        return None
    finally:
        transport.close()
        sock.close()


def fingerprint(key_line: str) -> str:
    """OpenSSH's fingerprint of a ``<type> <base64>`` key, ``SHA256:...`` as ``ssh-keygen -l`` prints it;
    ``<type> (unparsable)`` when the base64 is broken, so a message about a bad key still renders."""
    parts = key_line.split()
    try:
        blob = base64.b64decode(parts[1], validate=True)
    except (IndexError, binascii.Error):
        return f"{parts[0] if parts else '?'} (unparsable)"
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    return f"{parts[0]} SHA256:{digest}"


def known_hosts_line(host: str | None, port: int | None, host_key: str | None) -> str | None:
    """The OpenSSH ``known_hosts`` line that pins ``host_key`` for ``host:port`` (``[host]:port`` unless
    the port is 22), so ``ssh -o UserKnownHostsFile=<a file of it>`` checks the pinned key without
    asking; None until all three are known."""
    if not host or not port or not host_key:
        return None
    where = host if port == 22 else f"[{host}]:{port}"
    return f"{where} {host_key.strip()}"
