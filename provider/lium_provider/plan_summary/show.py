"""``terraform show -json`` of the plan the job has just made, with its provider started ahead.

``show`` starts the Lium provider only to read its schema, and that start is ~half of the command
(docs/benchmarks.md). :class:`PlanShow` starts the provider while Terraform plans, from the warm
zygote the plan's own starts use, and ``show`` attaches to it (:mod:`tfbridge.serving.reattach`). On a
fresh machine the zygote is warm only once the plan has started the provider, so a start that found
none is tried once more after the plan. Whenever no provider could be attached, or ``show`` failed
attached to one, ``show`` runs as it always does and starts its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tfbridge.serving.reattach import REATTACH_ENV, ReattachableProvider
from tfbridge.serving.warm import InstalledProvider

# How long ``show`` waits for the provider's handshake line; a warm start writes it in ~20 ms.
_HANDSHAKE_TIMEOUT_SECONDS = 5.0


class PlanShow:
    """Shows the saved plan of ``stack_dir`` as JSON, attached to the Lium provider ``terraform init``
    installed there (:meth:`start`) when it can be started warm."""

    def __init__(self, stack_dir: Path) -> None:
        self._stack_dir = stack_dir
        self._installed: InstalledProvider | None = None
        self._providers: list[ReattachableProvider] = []

    def start(self, provider: InstalledProvider | None) -> None:
        """Start ``provider`` for ``show`` to attach to, while Terraform plans."""
        self._installed = provider
        self._start_provider()

    def _start_provider(self) -> ReattachableProvider | None:
        # Not when the user attaches providers of their own: show is theirs to attach.
        if self._installed is None or REATTACH_ENV in os.environ:
            return None
        try:
            provider = ReattachableProvider(self._installed, self._stack_dir, os.environ)
        except OSError:
            return None
        self._providers.append(provider)
        return provider

    def _attach_environment(self) -> dict[str, str]:
        if not self._providers:
            return {}
        first = self._providers[0]
        attached = first.reattach_environment(_HANDSHAKE_TIMEOUT_SECONDS)
        if attached is None and first.declined:  # no warm zygote then: the plan's starts made one
            second = self._start_provider()
            attached = second.reattach_environment(_HANDSHAKE_TIMEOUT_SECONDS) if second else None
        return attached or {}

    def json(self, plan_file: Path) -> tuple[int, str]:
        """``terraform show -json plan_file``: (exit code, its output). Not echoed: the JSON carries
        sensitive values."""
        attached = self._attach_environment()
        if attached:
            result = _show(self._stack_dir, plan_file, {**os.environ, **attached})
            for provider in self._providers:  # it stops while the job goes on; close() reaps it
                provider.release()
            if result.returncode == 0:
                return 0, result.stdout
        result = _show(self._stack_dir, plan_file, None)
        if result.returncode != 0:
            sys.stderr.write(result.stderr)
        return result.returncode, result.stdout

    def close(self) -> None:
        """Stop every provider started for ``show``."""
        for provider in self._providers:
            provider.stop()
        self._providers.clear()


def _show(stack_dir: Path, plan_file: Path, env: dict[str, str] | None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["terraform", "show", "-json", str(plan_file)],
        cwd=stack_dir,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
    )
