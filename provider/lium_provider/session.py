"""The configured provider as resources see it (``ctx.provider``)."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from lium_provider.api.client import LiumClient
from lium_provider.journal import RentJournal
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
    stack_tag: str
    """This stack's tag (:mod:`lium_provider.stack`): recovery touches only objects that carry it."""
    watcher: PodWatcher = field(init=False)
    _planned_creates: set[str] = field(init=False, default_factory=set)
    _planned_lock: threading.Lock = field(init=False, default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.watcher = PodWatcher(self.client)

    def claim_pod_name(self, name: str) -> bool:
        """Note that this process plans to create a pod named ``name``; False if one already is.

        Within a stack the pod name is what recognises a pod without the local journal, so two creates
        of one name in one stack must be refused (each provider process plans one Terraform run).
        """
        with self._planned_lock:
            if name in self._planned_creates:
                return False
            self._planned_creates.add(name)
            return True

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
