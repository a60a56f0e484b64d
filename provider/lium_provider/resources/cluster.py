"""``lium_cluster``: whole GPU nodes of one RDMA fabric, rented all or nothing as one multi-node cluster.

The most expensive thing a stack rents, so it has every guarantee ``lium_pod`` has, for every member at
once: the members are in Terraform's state the moment Lium names them (a failed, timed-out or cancelled
wait still leaves them tracked); each carries a provisional removal deadline covering the create's
timeout, set before any wait; a create abandoned by Terraform (killed, gone) removes the cluster; an
uncertain rental is reconciled by the Lium name every member carries (this stack's tag and what the
rental asks for), never sent again blindly, and a fresh runner adopts what a killed run rented; another
stack's cluster is refused at plan and left alone by destroy (:mod:`lium_provider.resources.ownership`).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from lium_provider.api.client import RENT_IDEMPOTENCY
from lium_provider.api.clusters import ClusterRental, ClusterRentRequest
from lium_provider.api.errors import NO_CAPACITY_CODES, LiumError, is_definitive
from lium_provider.api.models import (
    DEAD_POD_STATES,
    DELETED,
    DELETING,
    POD_GONE_TIMEOUT,
    RUNNING,
    Pod,
    is_lium_id,
)
from lium_provider.domain.cluster_placement import ClusterChoice, choose_cluster, fits_once_freed
from lium_provider.domain.offer_filter import OfferFilter
from lium_provider.domain.removal import (
    HOUR,
    imported_schedule,
    parse_time,
    removal_at,
    rent_hours,
    rfc3339,
    set_removal,
)
from lium_provider.domain.stack import lium_pod_name, parse_lium_pod_name, tag_in_pod_name
from lium_provider.resources.authorized_keys import plan_same_keys, rented_keys
from lium_provider.resources.cluster_members import (
    check_cluster_template,
    delete_cluster_and_wait,
    members_of,
    members_under_id,
    newest_cluster_template,
    wait_for_members,
)
from lium_provider.resources.cluster_model import (
    DEGRADED,
    PLACEMENT,
    ClusterModel,
    ClusterNodeModel,
    cluster_digest,
    cluster_filter,
    host_keys,
    members_mark,
    members_schedule,
    members_state,
)
from lium_provider.resources.common import (
    api_errors,
    check_access_on_create,
    import_by_lium_id,
    undo_abandoned,
    with_plan_rules,
)
from lium_provider.resources.ownership import (
    check_before_change,
    claim_create_name,
    claim_lium_name,
    hold_at_delete,
    left_alone_at_delete,
    plan_ownership,
    refreshed_ownership,
)
from lium_provider.resources.pod import LIUM_NAME_KEY
from lium_provider.resources.pod_lifecycle import warn_if_stopped_by_budget
from lium_provider.resources.removal_plan import create_seconds_left, plan_default_hours, plan_removal
from lium_provider.resources.served_ports import wait_for_ports
from lium_provider.resources.visibility import check_not_hidden
from lium_provider.session import LiumSession, session
from lium_provider.sshkeys import public_key_line
from tfbridge import (
    Context,
    PlanChange,
    RequiresReplace,
    Resource,
    Schema,
    TFError,
    UseStateForUnknown,
    outliving_the_host,
)
from tfbridge.schema import PlanRule

_REPLACE = (RequiresReplace(),)
_KEEP = (UseStateForUnknown(),)
LISTING_WAIT_SECONDS = 60.0  # how long the pod listing may lag a cluster rental
LISTING_POLL_SECONDS = 2.0  # within Lium's ~60 listings a minute per account
# Rentals of one cluster create while other renters take its chosen nodes: each refused one frees nothing,
# and the offers are read again before the next.
CLUSTER_RENT_ATTEMPTS = 3


@dataclasses.dataclass(frozen=True)
class _Rented:
    """What a rental left: its fabric, the cluster and members Lium's answer named, and the members
    themselves when they were already listed (an uncertain answer is settled by the listing)."""

    fabric_id: str | None
    cluster_id: str | None
    pod_ids: list[str]
    members: list[Pod] | None = None


def _rented_state(state: ClusterModel, cluster_id: str, pod_ids: list[str]) -> ClusterModel:
    """The state of a cluster known from its rental (its answer, or its listed members): its id and its
    members' pod ids."""
    nodes = [ClusterNodeModel(pod_id=pod_id, node_index=rank) for rank, pod_id in enumerate(pod_ids)]
    return state.model_copy(update={"id": cluster_id, "nodes": nodes, "status": DEGRADED})


