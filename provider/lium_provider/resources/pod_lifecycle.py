"""A pod's lifecycle as every resource that rents pods needs it: waiting, deleting, ending orphans.

``lium_pod``, ``lium_cluster`` (its members are pods), ``lium_template`` and ``lium_volume`` (which
end the unrecorded pods that use them) share these; none of them imports another resource's module.
"""

from __future__ import annotations

import time

from lium_provider.api.errors import LiumError, is_definitive
from lium_provider.api.models import BUDGET_STOP_REASON, DEAD_POD_STATES, DELETED, RUNNING, Pod
from lium_provider.api.rent import find_rented_pod
from lium_provider.domain.stack import tag_in_pod_name
from lium_provider.resources.common import api_errors, undo_abandoned
from lium_provider.session import LiumSession
from lium_provider.sshkeys import fetch_host_key
from tfbridge import Context, TFError

SSH_POLL_SECONDS = 0.25
# How old the pod watcher's latest listing may be for a template's or volume's delete to use it instead
# of listing again (its own pods' deletes, just before, each end on a listing).
RECENT_LISTING_SECONDS = 5.0


def started_or_dead(pod: Pod | None) -> bool:
    """Whether a create's wait is over: the pod runs with its SSH address published, or will never run."""
    if pod is None or pod.status in DEAD_POD_STATES:
        return True
    return pod.status == RUNNING and pod.ssh_host_port() is not None


def delete_pod_and_wait(ctx: Context, s: LiumSession, pod_id: str) -> None:
    """Delete a pod and wait until Lium reports it DELETED or gone; 404 counts as success."""
    while True:
        try:
            s.client.delete_pod(pod_id)
            deleted_at = time.monotonic()
            break
        except LiumError as exc:
            if exc.code != "pod_state_conflict" and is_definitive(exc):
                raise TFError("Deleting the pod failed", str(exc)) from None
            # dstack's rule: a conflict (or an unknown outcome) is fine only if the pod is on its way out.
            with api_errors("reading the pod"):
                pod = s.client.get_pod(pod_id)
            if pod is None or pod.status in ("DELETING", DELETED):
                deleted_at = time.monotonic()
                break
            ctx.log.info("pod cannot be deleted yet, retrying", pod=pod_id, status=pod.status)
            ctx.sleep(2.0)
    try:
        s.watcher.wait_gone(ctx, pod_id, pod_gone, deleted_at)
    except TimeoutError:
        # The listing is shared by every waiter and rate limited per account, so under a 429 storm the
        # next one may come after the deadline although the pod is long gone: ask for this pod alone
        # before failing the destroy.
        with api_errors("reading the pod"):
            if pod_gone(s.client.get_pod(pod_id)):
                return
        raise


def pod_gone(pod: Pod | None) -> bool:
    """The pod is no more: unknown to Lium (404, or missing from a listing) or DELETED."""
    return pod is None or pod.status == DELETED


def failure_reason(s: LiumSession, pod_id: str) -> str:
    """Why a pod did not start, from its latest events: "Lium says: …", or that it gave no reason."""
    try:
        events = s.client.events(pod_id=pod_id, limit=20)
    except LiumError:
        return "Lium gave no reason."
    for event in events:
        reason = " ".join(
            x for x in (event.reason, getattr(event, "detail", None), getattr(event, "error", None)) if x
        )
        if reason:
            return f"Lium says: {reason}"
    return "Lium gave no reason."


def warn_if_stopped_by_budget(ctx: Context, s: LiumSession, pod_id: str) -> None:
    """A refresh found the pod gone: when Lium deleted it because the API key that rented it spent a budget,
    say so (the next plan rents it again, which the same budget may refuse). Any other end stays silent."""
    try:
        events = s.client.events(pod_id=pod_id, limit=20)
    except LiumError:
        return
    stop = next((e for e in events if e.reason == BUDGET_STOP_REASON), None)
    if stop is None:
        return
    ctx.warn(
        f"Lium stopped pod {pod_id}: its API key's budget ran out",
        f"Lium says: {stop.detail or BUDGET_STOP_REASON}. The pod is gone, and this plan rents a new one, which the "
        "same budget refuses until it is raised (`lium keys budget <key>`) or its window starts again.",
    )


