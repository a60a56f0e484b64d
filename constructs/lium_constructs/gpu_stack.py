"""``GpuStack``: ``count`` GPU pods from one image, ready to SSH into, with the dstack runner on each.

Per pod it declares what dstack's Lium backend creates per job: a private ``lium_template`` and, for a
private image, a temporary ``lium_docker_credential`` (the password is write-only and comes from a
``SecretVariable``, never from the program), then the ``lium_pod`` and its ``lium_runner``. Every one of
them belongs to its pod: ``cdktf destroy`` (or a smaller ``count``) removes all of them together.

Pods are placed by an :class:`~lium_constructs.generated.OfferFilter` (generated from the provider's
offer filter, the same fields as ``lium_pod`` and ``lium_offers``): by default the cheapest offer with
one GPU; every other field narrows the search (lower bounds for memory and disk, an upper bound for the
price).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from constructs import Construct
from lium_constructs._cdk import cdk
from lium_constructs.cluster_stack import (
    DEFAULT_RENDEZVOUS_PORT,
    RUNNER_PORTS,
    ClusterSpec,
    check_cluster_arguments,
    declare_cluster,
)
from lium_constructs.generated import Cluster, DockerCredential, OfferFilter, Pod, Runner, Template
from lium_constructs.runner_options import DEFAULT_RUNNER, RunnerOptions, runner_on
from lium_constructs.secrets import SecretVariable

KEEP_ALIVE_ENTRYPOINT = "/bin/sh"
KEEP_ALIVE_ARGUMENTS = "-c 'exec sleep infinity'"
_NOT_IDENTIFIER = re.compile(r"[^A-Za-z0-9_]")


@dataclass(frozen=True)
class RegistryAuth:
    """Credentials of a private registry. The password is read from ``TF_VAR_<password_variable>``."""

    username: str
    password_variable: str = "registry_password"


class GpuStack(Construct):
    """``count`` pods from one image, with their templates, optional registry login and optional volume.

    Outputs (names prefixed with ``output_prefix``): ``ssh_commands``, ``runner_ports`` and
    ``price_per_hour`` (per pod), ``known_hosts`` (every pod's pinned host key, one line each, for the
    SSH commands to read), ``stack_price_per_hour``, with ``serve`` ``served_addresses`` (per pod, each
    served port's ``host:port``), with a runner ``run_command`` (``lium-tf run`` on the stack's runners:
    the command goes after ``--``), and with a smoke test ``smoke_test_outputs``.
    """

    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        image: str,
        count: int = 1,
        name: str | None = None,
        offer: OfferFilter | None = None,
        registry: RegistryAuth | None = None,
        volume_id: str | None = None,
        environment: Mapping[str, str] | None = None,
        entrypoint: str | None = KEEP_ALIVE_ENTRYPOINT,
        startup_commands: str | None = KEEP_ALIVE_ARGUMENTS,
        ssh_public_key: str | None = None,
        authorized_keys: Sequence[str] | None = None,
        serve: Sequence[int] = (),
        termination_hours: int | None = None,
        runner: RunnerOptions | None = DEFAULT_RUNNER,
        provider: cdk.TerraformProvider | None = None,
        output_prefix: str = "",
        nodes: int | None = None,
        rendezvous_port: int = DEFAULT_RENDEZVOUS_PORT,
    ) -> None:
        """Declare the stack.

        Args:
            image: Image reference every pod runs, e.g. ``"python:3.11-slim"``.
            count: How many pods (0 is allowed: everything is removed).
            name: Prefix of the Lium names (``<name>-<i>``); default ``id_``. Terraform addresses come from
                ``id_`` (``lium_pod.<id_>_<i>``), so a new ``name`` replaces the pods in place of a delete
                and an unrelated create.
            offer: Which offer each pod rents (default: the cheapest with one GPU).
            registry: Login for a private image: a temporary credential per pod.
            volume_id: A ``lium_volume`` (``Volume(...).id``) to mount at /mnt. A volume is attached to one
                pod at a time, so it needs ``count`` ≤ 1; declare it outside the stack so that it outlives
                the pods.
            environment: Environment variables of the pods.
            entrypoint: Entrypoint of the pods; the default keeps the container alive (``sleep infinity``).
            startup_commands: Arguments of the entrypoint.
            ssh_public_key: Key authorised for root; default: derived from the provider's private key.
            authorized_keys: More keys authorised for root on every pod or node, so a team shares them
                (``DataLiumSshKeys(...).keys``' public keys, or literal OpenSSH lines).
            serve: Container ports the pods serve (a model server, TensorBoard): published beside SSH
                and the runner's, waited for at every apply until each answers inside the pod
                (``wait_for_ports``), and output as ``served_addresses``. The server must be what the
                container runs: set ``entrypoint``/``startup_commands`` to its command (``None`` for both
                runs the image's own); with the defaults (``sleep infinity``) this is refused.
            termination_hours: Lium removes each pod this many hours (1 to 720) after it started. Set on
                every pod (not as the provider's default), so the synthesized plan shows each pod's
                deadline and a provider shared with other stacks keeps its own; default: the provider's
                ``default_termination_hours``, else none.
            runner: The dstack runner on each pod, optionally with a smoke test; ``None``: no runner.
            provider: A provider configuration (an alias) for every resource of the stack.
            output_prefix: Prefix of the output names, for apps with several stacks.
            nodes: Declare one multi-node cluster of this many whole nodes (2 or more) instead of ``count``
                pods: a ``lium_cluster`` on Lium's cluster ``image`` (``daturaai/lium-cluster:<tag>``), with
                the runner on every node given ``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT``;
                ``offer`` is then checked per node, its ``gpu_count`` the GPUs per node (the default, one,
                means any size: members are whole nodes). No ``registry`` or ``volume_id`` (see
                :mod:`lium_constructs.cluster_stack`).
            rendezvous_port: ``MASTER_PORT`` of a cluster's distributed launch.
        """
        super().__init__(scope, id_)
        self.cluster: Cluster | None = None
        self.served = check_served_ports(serve)
        if isinstance(authorized_keys, str):
            raise ValueError("authorized_keys: a list of public key lines, not one string")
        if nodes is not None and rendezvous_port in self.served:
            raise ValueError(f"serve: port {rendezvous_port} is the cluster's rendezvous (MASTER_PORT)")
        if self.served and (entrypoint, startup_commands) == (KEEP_ALIVE_ENTRYPOINT, KEEP_ALIVE_ARGUMENTS):
            raise ValueError(
                "serve: the default entrypoint keeps the container alive with `sleep infinity`, which serves "
                "nothing: give the server's command (entrypoint and startup_commands; None for both runs the "
                "image's own)"
            )
        keys = list(authorized_keys) if authorized_keys is not None else None
        if nodes is not None:
            check_cluster_arguments(nodes, count, image, registry, volume_id, rendezvous_port)
            spec = ClusterSpec(
                name=name or id_,
                nodes=nodes,
                image=image,
                offer=offer or OfferFilter(),
                entrypoint=entrypoint,
                startup_commands=startup_commands,
                environment=environment,
                ssh_public_key=ssh_public_key,
                authorized_keys=keys,
                served=self.served,
                termination_hours=termination_hours,
                runner_options=runner,
                rendezvous_port=rendezvous_port,
                provider=provider,
            )
            self._declare_cluster(_identifier(id_), spec, output_prefix)
            return
        if count < 0:
            raise ValueError("count must be 0 or more")
        if volume_id is not None and count > 1:
            raise ValueError("a volume is mounted in one pod at a time: use count=1 with volume_id")
        self.name = name or id_
        base = _identifier(id_)
        flt = offer or OfferFilter()
        # One variable for all pods; two stacks with registries need different ``password_variable``s.
        self.password = (
            SecretVariable(
                self,
                "registry-password",
                name=registry.password_variable,
                description=f"Password of registry user {registry.username} (write-only: never stored).",
            )
            if registry is not None
            else None
        )
        self.credentials: list[DockerCredential] = []
        self.templates: list[Template] = []
        self.pods: list[Pod] = []
        self.runners: list[Runner] = []
        for index in range(count):
            logical = f"{base}_{index}"
            credential_id = None
            if registry is not None and self.password is not None:
                credential = DockerCredential(
                    self,
                    f"credential-{index}",
                    username=registry.username,
                    password_wo=self.password.string_value,
                    password_wo_version=1,
                    provider=provider,
                )
                credential.override_logical_id(logical)
                self.credentials.append(credential)
                credential_id = credential.id
            template = Template(
                self,
                f"template-{index}",
                name=f"{self.name}-{index}",
                image=image,
                entrypoint=entrypoint,
                startup_commands=startup_commands,
                environment=environment,
                docker_credential_id=credential_id,
                internal_ports=published_ports(self.served),
                is_private=True,
                provider=provider,
            )
            template.override_logical_id(logical)
            self.templates.append(template)
            pod = Pod(
                self,
                f"pod-{index}",
                name=f"{self.name}-{index}",
                template_id=template.id,
                ssh_public_key=ssh_public_key,
                authorized_keys=keys,
                wait_for_ports=list(self.served) or None,
                volume_id=volume_id,
                termination_hours=termination_hours,
                provider=provider,
                **flt.arguments(),
            )
            pod.override_logical_id(logical)
            self.pods.append(pod)
            if runner is not None:
                pod_runner = runner_on(
                    self,
                    f"runner-{index}",
                    runner,
                    pod_id=pod.id,
                    ssh_host_key=pod.ssh_host_key,
                    environment=runner.environment,
                    provider=provider,
                )
                pod_runner.override_logical_id(logical)
                self.runners.append(pod_runner)
        self.ssh_commands = [ssh_command(p.ssh_host, p.ssh_port) for p in self.pods]
        self.known_hosts = [p.known_hosts for p in self.pods]
        self.served_addresses = [served_addresses(p.ssh_host, p.ports, self.served) for p in self.pods]
        self.prices = [p.price_per_hour for p in self.pods]
        self.hourly_price = cdk.Token.as_number(cdk.Fn.sum(self.prices)) if self.pods else 0.0
        self._output_common(output_prefix, runner, "pod")

    def _declare_cluster(self, base: str, spec: ClusterSpec, output_prefix: str) -> None:
        self.name = spec.name
        self.password = None
        self.credentials = []
        self.pods = []
        parts = declare_cluster(self, base, spec)
        self.templates, self.cluster, self.runners = [parts.template], parts.cluster, parts.runners
        members = [parts.cluster.nodes.get(rank) for rank in range(spec.nodes)]
        self.ssh_commands = [ssh_command(m.ssh_host, m.ssh_port) for m in members]
        self.known_hosts = [m.known_hosts for m in members]
        self.served_addresses = [served_addresses(m.ssh_host, m.ports, self.served) for m in members]
        self.prices = [parts.cluster.price_per_hour]
        self.hourly_price = parts.cluster.price_per_hour
        self._output(
            output_prefix + "rendezvous_address", members[0].overlay_ip, "MASTER_ADDR: node 0's overlay"
        )
        self._output(
            output_prefix + "rendezvous_port", spec.rendezvous_port, "MASTER_PORT of a distributed launch"
        )
        self._output(output_prefix + "world_size", spec.nodes, "WORLD_SIZE: the nodes of the cluster")
        self._output_common(output_prefix, spec.runner_options, "node")

    def _output_common(self, prefix: str, runner: RunnerOptions | None, unit: str) -> None:
        """The outputs of both forms: per ``unit`` (pod or node, in order) and for the whole stack."""
        self._output(
            prefix + "ssh_commands",
            self.ssh_commands,
            f"root SSH command per {unit}; it reads the host keys from ./{KNOWN_HOSTS_FILE} ("
            f"`terraform output -raw {prefix}known_hosts > {KNOWN_HOSTS_FILE}`)",
        )
        self._output(
            prefix + "known_hosts",
            cdk.Fn.join("\n", self.known_hosts),
            f"the pinned host key of every {unit}, one known_hosts line each",
        )
        if self.served:
            self._output(
                prefix + "served_addresses",
                self.served_addresses,
                f"per {unit}, each served port's `host:port`",
            )
        if runner is not None:
            ports = [r.runner_ssh_port for r in self.runners]
            self._output(prefix + "runner_ports", ports, "external port of each runner's sshd")
            self._output(prefix + "run_command", self.run_command(), "`lium-tf run` on this stack's runners")
        if runner is not None and runner.smoke_test:
            outputs = [r.smoke_test_output for r in self.runners]
            self._output(prefix + "smoke_test_outputs", outputs, "last lines of each smoke test")
        per = "the whole cluster" if self.cluster is not None else "per pod"
        self._output(prefix + "price_per_hour", self.prices, f"billed USD per hour, {per}")
        self._output(prefix + "stack_price_per_hour", self.hourly_price, f"billed USD per hour, all {unit}s")

    def run_command(self) -> str:
        """``lium-tf run`` on this stack's runners (every node of a cluster together), from the CDK
        project's directory after ``cdktf deploy``: the command to run goes after ``--``."""
        stack = cdk.TerraformStack.of(self).node.id
        targets = "".join(
            f" --target {r.terraform_resource_type}.{r.friendly_unique_id}" for r in self.runners
        )
        return f"lium-tf run --dir cdktf.out/stacks/{stack}{targets} --"

    def _output(self, name: str, value: object, description: str) -> None:
        cdk.TerraformOutput(self, name, value=value, description=description, static_id=True)


def check_served_ports(serve: Sequence[int]) -> tuple[int, ...]:
    """``serve`` as given, once it is checked: TCP ports, each once, none of SSH's or the runner's."""
    if isinstance(serve, str | bytes) or not isinstance(serve, Sequence):
        raise ValueError(f"serve: a list of ports, e.g. [8000], not {serve!r}")
    ports = tuple(serve)
    for port in ports:
        if not (isinstance(port, int) and not isinstance(port, bool) and 1 <= port <= 65535):
            raise ValueError(f"serve: {port!r} is not a TCP port (1 to 65535)")
        if port in RUNNER_PORTS:
            raise ValueError(f"serve: port {port} is SSH's or the runner's, published already")
    if len(set(ports)) != len(ports):
        raise ValueError(f"serve: a port is listed twice in {list(ports)}")
    return ports


def published_ports(served: Sequence[int]) -> list[int] | None:
    """A template's ``internal_ports`` for ``served``: SSH's and the runner's, then those (None: the
    provider's default, SSH's and the runner's)."""
    return [*RUNNER_PORTS, *served] if served else None


def served_addresses(host: str, ports: Mapping[str, float], served: Sequence[int]) -> dict[str, str]:
    """Each served container port's ``host:external port`` (Terraform expressions, known after apply)."""
    return {str(port): f"{host}:{cdk.Token.as_string(cdk.Fn.lookup(ports, str(port)))}" for port in served}


KNOWN_HOSTS_FILE = "known_hosts"
"""The file the SSH commands read host keys from: the ``known_hosts`` output, written next to you."""


def ssh_command(host: str, port: float) -> str:
    """The root SSH command of a pod or node, in the one form the examples use: it checks the host key
    against :data:`KNOWN_HOSTS_FILE` (the pinned keys), so it works without a terminal to ask."""
    return f"ssh -o UserKnownHostsFile={KNOWN_HOSTS_FILE} -p {cdk.Token.as_string(port)} root@{host}"


def _identifier(name: str) -> str:
    """A Terraform resource name from a stack name (letters, digits and ``_``; not starting with a digit)."""
    cleaned = _NOT_IDENTIFIER.sub("_", name)
    return cleaned if cleaned[:1].isalpha() or cleaned[:1] == "_" else f"_{cleaned}"
