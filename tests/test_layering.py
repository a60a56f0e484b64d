"""The layout docs/design.md describes holds: no import cycle, imports run only in the layers' direction,
and each package keeps few flat modules.

No import cycle among the modules under ``provider/``, ``emulator/`` and ``constructs/``, not even
through function-local imports.

A function-local import hides a cycle from the interpreter until the function runs, which only moves the
failure (a partially initialised module) to a rarer path. So every ``import`` statement counts wherever it
stands: module level, inside a function or a class, under ``try``. The one exception is an import under
``if TYPE_CHECKING:``: it never runs, so it cannot take part in a cycle at run time, and it is how a module
annotates with the types of a module that imports it.

The graph is read from the source (``ast``), not from ``sys.modules``, so a cycle on a path no test runs
is found too; :mod:`graphlib` finds the cycle. The same graph answers what a module can import at run
time, and so what the provider program (``python -m lium_provider``) can ever load.
"""

from __future__ import annotations

import ast
import functools
import graphlib
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SOURCE_ROOTS = tuple(REPO / name for name in ("provider", "emulator", "constructs"))
# The checkout's own packages (not shipped), each a top-level package directory of the repository.
CHECKOUT_PACKAGES = ("devtools", "tests", "bench", "release")
# Imports that must never happen: (importer prefix, imported prefix, why). A prefix names a module and
# everything under it; one ending in "." only what is under it. docs/design.md's layer table says the same in prose.
FORBIDDEN = (
    ("tfbridge", "lium_provider", "the framework knows nothing of Lium"),
    ("tfbridge", "lium_emulator", "the framework knows nothing of Lium"),
    ("tfbridge", "lium_constructs", "the framework knows nothing of Lium"),
    ("tfbridge.serving", "tfbridge.protocol.server", "serving code reaches the service through the factory"),
    # lium_provider itself holds the distribution's one __version__; its modules are the client.
    ("lium_emulator", "lium_provider.", "the emulator stands in for Lium and uses no client code"),
    ("lium_provider.api", "lium_provider.resources", "the API client is below the resources"),
    ("lium_provider.api", "lium_provider.session", "the API client is below the session"),
    ("lium_provider.api", "lium_provider.domain", "the API client is below the domain rules"),
    ("lium_provider.domain", "lium_provider.resources", "domain rules are below the resources"),
    ("lium_provider.domain", "lium_provider.session", "domain rules are below the session"),
    ("lium_provider.runner", "lium_provider.resources", "the runner is below its resource"),
)
# Modules of the public tfbridge API may import only these of the framework's inner packages.
TFBRIDGE_INNER = ("tfbridge.serving", "tfbridge.protocol")
# tfbridge.command reads the pid the launcher hands on, named in the constants module (which imports nothing).
TFBRIDGE_API_MAY_IMPORT = {
    "tfbridge.plugin": ("tfbridge.serving",),
    "tfbridge.command": ("tfbridge.serving.constants",),
}
# At most this many plain modules (``__init__`` and ``__main__`` included) at the top of each package.
FLAT_MODULES = {"lium_provider": 6, "tfbridge": 12, "lium_emulator": 12}
# What the provider program must never load: the user CLI and contributor tools. Its server must not load
# the plan summaries either: they run only as the program's side command (plan_summary.warm_summary).
NOT_IN_THE_PLUGIN = ("lium_provider.cli", "devtools")
NOT_IN_THE_SERVER = (*NOT_IN_THE_PLUGIN, "lium_provider.plan_summary")


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


def import_graph(*roots: Path, packages: Collection[Path] = ()) -> dict[str, set[str]]:
    """Module name -> the modules it imports, for every module under the ``roots`` (each a directory of
    top-level packages) and in the ``packages`` (each a package directory, named as it is); imports
    between modules of different roots count too."""
    paths = {module_name(root, path): path for root in roots for path in sorted(root.rglob("*.py"))}
    paths |= {module_name(p.parent, path): path for p in packages for path in sorted(p.rglob("*.py"))}
    return {name: imported_modules(name, path, set(paths)) for name, path in paths.items()}


@functools.cache
def source_graph(*, with_checkout: bool = False) -> dict[str, frozenset[str]]:
    """:func:`import_graph` of the shipped sources (and the checkout's packages), parsed once per test run."""
    checkout = [REPO / name for name in CHECKOUT_PACKAGES] if with_checkout else []
    return {
        name: frozenset(imports) for name, imports in import_graph(*SOURCE_ROOTS, packages=checkout).items()
    }


