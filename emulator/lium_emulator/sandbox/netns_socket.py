"""Network namespaces other than the host's (pods', clusters'), from the host process: fds on them, and
sockets that live in them.

A socket belongs to the network namespace its creating thread was in at ``socket()`` time and keeps
working from any thread afterwards. So the calling thread joins the pod's namespace with ``setns(2)``
just for the ``socket()`` call and returns to its own namespace right after. Python 3.11 has no
``os.setns``, hence ctypes. Needs CAP_SYS_ADMIN (the emulator's sandboxes run as root).
"""

from __future__ import annotations

import ctypes
import os
import socket
import threading
from collections.abc import Callable
from typing import TypeVar

CLONE_NEWNET = 0x40000000
# Where the host tools run in a namespace (nsenter, ip, nft) are looked up.
HOST_TOOLS_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"

_libc = ctypes.CDLL(None, use_errno=True)
_T = TypeVar("_T")


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"setns(CLONE_NEWNET): {os.strerror(errno)}")


def open_netns(pid: int) -> int:
    """An fd on the network namespace of process ``pid`` (holding it keeps the namespace alive)."""
    return os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)


def new_netns() -> int:
    """An fd on a new, empty network namespace that nothing else holds: it lives as long as the fd (no
    process in it, no bind mount), so it dies with the emulator whatever way the emulator dies.

    Made by a thread of its own that ``unshare``s and ends: no thread ever has to find its way back to
    the host's namespace.
    """
    made: list[int] = []
    failed: list[OSError] = []

    def make() -> None:
        try:
            if _libc.unshare(CLONE_NEWNET) != 0:
                errno = ctypes.get_errno()
                raise OSError(errno, f"unshare(CLONE_NEWNET): {os.strerror(errno)}")
            made.append(os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC))
        except OSError as e:
            failed.append(e)

    maker = threading.Thread(target=make, name="lium-new-netns")
    maker.start()
    maker.join()
    if failed:
        raise failed[0]
    return made[0]


def in_netns(netns_fd: int, action: Callable[[], _T]) -> _T:
    """``action()`` run by the calling thread inside the namespace ``netns_fd`` (a socket it makes lives
    there; a ``/proc/sys/net`` file it opens is that namespace's); the thread's namespace is unchanged."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        _setns(netns_fd)
        try:
            return action()
        finally:
            # Cannot fail in practice (we just left that namespace with the same privileges); if it
            # did, this thread's later sockets would land in the pod, so make it loud.
            try:
                _setns(own)
            except OSError as e:
                raise RuntimeError(f"cannot return to the host network namespace: {e}") from e
    finally:
        os.close(own)


def socket_in_netns(
    netns_fd: int, family: int = socket.AF_INET, kind: int = socket.SOCK_STREAM
) -> socket.socket:
    """A new socket in the namespace ``netns_fd`` refers to; the calling thread's namespace is unchanged."""
    return in_netns(netns_fd, lambda: socket.socket(family, kind))
