"""TCP relays between the host's loopback and pods' network namespaces, all on one asyncio thread.

Three kinds, as a container runtime and the hosts' network provide them:

* published ports (``docker run -p``): a listener on a free ``127.0.0.1`` host port per internal
  port; each accepted connection is relayed to ``127.0.0.1:<internal>`` inside the pod;
* advertised addresses from pods: the clients of a pod's published ports are the host's *and* every
  pod's (on Lium pods reach each other's public ``host:port``, e.g. ``lium cp`` runs rsync from one
  pod to another's SSH port). Every pod that published ports gets one relay listener in its namespace,
  where a rule set sends its connections to ``127.0.0.1:<host port>`` (:mod:`.advertised`); the relay
  reads the port back and relays the connection straight into the pod that advertises it, to its
  ``127.0.0.1:<internal>``: it never touches the host's loopback, so a pod reaches only ports that are
  published, never a host service. A port of the host's ephemeral range that no pod advertises is
  the pod's own (dialled again inside it); one that a pod advertises is that pod's, even if the
  viewing pod listens on it itself (its own ephemeral ports are kept out of that range);
* reverse ports: a listener *inside* the pod (``127.0.0.1:<port>``) whose connections are relayed to
  the address the emulator's HTTP server listens on, ``<host>:<port>`` (loopback unless it was told
  otherwise) — how pods reach it. The host-side addresses of these relayed connections are kept while
  they are open, so the emulator can tell a pod's request from the host's
  (:meth:`PortForwarder.is_reverse_connection`).

One pod may hold at most :data:`MAX_CONNECTIONS_PER_POD` relayed connections at once: those to its
published ports from the host, and those it opens itself (to the emulator, to advertised addresses);
further ones are closed as they arrive. Each costs the emulator up to three descriptors, and without
the cap one pod opening thousands of idle connections would exhaust the emulator's open files and stop
it serving every other pod. Many pods together would all the same, so the connections pods open are
also bounded in all (:func:`pods_connection_budget`): past that budget a pod still opens up to its
fair share of it (the budget over the number of pods); at twice the budget in all, a pod under its
share takes the oldest connection of the pod furthest over its own. The host's
connections to published ports count only against their pod's share: the host is not hostile.

The emulator raises its soft open-files limit to the hard one and shares it out: published ports at
most an eighth (a pod whose ports do not fit does not start); the connections pods open at most a
quarter. The advertised addresses take one listener per pod, whatever the number of pods.

Relays are asyncio protocols with flow control (a full outgoing buffer pauses reading on the other
side) and half-close, so bulk transfers and SSH both work without a coroutine per chunk. Everything
belonging to one owner (a pod) is released together: listeners, live connections and connects in
flight, so a stopped pod's ports are free again as soon as ``release`` returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import logging
import os
import resource
import socket
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from lium_emulator.sandbox.advertised import (
    BYPASS_MARK,
    POD_SOURCE_ADDRESS,
    RELAY_ADDRESS,
    host_port_range,
    original_port,
    redirect,
)
from lium_emulator.sandbox.netns_socket import socket_in_netns

logger = logging.getLogger(__name__)
_T = TypeVar("_T")
_LOOPBACK = "127.0.0.1"
_CALL_TIMEOUT_SECONDS = 30.0
MAX_CONNECTIONS_PER_POD = 256
# Bytes a second the relays carry over the connections one pod opened, both ways together (the relays
# copy them on the emulator's one relay thread, outside every pod's CPU limit: one pod pumping through
# them would slow every other pod's connections, the host's SSH among them).
POD_RELAY_BYTES_PER_SECOND = 32 * 2**20
# The descriptors a connection a pod opens costs the emulator at most: its end in the pod's namespace,
# the end the relay dials, and (to the emulator) the server's accepted socket.
_FDS_PER_POD_CONNECTION = 3
_IP_BIND_ADDRESS_NO_PORT = 24  # <linux/in.h>: a bound source address takes its port at connect time


def pods_connection_budget(open_files: int) -> int:
    """How many connections pods may open in all before each is held to its fair share, given the
    emulator's open-files limit: an eighth of the descriptors, so a quarter at most with every pod at
    its share on top."""
    return open_files // 8 // _FDS_PER_POD_CONNECTION


@dataclass
class _ByteRate:
    """A token bucket of bytes: ``burst`` at once, ``per_second`` sustained."""

    per_second: float
    burst: float
    tokens: float
    at: float = 0.0

    def take(self, count: int, now: float) -> float:
        """Spend ``count`` bytes at ``now``; returns how long to wait before reading more (0: none)."""
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.per_second) - count
        self.at = now
        return max(0.0, -self.tokens / self.per_second)


def _pod_byte_rate() -> _ByteRate:
    return _ByteRate(POD_RELAY_BYTES_PER_SECOND, POD_RELAY_BYTES_PER_SECOND, POD_RELAY_BYTES_PER_SECOND)


@dataclass
class _Budget:
    """One pod's relayed connections open now (their accepted ends), for MAX_CONNECTIONS_PER_POD;
    ``opened`` holds those the pod opened itself, oldest first, which share ``rate``."""

    open: int = 0
    opened: dict[_InboundEnd, None] = field(default_factory=dict)
    rate: _ByteRate = field(default_factory=_pod_byte_rate)


@dataclass
class _PodsBudget:
    """The connections all pods opened (to the emulator, to advertised addresses), open now; ``pods``
    is every pod's own budget (the forwarder's, shared)."""

    budget: int
    pods: dict[str, _Budget]
    open: int = 0

    def admit(self, pod: _Budget) -> bool:
        """Whether ``pod`` may open one more: while the pods' total is within the budget; beyond it, up
        to the pod's fair share of it (the budget over the number of pods). In all never past twice the
        budget: there a pod under its share takes the oldest connection of the pod furthest over its
        own (shares shrink as pods start, and the first pods must not keep what the later ones are owed)."""
        if self.open < self.budget:
            return True
        share = self.budget // max(1, len(self.pods))
        if len(pod.opened) >= share:
            return False
        if self.open >= 2 * self.budget:
            # The pods' shares add up to the budget at most, so at twice the budget one is over its share.
            heaviest = max(self.pods.values(), key=lambda other: len(other.opened))
            next(iter(heaviest.opened)).shed()
        return True


@dataclass
class _Group:
    """Listeners and connections released as a unit; their connections count against ``budget``."""

    budget: _Budget
    netns_fds: list[int] = field(default_factory=list)
    servers: list[asyncio.AbstractServer] = field(default_factory=list)
    relays: set[_RelayEnd] = field(default_factory=set)
    connecting: set[asyncio.Task[None]] = field(default_factory=set)
    released: bool = False


# Connects the other end of a connection a listener accepted (given the accepted transport): the socket,
# and the group its relay end belongs to when not the listener's (a pod's address another pod dialled:
# released with the pod dialled into).
Dial = Callable[[asyncio.Transport], Awaitable[tuple[socket.socket, _Group | None]]]


@dataclass
class _Member:
    """A pod that published ports: every member reaches them at their host ports, and it theirs."""

    netns_fd: int  # owned by the pod's own group
    published: dict[int, int]  # internal -> host port


class _RelayEnd(asyncio.Protocol):
    """One socket of a relayed connection; ``peer`` is the other socket."""

    def __init__(self, group: _Group, rate: _ByteRate | None = None) -> None:
        self.group = group
        self.rate = rate  # what the bytes read here are charged to, if anything
        self.transport: asyncio.Transport | None = None
        self.peer: _RelayEnd | None = None
        self.on_lost: Callable[[], None] | None = None
        self._eof_received = False
        self._eof_sent = False
        self._held_for_peer = False  # the peer's outgoing buffer is full
        self._held_for_rate = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.group.relays.add(self)

    def data_received(self, data: bytes) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.write(data)
        if self.rate is not None and not self._held_for_rate:
            loop = asyncio.get_running_loop()
            wait = self.rate.take(len(data), loop.time())
            if wait > 0:
                self._hold(rate=True)
                loop.call_later(wait, self._hold, None, False)

    def _hold(self, peer: bool | None = None, rate: bool | None = None) -> None:
        """Stop or resume reading: it resumes once neither the peer's full buffer nor the rate holds it."""
        if peer is not None:
            self._held_for_peer = peer
        if rate is not None:
            self._held_for_rate = rate
        if self.transport is None or self.transport.is_closing():
            return
        if self._held_for_peer or self._held_for_rate:
            self.transport.pause_reading()
        else:
            self.transport.resume_reading()

    def eof_received(self) -> bool:
        self._eof_received = True
        if self.peer is not None:
            self.peer.send_eof()
        self._close_when_done()
        return True  # keep the other direction open (half-close)

    def send_eof(self) -> None:
        if self._eof_sent or self.transport is None or self.transport.is_closing():
            return
        self._eof_sent = True
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self._close_when_done()

    def _close_when_done(self) -> None:
        if self._eof_received and self._eof_sent and self.transport is not None:
            self.transport.close()

    def pause_writing(self) -> None:
        # Our outgoing buffer is full: stop reading what the peer sends us to write.
        if self.peer is not None:
            self.peer._hold(peer=True)

    def resume_writing(self) -> None:
        if self.peer is not None:
            self.peer._hold(peer=False)

    def connection_lost(self, exc: Exception | None) -> None:
        self.group.relays.discard(self)
        if self.on_lost is not None:
            self.on_lost()
        peer = self.peer.transport if self.peer is not None else None
        if peer is not None and not peer.is_closing():
            if exc is None:
                peer.close()  # flushes what is still buffered for the peer
            else:
                peer.abort()


