"""``lium_pod``: a rented GPU pod. The one resource that costs money by the second, so the careful one.

Create picks the cheapest matching offer at apply time, rents it with an idempotency key (falling back to
the next offer on a no-capacity refusal), and records the pod in Terraform's state the moment Lium names
it: a failed, timed-out or cancelled wait afterwards still leaves the pod tracked, so ``destroy`` removes
it. Uncertain rent outcomes are reconciled (pod list, account events, idempotent replay), never retried
blindly. Every rent attempt is journalled on disk before it is sent (see :mod:`lium_provider.domain.journal`).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from lium_provider.api.errors import LiumError, LiumUncertainOutcome
from lium_provider.api.models import (
    DEAD_POD_STATES,
    DELETED,
    DELETING,
    POD_GONE_TIMEOUT,
    RUNNING,
    Pod,
    RentRequest,
    is_lium_id,
)
from lium_provider.api.rent import RentAttempt, find_rented_pod, rent_reconciled
from lium_provider.domain.offer_filter import OfferFilter, display_gpu_name, same_gpu, same_gpu_name
from lium_provider.domain.removal import (
    imported_schedule,
    parse_time,
    removal_at,
    rent_hours,
    rfc3339,
    same_schedule,
    set_removal,
    started_at,
)
from lium_provider.domain.stack import lium_pod_name, tag_in_pod_name
from lium_provider.resources.authorized_keys import plan_same_keys, rented_keys
from lium_provider.resources.common import (
    api_errors,
    check_access_on_create,
    import_by_lium_id,
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
from lium_provider.resources.pod_import import (
    imported_fields,
    lium_stacks_name,
    plan_first_apply,
    refuse_cluster_member,
)
from lium_provider.resources.pod_lifecycle import (
    delete_abandoned_pod,
    delete_pod_and_wait,
    failure_reason,
    pod_gone,
    started_or_dead,
    wait_for_host_key,
    warn_if_stopped_by_budget,
)
from lium_provider.resources.pod_model import (
    PodModel,
    pod_facts,
    pod_rent_digest,
    refilter_replacements,
)
from lium_provider.resources.pod_notebook import (
    check_template_publishes,
    install_notebook,
    plan_notebook,
    refreshed_notebook,
)
from lium_provider.resources.pod_private import PodPrivate
from lium_provider.resources.pod_restore import wait_for_restore
from lium_provider.resources.pod_switch import plan_switch, switch_container, switching
from lium_provider.resources.removal_plan import create_seconds_left, plan_default_hours, plan_removal
from lium_provider.resources.served_ports import wait_for_ports
from lium_provider.resources.visibility import KEPT_IN_STATE, NOT_IMPORTED, NOT_RENTED_AGAIN, check_not_hidden
from lium_provider.session import LiumSession, session
from lium_provider.sshkeys import fetch_host_key, fingerprint, known_hosts_line, public_key_line
from tfbridge import (
    ConfigView,
    Context,
    Diagnostic,
    PlanChange,
    RequiresReplace,
    Resource,
    Schema,
    TFError,
    UseStateForUnknown,
    outliving_the_host,
)
from tfbridge.schema import PlanRule

if TYPE_CHECKING:  # gpuhunt costs ~100 ms to import: only plans and creates that search offers load it
    from lium_provider.domain.offers import Offer

# The pod's plan rules for fields of the shared offer filter (see PodResource.schema).
FILTER_PLAN_RULES: dict[str, tuple[PlanRule, ...]] = {
    "gpu_count": (RequiresReplace(),),
    "gpu": (UseStateForUnknown(),),
}
LIUM_NAME_KEY = "lium-name"
"""The kind of name a pod's or cluster's Lium name is in the stack's register of names (one namespace:
Lium's pod names)."""


def _mark(pod: Pod | None) -> str | None:
    """The stack tag a pod carries in Lium: the one in its Lium name, whatever else the name says."""
    return tag_in_pod_name(pod.pod_name) if pod is not None else None


def _apply_pod(state: PodModel, pod: Pod) -> PodModel:
    target = pod.ssh_host_port()
    switched = {}
    if pod.template_id and state.template_id and pod.template_id != state.template_id:
        # Switched since the state was written (a switch killed half-way, or done outside Terraform):
        # the pod runs a new container, whose host key is pinned again.
        switched = {"template_id": pod.template_id, "ssh_host_key": None}
    return state.model_copy(
        update={
            **switched,
            "status": pod.status,
            "executor_id": pod.executor_id or state.executor_id,
            "price_per_hour": pod.price if pod.price is not None else state.price_per_hour,
            "ssh_host": target[0] if target else state.ssh_host,
            "ssh_port": target[1] if target else state.ssh_port,
            "ports": dict(pod.ports_mapping) if pod.ports_mapping else state.ports,
            "api_key_id": pod.api_key_id or state.api_key_id,
            "workspace_id": pod.workspace_id or state.workspace_id,
        }
    )


