"""The examples' committed ``.terraform.lock.hcl`` files name the release's archives (:mod:`release.locks`).

A change to the provider (or a version bump) changes the archive; the lock files must then be written
again, or every user's ``terraform init`` of an example would refuse the released provider. The build
is the one the other release tests use (cached per source hash), so this adds seconds, not minutes.
That Terraform accepts the committed lock as it is, installing from the registry protocol and from the
network mirror, is checked where those installs run (test_clean_room_install.py,
test_gitops_from_release.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from release.locks import EXAMPLES, LOCK_FILE, example_configurations, release_archives, render_lock

pytestmark = pytest.mark.release


def test_every_example_configuration_commits_a_lock() -> None:
    directories = example_configurations()
    assert {EXAMPLES / "hcl", EXAMPLES / "gitops" / "infra", EXAMPLES / "provider"} <= set(directories)
    assert [d for d in directories if not (d / LOCK_FILE).is_file()] == []


def test_committed_locks_hold_the_release_archive_hashes(release_dist: Path) -> None:
    expected = render_lock(release_archives(release_dist))
    stale = [
        str(d.relative_to(EXAMPLES))
        for d in example_configurations()
        if not (d / LOCK_FILE).is_file() or (d / LOCK_FILE).read_text() != expected
    ]
    assert stale == [], (
        f"these examples' {LOCK_FILE} name another build of the provider: run `make locks` "
        f"(or `python -m release.locks --dist {release_dist}`) and commit them\n{expected}"
    )