class _Addresses:
    """Local addresses of open relayed sockets, shared between the relay thread and the server's."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: set[tuple[str, int]] = set()

    def add(self, address: tuple[str, int]) -> None:
        with self._lock:
            self._open.add(address)

    def discard(self, address: tuple[str, int]) -> None:
        with self._lock:
            self._open.discard(address)

    def __contains__(self, address: object) -> bool:
        with self._lock:
            return address in self._open


class _InboundEnd(_RelayEnd):
    """An accepted connection: held (not read) until the upstream connection is established.

    With ``track``, the upstream socket's local address is in it from before the first relayed byte
    until the connection closes. ``pods`` is set when a pod opened it (it counts there too).
    """

    def __init__(self, group: _Group, dial: Dial, track: _Addresses | None, pods: _PodsBudget | None) -> None:
        # A connection a pod opened: the bytes both ways are charged to that pod.
        super().__init__(group, group.budget.rate if pods is not None else None)
        self._dial = dial
        self._track = track
        self._pods = pods
        self._counted = False

    def connection_lost(self, exc: Exception | None) -> None:
        self._uncount()
        super().connection_lost(exc)

    def _uncount(self) -> None:
        if self._counted:
            self._counted = False
            self.group.budget.open -= 1
            if self._pods is not None:
                self._pods.open -= 1
                del self.group.budget.opened[self]

    def shed(self) -> None:
        """Close this connection to make room for another pod's (counted free at once: the transport's
        close completes on a later turn of the loop)."""
        self._uncount()
        if self.transport is not None:
            self.transport.abort()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        assert self.transport is not None
        budget = self.group.budget
        if budget.open >= MAX_CONNECTIONS_PER_POD or (
            self._pods is not None and not self._pods.admit(budget)
        ):
            self.transport.abort()  # over the pod's share: refused before anything is dialled
            return
        budget.open += 1
        if self._pods is not None:
            self._pods.open += 1
            budget.opened[self] = None
        self._counted = True
        self.transport.pause_reading()
        task = asyncio.get_running_loop().create_task(self._link())
        self.group.connecting.add(task)
        task.add_done_callback(self.group.connecting.discard)

    async def _link(self) -> None:
        assert self.transport is not None
        if self.group.released:
            # Accepted just before its listener closed: the namespace descriptors the dial would use
            # are closed, and their numbers may already name another pod's.
            self.transport.abort()
            return
        try:
            sock, group = await self._dial(self.transport)
        except OSError:
            self.transport.close()  # nothing listens there (yet): the client sees the connection closed
            return
        if self.transport.is_closing():
            sock.close()
            return
        upstream = _RelayEnd(group or self.group, self.rate)
        upstream.peer, self.peer = self, upstream
        if self._track is not None:
            # (host, port) as the server names its client; an IPv6 name has flow info and scope too.
            address: tuple[str, int] = sock.getsockname()[:2]
            self._track.add(address)
            upstream.on_lost = functools.partial(self._track.discard, address)
        try:
            await asyncio.get_running_loop().create_connection(lambda: upstream, sock=sock)
        except OSError:
            sock.close()
            self.transport.abort()
            return
        if upstream.group.released and upstream.transport is not None:
            # The pod dialled into was released meanwhile (its dial runs in the viewer's group, which
            # that release does not wait for): its connections close with it.
            upstream.transport.abort()
            return
        self._hold()  # reads from now on, unless the peer or the rate holds it already


async def _connect(sock: socket.socket, port: int, host: str = _LOOPBACK) -> socket.socket:
    sock.setblocking(False)
    try:
        await asyncio.get_running_loop().sock_connect(sock, (host, port))
    except BaseException:
        sock.close()
        raise
    return sock


def _listener(sock: socket.socket, port: int, host: str = _LOOPBACK) -> socket.socket:
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except BaseException:
        sock.close()
        raise
    return sock


def _free_listener(port: int) -> socket.socket:
    """A listener on host ``port`` when it is free, else on any free port."""
    if port:
        with contextlib.suppress(OSError):
            return _listener(socket.socket(socket.AF_INET, socket.SOCK_STREAM), port)
    return _listener(socket.socket(socket.AF_INET, socket.SOCK_STREAM), 0)


def _raise_open_files_limit() -> int:
    """Lift the soft open-files limit to the hard one (it is kept low only for ``select()``, which the
    emulator does not use); returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
    return soft


