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
from typing import TYPE_CHECKING, Annotated

from pydantic import ConfigDict, Field

from lium_provider.api.errors import LiumError, LiumUncertainOutcome, is_definitive
from lium_provider.api.models import (
    DEAD_POD_STATES,
    DELETED,
    DELETING,
    POD_GONE_TIMEOUT,
    RUNNING,
    Pod,
    RentRequest,
    TerminationHours,
    is_lium_id,
)
from lium_provider.api.rent import RentAttempt, find_rented_pod, rent_reconciled
from lium_provider.domain.offer_filter import (
    OfferFilter,
    PodFacts,
    display_gpu_name,
    same_gpu,
    same_gpu_name,
)
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
from lium_provider.domain.stack import lium_pod_name, rent_digest, tag_in_pod_name
from lium_provider.resources.common import (
    api_errors,
    check_access_on_create,
    undo_abandoned,
    with_plan_rules,
)
from lium_provider.resources.inputs import LIUM_ID, OPENSSH_PUBLIC_KEY, PRINTABLE_NAME
from lium_provider.resources.ownership import (
    StackTag,
    claim_create_name,
    left_alone_at_delete,
    plan_ownership,
    refreshed_owner,
    warn_if_foreign,
)
from lium_provider.resources.pod_import import (
    imported_fields,
    lium_stacks_name,
    plan_first_apply,
    warn_if_unproven,
)
from lium_provider.resources.pod_private import PodPrivate
from lium_provider.resources.removal_plan import create_seconds_left, plan_default_hours, plan_removal
from lium_provider.session import LiumSession, session
from lium_provider.sshkeys import fetch_host_key, fingerprint, public_key_line
from tfbridge import (
    TIMEOUTS_BLOCK,
    Attribute,
    ConfigView,
    Context,
    Diagnostic,
    PlanChange,
    RequiresReplace,
    Resource,
    Schema,
    TFError,
    Timeouts,
    UseStateForUnknown,
)
from tfbridge.schema import PlanRule

if TYPE_CHECKING:  # gpuhunt costs ~100 ms to import: only plans and creates that search offers load it
    from lium_provider.domain.offers import Offer

_REPLACE = (RequiresReplace(),)
_KEEP = (UseStateForUnknown(),)
# The pod's plan rules for fields of the shared offer filter (see PodResource.schema).
FILTER_PLAN_RULES: dict[str, tuple[PlanRule, ...]] = {"gpu_count": _REPLACE, "gpu": _KEEP}
SSH_POLL_SECONDS = 0.25
# How old the pod watcher's latest listing may be for a template's or volume's delete to use it instead
# of listing again (its own pods' deletes, just before, each end on a listing).
RECENT_LISTING_SECONDS = 5.0


