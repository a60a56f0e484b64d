"""Process-tree helpers: find the provider process Terraform started, to kill it mid-operation."""

from __future__ import annotations

from pathlib import Path


def children(pid: int) -> list[int]:
    """Direct children of ``pid`` (from /proc: every thread's ``children`` list)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return found


def descendants(pid: int) -> list[int]:
    result: list[int] = []
    stack = children(pid)
    while stack:
        child = stack.pop()
        result.append(child)
        stack += children(child)
    return result


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def find_descendant(pid: int, needle: str) -> int | None:
    """The first descendant of ``pid`` whose command line contains ``needle``."""
    return next((p for p in descendants(pid) if needle in cmdline(p)), None)
