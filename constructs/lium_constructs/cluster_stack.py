"""The cluster form of ``GpuStack`` (``nodes=N``): one ``lium_cluster`` of N whole nodes on one RDMA
fabric, its template, and the dstack runner on every node with the rendezvous of a distributed launch.

Every runner (and every job it runs) gets ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` (node 0's overlay
address) and ``MASTER_PORT``, over the runner options' own environment: what ``torchrun`` and
``torch.distributed`` read. A smoke test in the runner options then runs on every node at once, so it
can be a collective across them (``examples/cluster/allreduce.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeGuard

from constructs import Construct
from lium_constructs._cdk import cdk
from lium_constructs.generated import Cluster, OfferFilter, Runner, Template
from lium_constructs.runner_options import RunnerOptions, runner_on
from lium_provider.api.cluster_rules import (
    CLUSTER_IMAGE_PREFIX,
    MAX_CLUSTER_NODES,
    MIN_CLUSTER_NODES,
    is_cluster_image,
)

RUNNER_PORTS = [22, 10022]
"""SSH and the runner's sshd, published on every member."""
DEFAULT_RENDEZVOUS_PORT = 29500
POD_GPU_COUNT = OfferFilter().gpu_count
"""The offer filter's default size (one GPU per pod), which says nothing about a cluster's nodes."""


@dataclass(frozen=True)
class ClusterSpec:
    """The arguments of a ``GpuStack(nodes=...)`` that its cluster, template and runners are made of."""

    name: str
    nodes: int
    image: str
    offer: OfferFilter
    entrypoint: str | None
    startup_commands: str | None
    environment: Mapping[str, str] | None
    ssh_public_key: str | None
    authorized_keys: list[str] | None
    served: tuple[int, ...]
    termination_hours: int | None
    runner_options: RunnerOptions | None
    rendezvous_port: int
    provider: cdk.TerraformProvider | None


@dataclass(frozen=True)
class ClusterParts:
    """What the cluster form declares."""

    template: Template
    cluster: Cluster
    runners: list[Runner]


def _whole_number(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def check_cluster_arguments(
    nodes: object, count: int, image: str, registry: object, volume_id: str | None, rendezvous_port: object
) -> None:
    """Refuse what a cluster cannot have, naming the argument: at synth, not at the plan (or never)."""
    if not (_whole_number(nodes) and MIN_CLUSTER_NODES <= nodes <= MAX_CLUSTER_NODES):
        raise ValueError(
            f"nodes must be a whole number from {MIN_CLUSTER_NODES} to {MAX_CLUSTER_NODES}, got {nodes!r} "
            "(a cluster has two whole nodes or more; use count for single pods)"
        )
    if count != 1:
        raise ValueError("give either nodes (one cluster of whole nodes) or count (separate pods), not both")
    if not is_cluster_image(image):
        raise ValueError(
            f"image must be Lium's cluster image ({CLUSTER_IMAGE_PREFIX}:<tag>) when nodes is set, got {image!r}"
        )
    if not (_whole_number(rendezvous_port) and 1 <= rendezvous_port <= 65535):
        raise ValueError(f"rendezvous_port must be a TCP port (1 to 65535), got {rendezvous_port!r}")
    if registry is not None:
        raise ValueError("registry: Lium's cluster image is public; a cluster takes no registry login")
    if volume_id is not None:
        raise ValueError("volume_id: a cluster's members mount no network volume")


def declare_cluster(scope: Construct, base: str, spec: ClusterSpec) -> ClusterParts:
    """The template, the cluster and (with ``spec.runner_options``) a runner per node, in rank order."""
    template = Template(
        scope,
        "template",
        name=spec.name,
        image=spec.image,
        entrypoint=spec.entrypoint,
        startup_commands=spec.startup_commands,
        environment=spec.environment,
        internal_ports=[*RUNNER_PORTS, *spec.served],
        is_private=True,
        provider=spec.provider,
    )
    template.override_logical_id(base)
    # A pod's default size (one GPU) is not a cluster's: its members are whole nodes of any size. Any other
    # gpu_count asks for nodes of that many GPUs, as lium_cluster's own gpu_count does.
    arguments = spec.offer.arguments()
    if arguments.get("gpu_count") == POD_GPU_COUNT:
        del arguments["gpu_count"]
    cluster = Cluster(
        scope,
        "cluster",
        name=spec.name,
        node_count=spec.nodes,
        template_id=template.id,
        ssh_public_key=spec.ssh_public_key,
        authorized_keys=spec.authorized_keys,
        wait_for_ports=list(spec.served) or None,
        termination_hours=spec.termination_hours,
        provider=spec.provider,
        **arguments,
    )
    cluster.override_logical_id(base)
    runners: list[Runner] = []
    if spec.runner_options is not None:
        master = cluster.nodes.get(0).overlay_ip
        for rank in range(spec.nodes):
            node = cluster.nodes.get(rank)
            rendezvous = {
                "RANK": str(rank),
                "WORLD_SIZE": str(spec.nodes),
                "MASTER_ADDR": master,
                "MASTER_PORT": str(spec.rendezvous_port),
            }
            runner = runner_on(
                scope,
                f"runner-{rank}",
                spec.runner_options,
                pod_id=node.pod_id,
                ssh_host_key=node.ssh_host_key,
                environment={**(spec.runner_options.environment or {}), **rendezvous},
                provider=spec.provider,
            )
            runner.override_logical_id(f"{base}_{rank}")
            runners.append(runner)
    return ClusterParts(template, cluster, runners)
