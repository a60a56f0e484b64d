"""How the suite is handed to xdist workers: the heaviest work first, whole.

``make test`` runs ``--dist loadscope --no-loadscope-reorder``: a scope's tests run together in one
worker, and scopes start in collection order. Two rules on top of that:

- a scope is a test module, except that all of ``tests/release`` is one: the release build and the
  wheel's venv are made once, by the worker that runs them all, while the others work;
- modules of the tiers whose modules run longest go first (the release build and its installs, then
  the chaos scenarios, then terraform runs), so no long module starts last and keeps one worker busy
  after the others have finished; the short unit modules fill in at the end.
"""

from __future__ import annotations

from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

# Earlier in this tuple: scheduled earlier. A module takes the earliest rank of its tests' tiers.
TIER_ORDER = ("release", "chaos", "terraform", "sandbox", "unit")
ONE_SCOPE_DIRECTORIES = ("tests/release/",)


def scope_of(nodeid: str) -> str:
    module = nodeid.split("::", 1)[0]
    return next((d for d in ONE_SCOPE_DIRECTORIES if module.startswith(d)), module)


class ModuleScheduling(LoadScopeScheduling):
    """``loadscope`` with :func:`scope_of` for scopes."""

    def _split_scope(self, nodeid: str) -> str:
        return scope_of(nodeid)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> LoadScopeScheduling | None:
    return ModuleScheduling(config, log) if config.getoption("dist") == "loadscope" else None


def _rank(item: pytest.Item) -> int:
    return min((TIER_ORDER.index(m.name) for m in item.iter_markers() if m.name in TIER_ORDER), default=0)


@pytest.hookimpl(trylast=True)  # after tests/support/tiers.py has marked every test
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    scope_rank: dict[str, int] = {}
    first_seen: dict[str, int] = {}
    for index, item in enumerate(items):
        scope = scope_of(item.nodeid)
        scope_rank[scope] = min(scope_rank.get(scope, len(TIER_ORDER)), _rank(item))
        first_seen.setdefault(scope, index)
    items.sort(key=lambda item: (scope_rank[s := scope_of(item.nodeid)], first_seen[s]))
