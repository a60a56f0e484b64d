"""The ``lium_cluster`` model: its attributes and its members', the digest of its Lium name, and what a
cluster's state says of the member pods Lium lists (shared by the resource and its plan rules)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from lium_provider.api.cluster_rules import CLUSTER_IMAGE_PREFIX, MAX_CLUSTER_NODES, MIN_CLUSTER_NODES
from lium_provider.api.models import RUNNING, Pod, TerminationHours
from lium_provider.domain.offer_filter import MAX_GPUS_PER_NODE, OfferFilter
from lium_provider.domain.removal import parse_time, rfc3339, same_schedule
from lium_provider.domain.stack import cluster_rent_digest, tag_in_pod_name
from lium_provider.resources.authorized_keys import AuthorizedKeys, authorized_beside, keys_digested
from lium_provider.resources.inputs import LIUM_ID, OPENSSH_PUBLIC_KEY, PRINTABLE_NAME
from lium_provider.resources.ownership import AdoptedFrom, StackTag
from lium_provider.resources.served_ports import WaitForPorts
from lium_provider.resources.visibility import RentedByKey, WorkspaceId
from lium_provider.sshkeys import known_hosts_line
from tfbridge import TIMEOUTS_BLOCK, Attribute, RequiresReplace, Timeouts, UseStateForUnknown

_REPLACE = (RequiresReplace(),)
_KEEP = (UseStateForUnknown(),)
DEGRADED = "DEGRADED"
"""The cluster's ``status`` when some member is not running: the next apply replaces the whole cluster."""


class ClusterNodeModel(BaseModel):
    """One member of the cluster, in rank order."""

    model_config = ConfigDict(extra="forbid")

    pod_id: Annotated[str | None, Attribute(computed=True, description="The member's pod id.")] = None
    node_index: Annotated[
        int | None, Attribute(computed=True, description="Its rank: node 0 is the master.")
    ] = None
    executor_id: Annotated[str | None, Attribute(computed=True, description="The node it rents whole.")] = (
        None
    )
    overlay_ip: Annotated[
        str | None,
        Attribute(
            computed=True, description="Its address on the cluster's private overlay (`10.42.0.<rank+1>`)."
        ),
    ] = None
    ssh_host: Annotated[str | None, Attribute(computed=True, description="SSH host.")] = None
    ssh_port: Annotated[int | None, Attribute(computed=True, description="SSH port.")] = None
    ports: Annotated[
        dict[str, int] | None,
        Attribute(
            computed=True,
            description="Each port the template publishes (`internal_ports`) → its external port on `ssh_host`.",
        ),
    ] = None
    ssh_host_key: Annotated[
        str | None,
        Attribute(computed=True, description="The member's SSH host key, pinned on first contact."),
    ] = None
    known_hosts: Annotated[
        str | None,
        Attribute(
            computed=True,
            description="The member's `known_hosts` line (`[ssh_host]:ssh_port <ssh_host_key>`), for "
            "`ssh -o UserKnownHostsFile=<file>`.",
        ),
    ] = None


class ClusterModel(OfferFilter):
    """A multi-node GPU cluster: `node_count` whole nodes of one RDMA fabric (InfiniBand or RoCE), rented
    all or nothing, each running Lium's cluster template, which joins the members on a private overlay
    (`nodes[*].overlay_ip`; node 0 is the master). Placed on `fabric_id`, or on the fabric whose cheapest
    matching free nodes cost least (the offer filter, checked per node; `gpu_count` is GPUs per node,
    `max_price_per_hour` the most per node). Changing `name`, `node_count`, `template_id`, `fabric_id`,
    `ssh_public_key` or a filter field, or a member that stopped running, replaces the whole cluster.
    `termination_hours` moves every member's removal in place; every rental carries a provisional
    deadline covering the create's timeout until the members answer SSH.
    """

    model_config = ConfigDict(extra="forbid")

    id: Annotated[
        str | None, Attribute(computed=True, plan=_KEEP, description="The cluster's id (`cluster_id`).")
    ] = None
    name: Annotated[
        str,
        Attribute(required=True, plan=_REPLACE, description="Cluster name (every member's pod name)."),
        PRINTABLE_NAME,
    ] = Field(min_length=1, max_length=63)
    node_count: Annotated[
        int, Attribute(required=True, plan=_REPLACE, description="How many whole nodes (at least 2).")
    ] = Field(ge=MIN_CLUSTER_NODES, le=MAX_CLUSTER_NODES)
    gpu_count: Annotated[
        int | None,
        Attribute(
            optional=True, plan=_REPLACE, description="GPUs per node (members are whole nodes). Default: any."
        ),
    ] = Field(default=None, ge=1, le=MAX_GPUS_PER_NODE)
    template_id: Annotated[
        str | None,
        Attribute(
            optional=True,
            computed=True,
            plan=(*_REPLACE, *_KEEP),
            description=f"Template every member runs; it must be of Lium's cluster image (`{CLUSTER_IMAGE_PREFIX}`). "
            "Default: the newest such template, as Lium's SDK picks it.",
        ),
        LIUM_ID,
    ] = None
    fabric_id: Annotated[
        str | None,
        Attribute(
            optional=True,
            computed=True,
            plan=(*_REPLACE, *_KEEP),
            description="Rent on this fabric (see `lium_cluster_offers`). Default: the cheapest that fits.",
        ),
    ] = Field(default=None, min_length=1, max_length=100)
    ssh_public_key: Annotated[
        str | None,
        Attribute(
            optional=True,
            computed=True,
            plan=(*_REPLACE, *_KEEP),
            description="Public key authorised for root SSH on every member. Default: derived from the "
            "provider's private key.",
        ),
        OPENSSH_PUBLIC_KEY,
    ] = None
    wait_for_ports: WaitForPorts = None
    authorized_keys: AuthorizedKeys = None
    termination_hours: Annotated[
        TerminationHours | None,
        Attribute(
            optional=True,
            computed=True,
            description="Lium removes every member this many hours after the cluster started. Default: the "
            "provider's `default_termination_hours`, else none.",
        ),
    ] = None
    removal_scheduled_at: Annotated[
        str | None,
        Attribute(computed=True, description="When Lium removes the members (RFC 3339, UTC); null: never."),
    ] = None
    started_at: Annotated[
        str | None,
        Attribute(computed=True, plan=_KEEP, description="When the cluster started (RFC 3339, UTC)."),
    ] = None
    status: Annotated[
        str | None,
        Attribute(computed=True, description=f"`RUNNING` when every member runs, else `{DEGRADED}`."),
    ] = None
    price_per_hour: Annotated[
        float | None, Attribute(computed=True, plan=_KEEP, description="Billed USD per hour, all members.")
    ] = None
    nodes: Annotated[
        list[ClusterNodeModel] | None,
        Attribute(computed=True, plan=_KEEP, description="The members, in rank order."),
    ] = None
    lium_name: Annotated[
        str | None,
        Attribute(
            computed=True,
            plan=_KEEP,
            description="The pod name sent to Lium for every member: `name`, `-`, the stack tag and 3 "
            "characters of what the rental asks for; it recognises this stack's cluster from any machine.",
        ),
    ] = None
    stack_tag: StackTag = None
    adopted_from: AdoptedFrom = None
    api_key_id: RentedByKey = None
    workspace_id: WorkspaceId = None
    timeouts: Annotated[Timeouts | None, TIMEOUTS_BLOCK] = None


