"""The ``lium_pod`` model: its attributes, the digest of its Lium name, and what a running pod is.

Shared by the resource (:mod:`lium_provider.resources.pod`) and what reads or imports pods
(:mod:`lium_provider.resources.pod_import`), which therefore never import the resource.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field, field_validator

from lium_provider.api.models import TerminationHours
from lium_provider.domain.offer_filter import OfferFilter, PodFacts
from lium_provider.domain.stack import rent_digest
from lium_provider.resources.authorized_keys import AuthorizedKeys, authorized_beside, keys_digested
from lium_provider.resources.inputs import LIUM_ID, OPENSSH_PUBLIC_KEY, POD_PATH, PRINTABLE_NAME
from lium_provider.resources.ownership import AdoptedFrom, StackTag
from lium_provider.resources.pod_private import PodPrivate
from lium_provider.resources.served_ports import WaitForPorts
from lium_provider.resources.visibility import RentedByKey, WorkspaceId
from lium_provider.runner.scripts import SSH_PORT as RUNNER_SSH_PORT
from tfbridge import TIMEOUTS_BLOCK, Attribute, RequiresReplace, Timeouts, UseStateForUnknown

_REPLACE = (RequiresReplace(),)
_KEEP = (UseStateForUnknown(),)
_KEEP_OR_REPLACE = (UseStateForUnknown(), RequiresReplace())

NOTEBOOK_RESERVED_PORTS = (22, RUNNER_SSH_PORT)
"""The pod's sshd and a ``lium_runner``'s: a notebook there would take the port from them."""


class PodModel(OfferFilter):
    """A Lium GPU pod. Placed by `executor_id`, or by an offer filter (the cheapest match at apply time).
    Re-renting (a new pod, billed anew; the old one is deleted): changing `name`, `gpu_count`,
    `executor_id`, `ssh_public_key`, the keys of `authorized_keys` or `volume_id`, or a dead pod. Changing
    `template_id` keeps the pod and its node: Lium switches its container in place (a new container and
    SSH host key, the same id, node and volume; a `lium_runner` on it is replaced), as it does again for
    a pod whose last switch failed. Changing an offer-filter
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
        str,
        Attribute(
            required=True,
            description="`lium_template` to run. A change switches the running pod's container in place "
            "(the same pod, node and volume; new ports and SSH host key).",
        ),
        LIUM_ID,
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
    authorized_keys: AuthorizedKeys = None
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
        Attribute(
            computed=True,
            plan=_KEEP,
            description="Each port the template publishes (`internal_ports`) → its external port on `ssh_host`; "
            "a template switch gives new ones.",
        ),
    ] = None
    ssh_host_key: Annotated[
        str | None,
        Attribute(computed=True, plan=_KEEP, description="The pod's SSH host key, pinned on first contact."),
    ] = None
    known_hosts: Annotated[
        str | None,
        Attribute(
            computed=True,
            plan=_KEEP,
            description="The pod's `known_hosts` line (`[ssh_host]:ssh_port <ssh_host_key>`): written to a "
            "file, `ssh -o UserKnownHostsFile=<file>` checks the pinned key without asking, as a CI job "
            "without a terminal needs.",
        ),
    ] = None
    wait_for_ports: WaitForPorts = None
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
            "characters of what the rent asks for and cannot change in place (`gpu_count`, `volume_id`, a "
            "configured `executor_id`, `ssh_public_key` and `authorized_keys`), so a replacement never has its "
            "predecessor's name. It recognises this stack's pod of this instance from any machine.",
        ),
    ] = None
    jupyter_port: Annotated[
        int | None,
        Attribute(
            optional=True,
            description="Run a Jupyter notebook server on this internal port of the pod's template (one of "
            f"its `internal_ports`, never {' or '.join(map(str, NOTEBOOK_RESERVED_PORTS))}); its address is "
            "`jupyter_url`. Changed in place; a new container (a template switch) gets it again. Unset: none "
            "is installed (one installed before runs until the pod's container changes).",
        ),
    ] = Field(default=None, ge=1, le=65535)
    jupyter_url: Annotated[
        str | None,
        Attribute(
            computed=True,
            sensitive=True,
            description="The notebook's URL, with its access token (sensitive); null without `jupyter_port`.",
        ),
    ] = None
    enable_backups: Annotated[
        bool | None,
        Attribute(
            optional=True,
            computed=True,
            plan=_KEEP_OR_REPLACE,
            description="Whether Lium backs up the pod's volume on its own schedule (billed per GB-hour of "
            "backup storage; docs/guides/backups-and-notebooks.md). Lium's own default is true; the provider's is false: "
            "declare backups with `lium_backup_config` instead. Set at rent: a change re-rents.",
        ),
    ] = None
    restore_backup_id: Annotated[
        str | None,
        Attribute(
            optional=True,
            plan=_REPLACE,
            description="Restore this backup (a `data.lium_backups` id) into the new pod, at `restore_path`. "
            "Set at rent: a change re-rents, so a pod restored from `latest_completed_id` (which moves with "
            "every backup) usually says `lifecycle { ignore_changes = [restore_backup_id] }`. Null: nothing "
            "is restored.",
        ),
        LIUM_ID,
    ] = None
    restore_path: Annotated[
        str | None,
        Attribute(
            optional=True,
            plan=_REPLACE,
            description="With `restore_backup_id`: the new or empty directory in the pod the backup is "
            "restored into (absolute); the backed-up directory's contents land in it directly.",
        ),
        POD_PATH,
    ] = None
    stack_tag: StackTag = None
    adopted_from: AdoptedFrom = None
    api_key_id: RentedByKey = None
    workspace_id: WorkspaceId = None
    timeouts: Annotated[Timeouts | None, TIMEOUTS_BLOCK] = None

    @field_validator("jupyter_port")
    @classmethod
    def _notebook_port(cls, port: int | None) -> int | None:
        if port in NOTEBOOK_RESERVED_PORTS:
            raise ValueError(
                f"jupyter_port {port} is the pod's sshd or its runner's: choose another of the template's "
                "internal_ports"
            )
        return port


def pod_rent_digest(pod: PodModel, configured: PodModel) -> str:
    """The rent digest of a pod's Lium name (:func:`lium_provider.domain.stack.rent_digest`): of what
    ``pod`` plans to rent that never changes in place, and of the executor and keys its configuration
    names. Not its template: a template switch keeps the pod, and its name."""
    key = configured.ssh_public_key
    extra = authorized_beside(key, configured.authorized_keys)
    return rent_digest(pod.gpu_count, pod.volume_id, configured.executor_id, key, *keys_digested(extra))


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
