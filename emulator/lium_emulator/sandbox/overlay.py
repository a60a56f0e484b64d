"""A cluster's private overlay network: the members of one cluster share a network that lives in a
network namespace of its own, made by the emulator for that cluster, never on the host's interfaces.

Per cluster (``OverlayMember.network``), a namespace held by one fd of the emulator (no process in
it, no bind mount: it dies with the emulator, see ``netns_socket.new_netns``) with a bridge in it.
Each member pod gets a veth pair: one end on the bridge, named after the pod, the other moved into
the pod's namespace as ``overlay0`` with the member's ``address``/24, up. Clusters never meet (each
bridge is alone in its namespace), so their addresses may repeat, as on Lium. A pod's namespace
belongs to the host's user namespace: its root cannot change the interface or its address.

The namespaces are configured with iproute2's ``ip`` entered into them by ``nsenter``; when the last
member leaves, the fd is closed and the kernel drops the namespace with its bridge.
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
import os
import shutil
import subprocess
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from lium_emulator.sandbox.netns_socket import HOST_TOOLS_PATH, new_netns

logger = logging.getLogger(__name__)
OVERLAY_INTERFACE = "overlay0"
OVERLAY_NETWORK = ipaddress.IPv4Network("10.42.0.0/24")
_BRIDGE = "cluster0"
_IP_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class OverlayMember:
    """One pod's place on its cluster's overlay: ``network`` names the cluster (one namespace each),
    ``address`` is the pod's overlay IPv4 address (``10.42.0.<rank + 1>``; addresses repeat across
    clusters, as on Lium)."""

    network: str
    address: str


class OverlayError(Exception):
    """The pod cannot be put on its cluster's network; ``str(e)`` says why."""


def check_member(member: OverlayMember) -> None:
    """Refuse an address that is not a host address of :data:`OVERLAY_NETWORK`."""
    try:
        address = ipaddress.IPv4Address(member.address)
    except ValueError as e:
        raise OverlayError(f"invalid overlay address {member.address!r}") from e
    if address not in OVERLAY_NETWORK or address in (
        OVERLAY_NETWORK.network_address,
        OVERLAY_NETWORK.broadcast_address,
    ):
        raise OverlayError(f"overlay address {address} is not a host of {OVERLAY_NETWORK}")


def _interface_name(pod_id: str) -> str:
    """The member's end of its veth on the bridge: unique per pod, within Linux's 15 characters."""
    return "m" + hashlib.sha256(pod_id.encode()).hexdigest()[:14]


@dataclass
class _Cluster:
    netns_fd: int
    members: dict[str, str]  # pod id -> its interface on the bridge