def _plan_filter_change(change: PlanChange[PodModel], prior: PodModel, rented: PodPrivate) -> None:
    """A running pod's offer filter: keep a respelled ``gpu``; re-rent for what the pod no longer meets."""
    if _same_gpu_respelled(change.planned.gpu, prior.gpu):
        change.set_planned("gpu", prior.gpu)  # Terraform takes the prior value as equal to the configured one
        _keep_computed_if_unchanged(change, prior)
    unknown = [name for name in OfferFilter.fields() if change.is_unknown(name)]
    wanted = OfferFilter.of(dict(change.planned), validate=False)  # an unknown value reads as None
    replace = refilter_replacements(
        wanted, OfferFilter.of(dict(prior), validate=False), pod_facts(prior, rented)
    )
    # A filter known only after apply cannot be checked against the pod now: re-rent to be safe.
    for name in [*unknown, *replace]:
        change.require_replace(name)


def _pinned(state: PodModel) -> PodModel:
    """``state`` with the ``known_hosts`` line of its address and pinned host key."""
    return state.model_copy(
        update={"known_hosts": known_hosts_line(state.ssh_host, state.ssh_port, state.ssh_host_key)}
    )


def _with_schedule(state: PodModel, pod: Pod) -> PodModel:
    """Lium's removal schedule in the state (the recorded string kept while it is the same schedule), and
    a start time for a pod that has none yet (imported, or older than removal deadlines)."""
    recorded = state.removal_scheduled_at
    removal = recorded if same_schedule(parse_time(recorded), pod.removal_scheduled_at) else None
    return state.model_copy(
        update={
            "started_at": state.started_at or rfc3339(imported_schedule(pod)[0]),
            "removal_scheduled_at": removal or rfc3339(pod.removal_scheduled_at),
        }
    )


def _keep_computed_if_unchanged(change: PlanChange[PodModel], prior: PodModel) -> None:
    """With nothing left to change, computed values the plan rules marked unknown keep their prior value.

    The rules ran before ``modify_plan`` kept a respelled ``gpu``, and saw that as a change.
    """
    names = list(PodModel.model_fields)
    recomputed = [n for n in names if change.is_unknown(n) and change.config_is_null(n)]
    planned = change.planned
    if all(getattr(planned, n) == getattr(prior, n) for n in names if n not in recomputed):
        for name in recomputed:
            change.set_planned(name, getattr(prior, name))


def _same_gpu_respelled(planned: object, prior: object) -> bool:
    """True when the configured ``gpu`` names the recorded GPU in another spelling (``RTX 3090``)."""
    return (
        isinstance(planned, str)
        and isinstance(prior, str)
        and planned != prior
        and same_gpu_name(planned, prior)
    )