class PortForwarder:
    """Published and reverse TCP ports of many owners, served by one lazily started thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._serial: asyncio.Lock | None = None  # one operation at a time, on the current loop
        # Touched on the loop thread only:
        self._budgets: dict[str, _Budget] = {}
        self._groups: dict[str, _Group] = {}  # an owner's published and reverse listeners
        self._members: dict[str, _Member] = {}
        self._advertised: dict[int, tuple[str, int]] = {}  # host port -> (pod, internal port)
        open_files = _raise_open_files_limit()
        self._pods_budget = _PodsBudget(pods_connection_budget(open_files), self._budgets)
        # Host listeners of published ports, per owner (under _lock: counted before they are made).
        self._published: dict[str, int] = {}
        self._max_published = open_files // 8
        self._reverse_connections = _Addresses()
        # Under _lock: the pods whose namespace sends advertised addresses to their relay, and the
        # emulator's ports each reaches through a reverse listener (left out of that rule).
        self._redirected: set[str] = set()
        self._reverse_ports: dict[str, set[int]] = {}
        self._host_range = host_port_range()

    def publish(
        self, owner: str, netns_fd: int, internal_ports: Iterable[int], *, preferred: Mapping[int, int] = {}
    ) -> dict[int, int]:
        """Expose ``127.0.0.1:<internal>`` of the namespace on host loopback ports: internal -> host; the
        ``preferred`` host port of an internal port where it is free (and of the host's ephemeral range,
        which pods' connections are redirected from), else any free one. The host ports become reachable
        from every pod that published ports too, and theirs from this one."""
        ports = list(dict.fromkeys(internal_ports))
        low, high = self._host_range
        self._reserve_published(owner, len(ports))
        with self._lock:
            joining = owner not in self._redirected
            self._redirected.add(owner)
            exempt = set(self._reverse_ports.get(owner, ()))
        listeners: list[socket.socket] = []
        relay: socket.socket | None = None
        fd: int | None = None
        try:
            for port in ports:
                wanted = preferred.get(port, 0)
                listeners.append(_free_listener(wanted if low <= wanted <= high else 0))
            mapping = {port: int(sock.getsockname()[1]) for port, sock in zip(ports, listeners, strict=True)}
            fd = os.dup(netns_fd)
            if joining:
                redirect(fd, self._host_range, exempt)
                relay = _listener(socket_in_netns(fd), RELAY_ADDRESS[1], RELAY_ADDRESS[0])
        except BaseException:
            for sock in listeners:
                sock.close()
            if fd is not None:
                os.close(fd)
            self._reserve_published(owner, -len(ports))
            if joining:
                with self._lock:
                    self._redirected.discard(owner)
            raise
        served = [(s, _dial_into(fd, p)) for p, s in zip(ports, listeners, strict=True)]
        self._call(self._publish(owner, fd, served, mapping, relay))
        return mapping

    def _reserve_published(self, owner: str, count: int) -> None:
        """Count ``count`` more host listeners for ``owner`` (fewer when negative); refused with EMFILE
        beyond an eighth of the open-files limit, before any is made: a pod asking for thousands of
        ports would otherwise take the descriptors every other pod and the server need."""
        with self._lock:
            in_use = sum(self._published.values())
            if count > 0 and in_use + count > self._max_published:
                raise OSError(
                    errno.EMFILE,
                    f"{count} ports to publish, {in_use} published already: the emulator publishes at "
                    f"most {self._max_published} at once (an eighth of its open-files limit)",
                )
            self._published[owner] = self._published.get(owner, 0) + count

    def reverse(self, owner: str, netns_fd: int, port: int, host: str = _LOOPBACK) -> None:
        """Make ``127.0.0.1:<port>`` inside the namespace reach ``<host>:<port>`` on the host: the
        emulator's own address, which is not always the host's ``127.0.0.1:<port>`` (another service may
        listen there when the emulator listens elsewhere)."""
        listener = _listener(socket_in_netns(netns_fd), port)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET

        async def dial_host(_: asyncio.Transport) -> tuple[socket.socket, _Group | None]:
            return await _connect(socket.socket(family, socket.SOCK_STREAM), port, host), None

        with self._lock:
            self._reverse_ports.setdefault(owner, set()).add(port)
        self._call(
            self._serve_own(owner, [(listener, dial_host)], self._reverse_connections, self._pods_budget)
        )

    def is_reverse_connection(self, address: tuple[str, int]) -> bool:
        """True while ``address`` (host, port) is the host side of a connection relayed out of a pod."""
        return address in self._reverse_connections

    def release(self, owner: str) -> None:
        """Close the owner's listeners and connections, those other pods opened to its advertised
        addresses among them; its host ports are free when this returns."""
        if self._loop is not None:
            self._call(self._release(owner))
        with self._lock:
            self._published.pop(owner, None)
            self._redirected.discard(owner)
            self._reverse_ports.pop(owner, None)

    def connection_count(self) -> int:
        """Relayed sockets currently open (two per live connection)."""
        if self._loop is None:
            return 0
        return self._call(self._count())

    def close(self) -> None:
        """Release everything and stop the thread (a later ``publish`` starts a new one)."""
        with self._lock:
            loop, thread, serial = self._loop, self._thread, self._serial
            self._loop = self._thread = self._serial = None
            self._published.clear()
            self._redirected.clear()
            self._reverse_ports.clear()
        if loop is None or thread is None or serial is None:
            return
        asyncio.run_coroutine_threadsafe(_one_at_a_time(serial, self._release_all()), loop).result(
            _CALL_TIMEOUT_SECONDS
        )
        loop.call_soon_threadsafe(loop.stop)
        thread.join(_CALL_TIMEOUT_SECONDS)
        loop.close()

    def _call(self, coro: Coroutine[Any, Any, _T]) -> _T:
        with self._lock:
            if self._loop is None or self._serial is None:
                self._loop, self._serial = asyncio.new_event_loop(), asyncio.Lock()
                self._thread = threading.Thread(
                    target=self._loop.run_forever, name="lium-portforward", daemon=True
                )
                self._thread.start()
            loop, serial = self._loop, self._serial
        return asyncio.run_coroutine_threadsafe(_one_at_a_time(serial, coro), loop).result(
            _CALL_TIMEOUT_SECONDS
        )

    def _budget(self, pod: str) -> _Budget:
        return self._budgets.setdefault(pod, _Budget())

    def _own_group(self, owner: str) -> _Group:
        return self._groups.setdefault(owner, _Group(self._budget(owner)))

    async def _serve_own(
        self,
        owner: str,
        listeners: list[tuple[socket.socket, Dial]],
        track: _Addresses | None,
        pods: _PodsBudget | None,
    ) -> None:
        await self._serve(self._own_group(owner), listeners, track, pods)

    async def _publish(
        self,
        owner: str,
        netns_fd: int,
        listeners: list[tuple[socket.socket, Dial]],
        mapping: dict[int, int],
        relay: socket.socket | None,
    ) -> None:
        self._own_group(owner).netns_fds.append(netns_fd)
        await self._serve_own(owner, listeners, None, None)  # the host's connections
        self._members.setdefault(owner, _Member(netns_fd, {})).published.update(mapping)
        self._advertised.update((host_port, (owner, internal)) for internal, host_port in mapping.items())
        if relay is not None:  # the pod's connections to advertised addresses: they count against it
            await self._serve_own(owner, [(relay, self._dial_advertised(owner))], None, self._pods_budget)

    def _dial_advertised(self, viewer: str) -> Dial:
        """How ``viewer``'s relay connects what it accepted: into the pod advertising the port it was
        made to, or (a port no pod advertises) to that port in ``viewer`` itself."""

        async def dial(accepted: asyncio.Transport) -> tuple[socket.socket, _Group | None]:
            port = original_port(accepted.get_extra_info("socket"))
            if port is None:
                raise OSError(errno.ECONNREFUSED, "a connection made to the relay itself")
            owner, internal = self._advertised.get(port, (viewer, port))
            member = self._members.get(owner)
            if member is None:
                raise OSError(errno.ECONNREFUSED, f"pod {owner} is gone")
            connected = await _connect(_pod_socket(member.netns_fd, POD_SOURCE_ADDRESS), internal)
            if self._members.get(owner) is not member:  # released while connecting
                connected.close()
                raise OSError(errno.ECONNREFUSED, f"pod {owner} is gone")
            return connected, None if owner == viewer else self._groups.get(owner)

        return dial

    async def _serve(
        self,
        group: _Group,
        listeners: list[tuple[socket.socket, Dial]],
        track: _Addresses | None,
        pods: _PodsBudget | None,
    ) -> None:
        loop = asyncio.get_running_loop()
        for index, (sock, dial) in enumerate(listeners):
            try:
                server = await loop.create_server(
                    functools.partial(_InboundEnd, group, dial, track, pods), sock=sock
                )
            except BaseException:
                for unserved, _ in listeners[index:]:
                    unserved.close()
                raise
            group.servers.append(server)

    async def _release(self, owner: str) -> None:
        member = self._members.pop(owner, None)
        for host_port in member.published.values() if member is not None else ():
            if self._advertised.get(host_port, (None, 0))[0] == owner:
                del self._advertised[host_port]
        self._budgets.pop(owner, None)
        own = self._groups.pop(owner, None)
        if own is None:
            return
        own.released = True
        for server in own.servers:
            server.close()
        for task in list(own.connecting):
            task.cancel()
        for relay in list(own.relays):
            if relay.transport is not None:
                relay.transport.abort()
        for server in own.servers:
            await server.wait_closed()
        # Let the aborted transports' close callbacks run before their netns goes away.
        await asyncio.sleep(0)
        for fd in own.netns_fds:
            os.close(fd)

    async def _release_all(self) -> None:
        for owner in {*self._groups, *self._members}:
            await self._release(owner)

    async def _count(self) -> int:
        return sum(len(group.relays) for group in self._groups.values())


async def _one_at_a_time(serial: asyncio.Lock, coro: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coro`` alone among the forwarder's operations: they await (starting a server yields to the
    loop), and one pod's release in the middle of another's publish would leave listeners behind in a
    namespace that is going away."""
    async with serial:
        return await coro


def _pod_socket(netns_fd: int, source: str | None = None) -> socket.socket:
    """A socket inside a pod's namespace that its rule set lets through: the emulator's connections to
    a pod's own ports are never taken for the pod's connections to advertised addresses (an internal
    port may lie in the host's range, and another pod may advertise that very number). Bound to
    ``source`` when given (its port chosen at connect time)."""
    sock = socket_in_netns(netns_fd)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, BYPASS_MARK)
        if source is not None:
            sock.setsockopt(socket.SOL_IP, _IP_BIND_ADDRESS_NO_PORT, 1)
            sock.bind((source, 0))
    except BaseException:
        sock.close()
        raise
    return sock


def _dial_into(netns_fd: int, port: int) -> Dial:
    """Connect to ``127.0.0.1:<port>`` inside the namespace (the fd must outlive the dial's listeners)."""

    async def dial(_: asyncio.Transport) -> tuple[socket.socket, _Group | None]:
        return await _connect(_pod_socket(netns_fd), port), None

    return dial
