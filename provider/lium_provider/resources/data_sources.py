"""Data sources: ``lium_offers`` (what can be rented now), ``lium_pod``, ``lium_templates`` and
``lium_ssh_keys`` (the account's keys, for a team's ``authorized_keys``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, model_validator

from lium_provider.domain.offer_filter import OfferFilter
from lium_provider.domain.stack import is_named
from lium_provider.resources.common import api_errors
from lium_provider.resources.template import image_of
from lium_provider.session import session
from lium_provider.sshkeys import fingerprint
from tfbridge import Attribute, Context, DataSource, TFError


class OfferModel(BaseModel):
    """One rentable offer."""

    executor_id: Annotated[
        str | None, Attribute(computed=True, description="Executor (node) id to rent.")
    ] = None
    gpu: Annotated[str | None, Attribute(computed=True, description="GPU model as the feed names it.")] = None
    gpu_count: Annotated[int | None, Attribute(computed=True, description="GPUs in this offer.")] = None
    gpu_memory_gib: Annotated[float | None, Attribute(computed=True, description="Memory per GPU, GiB.")] = (
        None
    )
    cpu: Annotated[int | None, Attribute(computed=True, description="CPUs a pod of this size gets.")] = None
    memory_gib: Annotated[
        float | None, Attribute(computed=True, description="RAM a pod of this size gets, GiB.")
    ] = None
    disk_gb: Annotated[float | None, Attribute(computed=True, description="Container disk quota, GB.")] = None
    region: Annotated[str | None, Attribute(computed=True, description="Region, e.g. `us-ca`.")] = None
    spot: Annotated[bool | None, Attribute(computed=True, description="Spot (reclaimable) capacity.")] = None
    price_per_hour: Annotated[
        float | None, Attribute(computed=True, description="USD per hour for the pod.")
    ] = None


class OffersModel(OfferFilter):
    """Offers rentable now, from Lium's public nodes feed, cheapest first. Memory and disk are lower bounds."""

    model_config = ConfigDict(extra="forbid")

    offers: Annotated[
        list[OfferModel] | None, Attribute(computed=True, description="Matching offers, cheapest first.")
    ] = None


class OffersDataSource(DataSource[OffersModel]):
    type_name = "lium_offers"
    model = OffersModel
    description = OffersModel.__doc__ or ""

    def read(self, ctx: Context, config: OffersModel) -> OffersModel:
        from lium_provider.domain.offers import find_offers  # gpuhunt: loaded only when used

        s = session(ctx)
        with api_errors("reading Lium offers"):
            offers = find_offers(s.feed_url, config, client=s.client)
        return config.model_copy(
            update={
                "offers": [
                    OfferModel(
                        executor_id=o.executor_id,
                        gpu=o.gpu_model,
                        gpu_count=o.gpu_count,
                        gpu_memory_gib=o.gpu_memory_gib,
                        cpu=o.cpu,
                        memory_gib=o.memory_gib,
                        disk_gb=o.disk_gb,
                        region=o.region,
                        spot=o.spot,
                        price_per_hour=o.price_per_hour,
                    )
                    for o in offers
                ]
            }
        )


class PodLookupModel(BaseModel):
    """Look up a pod of this account by `id` or by `name` (its name on Lium, or the `name` of one of this stack's `lium_pod`s)."""

    model_config = ConfigDict(extra="forbid")

    id: Annotated[str | None, Attribute(optional=True, computed=True, description="Pod id.")] = None
    name: Annotated[str | None, Attribute(optional=True, computed=True, description="Pod name.")] = None
    status: Annotated[str | None, Attribute(computed=True, description="Lium status.")] = None
    executor_id: Annotated[str | None, Attribute(computed=True, description="Executor id.")] = None
    gpu: Annotated[str | None, Attribute(computed=True, description="GPU model.")] = None
    gpu_count: Annotated[int | None, Attribute(computed=True, description="GPUs.")] = None
    price_per_hour: Annotated[float | None, Attribute(computed=True, description="USD per hour.")] = None
    ssh_host: Annotated[str | None, Attribute(computed=True, description="SSH host.")] = None
    ssh_port: Annotated[int | None, Attribute(computed=True, description="SSH port.")] = None
    ports: Annotated[
        dict[str, int] | None, Attribute(computed=True, description="Container → external port.")
    ] = None
    template_id: Annotated[str | None, Attribute(computed=True, description="Template id.")] = None

    @model_validator(mode="after")
    def _one_key(self) -> PodLookupModel:
        if (self.id is None) == (self.name is None):
            raise ValueError("set exactly one of `id` or `name`")
        return self