class PodResource(Resource[PodModel]):
    type_name = "lium_pod"
    model = PodModel
    description = inspect.cleandoc(PodModel.__doc__ or "")
    default_timeouts = {"create": 1800.0, "read": 300.0, "update": 300.0, "delete": POD_GONE_TIMEOUT}

    @classmethod
    def schema(cls) -> Schema:
        """The model's schema plus :data:`FILTER_PLAN_RULES`: ``gpu_count`` forces replacement (a pod's
        GPUs are fixed at rent), and ``gpu`` (the GPU rented) keeps its state when unknown.

        The fields are declared once, on the offer filter ``lium_offers`` shares; a data source has no
        plan, so these resource-only rules are added here rather than on the shared fields.
        """
        return with_plan_rules(super().schema(), FILTER_PLAN_RULES)

    # -- plan ------------------------------------------------------------------------------------

    def validate_config(self, config: ConfigView[PodModel]) -> list[Diagnostic]:
        # A backup is restored into a directory; a directory with no backup (yet: `latest_completed_id` is
        # null until one completes) restores nothing, and must not stop a plan or a destroy.
        if not config.is_null("restore_backup_id") and config.is_null("restore_path"):
            return [
                Diagnostic.error(
                    "restore_backup_id needs restore_path",
                    "A restore needs the directory the backup is restored into: set restore_path.",
                    ("restore_path",),
                )
            ]
        if config.is_null("executor_id"):
            return []
        # `gpu` may name the executor's GPU (as `-generate-config-out` writes it): checked at plan.
        chosen = [n for n in OfferFilter.search_fields() if n != "gpu" and not config.is_null(n)]
        if not chosen:
            return []
        return [
            Diagnostic.error(
                "Choose either executor_id or an offer filter",
                f"`executor_id` places the pod on one node; the filter ({', '.join(chosen)}) asks for the "
                "cheapest match. Set one of them.",
                ("executor_id",),
            )
        ]

    def modify_plan(self, ctx: Context, change: PlanChange[PodModel]) -> None:
        plan_ownership(ctx, change, self.type_name)
        check_access_on_create(ctx, change)
        plan_default_hours(ctx, change)
        prior = change.prior
        self._check_template(ctx, change, prior)
        if prior is None:
            self._plan_lium_name(ctx, change)
            self._check_offers_exist(ctx, change)
            plan_notebook(ctx, change, None, switched=False)
            if change.config_is_null("enable_backups"):
                change.set_planned("enable_backups", False)
            return
        # A new template (or a failed switch) switches the container in place; any other dead pod is
        # re-rented.
        switched = plan_switch(change, prior)
        plan_notebook(ctx, change, prior, switched)
        if prior.enable_backups is None:  # imported: Lium does not say, so what is configured is recorded
            change.keep_in_place("enable_backups")
        if not switched and prior.status in DEAD_POD_STATES:
            change.set_unknown("status")
            change.require_replace("status")
        self._check_executor_gpu(ctx, change)
        record = PodPrivate.from_private(ctx.private)
        if record.imported:
            plan_first_apply(ctx, change, prior, lambda: self._authorised_keys(ctx, prior))
        _plan_filter_change(change, prior, record)
        plan_same_keys(change, prior)
        if not change.requires_replace:
            plan_removal(change, prior, "pod")
        if prior.lium_name:
            claim_lium_name(ctx, change, (LIUM_NAME_KEY, prior.lium_name), prior.lium_name)

    def _check_template(self, ctx: Context, change: PlanChange[PodModel], prior: PodModel | None) -> None:
        """A template to rent or switch to must exist: the plan fails naming it, before a rent or a switch
        (which would first replace the pod's runner) is tried."""
        if change.is_unknown("template_id") or not isinstance(ctx.provider, LiumSession):
            return
        wanted = change.planned.template_id
        if prior is not None and wanted == prior.template_id:
            return
        with api_errors("reading the pod's template", path=("template_id",)):
            visible = ctx.provider.template_visible(wanted)
        if not visible:
            raise TFError(
                "The pod's template does not exist",
                f"No template {wanted} is visible to this API key (Lium's public templates and this "
                "account's own). Nothing was rented or switched.",
                path=("template_id",),
            )

    def _authorised_keys(self, ctx: Context, prior: PodModel) -> tuple[str, ...]:
        with api_errors("reading the pod's authorised keys"):
            pod = session(ctx).watcher.current(ctx, prior.id or "")
        return pod.ssh_keys if pod is not None else ()

    def _plan_lium_name(self, ctx: Context, change: PlanChange[PodModel]) -> None:
        """A create's Lium name, known at plan time when what it hashes is known; a second create of one
        name in this stack, or of a Lium name an object of the state has (this provider process plans
        the whole run), is refused."""
        if change.is_unknown("name"):
            change.set_unknown("lium_name")
            return
        name = change.planned.name
        claim_create_name(ctx, change, self.type_name)
        if any(change.is_unknown(n) for n in ("template_id", "gpu_count", "volume_id")) or any(
            change.config_is_unknown(n) for n in ("executor_id", "ssh_public_key", "authorized_keys")
        ):
            change.set_unknown("lium_name")  # named at create, from the same fields
            return
        lium_name = lium_pod_name(
            name, session(ctx).stack_tag, pod_rent_digest(change.planned, change.config)
        )
        claim_lium_name(ctx, change, (LIUM_NAME_KEY, lium_name), lium_name)
        change.set_planned("lium_name", lium_name)

    def _check_offers_exist(self, ctx: Context, change: PlanChange[PodModel]) -> None:
        """Creating by filter: check now that something matches, so `plan` fails, not a later `apply`;
        on a chosen executor, that a `gpu` set beside it names the executor's GPU."""
        if change.is_unknown("gpu_count"):
            return
        if not change.config_is_null("executor_id"):
            self._check_executor_gpu(ctx, change)
            return
        if any(change.config_is_unknown(n) for n in OfferFilter.search_fields()):
            return
        self._matching_offers(ctx, change.config)  # gpu_count: the default when unset, as planned

    def _check_executor_gpu(self, ctx: Context, change: PlanChange[PodModel]) -> None:
        """A `gpu` beside `executor_id` must name that executor's GPU: the running pod's, else its offer's
        (an executor whose GPUs are all rented is not listed, and is not checked until the rent)."""
        config = change.config
        if config.gpu is None or config.executor_id is None or change.config_is_unknown("gpu"):
            return
        prior = change.prior
        if prior is not None and prior.executor_id == config.executor_id and prior.gpu:
            gpus = [(prior.gpu, PodPrivate.from_private(ctx.private).gpu_memory_gib)]
        else:
            with api_errors("searching Lium offers"):
                offers = session(ctx).placement.offers()
            gpus = [(o.gpu_model, o.gpu_memory_gib) for o in offers if o.executor_id == config.executor_id]
        if gpus and not any(same_gpu(config.gpu, gpu, memory) for gpu, memory in gpus):
            raise TFError(
                f"Executor {config.executor_id} has no {config.gpu!r} GPU",
                f"Its GPUs are {gpus[0][0]}. Beside `executor_id`, `gpu` may only name the executor's own "
                "GPU; leave it unset or choose another executor.",
                path=("gpu",),
            )

    def _matching_offers(self, ctx: Context, pod: PodModel) -> list[Offer]:
        from lium_provider.domain.offers import known_gpu_names, matches, select_offers

        s = session(ctx)
        flt = OfferFilter.of(dict(pod)).with_defaults()
        with api_errors("searching Lium offers"):
            everything = select_offers(s.placement.offers(), OfferFilter(gpu_count=flt.gpu_count))
        offers = [o for o in everything if matches(o, flt)]
        if flt.gpu and not any(
            matches(o, OfferFilter(gpu=flt.gpu, gpu_count=flt.gpu_count)) for o in everything
        ):
            names = ", ".join(sorted(display_gpu_name(n) for n in known_gpu_names(everything))) or "none"
            raise TFError(
                f"Unknown or unavailable GPU {flt.gpu!r}",
                f"No offer with {flt.gpu_count} GPU(s) of that model is listed now. GPUs on offer: {names}.",
                path=("gpu",),
            )
        if not offers:
            cheapest = min((o.price_per_hour for o in everything), default=None)
            hint = f" The cheapest offer with {flt.gpu_count} GPU(s) is ${cheapest:g}/h." if cheapest else ""
            raise TFError(
                "No Lium offer matches the pod's filter",
                f"Searched {len(everything)} offers for {flt.describe()}.{hint}",
                path=("max_price_per_hour",) if flt.max_price_per_hour is not None else None,
            )
        return offers

    # -- create ----------------------------------------------------------------------------------

    def create(self, ctx: Context, plan: PodModel, config: PodModel) -> PodModel:
        s = session(ctx)
        public_key = plan.ssh_public_key or public_key_line(s.require_ssh_key("lium_pod.ssh_public_key"))
        tag = plan.stack_tag or s.stack_tag  # as planned: the state's tag may be read otherwise now
        lium_name = plan.lium_name or lium_pod_name(plan.name, tag, pod_rent_digest(plan, config))
        state = plan.model_copy(
            update={"ssh_public_key": public_key, "timeouts": plan.timeouts, "lium_name": lium_name}
        )
        candidates: Iterable[tuple[str, PodModel, PodPrivate]]
        if plan.executor_id:
            candidates = [(plan.executor_id, state, PodPrivate())]
        else:
            candidates = (  # each claimed in turn, so concurrent creates spread (lium_provider.domain.placement)
                (
                    o.executor_id,
                    state.model_copy(
                        update={
                            "gpu": plan.gpu or o.gpu_model,
                            "region": o.region,
                            "price_per_hour": o.price_per_hour,
                        }
                    ),
                    PodPrivate.of(o),
                )
                for o in s.placement.spread(self._matching_offers(ctx, plan))
            )
        if plan.jupyter_port is not None:  # before anything is rented for a notebook that cannot work
            check_template_publishes(s, plan.template_id, plan.jupyter_port)
        adopted = self._adopt_unrecorded(ctx, s, state)
        if adopted is not None:
            pod_id, state = adopted
        else:
            pod_id, state = self._rent_first_available(ctx, s, state, candidates, public_key)
        ctx.record(state)  # from here on, Terraform tracks the paid pod whatever happens next
        try:
            return self._wait_until_ready(ctx, s, plan, state)
        except BaseException:
            if ctx.abandoned:  # no state will ever hold this pod: it must not outlive the process
                delete_abandoned_pod(ctx, s, pod_id, state.lium_name or "")
            raise

    def _wait_until_ready(self, ctx: Context, s: LiumSession, plan: PodModel, state: PodModel) -> PodModel:
        """Wait for the rented pod to run and answer SSH; the ready state, with its host key pinned."""
        pod_id = state.id or ""
        # RUNNING comes before SSH: Lium publishes ssh_connect_cmd only once the pod's sshd is set up.
        pod = s.watcher.wait(ctx, pod_id, started_or_dead)
        if pod is None or pod.status != RUNNING:
            status = pod.status if pod else "gone"
            ctx.record(state.model_copy(update={"status": pod.status if pod else DELETED}))
            raise TFError(f"Pod {pod_id} did not start ({status})", failure_reason(s, pod_id))
        state = _apply_pod(state, pod).model_copy(
            update={
                "started_at": rfc3339(started_at(pod)),
                "removal_scheduled_at": rfc3339(pod.removal_scheduled_at),
            }
        )
        if not plan.gpu:
            state = state.model_copy(update={"gpu": pod.gpu_name or state.gpu})
        ctx.record(state)
        # The journal entry stays until Terraform is known to hold the pod (the next read or delete).
        state = _pinned(state.model_copy(update={"ssh_host_key": self._wait_for_ssh(ctx, state)}))
        ctx.record(state)
        self._wait_for_ports(ctx, s, state, plan.wait_for_ports)
        state = self._replace_provisional_deadline(s, state)
        if plan.restore_backup_id:
            wait_for_restore(ctx, s, state)
        if plan.jupyter_port is not None:
            ctx.record(state.model_copy(update={"jupyter_port": None}))  # a failed install is tried again
            state = install_notebook(ctx, s, state, plan.jupyter_port)
        return state

    def _replace_provisional_deadline(self, s: LiumSession, state: PodModel) -> PodModel:
        """The create has finished: the rent's provisional removal gives way to ``termination_hours``.

        If this fails, the create fails with the pod recorded (tainted), never leaving a provisional
        deadline on a pod silently; its state keeps the provisional time, so an untainted pod's next plan
        shows the in-place update that fixes it.
        """
        wanted = removal_at(parse_time(state.started_at), state.termination_hours)
        provisional = parse_time(state.removal_scheduled_at)
        if same_schedule(wanted, provisional):
            return state
        try:
            set_removal(s.client, state.id or "", wanted)
        except LiumError as exc:
            raise TFError(
                "Setting the pod's removal deadline failed",
                f"Pod {state.id} is running, but Lium still removes it at {state.removal_scheduled_at} (the "
                "provisional deadline every rent carries) instead of "
                f"{rfc3339(wanted) if wanted else 'never'}: {exc}. The pod is in the state as tainted: the "
                "next apply replaces it; to keep it, run `terraform untaint` on it and apply, which sets "
                "the deadline in place.",
                path=("termination_hours",),
            ) from None
        return state.model_copy(update={"removal_scheduled_at": rfc3339(wanted)})

    def _adopt_unrecorded(self, ctx: Context, s: LiumSession, state: PodModel) -> tuple[str, PodModel] | None:
        """A pod an earlier, killed run of this stack rented for this instance but never handed to Terraform.

        It is this stack's instance only if its Lium name is this create's (name, stack tag and
        rent digest): found through the local journal when this machine rented it, else by that name
        among the live pods (a fresh runner). If it matches this plan it is adopted instead of renting a
        second pod; otherwise it is deleted first. A pod of any other name is never touched.
        """
        lium_name = state.lium_name or ""
        attempt = s.journal.find(lium_name)
        if attempt is not None:
            # Another key's rent (or, from an older journal, one whose key is unknown) is out of sight of a
            # key that sees only its own, and another workspace's of any key: resending its Idempotency-Key
            # as this key would rent again.
            if attempt.api_key_id or attempt.workspace_id or s.verify_access().sees_only_own_pods:
                check_not_hidden(
                    ctx,
                    s,
                    f"The pod {lium_name} an interrupted create rented",
                    "",
                    attempt.api_key_id,
                    attempt.workspace_id,
                    NOT_RENTED_AGAIN,
                )
            try:
                result = rent_reconciled(s.client, attempt, resume=True)
            except LiumError as exc:
                raise TFError(
                    "An earlier rent of this pod has an unknown outcome",
                    f"{exc}. Nothing new was rented; run apply again, or inspect with `lium-tf sweep`.",
                ) from None
            pod = s.client.get_pod(result.pod_id) if result.outcome == "rented" and result.pod_id else None
            if pod is None and result.pod_id:
                check_not_hidden(
                    ctx,
                    s,
                    f"Pod {result.pod_id}",
                    result.pod_id,
                    attempt.api_key_id,
                    attempt.workspace_id,
                    NOT_RENTED_AGAIN,
                )
            s.journal.forget(lium_name)
        else:
            with api_errors("looking for a pod an interrupted run rented"):
                earlier = s.earlier_pod(lium_name)
                pod = s.client.get_pod(earlier.id) if earlier is not None else None
        if pod is None or pod.status in DEAD_POD_STATES:
            return None
        same = pod.template_id in (None, state.template_id) and pod.volume_id in (None, state.volume_id)
        if not same or (state.executor_id and pod.executor_id != state.executor_id):
            ctx.log.warn("deleting this stack's unrecorded pod that no longer matches the plan", pod=pod.id)
            delete_pod_and_wait(ctx, s, pod.id)
            return None
        ctx.log.info("adopting a pod an interrupted run of this stack rented", pod=pod.id)
        ctx.private = PodPrivate().to_private()  # its offer's facts are unknown here
        return pod.id, state.model_copy(
            update={"id": pod.id, "executor_id": pod.executor_id, "status": "PENDING"}
        )

    def _rent_first_available(
        self,
        ctx: Context,
        s: LiumSession,
        state: PodModel,
        candidates: Iterable[tuple[str, PodModel, PodPrivate]],
        public_key: str,
    ) -> tuple[str, PodModel]:
        """Rent the first candidate with capacity; its offer's facts go into the private state."""
        refusals: list[str] = []
        for executor_id, candidate, rented in candidates:
            ctx.check()
            body = RentRequest(
                pod_name=state.lium_name or state.name,
                template_id=state.template_id,
                user_public_key=rented_keys(public_key, state.authorized_keys),
                gpu_count=state.gpu_count,
                initial_port_count=2,
                volume_id=state.volume_id,
                enable_backups=bool(state.enable_backups),
                backup_log_id=state.restore_backup_id,
                restore_path=state.restore_path if state.restore_backup_id else None,
                termination_hours=rent_hours(
                    state.termination_hours, create_seconds_left(ctx, self.default_timeouts["create"])
                ),
            )
            me = s.verify_access()
            attempt = RentAttempt.new(
                executor_id,
                body,
                api_key_id=me.api_key_id,
                workspace_id=me.workspace.id if me.workspace else None,
            )
            s.journal.write(attempt)
            try:
                # Killed meanwhile, the create still learns whether Lium rented, and ends what it did.
                with outliving_the_host(s.client.request_timeout):
                    result = rent_reconciled(s.client, attempt)
            except LiumUncertainOutcome as exc:
                raise TFError(
                    "The rent's outcome is unknown",
                    f"{exc}. The attempt is journalled in {s.journal.directory}; the next apply or destroy "
                    "reconciles it, and `lium-tf sweep` lists it.",
                ) from None
            except LiumError as exc:
                raise TFError("Renting the pod failed", str(exc)) from None
            if result.outcome == "rented" and result.pod_id:
                ctx.private = rented.to_private()
                return result.pod_id, candidate.model_copy(
                    update={"id": result.pod_id, "executor_id": executor_id, "status": "PENDING"}
                )
            s.journal.forget(body.pod_name)
            if result.outcome == "deleted":  # rented, then gone at once: as good as no capacity here
                refusals.append(f"{executor_id}: pod {result.pod_id} was deleted right after the rent")
                continue
            if result.outcome == "no_capacity":
                refusals.append(f"{executor_id}: {result.code}")
                ctx.log.info(
                    "offer has no capacity, trying the next", executor=executor_id, code=result.code or ""
                )
                continue
            raise TFError("Lium refused the rent", str(result.error) if result.error else result.outcome)
        raise TFError(
            "No capacity on any matching offer",
            f"Tried {len(refusals)} offer(s); each refused: " + "; ".join(refusals[:10])
            if refusals
            else "Every matching offer refused another pod of this run for lack of capacity.",
        )

    def _wait_for_ports(self, ctx: Context, s: LiumSession, state: PodModel, ports: list[int] | None) -> None:
        """Wait until every port of ``wait_for_ports`` answers inside the running pod."""
        if ports and state.ssh_host and state.ssh_port and state.ssh_host_key:
            address = (state.ssh_host, state.ssh_port)
            wait_for_ports(
                ctx, s, pod_id=state.id or "", address=address, host_key=state.ssh_host_key, ports=ports
            )

    def _wait_for_ssh(self, ctx: Context, state: PodModel) -> str:
        """Wait until the pod's sshd answers and return its host key (pinned from now on)."""
        if not state.ssh_host or not state.ssh_port:
            raise TFError(f"Pod {state.id} is RUNNING but Lium gave no SSH address")
        return wait_for_host_key(ctx, state.ssh_host, state.ssh_port)

    # -- update / read / delete ---------------------------------------------------------------------------

    def update(self, ctx: Context, prior: PodModel, plan: PodModel, config: PodModel) -> PodModel:
        """Switch the pod to a new template in place (:mod:`lium_provider.resources.pod_switch`); record new
        offer-filter bounds the running pod still satisfies, or new timeouts: state only; move or cancel
        the removal as ``modify_plan`` planned it.

        Every other change re-rents (``modify_plan``).
        """
        state = prior.model_copy(
            update={
                **{name: getattr(plan, name) for name in OfferFilter.fields()},
                "name": plan.name,  # differs only after an import (resources/pod_import.py)
                "ssh_public_key": plan.ssh_public_key,
                "authorized_keys": plan.authorized_keys,  # differs after an import, or in order only
                "timeouts": plan.timeouts,
                "termination_hours": plan.termination_hours,
                "wait_for_ports": plan.wait_for_ports,
                "stack_tag": plan.stack_tag,
                "adopted_from": plan.adopted_from,
                "enable_backups": plan.enable_backups,  # differs only after an import
                "jupyter_port": plan.jupyter_port,
                "jupyter_url": plan.jupyter_url if plan.jupyter_port is not None else None,
            }
        )
        s = session(ctx)
        switched = switching(prior, plan.template_id)
        if switched:
            check_before_change(ctx, self.type_name, prior, lambda: self._mark_now(ctx, prior), "switched")
            state = switch_container(ctx, s, state, plan.template_id)
            # Until its ports answer, the new container is recorded as waiting for none: a failed wait
            # then leaves a difference, so the next plan waits again.
            ctx.record(state.model_copy(update={"wait_for_ports": None}))
            self._wait_for_ports(ctx, s, state, plan.wait_for_ports)
        elif set(plan.wait_for_ports or ()) - set(prior.wait_for_ports or ()):
            self._wait_for_ports(ctx, s, state, plan.wait_for_ports)
        wanted = parse_time(plan.removal_scheduled_at)
        if plan.removal_scheduled_at != prior.removal_scheduled_at:
            check_before_change(ctx, self.type_name, prior, lambda: self._mark_now(ctx, prior), "changed")
            with api_errors("scheduling the pod's removal" if wanted else "cancelling the pod's removal"):
                set_removal(s.client, prior.id or "", wanted)
        # Only once the update went through: a failed one leaves the import's plan rules in force, or
        # its retry would re-rent the pod for the name the import could not know.
        ctx.private = PodPrivate.from_private(ctx.private).model_copy(update={"imported": None}).to_private()
        state = state.model_copy(update={"removal_scheduled_at": plan.removal_scheduled_at})
        if plan.jupyter_port is not None and (switched or plan.jupyter_port != prior.jupyter_port):
            ctx.record(
                state.model_copy(update={"jupyter_port": prior.jupyter_port if not switched else None})
            )
            state = install_notebook(ctx, s, state, plan.jupyter_port)
        return state

    def read(self, ctx: Context, state: PodModel) -> PodModel | None:
        s = session(ctx)
        if not is_lium_id(state.id):
            return state  # names no pod: the plan refuses it, a destroy forgets it (resources/ownership.py)
        with api_errors("reading the pod"):
            pod = s.watcher.current(ctx, state.id or "")  # a stack's reads share one listing
        if pod is None:
            kept = NOT_IMPORTED if not state.name else KEPT_IN_STATE
            check_not_hidden(
                ctx, s, f"Pod {state.id}", state.id or "", state.api_key_id, state.workspace_id, kept
            )
        if pod is None or pod_gone(pod):
            warn_if_stopped_by_budget(ctx, s, state.id or "")
            return None
        refreshed = _with_schedule(_apply_pod(state, pod), pod)
        refreshed = refreshed.model_copy(update=refreshed_notebook(refreshed, pod))
        if not refreshed.name:  # just imported
            refuse_cluster_member(ctx, pod)
            refreshed = refreshed.model_copy(update=imported_fields(pod, lium_stacks_name(s, pod)))
            refreshed = self._with_listed_offer(ctx, s, refreshed)
            ctx.private = (
                PodPrivate.from_private(ctx.private).model_copy(update={"imported": True}).to_private()
            )
        # Whose the pod is: the tag its Lium name carries now is compared with what the state records.
        owner = refreshed_ownership(ctx, self.type_name, state, _mark(pod))
        refreshed = refreshed.model_copy(update=owner)
        if refreshed.ssh_host_key is None:  # imported (or its create stopped before SSH answered)
            refreshed = self._pin_on_first_read(ctx, refreshed)
        s.journal.forget(refreshed.lium_name or refreshed.name)  # Terraform holds this pod now
        return _pinned(refreshed)

    def _with_listed_offer(self, ctx: Context, s: LiumSession, state: PodModel) -> PodModel:
        """An imported pod's region and offer facts, from its executor's offer in the feed if listed.

        A rented whole node is no longer listed; its facts then stay unknown, and fail no filter rule.
        """
        from lium_provider.domain.offers import find_offers

        if not state.executor_id or not state.gpu_count:
            return state
        try:
            offers = find_offers(s.feed_url, OfferFilter(gpu_count=state.gpu_count), client=s.client)
        except (LiumError, ValueError):
            return state
        offer = next((o for o in offers if o.executor_id == state.executor_id), None)
        if offer is None:
            return state
        ctx.private = PodPrivate.of(offer).to_private()  # the imported flag is set after this
        return state.model_copy(update={"region": offer.region})

    def _pin_on_first_read(self, ctx: Context, state: PodModel) -> PodModel:
        """Pin the host key the pod offers now (trust on first use), saying so, so a runner can be added."""
        if state.status != RUNNING or not state.ssh_host or not state.ssh_port:
            return state
        key = fetch_host_key(state.ssh_host, state.ssh_port, timeout=5.0)
        if key is None:
            return state  # the next refresh tries again
        ctx.warn(
            f"Pinned pod {state.id}'s SSH host key on first read",
            f"{state.ssh_host}:{state.ssh_port} offered {fingerprint(key)}, and it is now `ssh_host_key`: trusted "
            "on first use, as Terraform did not create this pod. Compare it with the pod's own key "
            "(`ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` on the pod).",
            path=("ssh_host_key",),
        )
        return state.model_copy(update={"ssh_host_key": key})

    def delete(self, ctx: Context, state: PodModel) -> None:
        if not is_lium_id(state.id):
            self._delete_by_lium_name(ctx, state)
        if left_alone_at_delete(ctx, self.type_name, state, lambda: self._mark_now(ctx, state)):
            return
        s = session(ctx)
        with api_errors("reading the pod"):
            if s.watcher.current(ctx, state.id or "") is None:  # gone, or hidden from this key
                check_not_hidden(
                    ctx, s, f"Pod {state.id}", state.id or "", state.api_key_id, state.workspace_id
                )
        delete_pod_and_wait(ctx, s, state.id or "")
        s.journal.forget(state.lium_name or state.name)

    def plan_delete(self, ctx: Context, prior: PodModel) -> None:
        if prior.lium_name:
            hold_at_delete(ctx, (LIUM_NAME_KEY, prior.lium_name), prior.lium_name)

    def end_unrecorded(self, ctx: Context, config: PodModel) -> None:
        """During a destroy, a pod this instance's interrupted create rented and no state records (found
        by the Lium name its create would give it, with this stack's tag, and through this machine's
        journal) is deleted: it would be adopted by the next apply, and nothing else ends it early."""
        s = session(ctx)
        if not config.name or not config.template_id:
            return  # its Lium name is not known before the apply: nothing can be found by it
        lium_name = lium_pod_name(config.name, s.stack_tag, pod_rent_digest(config, config))
        with api_errors("looking for a pod an interrupted create of this stack rented"):
            listed = s.client.list_pods()
            found = {p.id for p in listed if p.pod_name == lium_name and p.status not in (DELETING, DELETED)}
            attempt = s.journal.find(lium_name)
            if attempt is not None:
                rented = find_rented_pod(s.client, attempt)
                if rented is not None and rented.outcome == "rented" and rented.pod_id:
                    found.add(rented.pod_id)
        for pod_id in sorted(found):
            ctx.log.warn("deleting a pod an interrupted create rented and no state records", pod=pod_id)
            ctx.warn(
                f"Deleted pod {pod_id} ({lium_name}), which no state records",
                "An interrupted create of this lium_pod rented it (its Lium name carries this stack's tag), "
                "and this destroy ends it.",
            )
            delete_pod_and_wait(ctx, s, pod_id)
        s.journal.forget(lium_name)

    def _mark_now(self, ctx: Context, state: PodModel) -> str | None:
        """The stack tag the pod carries in Lium now (None: gone, or no tag), from the stack's listing."""
        with api_errors("reading the pod"):
            return _mark(session(ctx).watcher.current(ctx, state.id or ""))

    def _delete_by_lium_name(self, ctx: Context, state: PodModel) -> None:
        """A damaged id with this stack's Lium name beside it: the pod is found, and deleted, by the name
        (a paid pod is not left running because its id was lost)."""
        s = session(ctx)
        # A name no stack made (an imported pod's own, "train") may be anyone's: only a tagged one is.
        tag = tag_in_pod_name(state.lium_name)
        if tag is None or tag not in (state.stack_tag or s.stack_tag, state.adopted_from):
            return
        with api_errors("looking for the pod by its Lium name"):
            found = [p for p in s.client.list_pods() if p.pod_name == state.lium_name]
        for pod in found:
            if pod.status not in (DELETING, DELETED):
                ctx.warn(
                    f"Deleted this stack's pod {pod.id} by its Lium name",
                    f"The state's id was unusable; the pod named {state.lium_name} (this stack's) was found "
                    "in Lium and deleted.",
                )
                delete_pod_and_wait(ctx, s, pod.id)
        s.journal.forget(state.lium_name or state.name)

    def import_state(self, ctx: Context, import_id: str) -> dict[str, Any]:
        return import_by_lium_id(self.type_name, import_id)
