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

from constructs import Construct
from lium_constructs._cdk import cdk
from lium_constructs.generated import Cluster, OfferFilter, Runner, Template
from lium_constructs.runner_options import RunnerOptions, runner_on

CLUSTER_IMAGE_PREFIX = "daturaai/lium-cluster"
"""Lium runs a cluster only on its cluster image (``lium_cluster.template_id``)."""
RUNNER_PORTS = [22, 10022]
"""SSH and the runner's sshd, published on every member."""
DEFAULT_RENDEZVOUS_PORT = 29500


@dataclass(frozen=True)
class ClusterParts:
    """What the cluster form declares."""

    template: Template
    cluster: Cluster
    runners: list[Runner]


def check_cluster_arguments(
    nodes: int, count: int, image: str, registry: object, volume_id: str | None
) -> None:
    """Refuse what a cluster cannot have, naming the argument."""
    if nodes < 2:
        raise ValueError("nodes must be at least 2 (a cluster has two nodes or more; use count for pods)")
    if count != 1:
        raise ValueError("give either nodes (one cluster of whole nodes) or count (separate pods), not both")
    if not image.startswith(CLUSTER_IMAGE_PREFIX):
        raise ValueError(
            f"image must be Lium's cluster image ({CLUSTER_IMAGE_PREFIX}:<tag>) when nodes is set"
        )
    if registry is not None:
        raise ValueError("registry: Lium's cluster image is public; a cluster takes no registry login")
    if volume_id is not None:
        raise ValueError("volume_id: a cluster's members mount no network volume")


def declare_cluster(
    scope: Construct,
    base: str,
    name: str,
    *,
    nodes: int,
    image: str,
    offer: OfferFilter,
    entrypoint: str | None,
    startup_commands: str | None,
    environment: Mapping[str, str] | None,
    ssh_public_key: str | None,
    termination_hours: int | None,
    runner_options: RunnerOptions | None,
    rendezvous_port: int,
    provider: cdk.TerraformProvider | None,
) -> ClusterParts:
    """The template, the cluster and (with ``runner_options``) a runner per node, in rank order."""
    template = Template(
        scope,
        "template",
        name=name,
        image=image,
        entrypoint=entrypoint,
        startup_commands=startup_commands,
        environment=environment,
        internal_ports=RUNNER_PORTS,
        is_private=True,
        provider=provider,
    )
    template.override_logical_id(base)
    # A pod's size (gpu_count, 1 by default) is not a cluster's: its members are whole nodes.
    arguments = {k: v for k, v in offer.arguments().items() if k != "gpu_count"}
    cluster = Cluster(
        scope,
        "cluster",
        name=name,
        node_count=nodes,
        template_id=template.id,
        ssh_public_key=ssh_public_key,
        termination_hours=termination_hours,
        provider=provider,
        **arguments,
    )
    cluster.override_logical_id(base)
    runners: list[Runner] = []
    if runner_options is not None:
        master = cluster.nodes.get(0).overlay_ip
        for rank in range(nodes):
            node = cluster.nodes.get(rank)
            rendezvous = {
                "RANK": str(rank),
                "WORLD_SIZE": str(nodes),
                "MASTER_ADDR": master,
                "MASTER_PORT": str(rendezvous_port),
            }
            runner = runner_on(
                scope,
                f"runner-{rank}",
                runner_options,
                pod_id=node.pod_id,
                ssh_host_key=node.ssh_host_key,
                environment={**(runner_options.environment or {}), **rendezvous},
                provider=provider,
            )
            runner.override_logical_id(f"{base}_{rank}")
            runners.append(runner)
    return ClusterParts(template, cluster, runners)
