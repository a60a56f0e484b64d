"""No import cycle among the modules under ``provider/``, not even through function-local imports.

A function-local import hides a cycle from the interpreter until the function runs, which only moves the
failure (a partially initialised module) to a rarer path. So every ``import`` statement counts wherever it
stands: module level, inside a function or a class, under ``try``. The one exception is an import under
``if TYPE_CHECKING:``: it never runs, so it cannot take part in a cycle at run time, and it is how a module
annotates with the types of a module that imports it.

The graph is read from the source (``ast``), not from ``sys.modules``, so a cycle on a path no test runs
is found too; :mod:`graphlib` finds the cycle.
"""

from __future__ import annotations

import ast
import graphlib
from collections.abc import Iterator
from pathlib import Path

PROVIDER_ROOT = Path(__file__).resolve().parent.parent / "provider"


def module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking_guard(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def runtime_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement in ``tree`` that can run: all but those in the body of ``if TYPE_CHECKING:``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If) and _is_type_checking_guard(node.test):
            for branch in node.orelse:
                yield from runtime_imports(ast.Module(body=[branch], type_ignores=[]))
        else:
            yield from runtime_imports(node)


def imported_modules(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of ``known`` that module ``name`` (source at ``path``) imports at run time.

    ``from package import x`` depends on the submodule ``package.x`` if there is one, else on the package
    itself (``x`` is then a name its ``__init__`` defines).
    """
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in runtime_imports(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
            continue
        base = node.module or ""
        if node.level:
            anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            base = ".".join([*anchor, *([node.module] if node.module else [])])
        for alias in node.names:
            submodule = f"{base}.{alias.name}"
            found.add(submodule if submodule in known else base)
    return {module for module in found if module in known and module != name}


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module name -> the modules it imports, for every module under ``root``."""
    paths = {module_name(root, path): path for path in sorted(root.rglob("*.py"))}
    return {name: imported_modules(name, path, set(paths)) for name, path in paths.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of ``graph`` (``[a, b, a]``), or ``[]`` when there is none."""
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as error:
        cycle: list[str] = error.args[1]
        return cycle
    return []


def test_function_local_imports_count_and_type_checking_ones_do_not(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("VERSION = 1\n")
    (package / "a.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from pkg import VERSION\n"
        "if TYPE_CHECKING:\n    from pkg import b\n"
        "def f():\n    from . import c\n    import pkg.d\n"
    )
    (package / "b.py").write_text("import pkg.a\n")
    (package / "c.py").write_text("class C:\n    def m(self):\n        from .a import f\n")
    (package / "d.py").write_text("")

    graph = import_graph(tmp_path)

    assert graph["pkg.a"] == {"pkg", "pkg.c", "pkg.d"}
    assert find_cycle(graph) in (["pkg.a", "pkg.c", "pkg.a"], ["pkg.c", "pkg.a", "pkg.c"])
    (package / "c.py").write_text("")
    assert find_cycle(import_graph(tmp_path)) == []  # a -> b only under TYPE_CHECKING: no cycle


def test_no_import_cycle_in_provider() -> None:
    graph = import_graph(PROVIDER_ROOT)
    assert {"tfbridge.plugin", "tfbridge.zygote", "lium_provider.provider"} <= set(graph)
    cycle = find_cycle(graph)
    assert cycle == [], "import cycle under provider/: " + " -> ".join(cycle)
