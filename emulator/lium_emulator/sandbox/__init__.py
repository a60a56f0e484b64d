"""Pods as real Linux sandboxes. :mod:`.manager` starts, enters and tears them down on the host;
:mod:`.pod_init` runs inside each new set of namespaces (as a script: standard library only) to build
the pod's filesystem and become its PID 1; :mod:`.plan` is the shape of what the first hands the second.
The pieces they use: cgroup limits (:mod:`.cgroups`), capabilities and seccomp (:mod:`.confinement`),
user-namespace id ranges (:mod:`.idmap`), sockets in a pod's network namespace (:mod:`.netns_socket`)
and the relays of published ports (:mod:`.portforward`). This package re-exports nothing.
"""