class PodModel(OfferFilter):
    """A Lium GPU pod. Placed by `executor_id`, or by an offer filter (the cheapest match at apply time).
    Re-renting (a new pod, billed anew; the old one is deleted): changing `name`, `template_id`,
    `gpu_count`, `executor_id`, `ssh_public_key` or `volume_id`, or a dead pod. Changing an offer-filter
    field (`gpu`, `max_price_per_hour`, `regions`, `min_memory_gib`, `min_disk_gb`, `spot`) re-rents only
    when the running pod no longer satisfies the new filter; otherwise it updates the state alone. The
    offer-filter fields are those of `lium_offers`.
    Removal deadline: with `termination_hours` (or the provider's `default_termination_hours`) Lium
    removes the pod that many hours after it started (`started_at`), at `removal_scheduled_at`; changing
    it moves the removal in place, removing it cancels the removal. Every rent also carries a provisional
    deadline covering the create's timeout (`termination_hours` when shorter), so a create that never
    finished is ended by Lium itself; once the pod answers SSH the real schedule replaces it. If that last
    call fails, the create fails with the pod in the state as tainted (`terraform untaint` keeps it, and
    the next apply then sets the schedule in place). A schedule changed outside Terraform (Lium's UI)
    plans an in-place update back to the configuration.
    """

    model_config = ConfigDict(extra="forbid")

    id: Annotated[str | None, Attribute(computed=True, plan=_KEEP, description="Pod id (UUID).")] = None
    name: Annotated[
        str,
        Attribute(required=True, plan=_REPLACE, description="Pod name."),
        PRINTABLE_NAME,
    ] = Field(min_length=1, max_length=63)
    template_id: Annotated[
        str, Attribute(required=True, plan=_REPLACE, description="`lium_template` to run."), LIUM_ID
    ]
    executor_id: Annotated[
        str | None,
        Attribute(
            optional=True,
            computed=True,
            plan=(*_REPLACE, *_KEEP),
            description="Rent this executor (node). Conflicts with the offer filter, except `gpu`, which may "
            "name the executor's GPU; computed when the filter chose.",
        ),
        LIUM_ID,
    ] = None
    ssh_public_key: Annotated[
        str | None,
        Attribute(
            optional=True,
            computed=True,
            plan=(*_REPLACE, *_KEEP),
            description="Public key authorised for root SSH, one OpenSSH line (ed25519, ecdsa or rsa). Default: "
            "derived from the provider's private key.",
        ),
        OPENSSH_PUBLIC_KEY,
    ] = None
    volume_id: Annotated[
        str | None,
        Attribute(optional=True, plan=_REPLACE, description="`lium_volume` to mount at /mnt (one)."),
        LIUM_ID,
    ] = None
    status: Annotated[str | None, Attribute(computed=True, description="Lium status, e.g. `RUNNING`.")] = None
    region: Annotated[
        str | None, Attribute(computed=True, plan=_KEEP, description="Region of the executor.")
    ] = None
    price_per_hour: Annotated[
        float | None, Attribute(computed=True, plan=_KEEP, description="Billed USD per hour.")
    ] = None
    ssh_host: Annotated[str | None, Attribute(computed=True, plan=_KEEP, description="SSH host.")] = None
    ssh_port: Annotated[int | None, Attribute(computed=True, plan=_KEEP, description="SSH port.")] = None
    ports: Annotated[
        dict[str, int] | None,
        Attribute(computed=True, plan=_KEEP, description="Container port → external port."),
    ] = None
    ssh_host_key: Annotated[
        str | None,
        Attribute(computed=True, plan=_KEEP, description="The pod's SSH host key, pinned on first contact."),
    ] = None
    termination_hours: Annotated[
        TerminationHours | None,
        Attribute(
            optional=True,
            computed=True,
            description="Lium removes the pod this many hours after it started. Default: the "
            "provider's `default_termination_hours`, else none (the pod runs until deleted). Changing it "
            "moves the removal in place; removing it cancels the removal.",
        ),
    ] = None
    removal_scheduled_at: Annotated[
        str | None,
        Attribute(
            computed=True,
            description="When Lium removes the pod (RFC 3339, UTC): `started_at` plus `termination_hours`; "
            "null when it has none.",
        ),
    ] = None
    started_at: Annotated[
        str | None,
        Attribute(
            computed=True,
            plan=_KEEP,
            description="When the pod started running (RFC 3339, UTC), from which `termination_hours` "
            "counts. For an imported pod: when Lium created it.",
        ),
    ] = None
    lium_name: Annotated[
        str | None,
        Attribute(
            computed=True,
            plan=_KEEP,
            description="The name sent to Lium: `name`, `-`, the stack tag (see the provider's `stack`) and 3 "
            "characters of what the rent asks for (`template_id`, `gpu_count`, `volume_id`, a configured "
            "`executor_id` and `ssh_public_key`), so a replacement never has its predecessor's name. It "
            "recognises this stack's pod of this instance from any machine.",
        ),
    ] = None
    stack_tag: StackTag = None
    timeouts: Annotated[Timeouts | None, TIMEOUTS_BLOCK] = None


def _rent_digest(pod: PodModel, configured: PodModel) -> str:
    """The rent digest of a pod's Lium name (:func:`lium_provider.domain.stack.rent_digest`)."""
    return rent_digest(
        pod.template_id, pod.gpu_count, pod.volume_id, configured.executor_id, configured.ssh_public_key
    )