def wait_for_host_key(ctx: Context, host: str, port: int) -> str:
    """Wait until the sshd at ``host:port`` answers and return its host key (pinned from then on)."""
    while True:
        ctx.check()
        key = fetch_host_key(host, port, timeout=5.0)
        if key:
            return key
        ctx.sleep(SSH_POLL_SECONDS)


def delete_abandoned_pod(ctx: Context, s: LiumSession, pod_id: str, lium_name: str) -> None:
    """Send DELETE for a pod whose create was abandoned; no wait for DELETED (the process is exiting)."""
    error = undo_abandoned(lambda: s.client.delete_pod(pod_id))
    if error is not None:  # the process exits anyway: the removal deadline and sweep remain
        ctx.log.warn(
            "could not delete the pod of an abandoned create", pod=pod_id, error=type(error).__name__
        )
        return
    ctx.log.warn("deleted the pod of an abandoned create: Terraform is gone and cannot record it", pod=pod_id)
    s.journal.forget(lium_name)


def settle_orphans(
    ctx: Context,
    s: LiumSession,
    tag: str,
    *,
    template_id: str | None = None,
    volume_id: str | None = None,
) -> None:
    """Delete the pods of the stack tagged ``tag`` (the template's or volume's own stack) that run
    ``template_id`` or mount ``volume_id``, just before that goes.

    Terraform deletes the pods it records before their template or volume, so such a pod is one
    Terraform never recorded: the provider died between Lium's answer and the state write (SIGKILL,
    a crash, power loss). It is found by the stack's tag in its Lium name among the live pods (from
    any machine), and through this machine's journal (by name and executor in the pod list, then in the
    account events; never by renting again). A pod of another stack is never touched.
    """

    def uses(template: str | None, volume: str | None) -> bool:
        return (template_id is not None and template == template_id) or (
            volume_id is not None and volume == volume_id
        )

    with api_errors("looking for this stack's unrecorded pods"):
        # Such a pod was rented before this process began, so the listing that saw this process's
        # own pods go (a moment ago, as Terraform deletes them first) shows it as well as a new one.
        live = s.watcher.recent_pods(RECENT_LISTING_SECONDS)
        listed = [
            p
            for p in (live if live is not None else s.client.list_pods())
            if p.status not in DEAD_POD_STATES
            and tag_in_pod_name(p.pod_name) == tag
            and uses(p.template_id, p.volume_id)
        ]
    for pod in listed:
        ctx.log.warn("deleting a pod of this stack Terraform never recorded", pod=pod.id, name=pod.pod_name)
        ctx.warn(
            f"Deleted pod {pod.id} ({pod.pod_name}), which this state does not hold",
            "Its Lium name carries this stack's tag and it used what is being deleted here, so it is taken "
            "for a pod an interrupted create rented. A pod this stack let go of (a `removed` block) must be "
            "let go of with its template and volume: deleting those here ends it.",
        )
        delete_pod_and_wait(ctx, s, pod.id)
    for attempt in s.journal.pending():
        if tag_in_pod_name(attempt.pod_name) != tag or not uses(
            attempt.body.template_id, attempt.body.volume_id
        ):
            continue
        with api_errors("reconciling an unrecorded rent"):
            found = find_rented_pod(s.client, attempt)
        if found is not None and found.outcome == "rented" and found.pod_id:
            ctx.log.warn("deleting a pod Terraform never recorded", pod=found.pod_id, name=attempt.pod_name)
            delete_pod_and_wait(ctx, s, found.pod_id)
        s.journal.forget(attempt.pod_name)