def _plan_unrecorded_placement(change: PlanChange[ClusterModel], prior: ClusterModel) -> None:
    """A cluster this state's create did not place (imported, or adopted after an interrupted run: no
    ``fabric_id`` recorded) takes the fabric and filter its configuration names into the state in place:
    they are unknown, not changed, and replacing a running cluster over them would end its work."""
    if prior.fabric_id is not None:  # placed by this state's create: every change is a real one
        return
    for name in PLACEMENT:
        if getattr(prior, name) is None and not change.config_is_null(name):
            change.keep_in_place(name)


# The key, in a replaced cluster's planned private record, of the nodes its deletion frees.
_FREED = "frees"


def _with_freed_nodes(private: bytes, fabric_id: str | None, count: int) -> bytes:
    try:
        record = json.loads(private) if private else {}
    except ValueError:
        record = {}
    return json.dumps({**(record if isinstance(record, dict) else {}), _FREED: [fabric_id, count]}).encode()


def _freed_nodes(private: bytes) -> tuple[str | None, int] | None:
    """What the cluster this create replaces frees (its fabric, its node count); None for a plain create."""
    try:
        freed = json.loads(private).get(_FREED) if private else None
    except (ValueError, AttributeError):
        return None
    if not isinstance(freed, list) or len(freed) != 2 or not isinstance(freed[1], int):
        return None
    return (freed[0] if isinstance(freed[0], str) else None), freed[1]


def as_list(keys: str | list[str]) -> list[str]:
    """A cluster rental's ``user_public_key`` is always a list (Lium's SDK sends it so)."""
    return [keys] if isinstance(keys, str) else keys


