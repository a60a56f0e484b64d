"""An imported ``lium_pod``: what its first read fills in, and what its first plan takes in place.

``terraform import`` gives a pod's id alone. Its first read fills in what Lium's pod row says: the name
(from its Lium name), template, GPU, count, volume, the removal schedule as ``termination_hours``, and
the authorised keys: the first as ``ssh_public_key``, the others as ``authorized_keys``. What no row says (how the pod was
placed: the offer filter's bounds; Terraform's timeouts) the configuration supplies, in place; the offer
rules judge those bounds as for any running pod.

Arguments whose change re-rents a pod Terraform created are taken in place by the first plan after an
import, as ``ImportStateVerify`` expects of the configuration the pod was made with: ``name`` (Lium
cannot rename a pod, so an imported pod keeps its Lium name whatever the code calls it), an
``ssh_public_key`` the pod's row lists, and ``authorized_keys`` that it lists every one of. A key the
pod lacks re-rents it (for ``ssh_public_key`` with a warning saying why).
"""

from __future__ import annotations

from collections.abc import Callable

from lium_provider.api.models import Pod
from lium_provider.domain.removal import imported_schedule
from lium_provider.domain.stack import parse_lium_pod_name, rent_digest, tag_in
from lium_provider.resources.authorized_keys import keys_digested
from lium_provider.resources.common import api_errors
from lium_provider.resources.pod_model import PodModel
from lium_provider.session import LiumSession
from lium_provider.sshkeys import fingerprint, same_public_key
from tfbridge import Context, PlanChange, TFError, destroying


def lium_stacks_name(s: LiumSession, pod: Pod) -> tuple[str, str] | None:
    """``(name, stack tag)`` when the pod's Lium name is provably one a ``lium_pod`` made
    (:func:`name_made_by_lium_pod`, reading the pod's template only if need be), else None: what an
    import's ``name`` is. Whose the pod is does not depend on it: any name shaped like a stack's carries
    that stack's tag (:mod:`lium_provider.resources.ownership`)."""
    return name_made_by_lium_pod(pod, lambda: _template_tag(s, pod.template_id))


def refuse_cluster_member(ctx: Context, pod: Pod) -> None:
    """At import: a member of a cluster is refused as a ``lium_pod`` (a warning during a destroy): its
    cluster's members are rented, scheduled and removed together, and replacing or deleting one alone
    would leave that cluster degraded."""
    if not pod.cluster_id:
        return
    refusal = TFError(
        f"Pod {pod.id} is a member of cluster {pod.cluster_id}",
        f"It is node {pod.cluster_node_index} of that cluster, whose members are rented and removed "
        "together: it cannot be managed as a lium_pod. Nothing was changed. Import the cluster instead "
        f'(`import {{ to = lium_cluster.<name>, id = "{pod.cluster_id}" }}`), or remove this import.',
        path=("id",),
    )
    if not destroying():
        raise refusal
    ctx.warnings += [d.as_warning() for d in refusal.diagnostics()]


def name_made_by_lium_pod(pod: Pod, template_tag: Callable[[], str | None]) -> tuple[str, str] | None:
    """``(name, stack tag)`` of a Lium name a ``lium_pod`` made, else None.

    A name shaped like ``<name>-<tag><digest>`` may be a person's (``gpu-workstation``), so the shape
    alone is not taken as a stack's mark: its rent digest must be that of the pod's own count and volume
    (with or without its executor, and its keys read as :func:`_key_readings` says, as the configuration
    may have named them; a pod named before template switches also digested its template), or its
    template (``template_tag()``, called only then) must carry the same tag. (A cluster's member is never imported as a pod:
    :func:`refuse_cluster_member`.)
    """
    parsed = parse_lium_pod_name(pod.pod_name)
    if parsed is None:
        return None
    name, tag, digest = parsed
    digests = {
        rent_digest(*template, pod.gpu_count, pod.volume_id, executor, key, *keys_digested(extra))
        for template in ((), (pod.template_id,))  # today's digest, and an older one of the template too
        for executor in (None, pod.executor_id)
        for key, extra in _key_readings(pod.ssh_keys)
    }
    return (name, tag) if digest in digests or template_tag() == tag else None


def _key_readings(keys: tuple[str, ...]) -> list[tuple[str | None, list[str]]]:
    """Each way a pod's authorised keys may have been configured: ``(ssh_public_key, authorized_keys
    beside it)``, with the key named or left to the provider's default (then also listed)."""
    if len(keys) <= 1:
        return [(None, []), *((k, []) for k in keys)]
    return [
        reading
        for key in keys
        for others in ([k for k in keys if k != key],)
        for reading in ((key, others), (None, others))
    ]


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
        # A rent lists ssh_public_key first, then authorized_keys (resources/authorized_keys.py).
        "ssh_public_key": pod.ssh_keys[0] if pod.ssh_keys else None,
        "authorized_keys": list(pod.ssh_keys[1:]) or None,
    }


def plan_first_apply(
    ctx: Context, change: PlanChange[PodModel], prior: PodModel, pod_keys: Callable[[], tuple[str, ...]]
) -> None:
    """Take in place a ``name``, and an ``ssh_public_key`` and ``authorized_keys`` the pod's row lists,
    which the import could not know.

    ``pod_keys`` reads the keys the pod's Lium row lists; it is called only when a key is configured that
    the state does not hold.
    """
    if change.planned.name != prior.name:
        change.keep_in_place("name")
    extra = change.config.authorized_keys
    if extra and not change.config_is_unknown("authorized_keys") and extra != prior.authorized_keys:
        listed = pod_keys()
        if all(any(same_public_key(k, line) for line in listed) for k in extra):
            change.keep_in_place("authorized_keys")
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