class PodDataSource(DataSource[PodLookupModel]):
    type_name = "lium_pod"
    model = PodLookupModel
    description = PodLookupModel.__doc__ or ""

    def read(self, ctx: Context, config: PodLookupModel) -> PodLookupModel:
        s = session(ctx)
        client = s.client
        with api_errors("looking up the pod"):
            if config.id:
                pod = client.get_pod(config.id)
            else:
                wanted = config.name or ""
                named = [p for p in client.list_pods() if is_named(p.pod_name, wanted, s.stack_tag)]
                if len(named) > 1:
                    raise TFError(
                        f"{len(named)} pods are named {config.name!r}",
                        "Look the pod up by `id`.",
                        path=("name",),
                    )
                pod = named[0] if named else None
        if pod is None:
            which = ("id", config.id) if config.id else ("name", config.name)
            raise TFError(f"No pod with {which[0]} {which[1]!r}", path=(which[0],))
        target = pod.ssh_host_port()
        return PodLookupModel.model_construct(
            id=pod.id,
            name=config.name or pod.pod_name,
            status=pod.status,
            executor_id=pod.executor_id,
            gpu=pod.gpu_name,
            gpu_count=pod.gpu_count,
            price_per_hour=pod.price,
            ssh_host=target[0] if target else None,
            ssh_port=target[1] if target else None,
            ports=dict(pod.ports_mapping) if pod.ports_mapping else None,
            template_id=pod.template_id,
        )


class TemplateSummary(BaseModel):
    """One template."""

    id: Annotated[str | None, Attribute(computed=True, description="Template id.")] = None
    name: Annotated[str | None, Attribute(computed=True, description="Name.")] = None
    image: Annotated[str | None, Attribute(computed=True, description="Image reference.")] = None
    is_private: Annotated[bool | None, Attribute(computed=True, description="Owned by this account.")] = None


class TemplatesModel(BaseModel):
    """Templates visible to this account (public and own), optionally filtered by name prefix."""

    model_config = ConfigDict(extra="forbid")

    name_prefix: Annotated[
        str | None, Attribute(optional=True, description="Only names starting with this.")
    ] = None
    templates: Annotated[
        list[TemplateSummary] | None, Attribute(computed=True, description="Templates, by name.")
    ] = None


class TemplatesDataSource(DataSource[TemplatesModel]):
    type_name = "lium_templates"
    model = TemplatesModel
    description = TemplatesModel.__doc__ or ""

    def read(self, ctx: Context, config: TemplatesModel) -> TemplatesModel:
        with api_errors("listing templates"):
            templates = session(ctx).client.list_templates()
        prefix = config.name_prefix or ""
        chosen = sorted((t for t in templates if t.name.startswith(prefix)), key=lambda t: (t.name, t.id))
        return config.model_copy(
            update={
                "templates": [
                    TemplateSummary(id=t.id, name=t.name, image=image_of(t), is_private=t.is_private)
                    for t in chosen
                ]
            }
        )


class SshKeySummary(BaseModel):
    """One key registered on the account."""

    id: Annotated[str | None, Attribute(computed=True, description="Key id.")] = None
    name: Annotated[
        str | None,
        Attribute(
            computed=True,
            description="Its name on Lium (a `lium_ssh_key`'s ends with `.lium-stacks-<stack tag>`).",
        ),
    ] = None
    public_key: Annotated[str | None, Attribute(computed=True, description="One OpenSSH line.")] = None
    fingerprint: Annotated[str | None, Attribute(computed=True, description="`<type> SHA256:…`.")] = None


class SshKeysModel(BaseModel):
    """Public keys registered on the Lium account (`lium_ssh_key`, Lium's console or `lium` CLI), optionally filtered by name prefix: `keys[*].public_key` is a team's `authorized_keys`."""

    model_config = ConfigDict(extra="forbid")

    name_prefix: Annotated[
        str | None, Attribute(optional=True, description="Only keys whose Lium name starts with this.")
    ] = None
    keys: Annotated[list[SshKeySummary] | None, Attribute(computed=True, description="Keys, by name.")] = None


class SshKeysDataSource(DataSource[SshKeysModel]):
    type_name = "lium_ssh_keys"
    model = SshKeysModel
    description = SshKeysModel.__doc__ or ""

    def read(self, ctx: Context, config: SshKeysModel) -> SshKeysModel:
        with api_errors("listing the account's SSH keys"):
            keys = session(ctx).client.list_ssh_keys()
        prefix = config.name_prefix or ""
        chosen = sorted(
            (k for k in keys if k.name.startswith(prefix) and k.public_key.strip()),
            key=lambda k: (k.name, k.id),
        )
        return config.model_copy(
            update={
                "keys": [
                    SshKeySummary(
                        id=k.id,
                        name=k.name,
                        public_key=k.public_key.strip(),
                        fingerprint=fingerprint(k.public_key),
                    )
                    for k in chosen
                ]
            }
        )