class ClusterResource(Resource[ClusterModel]):
    type_name = "lium_cluster"
    model = ClusterModel
    description = inspect.cleandoc(ClusterModel.__doc__ or "")
    default_timeouts = {"create": 1800.0, "read": 300.0, "update": 300.0, "delete": POD_GONE_TIMEOUT}

    @classmethod
    def schema(cls) -> Schema:
        """The model's schema, with every offer-filter field forcing replacement: the filter chose the
        nodes, and a cluster cannot move (the shared fields carry no plan rule of their own)."""
        # gpu_count is the cluster's own field, already replacing
        rules: dict[str, tuple[PlanRule, ...]] = {
            name: _REPLACE for name in OfferFilter.fields() if name != "gpu_count"
        }
        # The shared gpu is computed (a pod records the GPU it rented) but a cluster never sets it: unset,
        # it keeps its null state, or it would be unknown, and force a replacement, in every change.
        rules["gpu"] = (*_KEEP, *_REPLACE)
        return with_plan_rules(super().schema(), rules)

    # -- plan ------------------------------------------------------------------------------------

    def modify_plan(self, ctx: Context, change: PlanChange[ClusterModel]) -> None:
        plan_ownership(ctx, change, self.type_name)
        check_access_on_create(ctx, change)
        plan_default_hours(ctx, change)
        prior = change.prior
        if prior is None:
            self._plan_create(ctx, change)
            return
        _plan_unrecorded_placement(change, prior)
        plan_same_keys(change, prior)
        if prior.status != RUNNING:
            change.set_unknown("status")
            change.require_replace("status")
        if not change.requires_replace:
            plan_removal(change, prior, "cluster")
        else:  # the plan of the create that replaces it gets this record: it may count these nodes
            ctx.private = _with_freed_nodes(ctx.private, prior.fabric_id, len(prior.nodes or []))
        if prior.lium_name:
            claim_lium_name(ctx, change, (LIUM_NAME_KEY, prior.lium_name), prior.lium_name)

    def _plan_create(self, ctx: Context, change: PlanChange[ClusterModel]) -> None:
        """A create's template (Lium's newest cluster template unless set) and its Lium name; when the
        placement is known, an error if no fabric could take the cluster now (for the create that
        replaces a cluster, not even once that cluster's nodes are free again: then a warning)."""
        claim_create_name(ctx, change, self.type_name)
        s = session(ctx)
        if change.config_is_null("template_id"):
            with api_errors("finding Lium's cluster template"):
                change.set_planned("template_id", newest_cluster_template(s.client).id)
        elif not change.is_unknown("template_id"):
            with api_errors("reading the cluster's template", path=("template_id",)):
                check_cluster_template(s.client, change.planned.template_id or "")
        if any(change.is_unknown(n) for n in ("name", "template_id", "node_count")) or any(
            change.config_is_unknown(n)
            for n in ("fabric_id", "ssh_public_key", "authorized_keys", *OfferFilter.fields())
        ):
            change.set_unknown("lium_name")
        else:
            lium_name = lium_pod_name(
                change.planned.name, s.stack_tag, cluster_digest(change.planned, change.config)
            )
            claim_lium_name(ctx, change, (LIUM_NAME_KEY, lium_name), lium_name)
            change.set_planned("lium_name", lium_name)
        # The nodes are chosen at apply (the cheapest then), so the price is known only after it.
        change.set_unknown("price_per_hour")
        if change.is_unknown("node_count") or any(
            change.config_is_unknown(n) for n in (*OfferFilter.fields(), "fabric_id")
        ):
            return
        try:
            self._choose(ctx, change.planned)
        except TFError as shortage:
            freed = _freed_nodes(ctx.private)
            if freed is None or not self._fits_once_freed(ctx, change.planned, freed):
                raise
            # The nodes of the cluster this create replaces are not listed while it runs: they may
            # make it fit once it is deleted first (not under create_before_destroy).
            ctx.warn(
                shortage.summary + " now",
                shortage.detail + " It fits only once the nodes of the cluster it replaces are free again "
                "(without `create_before_destroy`); the apply checks again.",
                path=tuple(shortage.path) if shortage.path is not None else None,
            )

    def _fits_once_freed(self, ctx: Context, plan: ClusterModel, freed: tuple[str | None, int]) -> bool:
        s = session(ctx)
        with api_errors("searching Lium's cluster offers"):
            offers, feed = s.client.cluster_offers(), s.placement.offers()
        return fits_once_freed(offers, feed, cluster_filter(plan), plan.node_count, plan.fabric_id, freed)

    def _choose(self, ctx: Context, plan: ClusterModel, taken: frozenset[str] = frozenset()) -> ClusterChoice:
        """The fabric and nodes the cluster would get now, without the nodes ``taken`` (a refused rental
        named them); the error says what is on offer."""
        s = session(ctx)
        with api_errors("searching Lium's cluster offers"):
            listed = s.client.cluster_offers()
            feed = s.placement.offers()
        offers = [
            o.model_copy(update={"nodes": [n for n in o.nodes if n.id not in taken]}) if taken else o
            for o in listed
        ]
        choice = choose_cluster(offers, feed, cluster_filter(plan), plan.node_count, plan.fabric_id)
        if choice is None:
            free = ", ".join(f"{o.fabric_id}: {len(o.nodes)} free" for o in offers) or "none"
            narrowing = [n for n in OfferFilter.fields() if getattr(plan, n) is not None]
            wanted = [f"{n} = {json.dumps(getattr(plan, n))}" for n in narrowing]
            # what to look at first: the fabric asked for, else the first filter field, else the count
            blamed = "fabric_id" if plan.fabric_id else next(iter(narrowing), "node_count")
            raise TFError(
                "No Lium fabric has enough free nodes for the cluster",
                f"Searched for {plan.node_count} whole free nodes of one fabric"
                + (f" (fabric {plan.fabric_id})" if plan.fabric_id else "")
                + (f" with {', '.join(wanted)}" if wanted else "")
                + f". Fabrics on offer: {free}.",
                path=(blamed,),
            )
        return choice

    # -- create ----------------------------------------------------------------------------------

    def create(self, ctx: Context, plan: ClusterModel, config: ClusterModel) -> ClusterModel:
        s = session(ctx)
        public_key = plan.ssh_public_key or public_key_line(s.require_ssh_key("lium_cluster.ssh_public_key"))
        template_id = plan.template_id
        if template_id is None:
            with api_errors("finding Lium's cluster template"):
                template_id = newest_cluster_template(s.client).id
        else:  # the configuration's, known perhaps only now (a template created in the same apply)
            with api_errors("reading the cluster's template", path=("template_id",)):
                check_cluster_template(s.client, template_id)
        state = plan.model_copy(
            update={"ssh_public_key": public_key, "template_id": template_id, "timeouts": plan.timeouts}
        )
        tag = plan.stack_tag or s.stack_tag  # as planned: the state's tag may be read otherwise now
        lium_name = plan.lium_name or lium_pod_name(plan.name, tag, cluster_digest(state, config))
        state = state.model_copy(update={"lium_name": lium_name})
        adopted = self._adopt_unrecorded(ctx, s, state)
        if adopted is not None:
            rented = _Rented(state.fabric_id, adopted[0].cluster_id, [p.id for p in adopted], adopted)
        else:
            rented = self._rent(ctx, s, state, config)
            state = state.model_copy(update={"fabric_id": rented.fabric_id})
        cluster_id = rented.cluster_id or ""
        # The members Lium named, tracked from here on when it also named the cluster: a Ctrl-C or a
        # failed listing below still leaves every paid member in the state (tainted) for the next destroy.
        state = _rented_state(state, cluster_id, rented.pod_ids)
        if cluster_id:
            ctx.record(state)
        try:
            if state.nodes:  # first: Lium removes them itself if this create never finishes
                state = self._set_provisional_deadline(ctx, s, state)
                if cluster_id:
                    ctx.record(state)
            members = rented.members or self._members_rented(ctx, s, state, rented.pod_ids)
            cluster_id = members[0].cluster_id or ""
            unscheduled = state.removal_scheduled_at is None
            state = members_state(state.model_copy(update={"id": cluster_id}), members, {})
            ctx.record(state)  # from here on, Terraform tracks every paid member whatever happens next
            if unscheduled:  # the answer named no member: scheduled as soon as they are listed
                state = self._set_provisional_deadline(ctx, s, state)
                ctx.record(state)
            return self._wait_until_ready(ctx, s, state)
        except BaseException:
            if ctx.abandoned and cluster_id:  # no state will ever hold it: it must not outlive the process
                self._delete_abandoned(ctx, s, cluster_id)
            raise

    def _rent(self, ctx: Context, s: LiumSession, state: ClusterModel, config: ClusterModel) -> _Rented:
        """Rent the cheapest fitting nodes: what Lium's answer names (the members are listed by the
        caller, once it tracks them), or the members found by their Lium name when the answer got lost.

        A node another renter took meanwhile refuses the whole rental (a capacity code such as
        ``node_unavailable``): nothing was rented, so the offers are read again and the fabric's other free
        nodes (or another fabric that fits) are rented instead, as a pod's rent falls back to its next
        offer, up to :data:`CLUSTER_RENT_ATTEMPTS` rentals."""
        taken: frozenset[str] = frozenset()
        attempt = 1
        while True:
            ctx.check()
            choice = self._choose(ctx, state.model_copy(update={"fabric_id": config.fabric_id}), taken)
            try:
                return self._rent_nodes(ctx, s, state, choice)
            except LiumError as exc:  # a definitive refusal: nothing was rented
                if exc.code not in NO_CAPACITY_CODES or attempt == CLUSTER_RENT_ATTEMPTS:
                    raise TFError("Lium refused the cluster rental", str(exc)) from None
                # The node the refusal names (when it names one) is left out even if the listing lags.
                taken |= {n.executor_id for n in choice.nodes if n.executor_id in exc.message}
                ctx.log.info("a node of the cluster was taken meanwhile: choosing again", error=str(exc))
                attempt += 1

    def _rent_nodes(
        self, ctx: Context, s: LiumSession, state: ClusterModel, choice: ClusterChoice
    ) -> _Rented:
        """One rental of ``choice``'s nodes; a definitive refusal is raised as the :class:`LiumError`."""
        body = ClusterRentRequest(
            pod_name=state.lium_name or state.name,
            template_id=state.template_id or "",
            executor_uuids=[n.executor_id for n in choice.nodes],
            user_public_key=as_list(rented_keys(state.ssh_public_key or "", state.authorized_keys)),
            initial_port_count=2,
        )
        key = str(uuid.uuid4())
        try:
            # A cluster rental carries no removal deadline: killed meanwhile, the create still learns
            # what Lium rented, and removes it (see create).
            with outliving_the_host(s.client.request_timeout):
                rental = s.client.rent_cluster(body, idempotency_key=key)
        except LiumError as exc:
            if is_definitive(exc):
                raise
            # Looked for by name first; where the server keeps keys, the same order is then sent again
            # (a rental that did happen is answered 409 for good, one that did not is taken once), and
            # the members it names are returned unlisted, so the caller records them and sets their
            # deadline before anything else can fail. Then the listing is watched for a while, as it may
            # lag. Until then a listing that fails is one that does not show the cluster yet: this is
            # the only way to find a cluster that carries no removal deadline yet.
            resendable = RENT_IDEMPOTENCY in s.client.version_features()
            found = self._await_members(
                ctx, s, body.pod_name, state.node_count, [], wait=not resendable, patient=True
            )
            if found is None and resendable:
                replayed = self._resend(s, body, key)
                if replayed is not None and replayed.pod_ids:
                    return _Rented(choice.fabric_id, replayed.cluster_id, replayed.pod_ids)
                found = self._await_members(ctx, s, body.pod_name, state.node_count, [], patient=True)
            if found is None:
                raise TFError(
                    "The cluster rental's outcome is unknown",
                    f"{exc}. No cluster named {body.pod_name} is listed; the next apply adopts it if it was "
                    "rented (its members carry this stack's name) and sets its removal deadline. Nothing "
                    "was rented a second time.",
                ) from None
            return _Rented(choice.fabric_id, found[0].cluster_id, [p.id for p in found], found)
        return _Rented(choice.fabric_id, rental.cluster_id, rental.pod_ids)

    def _members_rented(
        self, ctx: Context, s: LiumSession, state: ClusterModel, pod_ids: list[str]
    ) -> list[Pod]:
        """The members of the cluster just rented, as the listing shows them once it has caught up."""
        lium_name = state.lium_name or state.name
        found = self._await_members(ctx, s, lium_name, state.node_count, pod_ids)
        if found is None:
            raise TFError(
                "Lium rented the cluster but does not list all its members",
                f"Pods {', '.join(pod_ids) or '(not named)'} were rented as cluster {lium_name}: the next "
                "apply adopts it by that name; nothing was rented a second time.",
            )
        return found

    def _resend(self, s: LiumSession, body: ClusterRentRequest, key: str) -> ClusterRental | None:
        """The same order with the same key: Lium replays the first answer, or takes the order once."""
        try:
            return s.client.rent_cluster(body, idempotency_key=key)
        except LiumError as exc:
            if is_definitive(exc) and exc.idempotent_replayed:
                raise TFError("Lium refused the cluster rental", str(exc)) from None
            return None  # still no answer: looked for by name, never ordered with a new key

    def _await_members(
        self,
        ctx: Context,
        s: LiumSession,
        lium_name: str,
        count: int,
        pod_ids: list[str],
        *,
        wait: bool = True,
        patient: bool = False,
    ) -> list[Pod] | None:
        """The members of the cluster just rented, once all ``count`` are listed (the listing may lag the
        rental): those ``pod_ids`` when Lium named them, else this stack's only complete cluster of
        ``lium_name`` (any earlier one was adopted or removed before the rental). None after
        :data:`LISTING_WAIT_SECONDS`, or after one listing without ``wait``. A ``patient`` wait takes a
        listing that fails for one that does not show the members yet."""
        deadline = time.monotonic() + LISTING_WAIT_SECONDS
        while True:
            try:
                with api_errors("listing the cluster's members"):
                    pods = s.client.list_pods()
            except TFError as failed:
                if not patient:
                    raise
                ctx.log.warn("the listing failed while looking for the cluster", error=failed.detail)
                pods = []
            if pod_ids:
                members = [p for p in pods if p.id in pod_ids]
                if len(members) == len(pod_ids) and len({p.cluster_id for p in members}) == 1:
                    return sorted(members, key=lambda p: p.cluster_node_index or 0)
            else:
                complete = [m for m in members_of(pods, lium_name, None).values() if len(m) == count]
                if len(complete) == 1:
                    return complete[0]
            if not wait or time.monotonic() >= deadline:
                return None
            ctx.sleep(LISTING_POLL_SECONDS)

    def _adopt_unrecorded(self, ctx: Context, s: LiumSession, state: ClusterModel) -> list[Pod] | None:
        """A cluster an earlier, killed run of this stack rented for this instance: its members carry this
        create's Lium name (name, stack tag and rental digest). Complete, it is adopted; short of members
        (one was removed by hand), it is removed first. A cluster of any other name is never touched."""
        with api_errors("looking for a cluster an interrupted run rented"):
            pods = s.client.list_pods()
        for cluster_id, members in members_of(pods, state.lium_name or "", None).items():
            if len(members) == state.node_count and all(p.status not in DEAD_POD_STATES for p in members):
                ctx.log.info("adopting a cluster an interrupted run of this stack rented", cluster=cluster_id)
                return members
            ctx.log.warn(
                "removing this stack's unrecorded cluster that is short of members", cluster=cluster_id
            )
            delete_cluster_and_wait(ctx, s, cluster_id, [p.id for p in members])
        return None

    def _set_provisional_deadline(self, ctx: Context, s: LiumSession, state: ClusterModel) -> ClusterModel:
        """Every member is removed by Lium itself if the create never finishes: its timeout (or the wanted
        ``termination_hours``, when shorter) from now, before any wait."""
        hours = rent_hours(state.termination_hours, create_seconds_left(ctx, self.default_timeouts["create"]))
        at = datetime.now(UTC) + hours * HOUR
        for node in state.nodes or []:
            with api_errors("setting the cluster's provisional removal deadline"):
                set_removal(s.client, node.pod_id or "", at)
        return state.model_copy(update={"removal_scheduled_at": rfc3339(at)})

    def _wait_until_ready(self, ctx: Context, s: LiumSession, state: ClusterModel) -> ClusterModel:
        """Wait for every member to run and answer SSH; a member that dies fails the cluster at once."""
        members, keys, failure = wait_for_members(ctx, s, [n.pod_id or "" for n in state.nodes or []])
        state = members_state(state, members, keys)
        if failure is not None:
            ctx.record(state)
            raise TFError(f"Cluster {state.id} did not start", failure)
        started = datetime.now(UTC)
        state = state.model_copy(update={"started_at": rfc3339(started)})
        ctx.record(state)
        self._wait_for_ports(ctx, s, state, state.wait_for_ports)
        wanted = removal_at(started, state.termination_hours)
        for node in state.nodes or []:
            with api_errors("setting the cluster's removal deadline"):
                set_removal(s.client, node.pod_id or "", wanted)
        return state.model_copy(update={"removal_scheduled_at": rfc3339(wanted)})

    def _wait_for_ports(
        self, ctx: Context, s: LiumSession, state: ClusterModel, ports: list[int] | None
    ) -> None:
        """Wait until every port of ``wait_for_ports`` answers inside every member."""
        for node in state.nodes or [] if ports else []:
            if node.ssh_host and node.ssh_port and node.ssh_host_key:
                address = (node.ssh_host, node.ssh_port)
                wait_for_ports(
                    ctx,
                    s,
                    pod_id=node.pod_id or "",
                    address=address,
                    host_key=node.ssh_host_key,
                    ports=ports or [],
                )

    def _delete_abandoned(self, ctx: Context, s: LiumSession, cluster_id: str) -> None:
        """Remove a cluster whose create was abandoned; no wait for its members (the process is exiting)."""
        error = undo_abandoned(lambda: s.client.delete_cluster(cluster_id))
        if error is not None:  # the process exits anyway: the provisional deadline remains
            ctx.log.warn(
                "could not remove the cluster of an abandoned create",
                cluster=cluster_id,
                error=type(error).__name__,
            )
            return
        ctx.log.warn(
            "removed the cluster of an abandoned create: Terraform is gone and cannot record it",
            cluster=cluster_id,
        )

    # -- update / read / delete ------------------------------------------------------------------

    def update(
        self, ctx: Context, prior: ClusterModel, plan: ClusterModel, config: ClusterModel
    ) -> ClusterModel:
        """New timeouts, or a placement the state did not record, are state only; a new removal time is set
        on every member."""
        state = prior.model_copy(
            update={
                "termination_hours": plan.termination_hours,
                "timeouts": plan.timeouts,
                "wait_for_ports": plan.wait_for_ports,
                "authorized_keys": plan.authorized_keys,  # the same keys, in another order
                "stack_tag": plan.stack_tag,
                "adopted_from": plan.adopted_from,
                **{name: getattr(plan, name) for name in PLACEMENT},
            }
        )
        if set(plan.wait_for_ports or ()) - set(prior.wait_for_ports or ()):
            self._wait_for_ports(ctx, session(ctx), state, plan.wait_for_ports)
        if plan.removal_scheduled_at != prior.removal_scheduled_at:
            check_before_change(ctx, self.type_name, prior, lambda: self._mark_now(ctx, prior), "changed")
            wanted = parse_time(plan.removal_scheduled_at)
            for node in prior.nodes or []:
                with api_errors("moving the cluster's removal"):
                    set_removal(session(ctx).client, node.pod_id or "", wanted)
        return state.model_copy(update={"removal_scheduled_at": plan.removal_scheduled_at})

    def read(self, ctx: Context, state: ClusterModel) -> ClusterModel | None:
        if not is_lium_id(state.id):
            return state  # names no cluster: the plan refuses it, a destroy forgets it
        # A member that failed to start is still listed (and is removed with the cluster): the cluster
        # is degraded, not gone, until every member is deleting or deleted.
        with api_errors("reading the cluster's members"):
            members = self._members(ctx, state)
        if not members:
            self._check_not_hidden(ctx, state)
            first = next((n.pod_id for n in state.nodes or [] if n.pod_id), None)
            if first:
                warn_if_stopped_by_budget(ctx, session(ctx), first)
            return None
        refreshed = state
        if not state.name:  # just imported: what the members say
            refreshed = self._imported(members, state)
        refreshed = members_state(refreshed, members, host_keys(state))
        schedule = members_schedule(refreshed.removal_scheduled_at, members)
        refreshed = refreshed.model_copy(update={"removal_scheduled_at": schedule})
        owner = refreshed_ownership(ctx, self.type_name, state, members_mark(state, members))
        return refreshed.model_copy(update=owner)

    def _imported(self, members: list[Pod], state: ClusterModel) -> ClusterModel:
        """An imported cluster's arguments, from what its members say (a config with them plans no change)."""
        first = members[0]
        parsed = parse_lium_pod_name(first.pod_name)
        started, hours = imported_schedule(first)
        removal = first.removal_scheduled_at
        return state.model_copy(
            update={
                "name": parsed[0] if parsed else first.pod_name,
                "lium_name": first.pod_name,
                "node_count": len(members),
                "template_id": first.template_id,
                "ssh_public_key": first.ssh_keys[0] if first.ssh_keys else None,
                "authorized_keys": list(first.ssh_keys[1:]) or None,
                "termination_hours": hours,
                "started_at": rfc3339(started),
                "removal_scheduled_at": rfc3339(removal),
            }
        )

    def delete(self, ctx: Context, state: ClusterModel) -> None:
        if not is_lium_id(state.id):
            self._delete_by_recorded_members(ctx, state)
        members: list[Pod] = []

        def mark() -> str | None:
            with api_errors("reading the cluster's members"):
                members.extend(self._members(ctx, state))
            return members_mark(state, members)

        if left_alone_at_delete(ctx, self.type_name, state, mark):
            return
        if not members:
            self._check_not_hidden(ctx, state)
        # Only the id's own members: a pod the state records under it but Lium places elsewhere is not.
        delete_cluster_and_wait(ctx, session(ctx), state.id or "", [p.id for p in members])

    def _check_not_hidden(self, ctx: Context, state: ClusterModel) -> None:
        """A cluster whose members all read as not found is gone only if this key could see them."""
        first = next((n.pod_id for n in state.nodes or [] if n.pod_id), None)
        if first:
            check_not_hidden(
                ctx, session(ctx), f"Cluster {state.id}", first, state.api_key_id, state.workspace_id
            )

    def _members(self, ctx: Context, state: ClusterModel) -> list[Pod]:
        """The cluster's live members, those Lium groups under its id (:func:`members_under_id`); a member
        that failed to start is one until it is deleted: the cluster is degraded, not gone."""
        recorded = [n.pod_id for n in state.nodes or [] if n.pod_id]
        return members_under_id(ctx, session(ctx), state.id or "", recorded)

    def _mark_now(self, ctx: Context, state: ClusterModel) -> str | None:
        """The stack tag the cluster's members carry in Lium now (None: all gone)."""
        with api_errors("reading the cluster's members"):
            return members_mark(state, self._members(ctx, state))

    def _delete_by_recorded_members(self, ctx: Context, state: ClusterModel) -> None:
        """A damaged id with this stack's members recorded beside it: the clusters those pods are members
        of, when every member carries this stack's tag, are removed (a paid cluster is not left running
        because its id was lost); any other is left alone, as any delete leaves another stack's."""
        s = session(ctx)
        ours = (state.stack_tag or s.stack_tag, state.adopted_from)
        recorded = [n.pod_id for n in state.nodes or [] if is_lium_id(n.pod_id)]
        with api_errors("looking for the cluster by its recorded members"):
            listing = s.client.list_pods()
            ids = {
                p.cluster_id
                for p in listing
                if p.cluster_id and (p.id in recorded or p.pod_name == state.lium_name)
            }
            for cluster_id in sorted(i for i in ids if i):
                members = [
                    p for p in listing if p.cluster_id == cluster_id and p.status not in (DELETING, DELETED)
                ]
                if not members or any(tag_in_pod_name(p.pod_name) not in ours for p in members):
                    continue
                ctx.warn(
                    f"Removed this stack's cluster {cluster_id} by its recorded members",
                    f"The state's id was unusable; the cluster its members ({state.lium_name}, this "
                    "stack's) belong to was found in Lium and removed.",
                )
                delete_cluster_and_wait(ctx, s, cluster_id, [p.id for p in members])

    def plan_delete(self, ctx: Context, prior: ClusterModel) -> None:
        if prior.lium_name:
            hold_at_delete(ctx, (LIUM_NAME_KEY, prior.lium_name), prior.lium_name)

    def end_unrecorded(self, ctx: Context, config: ClusterModel) -> None:
        """During a destroy, a cluster this instance's interrupted create rented and no state records
        (its members carry the Lium name its create would give it, with this stack's tag) is removed:
        a cluster rental carries no removal deadline until its create sets one member by member."""
        s = session(ctx)
        if not config.name or not config.node_count:
            return
        with api_errors("looking for a cluster an interrupted create of this stack rented"):
            template_id = config.template_id or newest_cluster_template(s.client).id
            named = config.model_copy(update={"template_id": template_id})
            lium_name = lium_pod_name(config.name, s.stack_tag, cluster_digest(named, config))
            clusters = members_of(s.client.list_pods(), lium_name, None)
        for cluster_id, members in sorted(clusters.items()):
            ctx.log.warn(
                "removing a cluster an interrupted create rented and no state records", cluster=cluster_id
            )
            ctx.warn(
                f"Removed cluster {cluster_id} ({lium_name}), which no state records",
                "An interrupted create of this lium_cluster rented it (its members' Lium name carries this "
                "stack's tag), and this destroy ends it.",
            )
            delete_cluster_and_wait(ctx, s, cluster_id, [p.id for p in members])

    def import_state(self, ctx: Context, import_id: str) -> dict[str, Any]:
        return import_by_lium_id(self.type_name, import_id)
