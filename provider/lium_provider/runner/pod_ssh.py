"""One root SSH connection to a pod whose host key was pinned by ``lium_pod``.

The pinned key is the only key accepted: paramiko's ``RejectPolicy`` refuses any other during the key
exchange, before authentication, so on a mismatch no command ever runs. Commands wait cooperatively
(Ctrl-C and the operation's deadline are checked while they run); HTTP to services inside the pod goes
through ``direct-tcpip`` channels, one per request, as an SSH tunnel would.
"""

from __future__ import annotations

import base64
import binascii
import http.client
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from lium_provider.sshkeys import parse_private_key
from tfbridge import Context

if TYPE_CHECKING:  # paramiko costs ~180 ms to import: loaded only when a pod is contacted
    import paramiko

CONNECT_TIMEOUT_SECONDS = 10.0
_POLL_SECONDS = 0.02
_EOF_GRACE_SECONDS = 2.0


class PodUnreachable(Exception):
    """SSH to the pod failed in a way that may pass: refused, timed out, reset, no banner yet."""


class HostKeyMismatch(Exception):
    """The pod offered a host key other than the pinned one."""

    def __init__(self, offered: str) -> None:
        super().__init__("the pod's SSH host key is not the pinned one")
        self.offered = offered


class LoginRefused(Exception):
    """The pod's sshd rejected the provider's key for root."""


class NothingListening(Exception):
    """Nothing answers on that port inside the pod (yet): no listener, or it closed without a response."""


@dataclass(frozen=True)
class CommandResult:
    status: int
    stdout: bytes
    stderr: bytes

    @property
    def text(self) -> str:
        return self.stdout.decode("utf-8", "replace")

    @property
    def error_text(self) -> str:
        return self.stderr.decode("utf-8", "replace").strip()


def pinned_key(host_key: str) -> paramiko.PKey:
    """The paramiko key of ``<type> <base64>``; ValueError when it is not one."""
    import paramiko

    try:
        key_type, encoded = host_key.split()[:2]
        return paramiko.PKey.from_type_string(key_type, base64.b64decode(encoded, validate=True))
    except (ValueError, binascii.Error, paramiko.SSHException, paramiko.UnknownKeyType) as exc:
        raise ValueError(f"not an SSH host key (`<type> <base64>`): {type(exc).__name__}") from None


class _TunnelledHTTPConnection(http.client.HTTPConnection):
    """``http.client`` over a ``direct-tcpip`` channel instead of a socket."""

    def __init__(self, transport: Any, port: int, timeout: float) -> None:
        super().__init__("127.0.0.1", port, timeout=timeout)
        self._transport = transport

    def connect(self) -> None:
        import paramiko

        try:
            channel = self._transport.open_channel(
                "direct-tcpip", ("127.0.0.1", self.port), ("127.0.0.1", 0), timeout=self.timeout
            )
        except paramiko.ChannelException as exc:
            raise NothingListening(f"127.0.0.1:{self.port} inside the pod: {exc}") from None
        except (paramiko.SSHException, EOFError, OSError) as exc:
            raise PodUnreachable(str(exc) or type(exc).__name__) from None
        channel.settimeout(self.timeout)
        # A paramiko Channel offers the socket calls http.client uses (sendall, makefile, close).
        self.sock = channel