class OverlayNetworks:
    """The overlay networks of one emulator's clusters. Thread-safe; members join and leave from any
    thread (the ``ip`` runs happen outside the lock, each on a duplicate of the cluster's fd)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clusters: dict[str, _Cluster] = {}
        self._network_of: dict[str, str] = {}  # pod id -> network

    def join(self, pod_id: str, pod_netns_fd: int, member: OverlayMember) -> None:
        """Put the pod (whose network namespace ``pod_netns_fd`` is) on ``member.network``."""
        check_member(member)
        nsenter, ip = _tools()
        interface = _interface_name(pod_id)
        with self._lock:
            if pod_id in self._network_of:
                raise OverlayError(f"pod {pod_id} is on an overlay network already")
            cluster = self._clusters.get(member.network)
            if cluster is None:
                cluster = self._clusters[member.network] = _Cluster(_new_cluster(nsenter, ip), {})
            cluster.members[pod_id] = interface
            self._network_of[pod_id] = member.network
            cluster_fd = os.dup(cluster.netns_fd)
        try:
            _ip(
                nsenter, ip, cluster_fd,
                f"link add {interface} master {_BRIDGE} up type veth"
                f" peer name {OVERLAY_INTERFACE} netns /proc/self/fd/{pod_netns_fd}\n",
                pod_netns_fd,
            )  # fmt: skip
            _ip(
                nsenter, ip, pod_netns_fd,
                f"addr add {member.address}/{OVERLAY_NETWORK.prefixlen} dev {OVERLAY_INTERFACE}\n"
                # IPv4 only, as Lium's overlay is: a link-local IPv6 address per member would give
                # every member a source of its own that the pod sshd's per-source limits count apart.
                f"link set {OVERLAY_INTERFACE} addrgenmode none\n"
                f"link set {OVERLAY_INTERFACE} up\n",
            )  # fmt: skip
        except BaseException:
            self.leave([pod_id])
            raise
        finally:
            os.close(cluster_fd)

    def leave(self, pod_ids: Iterable[str]) -> None:
        """Take the pods off their networks (unknown ids are fine); a network whose last member left is
        dropped. Never raises: a veth that cannot be deleted is logged (it goes with the pod anyway)."""
        leaving: dict[str, list[str]] = {}
        deletions: list[tuple[int, list[str]]] = []
        with self._lock:
            for pod_id in pod_ids:
                network = self._network_of.pop(pod_id, None)
                if network is not None:
                    leaving.setdefault(network, []).append(self._clusters[network].members.pop(pod_id))
            for network, interfaces in leaving.items():
                cluster = self._clusters[network]
                if cluster.members:
                    deletions.append((os.dup(cluster.netns_fd), interfaces))
                else:  # the namespace takes its bridge and veths (and their ends in pods) along
                    del self._clusters[network]
                    os.close(cluster.netns_fd)
        for cluster_fd, interfaces in deletions:
            try:
                nsenter, ip = _tools()
                _ip(nsenter, ip, cluster_fd, "".join(f"link del {name}\n" for name in interfaces), force=True)
            except OverlayError as e:
                logger.warning("cannot remove overlay interfaces %s: %s", ", ".join(interfaces), e)
            finally:
                os.close(cluster_fd)

    def members(self) -> dict[str, list[str]]:
        """Each network's member pods (for inspection and leak checks)."""
        with self._lock:
            return {network: sorted(cluster.members) for network, cluster in self._clusters.items()}


def _tools() -> tuple[str, str]:
    nsenter, ip = (shutil.which(name, path=HOST_TOOLS_PATH) for name in ("nsenter", "ip"))
    if nsenter is None or ip is None:
        raise OverlayError("the host has no nsenter (util-linux) or ip (iproute2): no cluster networks")
    return nsenter, ip


def _new_cluster(nsenter: str, ip: str) -> int:
    try:
        netns_fd = new_netns()
    except OSError as e:
        raise OverlayError(f"cannot make the cluster's network namespace: {e}") from e
    try:
        _ip(nsenter, ip, netns_fd, f"link add {_BRIDGE} type bridge\nlink set {_BRIDGE} up\n")
    except BaseException:
        os.close(netns_fd)
        raise
    return netns_fd


def _ip(nsenter: str, ip: str, netns_fd: int, script: str, *other_fds: int, force: bool = False) -> None:
    """Run ``ip -batch`` lines inside the namespace ``netns_fd`` (``/proc/self/fd/N`` names the fds
    passed along); ``force`` runs every line even after a failing one."""
    command = [nsenter, f"--net=/proc/self/fd/{netns_fd}", ip, *(["-force"] if force else []), "-batch", "-"]
    try:
        subprocess.run(
            command,
            input=script,
            text=True,
            capture_output=True,
            pass_fds=(netns_fd, *other_fds),
            env={"PATH": HOST_TOOLS_PATH, "LANG": "C"},
            timeout=_IP_TIMEOUT_SECONDS,
            check=True,
        )
    except subprocess.CalledProcessError as e:
        raise OverlayError(f"ip: {(e.stderr or '').strip() or f'exit status {e.returncode}'}") from e
    except (OSError, subprocess.TimeoutExpired) as e:
        raise OverlayError(f"ip: {e}") from e
