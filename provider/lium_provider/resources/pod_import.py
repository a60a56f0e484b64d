"""An imported ``lium_pod``: what its first read fills in, and what its first plan takes in place.

``terraform import`` gives a pod's id alone. Its first read fills in what Lium's pod row says: the name
(from its Lium name), template, GPU, count, volume, the removal schedule as ``termination_hours`` and,
when the row lists exactly one authorised key, ``ssh_public_key``. What no row says (how the pod was
placed: the offer filter's bounds; Terraform's timeouts) the configuration supplies, in place; the offer
rules judge those bounds as for any running pod.

Two arguments whose change re-rents a pod Terraform created are taken in place by the first plan after
an import, as ``ImportStateVerify`` expects of the configuration the pod was made with: ``name`` (Lium
cannot rename a pod, so an imported pod keeps its Lium name whatever the code calls it) and an
``ssh_public_key`` the pod's row lists. A key the pod lacks re-rents it, with a warning saying why.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from lium_provider.api.cluster_rules import MAX_CLUSTER_NODES, MIN_CLUSTER_NODES
from lium_provider.api.models import Pod
from lium_provider.domain.removal import imported_schedule
from lium_provider.domain.stack import cluster_rent_digest, parse_lium_pod_name, rent_digest, tag_in
from lium_provider.resources.common import api_errors
from lium_provider.session import LiumSession
from lium_provider.sshkeys import fingerprint, same_public_key
from tfbridge import Context, PlanChange

if TYPE_CHECKING:
    from lium_provider.resources.pod import PodModel


def lium_stacks_name(s: LiumSession, pod: Pod) -> tuple[str, str] | None:
    """``(name, stack tag)`` when the pod's Lium name is provably one a ``lium_pod`` made
    (:func:`name_made_by_lium_pod`, reading the pod's template only if need be), else None."""
    return name_made_by_lium_pod(pod, lambda: _template_tag(s, pod.template_id))


def warn_if_unproven(ctx: Context, pod: Pod, made: tuple[str, str] | None) -> None:
    """At import: a name shaped like a stack's pod name without the proof is said in a warning (a pod
    made with a commented key on an untagged template has none), since it imports as nobody's."""
    parsed = parse_lium_pod_name(pod.pod_name)
    if made is not None or parsed is None:
        return
    tag = parsed[1]
    ctx.warn(
        f"Pod {pod.id}'s name looks like a lium-stacks pod's, but nothing proves it",
        f"{pod.pod_name!r} has the shape of stack {tag}'s pod names, yet neither its rent digest nor its "
        "template says so: it is taken as a pod made outside lium-stacks, under its whole name. If "
        f"stack {tag} manages it, remove this import: that stack's destroy would delete it.",
    )


def name_made_by_lium_pod(pod: Pod, template_tag: Callable[[], str | None]) -> tuple[str, str] | None:
    """``(name, stack tag)`` of a Lium name a ``lium_pod`` made, else None.

    A name shaped like ``<name>-<tag><digest>`` may be a person's (``gpu-workstation``), so the shape
    alone is not taken as a stack's mark: its rent digest must be that of the pod's own template, count
    and volume (with or without its executor and one of its keys, as the configuration may have named
    them) — for a cluster's member, of its cluster's template, any member count and key, without a
    fabric —, or its template (``template_tag()``, called only then) must carry the same tag.
    """
    parsed = parse_lium_pod_name(pod.pod_name)
    if parsed is None:
        return None
    name, tag, digest = parsed
    digests = {
        rent_digest(pod.template_id, pod.gpu_count, pod.volume_id, executor, key)
        for executor in (None, pod.executor_id)
        for key in (None, *pod.ssh_keys)
    }
    if pod.cluster_id:  # a lium_cluster's member: its row does not say how many members (nor a fabric)
        digests |= {
            cluster_rent_digest(pod.template_id, count, None, key)
            for count in range(MIN_CLUSTER_NODES, MAX_CLUSTER_NODES + 1)
            for key in (None, *pod.ssh_keys)
        }
    return (name, tag) if digest in digests or template_tag() == tag else None


def proven_stack_tag(s: LiumSession, pod: Pod) -> str | None:
    """The stack a pod's Lium name provably belongs to (:func:`lium_stacks_name`), else None."""
    made = lium_stacks_name(s, pod)
    return made[1] if made else None


def _template_tag(s: LiumSession, template_id: str | None) -> str | None:
    """The stack tag in the description of the template ``template_id`` (None: none, or no template)."""
    if not template_id:
        return None
    with api_errors("reading the pod's template"):
        template = s.client.get_template(template_id)
    return tag_in(template.description) if template else None


def imported_fields(pod: Pod, made: tuple[str, str] | None) -> dict[str, object]:
    """The state fields an imported pod's first read takes from its Lium row (``made``: what
    :func:`lium_stacks_name` found)."""
    return {
        "name": made[0] if made else pod.pod_name,
        "lium_name": pod.pod_name,
        "template_id": pod.template_id,
        "gpu_count": pod.gpu_count,
        "gpu": pod.gpu_name,
        "volume_id": pod.volume_id,
        "termination_hours": imported_schedule(pod)[1],
        "ssh_public_key": pod.ssh_keys[0] if len(pod.ssh_keys) == 1 else None,
    }


def plan_first_apply(
    ctx: Context, change: PlanChange[PodModel], prior: PodModel, pod_keys: Callable[[], tuple[str, ...]]
) -> None:
    """Take in place a ``name`` and an authorised ``ssh_public_key`` the import could not know.

    ``pod_keys`` reads the keys the pod's Lium row lists; it is called only when a key is configured that
    the state does not hold.
    """
    if change.planned.name != prior.name:
        change.keep_in_place("name")
    key = change.config.ssh_public_key
    if key is None or change.config_is_unknown("ssh_public_key") or key == prior.ssh_public_key:
        return
    listed = pod_keys()
    if any(same_public_key(key, line) for line in listed):
        change.keep_in_place("ssh_public_key")
        return
    authorised = ", ".join(fingerprint(line) for line in listed) or "none"
    ctx.warn(
        "The imported pod does not authorise this ssh_public_key",
        f"Pod {prior.id} authorises {authorised}; the configured key is {fingerprint(key)}. Lium cannot "
        "add a key to a running pod, so the plan replaces it (a new pod, billed anew). To keep the pod, set "
        "`ssh_public_key` to a key it lists, or leave it unset.",
        path=("ssh_public_key",),
    )
