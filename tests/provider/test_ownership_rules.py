"""Whose object a state holds, decided without Lium: the rules of ``resources/ownership.py`` and the stack's
register of names (``LiumSession.use_name``), on records and marks given here."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from lium_provider.api.client import LiumClient
from lium_provider.domain.journal import RentJournal
from lium_provider.domain.stack import lium_pod_name, rent_digest, stack_tag
from lium_provider.resources.ownership import owns
from lium_provider.resources.pod import PodResource
from lium_provider.resources.pod_model import PodModel
from lium_provider.session import LiumSession
from tfbridge import Context, TFError
from tfbridge.cancel import CancelToken
from tfbridge.logs import Logger

THIS, OTHER, OLD = stack_tag("stack:this"), stack_tag("stack:other"), stack_tag("stack:old")
ID = "3f2a5c1e-8b7d-4e6f-9a0b-1c2d3e4f5a6b"


@dataclass
class Record:
    """An object of the state, as ownership reads it."""

    stack_tag: str | None
    adopted_from: str | None = None
    id: str | None = ID


def session(tmp_path: Path, *, named: bool = False, adopt: frozenset[str] = frozenset()) -> LiumSession:
    return LiumSession(
        client=LiumClient("http://127.0.0.1:9/api", "tf-key", max_retries=0),  # reaches nothing, at once
        feed_url="http://127.0.0.1:9/api/public/v1/nodes",
        ssh_private_key=None,
        runner_download_url=None,
        journal=RentJournal(tmp_path / "journal"),
        stack_tag=THIS,
        stack_name="this" if named else None,
        adopt_tags=adopt,
    )


def test_a_state_that_is_its_stack_owns_what_it_records_as_lium_holds_it(tmp_path: Path) -> None:
    s = session(tmp_path)
    moved = Record(OLD)  # recorded before the directory moved: its tag is the state's, not the new path's
    assert owns(s, moved, OLD) and owns(s, moved, None)
    assert not owns(s, moved, OTHER), "an id edited to another stack's object"
    assert owns(s, Record(THIS, adopted_from=OTHER), OTHER), "taken over on purpose, remembered"
    assert not owns(s, Record(None), OTHER) and owns(s, Record(None), THIS), "an import is judged by its mark"


def test_a_named_stack_owns_only_what_is_recorded_under_its_name_or_an_adopted_one(tmp_path: Path) -> None:
    named = session(tmp_path, named=True)
    assert owns(named, Record(THIS), THIS) and not owns(named, Record(OTHER), OTHER)
    adopting = session(tmp_path, named=True, adopt=frozenset({OTHER}))
    assert owns(adopting, Record(OTHER), OTHER) and owns(adopting, Record(THIS), OTHER)


@pytest.mark.parametrize(
    ("first", "second", "second_allowed"),
    [
        ("create", "create", False),  # two creates of one name
        ("held", "create", False),  # count raised with a fixed name: the create would adopt the object
        ("create", "held", False),  # the same, planned in the other order
        ("held", "replacing", True),  # the create half of that object's own replacement
        ("held", "held", True),
    ],
)
def test_a_name_is_one_resources(tmp_path: Path, first: str, second: str, second_allowed: bool) -> None:
    s = session(tmp_path)
    key = ("lium-name", "trainer-abcdefghxyz")

    def use(how: str) -> bool:
        return s.use_name(key, create=how != "held", replacing=how == "replacing")

    assert use(first)
    assert use(second) is second_allowed
    assert s.use_name(("lium-name", "another"), create=True), "other names are free"


def test_a_lost_id_is_never_looked_for_by_a_name_no_stack_made(tmp_path: Path) -> None:
    """An imported pod keeps its own Lium name ("train"): any number of others' pods may carry it, so a
    state whose id is unusable deletes nothing by it (this session's client reaches nothing: a single
    request would fail the call)."""
    s = session(tmp_path)
    ctx = Context(cancel=CancelToken(), log=Logger("test"), provider=s, deadline=time.monotonic() + 30)
    imported = PodModel.model_construct(**dict.fromkeys(PodModel.model_fields)).model_copy(
        update={"id": ID.upper(), "lium_name": "train", "name": "train"}
    )
    PodResource()._delete_by_lium_name(ctx, imported)
    assert ctx.warnings == []
    tagged = imported.model_copy(
        update={"lium_name": lium_pod_name("train", THIS, rent_digest("template", 1))}
    )
    with pytest.raises(TFError, match="looking for the pod by its Lium name failed"):
        PodResource()._delete_by_lium_name(ctx, tagged)  # this stack's name: it is looked for
