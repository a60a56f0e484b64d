"""How a pod reaches the advertised addresses of every pod (its own too) with one relay listener.

An advertised address is ``127.0.0.1:<host port>``, a port the emulator published on the host's
loopback. Inside a pod, ``127.0.0.1`` is the pod's own loopback, so the emulator puts one rule set in
the pod's network namespace (which belongs to the host's user namespace: the pod's root cannot change
it) that sends every TCP connection to ``127.0.0.1`` on a port of the host's ephemeral range, where
the emulator's host ports come from, to one listener, :data:`RELAY_ADDRESS`. The relay reads the
connection's original destination back from the kernel (``SO_ORIGINAL_DST``) and dials the pod that
advertises that port straight inside its namespace, never the host's loopback. So a pod holds one
listener whatever the number of pods, and a pod starting or stopping changes no other pod's
namespace.

The rule set also:

* leaves alone every connection the emulator makes inside the pod (they carry :data:`BYPASS_MARK`):
  the host's connections to the pod's published ports, whose internal port may lie in that range and
  even be a number another pod advertises; and the relay's, so a port of that range that the pod
  listens on itself, and no pod advertises, is reached through the relay, which dials it again in
  the pod;
* leaves alone the ports the emulator reaches pods on (its own HTTP port, ``exempt``);
* tracks only the connections it may redirect: every other packet is ``notrack``, those the pod
  sends and those it receives from outside its loopback (another cluster member's flood on the
  overlay included), so no pod fills the kernel's connection table, which all namespaces share; and those it
  tracks are bounded too: a pod opens at most :data:`_NEW_CONNECTIONS_PER_SECOND` a second (its
  further SYNs are dropped, and resent), and its namespace forgets a closed one after seconds, not
  the kernel's two minutes of TIME_WAIT.

And the pod's own ephemeral ports (``ip_local_port_range``, one per namespace) are moved out of the
host's range, so the ports a pod's programs bind with port 0 are never shadowed by the redirect.
"""

from __future__ import annotations

import shutil
import socket
import struct
import subprocess
from pathlib import Path

from lium_emulator.sandbox.netns_socket import HOST_TOOLS_PATH, in_netns

RELAY_ADDRESS = ("127.255.255.254", 1)
# Where a pod's connections to advertised addresses come from in the pod they reach: the host's come
# from 127.0.0.1, so a pod's sshd, which limits unauthenticated connections per block of SOURCE_BLOCK_BITS
# (manager.py), never lets other pods' idle connections take the slots the host's SSH needs.
POD_SOURCE_ADDRESS = "127.128.0.1"
SOURCE_BLOCK_BITS = 9  # 127.0.0.0/9 is the host's, 127.128.0.0/9 the pods'
# Set (SO_MARK) on the sockets the relay dials inside a pod: the rule set lets them through.
BYPASS_MARK = 0x4C49554D
_SO_ORIGINAL_DST = 80
_TABLE = "lium_advertised"
_NFT_TIMEOUT_SECONDS = 10.0
_PORT_RANGE = "/proc/sys/net/ipv4/ip_local_port_range"
# New connections a pod may open to that range a second (beyond a burst of twice as many, its further
# SYNs are dropped and resent by its kernel): each takes an entry of the connection table all
# namespaces share, kept a while after it closes.
_NEW_CONNECTIONS_PER_SECOND = 200
# How long the pod's namespace keeps a closed or half-open connection's entry (the kernel's defaults
# keep TIME_WAIT two minutes): a pod opening and closing connections fast holds only a few seconds' worth.
_CONNTRACK_TIMEOUTS = {
    "nf_conntrack_tcp_timeout_time_wait": 2,
    "nf_conntrack_tcp_timeout_close": 2,
    "nf_conntrack_tcp_timeout_fin_wait": 10,
    "nf_conntrack_tcp_timeout_close_wait": 10,
    "nf_conntrack_tcp_timeout_last_ack": 10,
    "nf_conntrack_tcp_timeout_syn_sent": 10,
    "nf_conntrack_tcp_timeout_syn_recv": 10,
}
_NETFILTER_SYSCTLS = Path("/proc/sys/net/netfilter")
# The fewest ephemeral ports a pod is left with when its range moves out of the host's.
_MIN_POD_EPHEMERAL_PORTS = 4096


def host_port_range() -> tuple[int, int]:
    """The host's ephemeral port range (the emulator's own namespace), where its host ports come from."""
    low, high = Path(_PORT_RANGE).read_text().split()
    return int(low), int(high)


