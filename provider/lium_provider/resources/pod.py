"""``lium_pod``: a rented GPU pod. The one resource that costs money by the second, so the careful one.

Create picks the cheapest matching offer at apply time, rents it with an idempotency key (falling back to
the next offer on a no-capacity refusal), and records the pod in Terraform's state the moment Lium names
it: a failed, timed-out or cancelled wait afterwards still leaves the pod tracked, so ``destroy`` removes
it. Uncertain rent outcomes are reconciled (pod list, account events, idempotent replay), never retried
blindly. Every rent attempt is journalled on disk before it is sent (see :mod:`lium_provider.journal`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated

from pydantic import BaseModel, ConfigDict, Field

from lium_provider.api.errors import LiumError, LiumUncertainOutcome, is_definitive
from lium_provider.api.models import DEAD_POD_STATES, DELETED, RUNNING, Pod, RentRequest
from lium_provider.api.rent import RentAttempt, find_rented_pod, rent_reconciled
from lium_provider.resources.common import api_errors
from lium_provider.resources.inputs import OPENSSH_PUBLIC_KEY, PRINTABLE_NAME
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
    TFError,
    Timeouts,
    UseStateForUnknown,
)

if TYPE_CHECKING:  # gpuhunt costs ~100 ms to import: only plans and creates that search offers load it
    from lium_provider.api.offers import Offer, OfferFilter

_REPLACE = (RequiresReplace(),)
_KEEP = (UseStateForUnknown(),)
FILTER_ATTRIBUTES = ("gpu", "max_price_per_hour", "regions", "min_memory_gib", "min_disk_gb", "spot")
SSH_POLL_SECONDS = 0.25


class PodModel(BaseModel):
    """A Lium GPU pod. Placed by `executor_id`, or by an offer filter (the cheapest match at apply time)."""

    model_config = ConfigDict(extra="forbid")

    id: Annotated[str | None, Attribute(computed=True, plan=_KEEP, description="Pod id (UUID).")] = None
    name: Annotated[
        str,
        Attribute(required=True, plan=_REPLACE, description="Pod name (at most 63 characters)."),
        PRINTABLE_NAME,
    ] = Field(min_length=1, max_length=63)
    template_id: Annotated[
        str, Attribute(required=True, plan=_REPLACE, description="`lium_template` to run.")
    ]
    gpu_count: Annotated[
        int | None,
        Attribute(
            optional=True,
            computed=True,
            default=1,
            plan=_REPLACE,
            description="GPUs for this pod. Default 1.",
        ),
    ] = Field(default=None, ge=1, le=64)
    executor_id: Annotated[
        str | None,
        Attribute(
            optional=True,
            computed=True,
            plan=_REPLACE,
            description="Rent this executor (node). Conflicts with the offer filter; computed when the filter "
            "chose.",
        ),
    ] = None
    gpu: Annotated[
        str | None,
        Attribute(
            optional=True,
            computed=True,
            description='Offer filter: GPU model, e.g. `"RTX 4090"`, `"H100"`. Computed: the GPU rented.',
        ),
    ] = None
    max_price_per_hour: Annotated[
        float | None,
        Attribute(optional=True, description="Offer filter: most USD per hour for the whole pod."),
    ] = Field(default=None, gt=0)
    regions: Annotated[
        list[str] | None,
        Attribute(optional=True, description="Offer filter: regions (`us-ca`) or countries (`us`)."),
    ] = None
    min_memory_gib: Annotated[
        float | None, Attribute(optional=True, description="Offer filter: least RAM for the pod, GiB.")
    ] = Field(default=None, ge=0)
    min_disk_gb: Annotated[
        float | None,
        Attribute(optional=True, description="Offer filter: least container disk, GB. No default floor."),
    ] = Field(default=None, ge=0)
    spot: Annotated[
        bool | None,
        Attribute(optional=True, description="Offer filter: `true` spot only, `false` secure only."),
    ] = None
    ssh_public_key: Annotated[
        str | None,
        Attribute(
            optional=True,
            computed=True,
            plan=_REPLACE,
            description="Public key authorised for root SSH, one OpenSSH line (ed25519, ecdsa or rsa). Default: "
            "derived from the provider's private key.",
        ),
        OPENSSH_PUBLIC_KEY,
    ] = None
    volume_id: Annotated[
        str | None,
        Attribute(optional=True, plan=_REPLACE, description="`lium_volume` to mount at /mnt (one)."),
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
    timeouts: Annotated[Timeouts | None, TIMEOUTS_BLOCK] = None


def offer_filter(pod: PodModel) -> OfferFilter:
    from lium_provider.api.offers import OfferFilter

    return OfferFilter(
        gpu=pod.gpu,
        gpu_count=pod.gpu_count or 1,
        max_price_per_hour=pod.max_price_per_hour,
        regions=list(pod.regions) if pod.regions is not None else None,
        min_memory_gib=pod.min_memory_gib,
        min_disk_gb=pod.min_disk_gb,
        spot=pod.spot,
    )


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


def _started_or_dead(pod: Pod | None) -> bool:
    if pod is None or pod.status in DEAD_POD_STATES:
        return True
    return pod.status == RUNNING and pod.ssh_host_port() is not None


class PodResource(Resource[PodModel]):
    type_name = "lium_pod"
    model = PodModel
    description = PodModel.__doc__ or ""
    default_timeouts = {"create": 1800.0, "delete": 900.0, "read": 300.0}

    # -- plan ------------------------------------------------------------------------------------

    def validate_config(self, config: ConfigView[PodModel]) -> list[Diagnostic]:
        if config.is_null("executor_id"):
            return []
        chosen = [name for name in FILTER_ATTRIBUTES if not config.is_null(name)]
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
        prior = change.prior
        if prior is not None:
            if prior.status in DEAD_POD_STATES:
                change.set_unknown("status")
                change.require_replace("status")
            self._replace_if_filter_no_longer_holds(change, prior)
            return
        if not change.config_is_null("executor_id") or any(
            change.config_is_unknown(n) for n in FILTER_ATTRIBUTES
        ):
            return
        if change.is_unknown("gpu_count"):
            return
        # Creating by filter: check now that something matches, so `plan` fails, not a later `apply`.
        self._matching_offers(ctx, change.config)  # gpu_count: the default when unset, as planned

    def _replace_if_filter_no_longer_holds(self, change: PlanChange[PodModel], prior: PodModel) -> None:
        planned = change.planned
        changed = [
            n
            for n in FILTER_ATTRIBUTES
            if n != "gpu" and (change.is_unknown(n) or getattr(planned, n) != getattr(prior, n))
        ]
        if not changed:
            return
        flt = offer_filter(planned)
        price, region = prior.price_per_hour, prior.region or ""
        ok = (flt.max_price_per_hour is None or (price is not None and price <= flt.max_price_per_hour)) and (
            flt.regions is None or any(region.lower().startswith(r.lower()) for r in flt.regions)
        )
        if not ok or any(n in changed for n in ("min_memory_gib", "min_disk_gb", "spot")):
            for name in changed:
                change.require_replace(name)

    def _matching_offers(self, ctx: Context, pod: PodModel) -> list[Offer]:
        from lium_provider.api.offers import (
            OfferFilter,
            describe_filter,
            find_offers,
            known_gpu_names,
            matches,
        )

        s = session(ctx)
        flt = offer_filter(pod)
        with api_errors("searching Lium offers"):
            everything = find_offers(s.feed_url, OfferFilter(gpu_count=flt.gpu_count), client=s.client)
        offers = [o for o in everything if matches(o, flt)]
        if flt.gpu and not any(
            matches(o, OfferFilter(gpu=flt.gpu, gpu_count=flt.gpu_count)) for o in everything
        ):
            names = ", ".join(sorted(known_gpu_names(everything))) or "none"
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
                f"Searched {len(everything)} offers for {describe_filter(flt)}.{hint}",
                path=("max_price_per_hour",) if flt.max_price_per_hour is not None else None,
            )
        return offers

    # -- create ----------------------------------------------------------------------------------

    def create(self, ctx: Context, plan: PodModel, config: PodModel) -> PodModel:
        s = session(ctx)
        public_key = plan.ssh_public_key or public_key_line(s.require_ssh_key("lium_pod.ssh_public_key"))
        state = plan.model_copy(update={"ssh_public_key": public_key, "timeouts": plan.timeouts})
        if plan.executor_id:
            candidates = [(plan.executor_id, state)]
        else:
            candidates = [
                (
                    o.executor_id,
                    state.model_copy(
                        update={
                            "gpu": plan.gpu or o.gpu_model,
                            "region": o.region,
                            "price_per_hour": o.price_per_hour,
                        }
                    ),
                )
                for o in self._matching_offers(ctx, plan)
            ]
        adopted = self._adopt_unrecorded(ctx, s, state)
        if adopted is not None:
            pod_id, state = adopted
        else:
            pod_id, state = self._rent_first_available(ctx, s, state, candidates, public_key)
        ctx.record(state)  # from here on, Terraform tracks the paid pod whatever happens next
        # RUNNING comes before SSH: Lium publishes ssh_connect_cmd only once the pod's sshd is set up.
        pod = s.watcher.wait(ctx, pod_id, _started_or_dead)
        if pod is None or pod.status != RUNNING:
            status = pod.status if pod else "gone"
            ctx.record(state.model_copy(update={"status": pod.status if pod else DELETED}))
            raise TFError(f"Pod {pod_id} did not start ({status})", self._failure_reason(s, pod_id))
        state = _apply_pod(state, pod)
        if not plan.gpu:
            state = state.model_copy(update={"gpu": pod.gpu_name or state.gpu})
        ctx.record(state)
        # The journal entry stays until Terraform is known to hold the pod (the next read or delete).
        return state.model_copy(update={"ssh_host_key": self._wait_for_ssh(ctx, state)})

    def _adopt_unrecorded(self, ctx: Context, s: LiumSession, state: PodModel) -> tuple[str, PodModel] | None:
        """A pod an earlier, killed run rented under this name but never handed to Terraform.

        If its rent matches this plan it is adopted instead of renting a second pod; otherwise it is
        deleted first. The journal entry is resolved either way.
        """
        attempt = s.journal.find(state.name)
        if attempt is None:
            return None
        try:
            result = rent_reconciled(s.client, attempt, resume=True)
        except LiumError as exc:
            raise TFError(
                "An earlier rent of this pod has an unknown outcome",
                f"{exc}. Nothing new was rented; run apply again, or inspect with `lium-tf sweep`.",
            ) from None
        s.journal.forget(state.name)
        if result.outcome != "rented" or not result.pod_id:
            return None
        same = attempt.body.template_id == state.template_id and attempt.body.gpu_count == (
            state.gpu_count or 1
        )
        if not same or (state.executor_id and attempt.executor_id != state.executor_id):
            ctx.log.warn("deleting an unrecorded pod that no longer matches the plan", pod=result.pod_id)
            delete_pod_and_wait(ctx, s, result.pod_id)
            return None
        ctx.log.info("adopting a pod an interrupted run rented", pod=result.pod_id)
        return result.pod_id, state.model_copy(
            update={"id": result.pod_id, "executor_id": attempt.executor_id, "status": "PENDING"}
        )

    def _rent_first_available(
        self,
        ctx: Context,
        s: LiumSession,
        state: PodModel,
        candidates: list[tuple[str, PodModel]],
        public_key: str,
    ) -> tuple[str, PodModel]:
        refusals: list[str] = []
        for executor_id, candidate in candidates:
            ctx.check()
            body = RentRequest(
                pod_name=state.name,
                template_id=state.template_id,
                user_public_key=public_key,
                gpu_count=state.gpu_count or 1,
                initial_port_count=2,
                volume_id=state.volume_id,
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
                return result.pod_id, candidate.model_copy(
                    update={"id": result.pod_id, "executor_id": executor_id, "status": "PENDING"}
                )
            s.journal.forget(state.name)
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
            f"Tried {len(candidates)} offer(s); each refused: " + "; ".join(refusals[:10]),
        )

    def _failure_reason(self, s: LiumSession, pod_id: str) -> str:
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

    def _wait_for_ssh(self, ctx: Context, state: PodModel) -> str:
        """Wait until the pod's sshd answers and return its host key (pinned from now on)."""
        if not state.ssh_host or not state.ssh_port:
            raise TFError(f"Pod {state.id} is RUNNING but Lium gave no SSH address")
        while True:
            ctx.check()
            key = fetch_host_key(state.ssh_host, state.ssh_port, timeout=5.0)
            if key:
                return key
            ctx.sleep(SSH_POLL_SECONDS)

    # -- read / delete ---------------------------------------------------------------------------

    def read(self, ctx: Context, state: PodModel) -> PodModel | None:
        s = session(ctx)
        with api_errors("reading the pod"):
            pod = s.client.get_pod(state.id or "")
        if pod is None or pod.status == DELETED:
            return None
        refreshed = _apply_pod(state, pod)
        if not refreshed.name:  # just imported
            refreshed = refreshed.model_copy(
                update={
                    "name": pod.pod_name,
                    "template_id": pod.template_id,
                    "gpu_count": pod.gpu_count,
                    "gpu": pod.gpu_name,
                    "volume_id": pod.volume_id,
                }
            )
        if refreshed.ssh_host_key is None:  # imported (or its create stopped before SSH answered)
            refreshed = self._pin_on_first_read(ctx, refreshed)
        s.journal.forget(refreshed.name)  # Terraform holds this pod now: its rent needs no reconciling
        return refreshed

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
        s = session(ctx)
        delete_pod_and_wait(ctx, s, state.id or "")
        s.journal.forget(state.name)


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
    s.watcher.wait(ctx, pod_id, lambda p: p is None or p.status == DELETED)


def settle_orphans(ctx: Context, s: LiumSession, uses: Callable[[RentAttempt], bool]) -> None:
    """Delete pods that journalled rents matching ``uses`` made but Terraform never recorded.

    Such a pod exists when the provider died between Lium's answer and the state write (SIGKILL, a
    crash). Before the template it runs or the volume it mounts goes, it goes: found by name and
    executor in the pod list, then in the account events — never by renting again.
    """
    for attempt in s.journal.pending():
        if not uses(attempt):
            continue
        with api_errors("reconciling an unrecorded rent"):
            found = find_rented_pod(s.client, attempt)
        if found is not None and found.outcome == "rented" and found.pod_id:
            ctx.log.warn("deleting a pod Terraform never recorded", pod=found.pod_id, name=attempt.pod_name)
            delete_pod_and_wait(ctx, s, found.pod_id)
        s.journal.forget(attempt.pod_name)
