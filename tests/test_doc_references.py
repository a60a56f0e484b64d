"""References into the Lium API reference resolve, and nothing cites the old contract's section numbers.

Code and docs cite ``docs/lium-api.md#<anchor>``, several anchors after one path as
``docs/lium-api.md#<one>, #<other>``; the anchors are the page's ``<a id="...">`` tags. Earlier commits
cited "contract" section numbers of a document that is not in the repository: such a reference, or a
bare section sign with a number, must not come back. The page's own table of old numbers is the exception.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
API_DOC = REPO / "docs" / "lium-api.md"
SCANNED_SUFFIXES = frozenset({".py", ".md", ".tf", ".sh"})
GENERATED_PROTO_MARK = "_pb2"  # tfplugin6_pb2.py, health_pb2_grpc.py …: protoc output

# Written with escapes so that this file does not match itself.
OLD_REFERENCE = re.compile(r"contract\s*\u00a7|\u00a7\s*\d", re.IGNORECASE)
# Code and tests say what they check in their own words: an issue number means nothing to a reader.
ISSUE_NUMBER = re.compile(r"\bissue\s*#?\d+|\bissues?\s+\d+(?:\s*(?:,|and)\s*\d+)*", re.IGNORECASE)
CODE_SUFFIXES = frozenset({".py", ".sh", ".tf"})
API_REFERENCE = re.compile(r"lium-api\.md(#[\w-]+(?:,\s*#[\w-]+)*)")
ANCHOR_TAG = re.compile(r'<a id="([^"]*)"></a>')
LOCAL_LINK = re.compile(r"\]\(#([^)]*)\)")
HEADING = re.compile(r"#{2,6} ")
SLUG = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


def hand_written_files() -> Iterator[Path]:
    """Every scanned file of the repository, in a stable order: what git tracks or would track (tool
    caches, dependencies and build output are ignored, and so are the staging directories a release
    build in another test worker creates and removes meanwhile)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in sorted(set(listed.split("\0")) - {""}):
        path = REPO / name
        if path.suffix in SCANNED_SUFFIXES and GENERATED_PROTO_MARK not in path.name and path.is_file():
            yield path


def numbered_lines(path: Path) -> Iterator[tuple[str, str]]:
    """``("relative/path:line", text)`` for every line of ``path``."""
    relative = path.relative_to(REPO)
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        yield f"{relative}:{number}", line


def defined_anchors() -> list[str]:
    return ANCHOR_TAG.findall(API_DOC.read_text(encoding="utf-8"))


def test_nothing_cites_the_old_contract_section_numbers() -> None:
    scanned = [path for path in hand_written_files() if path != API_DOC]
    assert REPO / "provider" / "lium_provider" / "api" / "rent.py" in scanned, "the scan missed the sources"
    stale = [
        f"{where}: {line.strip()}"
        for path in scanned
        for where, line in numbered_lines(path)
        if OLD_REFERENCE.search(line)
    ]
    assert not stale, "cite docs/lium-api.md#<anchor> (see its #section-map) instead of:\n" + "\n".join(stale)


def test_code_and_tests_cite_no_issue_numbers() -> None:
    code = [path for path in hand_written_files() if path.suffix in CODE_SUFFIXES]
    assert REPO / "tests" / "conftest.py" in code, "the scan missed the tests"
    cited = [
        f"{where}: {line.strip()}"
        for path in code
        for where, line in numbered_lines(path)
        if ISSUE_NUMBER.search(line)
    ]
    assert not cited, "say what the code or test checks instead of citing an issue:\n" + "\n".join(cited)


def test_every_reference_into_the_api_doc_names_a_defined_anchor() -> None:
    anchors = set(defined_anchors())
    references = [
        (where, anchor)
        for path in hand_written_files()
        for where, line in numbered_lines(path)
        for group in API_REFERENCE.findall(line)
        for anchor in re.findall(r"#([\w-]+)", group)
    ]
    assert any(where.startswith("provider/") for where, _ in references), "no reference found in the code"
    unknown = [f"{where}: #{anchor}" for where, anchor in references if anchor not in anchors]
    assert not unknown, "anchors not defined in docs/lium-api.md:\n" + "\n".join(unknown)


def test_the_api_doc_anchors_are_unique_slugs_and_its_own_links_resolve() -> None:
    anchors = defined_anchors()
    assert len(anchors) >= 20
    duplicated = sorted({a for a in anchors if anchors.count(a) > 1})
    assert not duplicated, f"anchors defined twice: {duplicated}"
    malformed = [a for a in anchors if not SLUG.fullmatch(a)]
    assert not malformed, f"anchors must be short lowercase slugs: {malformed}"
    broken = [
        f"{where}: #{target}"
        for where, line in numbered_lines(API_DOC)
        for target in LOCAL_LINK.findall(line)
        if target not in anchors
    ]
    assert not broken, "links to undefined anchors:\n" + "\n".join(broken)


def test_every_heading_of_the_api_doc_has_an_anchor_right_before_it() -> None:
    lines = API_DOC.read_text(encoding="utf-8").splitlines()
    unanchored = [
        f"docs/lium-api.md:{number}: {line}"
        for number, line in enumerate(lines, start=1)
        if HEADING.match(line) and (number < 2 or not ANCHOR_TAG.fullmatch(lines[number - 2]))
    ]
    assert not unanchored, 'put <a id="slug"></a> on the line before:\n' + "\n".join(unanchored)


def test_the_readme_and_the_provider_index_link_the_api_doc() -> None:
    assert "](docs/lium-api.md)" in (REPO / "README.md").read_text(encoding="utf-8")
    assert "](lium-api.md)" in (REPO / "docs" / "index.md").read_text(encoding="utf-8")