def cluster_digest(plan: ClusterModel, configured: ClusterModel) -> str:
    """The rent digest of the members' Lium name: what the rental asks for and never changes in place
    (:func:`~lium_provider.domain.stack.cluster_rent_digest`), the keys it authorises among it."""
    placement: dict[str, object] = cluster_filter(configured).model_dump(mode="json", exclude_none=True)
    extra = authorized_beside(configured.ssh_public_key, configured.authorized_keys)
    if extra:
        placement["authorized_keys"] = keys_digested(extra)[0]
    return cluster_rent_digest(
        plan.template_id, plan.node_count, configured.fabric_id, configured.ssh_public_key, placement
    )


def cluster_filter(model: ClusterModel) -> OfferFilter:
    return OfferFilter.of(dict(model), validate=False)


def members_state(state: ClusterModel, members: list[Pod], keys: dict[str, str | None]) -> ClusterModel:
    """The state with ``members`` (rank order) as its nodes; known host keys kept."""
    nodes = []
    for pod in members:
        host, port = pod.ssh_host_port() or (None, None)
        nodes.append(
            ClusterNodeModel(
                pod_id=pod.id,
                node_index=pod.cluster_node_index,
                executor_id=pod.executor_id,
                overlay_ip=pod.cluster_overlay_ip,
                ssh_host=host,
                ssh_port=port,
                ports=dict(pod.ports_mapping) if pod.ports_mapping else None,
                ssh_host_key=keys.get(pod.id),
                known_hosts=known_hosts_line(host, port, keys.get(pod.id)),
            )
        )
    running = len(members) == state.node_count and all(p.status == RUNNING for p in members)
    prices = [p.price for p in members]
    return state.model_copy(
        update={
            "nodes": nodes,
            "status": RUNNING if running else DEGRADED,
            "price_per_hour": round(sum(p or 0.0 for p in prices), 6) if None not in prices else None,
            "api_key_id": next((p.api_key_id for p in members if p.api_key_id), state.api_key_id),
            "workspace_id": next((p.workspace_id for p in members if p.workspace_id), state.workspace_id),
        }
    )


PLACEMENT = ("fabric_id", *OfferFilter.fields())
"""What chose the cluster's nodes; Lium keeps none of it on the members."""


def members_schedule(recorded: str | None, members: list[Pod]) -> str | None:
    """The removal a refresh records: the recorded one while every member has it, else the first
    differing member's (changed outside Terraform, or an update cut short), so the plan sets every
    member's again instead of leaving one billed past, or without, the cluster's deadline."""
    for pod in members:
        if not same_schedule(parse_time(recorded), pod.removal_scheduled_at):
            return rfc3339(pod.removal_scheduled_at)
    return recorded


def members_mark(state: ClusterModel, members: list[Pod]) -> str | None:
    """The stack tag a cluster carries in Lium: its members' Lium name's (a member that carries another
    than the state records counts, whatever the others carry)."""
    marks = [tag_in_pod_name(p.pod_name) for p in members]
    odd = [m for m in marks if m not in (state.stack_tag, state.adopted_from)]
    return odd[0] if odd else next(iter(marks), None)


def host_keys(state: ClusterModel) -> dict[str, str | None]:
    return {n.pod_id: n.ssh_host_key for n in state.nodes or [] if n.pod_id}
