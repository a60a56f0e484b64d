"""Pods as real Linux sandboxes. :mod:`.manager` starts, enters and tears them down on the host;
:mod:`.pod_init` runs inside each new set of namespaces (as a script: standard library only) to build
the pod's filesystem and become its PID 1; :mod:`.plan` is the shape of what the first hands the second.
The pieces they use: cgroup limits (:mod:`.cgroups`), capabilities and seccomp (:mod:`.confinement`),
user-namespace id ranges (:mod:`.idmap`), network namespaces and sockets in them (:mod:`.netns_socket`),
the relays of published ports and their advertised addresses (:mod:`.portforward`) and the clusters'
overlay networks (:mod:`.overlay`). This package re-exports nothing.
"""
