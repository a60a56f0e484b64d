"""The configured provider as resources see it (``ctx.provider``)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from lium_provider.api.client import LiumClient
from lium_provider.journal import RentJournal
from lium_provider.placement import Placement
from lium_provider.pod_watch import PodWatcher
from tfbridge import Context, TFError


@dataclass
class LiumSession:
    """What a configured provider hands each resource: the API client and the user's SSH identity."""

    client: LiumClient
    feed_url: str
    ssh_private_key: str | None
    runner_download_url: str | None
    journal: RentJournal
    default_termination_hours: int | None = None
    """``termination_hours`` of a pod that sets none (the provider's ``default_termination_hours``)."""
    watcher: PodWatcher = field(init=False)
    placement: Placement = field(init=False)

    def __post_init__(self) -> None:
        self.watcher = PodWatcher(self.client)
        self.placement = Placement(lambda: self.client.nodes_feed(self.feed_url))

    def require_ssh_key(self, attribute: str) -> str:
        if not self.ssh_private_key:
            raise TFError(
                "No SSH private key configured",
                "Set `ssh_private_key` or `ssh_private_key_file` in the provider block, or the environment "
                f"variable LIUM_SSH_PRIVATE_KEY_FILE: {attribute} needs root SSH access to the pod.",
            )
        return self.ssh_private_key


def journal_dir() -> Path:
    """Where rent attempts are written before they are sent, so a crashed run can be reconciled."""
    base = os.environ.get("LIUM_STATE_DIR") or os.path.join(
        os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state"), "lium-stacks"
    )
    return Path(base) / "rent-journal"


def session(ctx: Context) -> LiumSession:
    """The configured session, or a clear error if Terraform never configured the provider."""
    if not isinstance(ctx.provider, LiumSession):
        raise TFError(
            "The lium provider is not configured", "Terraform did not configure the provider block."
        )
    return ctx.provider