def pod_port_range(host: tuple[int, int]) -> tuple[int, int] | None:
    """A pod's ephemeral range outside ``host``: above it if room enough is left there, else below it;
    None when neither leaves :data:`_MIN_POD_EPHEMERAL_PORTS` (the pod keeps its default, and its ports
    in the host's range are reached through the relay)."""
    low, high = host
    if 65535 - high >= _MIN_POD_EPHEMERAL_PORTS:
        return high + 1, 65535
    if low - 1024 >= _MIN_POD_EPHEMERAL_PORTS:
        return max(1024, low - 16384), low - 1
    return None


def rule_set(host: tuple[int, int], exempt: set[int]) -> str:
    """The ``nft -f`` script for one pod's namespace."""
    low, high = host
    relay_host, relay_port = RELAY_ADDRESS
    in_range = f"ip daddr 127.0.0.1 tcp dport {low}-{high}"  # what may be an advertised address
    skip = f"        ip daddr 127.0.0.1 tcp dport {{ {', '.join(map(str, sorted(exempt)))} }} return\n"
    return (
        f"table ip {_TABLE} {{\n"
        "    chain untracked_inbound {\n"
        "        type filter hook prerouting priority -300; policy accept;\n"
        '        iif != "lo" notrack\n'
        "    }\n"
        "    chain untracked {\n"
        "        type filter hook output priority -300; policy accept;\n"
        f"        meta mark != {BYPASS_MARK:#x} {in_range} "
        f"tcp flags & (syn | ack) == syn limit rate over {_NEW_CONNECTIONS_PER_SECOND}/second "
        f"burst {2 * _NEW_CONNECTIONS_PER_SECOND} packets drop\n"
        f"        {in_range} return\n"
        f"        ip saddr {relay_host} tcp sport {relay_port} return\n"
        "        notrack\n"
        "    }\n"
        "    chain advertised {\n"
        "        type nat hook output priority -100; policy accept;\n"
        f"        meta mark {BYPASS_MARK:#x} return\n"
        f"{skip if exempt else ''}"
        f"        {in_range} dnat to {relay_host}:{relay_port}\n"
        "    }\n"
        "}\n"
    )


def redirect(netns_fd: int, host: tuple[int, int], exempt: set[int]) -> None:
    """Send the pod's connections to advertised addresses to the relay and move its ephemeral ports out
    of ``host``; OSError saying what failed (the pod then does not start: it could not reach the
    other pods' addresses)."""
    nsenter, nft = (shutil.which(name, path=HOST_TOOLS_PATH) for name in ("nsenter", "nft"))
    if nsenter is None or nft is None:
        raise OSError("the host has no nft (nftables): pods cannot reach each other's advertised addresses")
    try:
        subprocess.run(
            [nsenter, f"--net=/proc/self/fd/{netns_fd}", nft, "-f", "-"],
            input=rule_set(host, exempt),
            text=True,
            capture_output=True,
            pass_fds=(netns_fd,),
            env={"PATH": HOST_TOOLS_PATH, "LANG": "C"},
            timeout=_NFT_TIMEOUT_SECONDS,
            check=True,
        )
    except subprocess.CalledProcessError as e:
        raise OSError(f"nft: {(e.stderr or '').strip() or f'exit status {e.returncode}'}") from e
    except subprocess.TimeoutExpired as e:
        raise OSError(f"nft: {e}") from e
    pod_range = pod_port_range(host)
    writes = {_NETFILTER_SYSCTLS / name: f"{seconds}\n" for name, seconds in _CONNTRACK_TIMEOUTS.items()}
    if pod_range is not None:
        writes[Path(_PORT_RANGE)] = f"{pod_range[0]} {pod_range[1]}\n"

    def write() -> None:
        for path, text in writes.items():
            path.write_text(text)

    in_netns(netns_fd, write)


def original_port(sock: socket.socket) -> int | None:
    """The port a redirected connection was made to; None when it was made to the relay itself (the
    kernel has no original destination for a connection it did not track)."""
    try:
        address = sock.getsockopt(socket.SOL_IP, _SO_ORIGINAL_DST, 16)
    except OSError:
        return None
    port, packed = struct.unpack("!2xH4s8x", address)
    if (socket.inet_ntoa(packed), port) == RELAY_ADDRESS:
        return None
    return int(port)
