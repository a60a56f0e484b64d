"""The hand-written docs a new user follows link to files that exist, and the guides carry Registry front matter.

Covers README.md, docs/*.md, docs/guides/*.md and every examples/**/README.md: each relative Markdown link
(``[text](path)`` or ``[text](path#anchor)``, not a URL) must name a file or directory of the checkout.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GUIDES = REPO / "docs" / "guides"
LINK = re.compile(r"\]\(([^)\s]+)\)")
FRONT_MATTER = re.compile(
    r'\A---\npage_title: "[^"\n]+"\nsubcategory: "[^"\n]*"\ndescription: \|-\n(  \S[^\n]*\n)+---\n'
)


def hand_written_pages() -> list[Path]:
    return sorted(
        [
            REPO / "README.md",
            *(REPO / "docs").glob("*.md"),
            *GUIDES.glob("*.md"),
            *(REPO / "examples").rglob("README.md"),
        ]
    )


def test_relative_links_resolve() -> None:
    pages = hand_written_pages()
    assert GUIDES / "emulator.md" in pages and REPO / "examples" / "hcl" / "README.md" in pages
    links = [
        (page, target)
        for page in pages
        for target in LINK.findall(page.read_text(encoding="utf-8"))
        if not re.match(r"[a-z]+:|#", target)
    ]
    assert len(links) > 50, "the scan found almost no links"
    broken = [
        f"{page.relative_to(REPO)}: {target}"
        for page, target in links
        if not (page.parent / target.split("#", 1)[0]).exists()
    ]
    assert not broken, "links to files that do not exist:\n" + "\n".join(broken)


def test_guides_have_registry_front_matter() -> None:
    guides = sorted(GUIDES.glob("*.md"))
    assert {g.stem for g in guides} >= {"emulator", "cdk", "real-lium"}
    malformed = [g.name for g in guides if not FRONT_MATTER.match(g.read_text(encoding="utf-8"))]
    assert not malformed, f"a guide starts with page_title, subcategory and description: {malformed}"
