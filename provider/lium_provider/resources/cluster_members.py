"""A cluster's members as pods: finding them by name, waiting for all of them, removing all of them.

Lium has no cluster row: a cluster is the pods that share its ``cluster_id`` (docs/lium-api.md#clusters),
so everything here reads the pod listing, through the pod watcher where a wait is involved (one listing
serves every waiter of the stack, within Lium's polling budget).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable

from lium_provider.api.client import LiumClient
from lium_provider.api.cluster_rules import CLUSTER_IMAGE_PREFIX, is_cluster_image
from lium_provider.api.errors import LiumError, is_definitive
from lium_provider.api.models import DELETED, DELETING, RUNNING, TERMINAL_POD_STATES, Pod, Template
from lium_provider.api.pod_watch import READ_STALENESS_SECONDS
from lium_provider.resources.pod_lifecycle import (
    delete_pod_and_wait,
    failure_reason,
    pod_gone,
    started_or_dead,
    wait_for_host_key,
)
from lium_provider.session import LiumSession
from tfbridge import Context, TFError

CONFLICT_RETRY_SECONDS = 2.0


def newest_cluster_template(client: LiumClient) -> Template:
    """Lium's cluster template, as its SDK picks it: of image ``daturaai/lium-cluster``, newest tag."""
    candidates = [t for t in client.list_templates() if is_cluster_image(t.docker_image)]
    if not candidates:
        raise TFError(
            "Lium offers no cluster template",
            f"No template of image {CLUSTER_IMAGE_PREFIX} is listed; set `template_id` to one.",
            path=("template_id",),
        )

    def tag_key(template: Template) -> tuple[int, ...]:
        parts = re.split(r"[.\-]", template.docker_image_tag or "0")
        return tuple(int(p) if p.isdigit() else -1 for p in parts)

    return max(candidates, key=tag_key)


def check_cluster_template(client: LiumClient, template_id: str) -> None:
    """Refuse, naming ``template_id``, a template that does not exist or is not of Lium's cluster image:
    Lium would refuse the rental (``cluster_template_required``), so the plan says so first."""
    template = client.get_template(template_id)
    if template is None:
        raise TFError(
            "The cluster's template does not exist",
            f"No template {template_id} is visible to this API key.",
            path=("template_id",),
        )
    if not is_cluster_image(template.docker_image):
        raise TFError(
            "The cluster's template is not of Lium's cluster image",
            f"Template {template_id} runs {template.docker_image}; every cluster member must run "
            f"{CLUSTER_IMAGE_PREFIX}:<tag>, which joins the members on their overlay. Leave `template_id` "
            "unset for Lium's newest cluster template, or use a template of that image.",
            path=("template_id",),
        )


def members_under_id(ctx: Context, s: LiumSession, cluster_id: str, recorded: Iterable[str]) -> list[Pod]:
    """The live pods Lium groups under ``cluster_id``, in rank order: the ``recorded`` members (each from
    the stack's shared listing, confirmed by its own GET when the listing lacks it) that Lium still places
    in it, and any other pod the listing shows under the id. A recorded pod of another cluster (an edited
    state) is no member: the id is what a change or a delete acts on, so the id's pods are judged."""
    found = [s.watcher.current(ctx, pod_id) for pod_id in recorded if pod_id]
    listing = s.watcher.recent_pods(READ_STALENESS_SECONDS)
    if listing is None:
        try:
            listing = s.client.list_pods()
        except LiumError:
            if not found:
                raise  # nothing else tells which pods the id groups
            listing = []  # an unreadable listing must not fail a refresh the members' GETs answered
    members = {p.id: p for p in found if p is not None and p.cluster_id in (None, cluster_id)}
    for pod in listing:
        if pod.cluster_id == cluster_id:
            members.setdefault(pod.id, pod)
    # A member that failed to start is still a member (it is removed with the cluster).
    kept = [p for p in members.values() if p.status not in (DELETING, DELETED)]
    return sorted(kept, key=lambda p: p.cluster_node_index or 0)


def members_of(pods: Iterable[Pod], lium_name: str, cluster_id: str | None) -> dict[str, list[Pod]]:
    """The live cluster members named ``lium_name`` (of ``cluster_id`` only, when given), by cluster, in
    rank order. A member on its way out (deleting: an abandoned create's cluster) is not live."""
    clusters: dict[str, list[Pod]] = {}
    for pod in pods:
        if pod.pod_name != lium_name or not pod.cluster_id or pod.status in TERMINAL_POD_STATES:
            continue
        if cluster_id is None or pod.cluster_id == cluster_id:
            clusters.setdefault(pod.cluster_id, []).append(pod)
    for members in clusters.values():
        members.sort(key=lambda p: p.cluster_node_index or 0)
    return clusters


def wait_for_members(
    ctx: Context, s: LiumSession, pod_ids: list[str]
) -> tuple[list[Pod], dict[str, str | None], str | None]:
    """Wait until every member runs and answers SSH: the members, their pinned host keys, and why the
    cluster failed (None when it did not). A member that is gone or dead fails it at once: the others
    are paid for every second."""
    members: list[Pod] = []
    for pod_id in pod_ids:
        pod = s.watcher.wait(ctx, pod_id, started_or_dead)
        if pod is None or pod.status != RUNNING:
            status = pod.status if pod else "gone"
            return members, {}, f"Member pod {pod_id} is {status}. {failure_reason(s, pod_id)}"
        members.append(pod)
    keys: dict[str, str | None] = {}
    for pod in members:
        host, port = pod.ssh_host_port() or ("", 0)
        keys[pod.id] = wait_for_host_key(ctx, host, port)
    members.sort(key=lambda p: p.cluster_node_index or 0)
    return members, keys, None


def delete_cluster_and_wait(ctx: Context, s: LiumSession, cluster_id: str, pod_ids: list[str]) -> None:
    """Remove every member with one ``DELETE /clusters/{id}`` and wait until each is gone.

    A 409 (a member still being created, on a platform that does not cancel creates) or an uncertain
    outcome is sent again after a pause. A 404 says no member is grouped under the id any more, which
    a stale answer also says while they run: each member is then deleted on its own, as is a member the
    answer says failed.
    """
    while True:
        try:
            removal = s.client.delete_cluster(cluster_id)
            removed_at = time.monotonic()
            break
        except LiumError as exc:
            if exc.status != 409 and is_definitive(exc):
                raise TFError("Removing the cluster failed", str(exc)) from None
            ctx.log.info("the cluster cannot be removed yet, retrying", cluster=cluster_id, error=str(exc))
            ctx.sleep(CONFLICT_RETRY_SECONDS)
    if removal is None:
        for pod_id in dict.fromkeys(pod_ids):
            if pod_id:
                delete_pod_and_wait(ctx, s, pod_id)
        return
    rows = removal.pods
    for row in rows:
        if not row.success and row.pod_id:
            delete_pod_and_wait(ctx, s, row.pod_id)
    for pod_id in dict.fromkeys([*pod_ids, *(row.pod_id for row in rows if row.pod_id)]):
        s.watcher.wait_gone(ctx, pod_id, pod_gone, removed_at)