def is_checkout_module(module: str) -> bool:
    return any(under(module, package) for package in CHECKOUT_PACKAGES)


def under(module: str, prefix: str) -> bool:
    if prefix.endswith("."):
        return module.startswith(prefix)
    return module == prefix or module.startswith(prefix + ".")


def reachable(graph: Mapping[str, Collection[str]], start: str) -> set[str]:
    """Every module ``start`` can import at run time, directly or through others (with its packages)."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        todo += graph.get(module, set())
        parts = module.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # importing a.b runs a/__init__
    return seen


def find_cycle(graph: Mapping[str, Collection[str]]) -> list[str]:
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


def test_no_import_cycle_in_the_sources() -> None:
    graph = source_graph()
    expected = {"tfbridge.plugin", "tfbridge.serving.zygote", "lium_provider.provider", "lium_emulator.cli"}
    assert expected <= set(graph)
    cycle = find_cycle(graph)
    assert cycle == [], "import cycle: " + " -> ".join(cycle)


def test_imports_run_only_in_the_layers_direction() -> None:
    graph = source_graph()
    wrong = [
        f"{importer} imports {imported}: {why}"
        for importer, imports in sorted(graph.items())
        for imported in sorted(imports)
        for source, target, why in FORBIDDEN
        if under(importer, source) and under(imported, target)
    ]
    assert not wrong, "\n".join(wrong)


def test_the_public_tfbridge_api_stays_apart_from_its_serving_code() -> None:
    graph = source_graph()
    public = [m for m in graph if m.startswith("tfbridge.") and not any(under(m, i) for i in TFBRIDGE_INNER)]
    assert "tfbridge.resource" in public and "tfbridge.plugin" in public
    wrong = [
        f"{module} imports {imported}"
        for module in sorted(public)
        for imported in sorted(graph[module])
        if under(imported, "tfbridge.serving")
        and not any(under(imported, allowed) for allowed in TFBRIDGE_API_MAY_IMPORT.get(module, ()))
    ]
    assert not wrong, "only tfbridge.plugin starts the serving code:\n" + "\n".join(wrong)


def test_the_provider_program_never_loads_the_cli_and_its_server_no_plan_summaries() -> None:
    graph = source_graph(with_checkout=True)
    assert "lium_provider.provider" in graph["devtools.reference_docs"], (
        "the checkout's modules are not in the graph"
    )
    loaded = reachable(graph, "lium_provider.__main__")
    assert {"lium_provider.provider", "lium_provider.plan_summary.warm_summary"} <= loaded
    wrong = sorted(m for m in loaded if any(under(m, p) for p in NOT_IN_THE_PLUGIN))
    assert not wrong, f"the provider program can import {wrong}"
    served = reachable(graph, "lium_provider.provider") | reachable(graph, "tfbridge.protocol.server")
    assert {"lium_provider.resources.pod", "tfbridge.protocol.server"} <= served
    wrong = sorted(m for m in served if any(under(m, p) for p in NOT_IN_THE_SERVER))
    assert not wrong, f"the provider's server can import {wrong}"


def test_shipped_sources_never_import_the_checkout_tools() -> None:
    graph = source_graph(with_checkout=True)
    assert {"devtools.reference_docs", "tests.support.lium", "bench.pods", "release.layout"} <= set(graph)
    wrong = [
        f"{module} imports {imported}"
        for module, imports in sorted(graph.items())
        if not is_checkout_module(module)
        for imported in sorted(imports)
        if is_checkout_module(imported)
    ]
    assert not wrong, "\n".join(wrong)


def test_an_import_of_a_checkout_package_is_seen(tmp_path: Path) -> None:
    shipped = tmp_path / "shipped" / "lib"
    tool = tmp_path / "devtools"
    for directory in (shipped, tool):
        directory.mkdir(parents=True)
        (directory / "__init__.py").write_text("")
    (shipped / "core.py").write_text("def f():\n    from devtools import helper\n")
    (tool / "helper.py").write_text("import lib.core\n")

    graph = import_graph(tmp_path / "shipped", packages=[tool])

    assert graph["lib.core"] == {"devtools.helper"} and graph["devtools.helper"] == {"lib.core"}


@pytest.mark.parametrize("package", sorted(FLAT_MODULES))
def test_each_package_keeps_few_flat_modules(package: str) -> None:
    (directory,) = [root / package for root in SOURCE_ROOTS if (root / package).is_dir()]
    flat = sorted(path.name for path in directory.glob("*.py"))
    assert "__init__.py" in flat
    assert len(flat) <= FLAT_MODULES[package], f"{package} has {len(flat)} flat modules: {flat}"
