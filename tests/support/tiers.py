"""Test tiers: what each test needs to run, as a marker, so a tier can be run alone (docs/testing.md).

A test is in the ``unit`` tier unless it needs one of the heavier parts, each its own marker:

- ``terraform``: drives the real terraform CLI (any test using the ``terraform_env`` fixture);
- ``sandbox``: starts the emulator, whose pods are Linux sandboxes with a real sshd (any fixture named
  ``*emulator``), or sandboxes directly;
- ``release``: builds the release artifacts and installs them (``tests/release``);
- ``chaos``: the seeded fault-injection scenarios (``tests/chaos``).

Markers come from the directory and the fixtures a test uses, or from the test itself
(``pytestmark = pytest.mark.sandbox``); a module of ``tests/chaos`` or ``tests/release`` that needs none
of it says ``pytestmark = pytest.mark.unit``. A test left in the unit tier that starts terraform, a sandbox
tool or the emulator fails at once, naming the marker it needs, so the unit tier stays fast by
construction rather than by review.
"""

from __future__ import annotations

import contextlib
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

TIERS = ("terraform", "sandbox", "release", "chaos")
# Fixtures that bring a tier with them (pytest resolves them transitively: `stack` needs `terraform_env`).
FIXTURE_TIERS = {"terraform_env": "terraform", "release_dist": "release"}
EMULATOR_FIXTURE_SUFFIX = "emulator"  # `emulator`, `shared_emulator`, `old_emulator`…: the sandbox tier
DIRECTORY_TIERS = {"release": "release", "chaos": "chaos"}
# What a unit test may not start: programs, and `python -m` modules, with the tier that allows each.
GUARDED_PROGRAMS = {"terraform": "terraform", "unshare": "sandbox", "nsenter": "sandbox"}
GUARDED_MODULES = {"release": "release"}
EMULATOR_COMMANDS = ("lium-emulator", "lium_emulator.cli")  # its `serve` starts pods: the sandbox tier


def tier_needed(argv: list[str]) -> str | None:
    """The tier a command line belongs to, or None when a unit test may run it.

    Every word counts, also inside a shell string (``sh -c "terraform plan"``) and after interpreter
    options (``python -I -m release``): a guarded program anywhere in the command needs its tier."""
    words: list[str] = []
    for arg in argv:
        try:
            words += shlex.split(arg)
        except ValueError:  # an unbalanced quote: plain words are still words
            words += arg.split()
    names = {Path(part).name for word in words for part in word.split()}  # a -c script's words too
    modules = {words[i + 1] for i, word in enumerate(words[:-1]) if word == "-m"}
    for program, tier in GUARDED_PROGRAMS.items():
        if program in names:
            return tier
    for module, tier in GUARDED_MODULES.items():
        if module in modules:
            return tier
    emulator = names | modules
    if any(c in emulator for c in EMULATOR_COMMANDS) and "serve" in words and "--help" not in words:
        return "sandbox"
    return None


def tiers_of(item: pytest.Item) -> set[str]:
    return {tier for tier in TIERS if item.get_closest_marker(tier) is not None}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tests_dir = Path(str(config.rootpath)) / "tests"
    for item in items:
        parts = Path(str(item.path)).relative_to(tests_dir).parts
        declared_unit = item.get_closest_marker("unit") is not None  # a pure module in a heavy directory
        wanted = {DIRECTORY_TIERS[parts[0]]} if parts[0] in DIRECTORY_TIERS and not declared_unit else set()
        fixtures = getattr(item, "fixturenames", ())
        wanted |= {tier for name, tier in FIXTURE_TIERS.items() if name in fixtures}
        if any(name.endswith(EMULATOR_FIXTURE_SUFFIX) for name in fixtures):
            wanted.add("sandbox")
        for tier in sorted(wanted - tiers_of(item)):
            item.add_marker(tier)
        if not tiers_of(item):
            item.add_marker("unit")


class _UnitTierPopen(subprocess.Popen):  # type: ignore[type-arg]
    """``subprocess.Popen`` for unit tests: refuses the programs of the heavier tiers."""

    def __init__(self, args: Any, *rest: Any, **kwargs: Any) -> None:
        argv = [str(args)] if isinstance(args, str | bytes | Path) else [str(a) for a in args]
        tier = tier_needed(argv)
        if tier is not None:
            pytest.fail(
                f"a unit test started {' '.join(argv[:3])}: mark it {tier!r} "
                f"(pytestmark = pytest.mark.{tier}) or use the fixture that brings it",
                pytrace=False,
            )
        super().__init__(args, *rest, **kwargs)


@contextlib.contextmanager
def _guarded(item: pytest.Item) -> Iterator[None]:
    """``subprocess.Popen`` refuses the heavier tiers' programs while a unit test's phase runs."""
    if item.get_closest_marker("unit") is None:
        yield
        return
    original = subprocess.Popen
    subprocess.Popen = _UnitTierPopen  # type: ignore[misc]
    try:
        yield
    finally:
        subprocess.Popen = original  # type: ignore[misc]


# Every phase, so that module and session fixtures a unit test sets up are guarded too.
@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    with _guarded(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with _guarded(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    with _guarded(item):
        return (yield)