class PodSSH:
    """A verified root session on one pod. Use as a context manager, or call :meth:`close`."""

    def __init__(self, client: paramiko.SSHClient) -> None:
        self._client = client

    @classmethod
    def connect(cls, host: str, port: int, host_key: str, private_key: str) -> PodSSH:
        import paramiko

        pinned = pinned_key(host_key)
        client = paramiko.SSHClient()
        client.get_host_keys().add(host if port == 22 else f"[{host}]:{port}", pinned.get_name(), pinned)
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        try:
            client.connect(
                host,
                port=port,
                username="root",
                pkey=parse_private_key(private_key),
                timeout=CONNECT_TIMEOUT_SECONDS,
                banner_timeout=CONNECT_TIMEOUT_SECONDS,
                auth_timeout=CONNECT_TIMEOUT_SECONDS,
                allow_agent=False,
                look_for_keys=False,
            )
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise HostKeyMismatch(f"{exc.key.get_name()} {exc.key.get_base64()}") from None
        except paramiko.AuthenticationException:
            client.close()
            raise LoginRefused("the pod refused root login with the provider's SSH key") from None
        except (paramiko.SSHException, EOFError, OSError) as exc:
            client.close()
            raise PodUnreachable(str(exc) or type(exc).__name__) from None
        return cls(client)

    def __enter__(self) -> PodSSH:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        self._client.close()

    def _transport(self) -> Any:
        transport = self._client.get_transport()
        if transport is None or not transport.is_active():
            raise PodUnreachable("the SSH connection to the pod was closed")
        return transport

    def run(self, ctx: Context, command: str, stdin: bytes = b"", timeout: float = 60.0) -> CommandResult:
        """Run ``command``; Ctrl-C, the deadline or ``timeout`` close the channel and raise."""
        import paramiko

        try:
            channel = self._transport().open_session(timeout=CONNECT_TIMEOUT_SECONDS)
        except (paramiko.SSHException, EOFError, OSError) as exc:
            raise PodUnreachable(str(exc) or type(exc).__name__) from None
        stdout, stderr = bytearray(), bytearray()

        def drain() -> None:
            # Reading keeps the SSH window open, so a chatty command never blocks on a full channel.
            while channel.recv_ready():
                stdout.extend(channel.recv(65536))
            while channel.recv_stderr_ready():
                stderr.extend(channel.recv_stderr(65536))

        give_up = time.monotonic() + timeout
        try:
            channel.exec_command(command)
            if stdin:
                channel.sendall(stdin)
            channel.shutdown_write()
            while not channel.status_event.wait(_POLL_SECONDS):
                drain()
                if channel.closed and not channel.status_event.is_set():
                    raise PodUnreachable("the pod closed the SSH channel before the command finished")
                ctx.check()
                if time.monotonic() > give_up:
                    raise TimeoutError(f"a command on the pod did not finish within {timeout:g} s")
            # Output sent before the exit status may still be in flight until end-of-file.
            eof_by = time.monotonic() + _EOF_GRACE_SECONDS
            while not (channel.eof_received or channel.closed) and time.monotonic() < eof_by:
                drain()
                time.sleep(_POLL_SECONDS / 4)
            drain()
            return CommandResult(channel.recv_exit_status(), bytes(stdout), bytes(stderr))
        except (paramiko.SSHException, EOFError, OSError) as exc:
            raise PodUnreachable(str(exc) or type(exc).__name__) from None
        finally:
            channel.close()

    def upload(self, ctx: Context, local: Path, remote: str) -> None:
        """Copy a local file to the pod over SFTP, checking for Ctrl-C between chunks."""
        import paramiko

        def progress(_sent: int, _total: int) -> None:
            ctx.check()

        try:
            with self._client.open_sftp() as sftp:
                sftp.put(str(local), remote, callback=progress)
        except (paramiko.SSHException, EOFError) as exc:
            raise PodUnreachable(f"SFTP upload failed: {exc}") from None

    def accepts(self, port: int, timeout: float = 10.0) -> bool:
        """Whether something inside the pod accepts a TCP connection on ``127.0.0.1:port``, tried through a
        ``direct-tcpip`` channel of this session: the pod's own sshd connects, so nothing in front of the
        pod (a relay that accepts every connect) can answer for it. :class:`PodUnreachable` when the SSH
        connection itself breaks."""
        import paramiko

        try:
            channel = self._transport().open_channel(
                "direct-tcpip", ("127.0.0.1", port), ("127.0.0.1", 0), timeout=timeout
            )
        except paramiko.ChannelException:
            return False
        except (paramiko.SSHException, EOFError, OSError) as exc:
            raise PodUnreachable(str(exc) or type(exc).__name__) from None
        channel.close()
        return True

    def http(
        self, method: str, path: str, port: int, body: bytes | None = None, timeout: float = 10.0
    ) -> tuple[int, bytes]:
        """One HTTP request to ``127.0.0.1:port`` inside the pod: ``(status, body)``.

        Raises :class:`NothingListening` when nothing accepts the connection or the service drops it
        without an answer, :class:`PodUnreachable` when the SSH connection itself breaks.
        """
        import paramiko

        connection = _TunnelledHTTPConnection(self._transport(), port, timeout)
        try:
            headers = {"Content-Type": "application/json"} if body is not None else {}
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            return response.status, response.read()
        except (http.client.HTTPException, paramiko.SSHException, EOFError, OSError) as exc:
            message = f"{method} {path}: {exc or type(exc).__name__}"
            transport = self._client.get_transport()
            if transport is not None and transport.is_active():
                # The tunnel works; the service went away mid-request (a runner exiting after its job).
                raise NothingListening(message) from None
            raise PodUnreachable(message) from None
        finally:
            connection.close()
