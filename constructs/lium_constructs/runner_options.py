"""The dstack runner's options of a ``GpuStack``: one declaration for the pod form and the cluster form."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from constructs import Construct
from lium_constructs._cdk import cdk
from lium_constructs.generated import Runner


@dataclass(frozen=True)
class RunnerOptions:
    """The dstack runner on every pod (``lium_runner``); unset fields take the provider's defaults."""

    version: str | None = None
    """dstack runner release (default: the provider's, 0.22.5)."""
    download_url: str | None = None
    """Where pods download it (``{version}``, ``{arch}`` filled in); default: the provider's setting."""
    smoke_test: Sequence[str] | None = None
    """Commands run once through the runner after it is healthy; a failure fails the deploy."""
    environment: Mapping[str, str] | None = None
    """Extra environment of the runner and its jobs."""
    authorized_keys: Sequence[str] | None = None
    """Extra public keys for the runner's sshd (the provider's key is always authorised)."""


DEFAULT_RUNNER = RunnerOptions()


def runner_on(
    scope: Construct,
    id_: str,
    options: RunnerOptions,
    *,
    pod_id: str,
    ssh_host_key: str,
    environment: Mapping[str, str] | None,
    provider: cdk.TerraformProvider | None,
) -> Runner:
    """The ``lium_runner`` of ``options`` on one pod (or cluster node), with ``environment`` as its own."""
    return Runner(
        scope,
        id_,
        pod_id=pod_id,
        ssh_host_key=ssh_host_key,
        runner_version=options.version,
        runner_download_url=options.download_url,
        smoke_test=options.smoke_test,
        environment=environment,
        authorized_keys=options.authorized_keys,
        provider=provider,
    )
