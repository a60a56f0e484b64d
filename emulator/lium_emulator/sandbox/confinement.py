"""What a pod's root may still do: its capability set and its seccomp filter (host-side decisions).

The pod's root is already unprivileged on the host (its own user namespace, see ``idmap.py``), and
every mount, network, UTS and cgroup namespace it lives in belongs to the host's user namespace, so
capabilities inside the pod grant nothing over them. These two layers narrow it further, as a
container runtime does:

* **capabilities**: Docker's default set (chown, file ownership, setuid/setgid, kill, chroot, …)
  plus ``CAP_SYS_PTRACE``, which counts only over processes of the pod's own user namespace, all
  of them in its PID namespace (so root can read ``/proc/1`` of a non-root entrypoint and debuggers
  work); no ``CAP_SYS_ADMIN``, ``CAP_DAC_READ_SEARCH`` (``open_by_handle_at``), ``CAP_SYS_MODULE``,
  ``CAP_NET_ADMIN``. ``no_new_privs`` keeps setuid binaries and file
  capabilities from raising anything back.
* **seccomp**: a deny list of the syscalls behind known container escapes and of kernel-global
  operations (``EPERM``): the mount API, ``open_by_handle_at``, ``kexec``, module loading, ``bpf``,
  ``perf_event_open``, keyrings, new namespaces (``unshare``/``setns``, namespace flags of
  ``clone``; ``clone3``, whose flags a filter cannot read, answers ``ENOSYS`` so libc falls back to
  ``clone``), clock and swap changes, ``reboot``. Everything else is allowed, so images run
  unchanged. The filter is compiled by libseccomp (through ``pyseccomp``) into a classic BPF
  program that ``pod_init.py`` installs with ``prctl``; a foreign architecture or x32 call is
  killed by libseccomp's architecture check.
"""

from __future__ import annotations

import errno
import functools
import tempfile

# Docker's default capabilities (moby's oci/caps/defaults.go) and CAP_SYS_PTRACE, by number
# (linux/capability.h).
KEPT_CAPABILITIES = {
    "CAP_CHOWN": 0,
    "CAP_DAC_OVERRIDE": 1,
    "CAP_FOWNER": 3,
    "CAP_FSETID": 4,
    "CAP_KILL": 5,
    "CAP_SETGID": 6,
    "CAP_SETUID": 7,
    "CAP_SETPCAP": 8,
    "CAP_NET_BIND_SERVICE": 10,
    "CAP_NET_RAW": 13,
    "CAP_SYS_CHROOT": 18,
    "CAP_SYS_PTRACE": 19,
    "CAP_MKNOD": 27,
    "CAP_AUDIT_WRITE": 29,
    "CAP_SETFCAP": 31,
}

DENIED_SYSCALLS = (
    # mounting, in the old and the new API
    "mount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount",
    "fspick", "mount_setattr",
    # reading any file of a filesystem by handle (the "shocker" escape)
    "open_by_handle_at",
    # the kernel itself
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "bpf",
    "perf_event_open", "iopl", "ioperm", "reboot", "swapon", "swapoff", "syslog", "acct",
    "quotactl", "lookup_dcookie", "userfaultfd",
    # kernel keyrings are not namespaced
    "keyctl", "add_key", "request_key",
    # the host's clock
    "settimeofday", "clock_settime", "clock_adjtime",
    # new or other namespaces
    "unshare", "setns",
)  # fmt: skip
NAMESPACE_FLAGS = (
    0x00020000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
)


class SeccompUnavailable(Exception):
    """The host has no libseccomp, so no filter can be built."""


@functools.cache
def seccomp_program() -> bytes:
    """The pod's filter as a classic BPF program (``struct sock_filter`` array), built once."""
    try:
        import pyseccomp  # type: ignore[import-untyped]  # loads libseccomp: only when a pod starts
    except RuntimeError as e:  # pyseccomp's "Unable to find libseccomp"
        raise SeccompUnavailable(f"{e}: install it (apt-get install libseccomp2)") from e
    pod_filter = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
    deny = pyseccomp.ERRNO(errno.EPERM)
    for name in DENIED_SYSCALLS:
        pod_filter.add_rule(deny, name)
    for flag in NAMESPACE_FLAGS:
        pod_filter.add_rule(deny, "clone", pyseccomp.Arg(0, pyseccomp.MASKED_EQ, flag, flag))
    pod_filter.add_rule(pyseccomp.ERRNO(errno.ENOSYS), "clone3")
    with tempfile.TemporaryFile() as out:
        pod_filter.export_bpf(out)
        out.seek(0)
        return out.read()
