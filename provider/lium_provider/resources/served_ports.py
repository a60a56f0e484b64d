"""What a pod serves: ``wait_for_ports``, the ports a pod's (or cluster node's) create and update wait for.

A pod that serves a model is usable when its port answers, not when it is RUNNING. The ports are
internal ones (what the process inside listens on), tried from inside the pod: each through a
``direct-tcpip`` channel of the provider's root SSH session, so the pod's own sshd makes the connection
(:meth:`~lium_provider.runner.pod_ssh.PodSSH.accepts`) and nothing in front of the pod — Lium's port
mapping, or a relay that accepts every connect — can answer for the service. The wait lasts as long as
the operation's ``timeouts`` allow; a port that never answers fails it, naming the port and the last
lines the pod's container printed.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from lium_provider.api.errors import LiumError
from lium_provider.runner.pod_ssh import LoginRefused, PodSSH, PodUnreachable
from lium_provider.session import LiumSession
from tfbridge import Attribute, Context, TFError

PORT_POLL_SECONDS = 0.5
LOG_TAIL_LINES = 20

WAIT_FOR_PORTS = Attribute(
    optional=True,
    description="Internal ports (what a process in the container listens on) the create and every update "
    "wait for, until each accepts a connection inside the pod (tried through the provider's SSH session, "
    "so only the pod's own service can answer), within the operation's `timeouts`. A port that never "
    "answers fails the apply naming it, with the last lines the container printed; a create's pod is then "
    "kept as tainted. A port need not be published (in the template's `internal_ports`) to be waited for; "
    "it must be to be reached from outside (`ports`).",
)
WaitForPorts = Annotated[
    list[Annotated[int, Field(ge=1, le=65535)]] | None, WAIT_FOR_PORTS, Field(max_length=64)
]
"""The ``wait_for_ports`` field of ``lium_pod`` and ``lium_cluster``."""


def wait_for_ports(
    ctx: Context,
    s: LiumSession,
    *,
    pod_id: str,
    address: tuple[str, int],
    host_key: str,
    ports: list[int],
    attribute: str = "wait_for_ports",
) -> None:
    """Wait until each of ``ports`` accepts a connection inside the pod at SSH ``address`` (its pinned
    ``host_key``); a TFError naming the ports that never did (and the pod's last log lines) once the
    operation's deadline passes."""
    waiting = sorted(set(ports))
    if not waiting:
        return
    private_key = s.require_ssh_key(attribute)
    host, port = address
    try:
        while waiting:
            try:
                with PodSSH.connect(host, port, host_key, private_key) as ssh:
                    while waiting:
                        waiting = [p for p in waiting if not ssh.accepts(p)]
                        if waiting:
                            ctx.sleep(PORT_POLL_SECONDS)
            except (PodUnreachable, LoginRefused) as exc:
                ctx.log.info("the pod's sshd does not let the port check in yet", pod=pod_id, error=str(exc))
                ctx.sleep(PORT_POLL_SECONDS)
    except TimeoutError:
        shown = ", ".join(str(p) for p in waiting)
        raise TFError(
            f"Port{'s' if len(waiting) > 1 else ''} {shown} of pod {pod_id} never answered",
            f"Nothing accepted a connection on 127.0.0.1:{shown} inside the pod within the operation's "
            f"timeout. The container's last lines:\n{_last_lines(s, pod_id)}",
            path=(attribute,),
        ) from None


def _last_lines(s: LiumSession, pod_id: str) -> str:
    try:
        text = s.client.pod_logs(pod_id, LOG_TAIL_LINES).rstrip("\n")
    except LiumError as exc:
        return f"(its log could not be read: {exc})"
    return text or "(it printed nothing)"