def pod_facts(state: PodModel, rented: PodPrivate) -> PodFacts:
    """What a running pod is: count, price and region from its state, the rest from the offer it rented."""
    return PodFacts(
        gpu=rented.gpu_model or state.gpu,
        gpu_memory_gib=rented.gpu_memory_gib,
        gpu_count=state.gpu_count,
        price_per_hour=state.price_per_hour,
        region=state.region,
        memory_gib=rented.memory_gib,
        disk_gb=rented.disk_gb,
        spot=rented.spot,
    )


def refilter_replacements(wanted: OfferFilter, prior: OfferFilter, facts: PodFacts) -> list[str]:
    """The filter fields whose change re-rents the pod: changed from ``prior`` and unmet by ``facts``."""
    changed = {name for name in OfferFilter.fields() if getattr(wanted, name) != getattr(prior, name)}
    if not changed:  # the common plan: no rule to run (and gpuhunt stays unloaded)
        return []
    return [name for name in wanted.unmet_by(facts) if name in changed]


def _apply_pod(state: PodModel, pod: Pod) -> PodModel:
    target = pod.ssh_host_port()
    return state.model_copy(
        update={
            "status": pod.status,
            "executor_id": pod.executor_id or state.executor_id,
            "price_per_hour": pod.price if pod.price is not None else state.price_per_hour,
            "ssh_host": target[0] if target else state.ssh_host,
            "ssh_port": target[1] if target else state.ssh_port,
            "ports": dict(pod.ports_mapping) if pod.ports_mapping else state.ports,
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


def started_or_dead(pod: Pod | None) -> bool:
    """Whether a create's wait is over: the pod runs with its SSH address published, or will never run."""
    if pod is None or pod.status in DEAD_POD_STATES:
        return True
    return pod.status == RUNNING and pod.ssh_host_port() is not None


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
        if prior is None:
            self._plan_lium_name(ctx, change)
            self._check_offers_exist(ctx, change)
            return
        if prior.status in DEAD_POD_STATES:
            change.set_unknown("status")
            change.require_replace("status")
        self._check_executor_gpu(ctx, change)
        record = PodPrivate.from_private(ctx.private)
        if record.imported:
            plan_first_apply(ctx, change, prior, lambda: self._authorised_keys(ctx, prior))
        _plan_filter_change(change, prior, record)
        if not change.requires_replace:
            plan_removal(change, prior, "pod")

    def _authorised_keys(self, ctx: Context, prior: PodModel) -> tuple[str, ...]:
        with api_errors("reading the pod's authorised keys"):
            pod = session(ctx).watcher.current(ctx, prior.id or "")
        return pod.ssh_keys if pod is not None else ()

    def _plan_lium_name(self, ctx: Context, change: PlanChange[PodModel]) -> None:
        """A create's Lium name, known at plan time when what it hashes is known; a second create of one
        name in this stack (this provider process plans the whole run) is refused."""
        if change.is_unknown("name"):
            change.set_unknown("lium_name")
            return
        name = change.planned.name
        claim_create_name(ctx, change, self.type_name)
        if any(change.is_unknown(n) for n in ("template_id", "gpu_count", "volume_id")) or any(
            change.config_is_unknown(n) for n in ("executor_id", "ssh_public_key")
        ):
            change.set_unknown("lium_name")  # named at create, from the same fields
            return
        digest = _rent_digest(change.planned, change.config)
        change.set_planned("lium_name", lium_pod_name(name, session(ctx).stack_tag, digest))

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
        lium_name = plan.lium_name or lium_pod_name(plan.name, s.stack_tag, _rent_digest(plan, config))
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
                _delete_abandoned(ctx, s, pod_id, state.lium_name or "")
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
        state = state.model_copy(update={"ssh_host_key": self._wait_for_ssh(ctx, state)})
        ctx.record(state)
        return self._replace_provisional_deadline(s, state)

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
            try:
                result = rent_reconciled(s.client, attempt, resume=True)
            except LiumError as exc:
                raise TFError(
                    "An earlier rent of this pod has an unknown outcome",
                    f"{exc}. Nothing new was rented; run apply again, or inspect with `lium-tf sweep`.",
                ) from None
            s.journal.forget(lium_name)
            pod = s.client.get_pod(result.pod_id) if result.outcome == "rented" and result.pod_id else None
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
                user_public_key=public_key,
                gpu_count=state.gpu_count,
                initial_port_count=2,
                volume_id=state.volume_id,
                termination_hours=rent_hours(
                    state.termination_hours, create_seconds_left(ctx, self.default_timeouts["create"])
                ),
            )
            attempt = RentAttempt.new(executor_id, body)
            s.journal.write(attempt)
            try:
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

    def _wait_for_ssh(self, ctx: Context, state: PodModel) -> str:
        """Wait until the pod's sshd answers and return its host key (pinned from now on)."""
        if not state.ssh_host or not state.ssh_port:
            raise TFError(f"Pod {state.id} is RUNNING but Lium gave no SSH address")
        return wait_for_host_key(ctx, state.ssh_host, state.ssh_port)

    # -- update / read / delete ---------------------------------------------------------------------------

    def update(self, ctx: Context, prior: PodModel, plan: PodModel, config: PodModel) -> PodModel:
        """Record new offer-filter bounds the running pod still satisfies, or new timeouts: state only;
        move or cancel the removal as ``modify_plan`` planned it.

        Every other change re-rents (``modify_plan``), so only the removal calls Lium here.
        """
        state = prior.model_copy(
            update={
                **{name: getattr(plan, name) for name in OfferFilter.fields()},
                "name": plan.name,  # differs only after an import (resources/pod_import.py)
                "ssh_public_key": plan.ssh_public_key,
                "timeouts": plan.timeouts,
                "termination_hours": plan.termination_hours,
                "stack_tag": plan.stack_tag,
            }
        )
        wanted = parse_time(plan.removal_scheduled_at)
        if plan.removal_scheduled_at != prior.removal_scheduled_at:
            with api_errors("scheduling the pod's removal" if wanted else "cancelling the pod's removal"):
                set_removal(session(ctx).client, prior.id or "", wanted)
        # Only once the update went through: a failed one leaves the import's plan rules in force, or
        # its retry would re-rent the pod for the name the import could not know.
        ctx.private = PodPrivate.from_private(ctx.private).model_copy(update={"imported": None}).to_private()
        return state.model_copy(update={"removal_scheduled_at": plan.removal_scheduled_at})

    def read(self, ctx: Context, state: PodModel) -> PodModel | None:
        s = session(ctx)
        if not is_lium_id(state.id):
            return state  # names no pod: the plan refuses it, a destroy forgets it (resources/ownership.py)
        with api_errors("reading the pod"):
            pod = s.watcher.current(ctx, state.id or "")  # a stack's reads share one listing
        if pod is None or pod_gone(pod):
            return None
        refreshed = _with_schedule(_apply_pod(state, pod), pod)
        # Whose the pod is when the state does not say: a state from before the tag recorded the Lium
        # name a lium_pod made, so its tag; for an import, only a name provably a lium_pod's.
        if not refreshed.name:  # just imported
            made = lium_stacks_name(s, pod)
            warn_if_unproven(ctx, pod, made)
            in_lium = made[1] if made else None
            refreshed = refreshed.model_copy(update=imported_fields(pod, made))
            refreshed = self._with_listed_offer(ctx, s, refreshed)
            ctx.private = (
                PodPrivate.from_private(ctx.private).model_copy(update={"imported": True}).to_private()
            )
        else:
            in_lium = tag_in_pod_name(refreshed.lium_name)
        owner = refreshed_owner(ctx, state.stack_tag, in_lium=in_lium)
        refreshed = refreshed.model_copy(update={"stack_tag": owner})
        warn_if_foreign(ctx, self.type_name, refreshed)
        if refreshed.ssh_host_key is None:  # imported (or its create stopped before SSH answered)
            refreshed = self._pin_on_first_read(ctx, refreshed)
        s.journal.forget(refreshed.lium_name or refreshed.name)  # Terraform holds this pod now
        return refreshed

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
        if left_alone_at_delete(ctx, self.type_name, state, in_lium=lambda: tag_in_pod_name(state.lium_name)):
            return
        s = session(ctx)
        delete_pod_and_wait(ctx, s, state.id or "")
        s.journal.forget(state.lium_name or state.name)

    def _delete_by_lium_name(self, ctx: Context, state: PodModel) -> None:
        """A damaged id with this stack's Lium name beside it: the pod is found, and deleted, by the name
        (a paid pod is not left running because its id was lost)."""
        s = session(ctx)
        if not is_this_stacks(s, state.lium_name or ""):
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


def delete_pod_and_wait(ctx: Context, s: LiumSession, pod_id: str) -> None:
    """Delete a pod and wait until Lium reports it DELETED or gone; 404 counts as success."""
    while True:
        try:
            s.client.delete_pod(pod_id)
            break
        except LiumError as exc:
            if exc.code != "pod_state_conflict" and is_definitive(exc):
                raise TFError("Deleting the pod failed", str(exc)) from None
            # dstack's rule: a conflict (or an unknown outcome) is fine only if the pod is on its way out.
            with api_errors("reading the pod"):
                pod = s.client.get_pod(pod_id)
            if pod is None or pod.status in ("DELETING", DELETED):
                break
            ctx.log.info("pod cannot be deleted yet, retrying", pod=pod_id, status=pod.status)
            ctx.sleep(2.0)
    try:
        s.watcher.wait(ctx, pod_id, pod_gone, unlisted_is_gone=True)
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


def wait_for_host_key(ctx: Context, host: str, port: int) -> str:
    """Wait until the sshd at ``host:port`` answers and return its host key (pinned from then on)."""
    while True:
        ctx.check()
        key = fetch_host_key(host, port, timeout=5.0)
        if key:
            return key
        ctx.sleep(SSH_POLL_SECONDS)


def _delete_abandoned(ctx: Context, s: LiumSession, pod_id: str, lium_name: str) -> None:
    """Send DELETE for a pod whose create was abandoned; no wait for DELETED (the process is exiting)."""
    error = undo_abandoned(lambda: s.client.delete_pod(pod_id))
    if error is not None:  # the process exits anyway: the removal deadline and sweep remain
        ctx.log.warn(
            "could not delete the pod of an abandoned create", pod=pod_id, error=type(error).__name__
        )
        return
    ctx.log.warn("deleted the pod of an abandoned create: Terraform is gone and cannot record it", pod=pod_id)
    s.journal.forget(lium_name)


def is_this_stacks(s: LiumSession, lium_name: str) -> bool:
    """Whether a Lium pod name carries this stack's tag (:func:`lium_provider.domain.stack.lium_pod_name`)."""
    return tag_in_pod_name(lium_name) == s.stack_tag


def settle_orphans(
    ctx: Context, s: LiumSession, *, template_id: str | None = None, volume_id: str | None = None
) -> None:
    """Delete this stack's pods that run ``template_id`` or mount ``volume_id``, just before that goes.

    Terraform deletes the pods it records before their template or volume, so such a pod is one
    Terraform never recorded: the provider died between Lium's answer and the state write (SIGKILL,
    a crash, power loss). It is found by this stack's tag in its Lium name among the live pods (from
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
            and is_this_stacks(s, p.pod_name)
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
        if not is_this_stacks(s, attempt.pod_name) or not uses(
            attempt.body.template_id, attempt.body.volume_id
        ):
            continue
        with api_errors("reconciling an unrecorded rent"):
            found = find_rented_pod(s.client, attempt)
        if found is not None and found.outcome == "rented" and found.pod_id:
            ctx.log.warn("deleting a pod Terraform never recorded", pod=found.pod_id, name=attempt.pod_name)
            delete_pod_and_wait(ctx, s, found.pod_id)
        s.journal.forget(attempt.pod_name)
