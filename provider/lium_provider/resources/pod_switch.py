"""Switching a running ``lium_pod`` to another template in place: the same pod, node and volume.

Lium reboots the pod into a new container of the template (``PUT /pods/{id}/switch-template``:
REBOOT_PENDING, then RUNNING with new ports and a new SSH host key; docs/lium-api.md#other-pod-routes),
so a new ``template_id`` keeps a scarce node instead of re-renting it. The plan shows an update in
place whose address and host key are known only after it (a ``lium_runner`` pinned to the old key is
replaced). A switch Lium refuses, or one that ends REBOOT_FAILED, leaves the pod as it was recorded or
REBOOT_FAILED, and the next plan switches it again in place: a failed switch never re-rents the node.
"""

from __future__ import annotations

from lium_provider.api.errors import LiumError
from lium_provider.api.models import DEAD_POD_STATES, REBOOT_FAILED, RUNNING, Pod
from lium_provider.resources.common import api_errors
from lium_provider.resources.pod_lifecycle import failure_reason, started_or_dead, wait_for_host_key
from lium_provider.resources.pod_model import PodModel
from lium_provider.session import LiumSession
from lium_provider.sshkeys import known_hosts_line
from tfbridge import Context, PlanChange, TFError

# What a new container changes: known only once it runs.
_NEW_CONTAINER = ("status", "ssh_host", "ssh_port", "ports", "ssh_host_key", "known_hosts")
SWITCH_POLL_SECONDS = 1.0


def switching(prior: PodModel, template_id: str | None) -> bool:
    """Whether the pod's container must be switched to ``template_id`` (None: not known yet): another
    template, or a pod whose last switch failed. Never a pod that died otherwise (BROKEN, STOPPED...):
    Lium switches only a running pod or one whose switch failed, so that one is re-rented."""
    if prior.status in DEAD_POD_STATES - {REBOOT_FAILED}:
        return False
    return template_id != prior.template_id or prior.status == REBOOT_FAILED


def plan_switch(change: PlanChange[PodModel], prior: PodModel) -> bool:
    """Plan a template switch in place when one is due (:func:`switching`): what the new container
    changes becomes unknown. Whether one is planned."""
    planned = None if change.is_unknown("template_id") else change.planned.template_id
    if not switching(prior, planned):
        return False
    for name in _NEW_CONTAINER:
        change.set_unknown(name)
    return True


def switch_container(ctx: Context, s: LiumSession, state: PodModel, template_id: str) -> PodModel:
    """Switch the pod to ``template_id`` and wait until its new container runs and answers SSH: the state
    with the new template, address, ports and host key (pinned from now on). A refusal, or a switch that
    ends in another state than RUNNING, fails naming the pod's state; the state the caller records then
    keeps the template the pod really runs, so the next apply switches again."""
    pod_id = state.id or ""
    try:
        s.client.switch_template(pod_id, template_id)
    except LiumError as exc:
        with api_errors("reading the pod"):
            now = s.client.get_pod(pod_id)
        status = now.status if now is not None else "gone"
        running = (now.template_id if now is not None else None) or state.template_id
        raise TFError(
            f"Lium refused to switch pod {pod_id} to template {template_id}",
            f"{exc}. The pod is {status}, on template {running}; nothing was re-rented. {_next_apply(status)}",
            path=("template_id",),
        ) from None
    ctx.record(state.model_copy(update={"status": "REBOOT_PENDING"}))
    pod = _wait_for_new_container(ctx, s, pod_id)
    if pod is None or pod.status != RUNNING:
        status = pod.status if pod is not None else "gone"
        ctx.record(state.model_copy(update={"status": status}))
        raise TFError(
            f"Pod {pod_id} did not start on template {template_id} ({status})",
            f"{failure_reason(s, pod_id).rstrip('.')}. Nothing was re-rented. {_next_apply(status)}",
            path=("template_id",),
        )
    host, port = pod.ssh_host_port() or (None, None)
    switched = state.model_copy(
        update={
            "template_id": template_id,
            "status": pod.status,
            "ssh_host": host,
            "ssh_port": port,
            "ports": dict(pod.ports_mapping) if pod.ports_mapping else None,
            "ssh_host_key": None,
            "known_hosts": None,
        }
    )
    ctx.record(switched)
    key = wait_for_host_key(ctx, host or "", port or 0)
    return switched.model_copy(update={"ssh_host_key": key, "known_hosts": known_hosts_line(host, port, key)})


def _next_apply(status: str) -> str:
    """What the next apply does with a pod in ``status`` after a failed switch."""
    if status in DEAD_POD_STATES - {REBOOT_FAILED} or status == "gone":
        return f"Lium cannot switch a {status} pod: the next apply replaces it (a new pod, billed anew)."
    return "The next apply tries the switch again, in place."


def _wait_for_new_container(ctx: Context, s: LiumSession, pod_id: str) -> Pod | None:
    """The pod once its new container runs with an SSH address, or ends otherwise. Read on its own
    (not from the stack's shared listing, which may be older than the switch)."""
    while True:
        with api_errors("reading the pod"):
            pod = s.client.get_pod(pod_id)
        if pod is not None and pod.status not in ("REBOOT_PENDING", "REBOOTING") and started_or_dead(pod):
            return pod
        if pod is None:
            return None
        ctx.sleep(SWITCH_POLL_SECONDS)
