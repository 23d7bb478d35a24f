"""The ``sealeval`` package has no import cycle, deferred imports included.

The graph is built from the source (AST), not from ``sys.modules``: every
``import`` / ``from ... import`` anywhere in a module — at module level, inside
a function, under ``if TYPE_CHECKING:`` — is an edge from that module to the
``sealeval`` module it names (``from pkg import name`` points at ``pkg.name``
when that is a module, else at ``pkg``). A module that imports by name
(``importlib.import_module``: a lazy face's table, the CLI's command table)
has an edge to every package module it names in a string. A deferred import
that only hides a cycle from the interpreter is therefore still a cycle here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import sealeval

PACKAGE_ROOT = Path(sealeval.__file__).resolve().parent


def _modules(root: Path) -> dict[str, tuple[Path, bool]]:
    """Map every module name under ``root`` to its file and whether it is a package."""
    found: dict[str, tuple[Path, bool]] = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        found[".".join(parts)] = (path, is_package)
    return found


def _resolve(name: str, modules: dict[str, tuple[Path, bool]]) -> str | None:
    """The longest known module prefix of a dotted name (``None`` outside the package)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _edges(
    module: str, path: Path, is_package: bool, modules: dict[str, tuple[Path, bool]]
) -> set[str]:
    package = module if is_package else module.rpartition(".")[0]
    root_name = module.partition(".")[0]
    targets: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    by_name = False
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "import_module":
            by_name = True
        elif isinstance(node, ast.Import):
            for alias in node.names:
                resolved = _resolve(alias.name, modules)
                if resolved is not None:
                    targets.add(resolved)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            for alias in node.names:
                candidate = f"{source}.{alias.name}"
                resolved = candidate if candidate in modules else _resolve(source, modules)
                if resolved is not None:
                    targets.add(resolved)
    if by_name:
        # A module importing by name (``importlib.import_module``: a lazy face's
        # table, the CLI's command table) imports every package module it names
        # in a string: an edge like any import.
        targets |= {
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.startswith(f"{root_name}.")
            and node.value in modules
        }
    targets.discard(module)
    return targets


def import_graph(root: Path = PACKAGE_ROOT) -> dict[str, set[str]]:
    """The module import graph of the package at ``root`` (deferred imports included)."""
    modules = _modules(root)
    return {
        name: _edges(name, path, is_package, modules)
        for name, (path, is_package) in modules.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, list[str]]] = [(start, sorted(graph[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, pending = work[-1]
            if pending:
                child = pending.pop()
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, sorted(graph[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph[node]:
                    found.append(sorted(component))
    return found


def test_graph_covers_the_whole_package() -> None:
    graph = import_graph()
    files = set(PACKAGE_ROOT.rglob("*.py"))
    assert len(graph) == len(files)
    assert "sealeval" in graph
    assert "sealeval.gates.adversarial.suite" in graph
    # The graph sees real edges, deferred ones included.
    assert "sealeval.gates.adversarial.corpus" in graph["sealeval.gates.adversarial.suite"]
    assert "sealeval.canonical" in graph["sealeval.gates.adversarial.report"]
    # ... and the lazy tables: the faces and the CLI import their homes by name.
    assert "sealeval.captured.verify" in graph["sealeval.captured"]
    assert "sealeval.cli.demo" in graph["sealeval.cli"]


def test_no_import_cycle() -> None:
    assert cycles(import_graph()) == []


def _write(root: Path, name: str, text: str) -> None:
    path = root.joinpath(*name.split("/"))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@pytest.mark.parametrize(
    ("b_source", "expected"),
    [
        pytest.param("from pkg.a import x\n", [["pkg.a", "pkg.b"]], id="module-level"),
        pytest.param(
            "def f():\n    from pkg.a import x  # noqa\n    return x\n",
            [["pkg.a", "pkg.b"]],
            id="deferred-in-function",
        ),
        pytest.param(
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.a\n",
            [["pkg.a", "pkg.b"]],
            id="type-checking-block",
        ),
        pytest.param("from . import a\n", [["pkg.a", "pkg.b"]], id="relative-module"),
        pytest.param("from .a import x\n", [["pkg.a", "pkg.b"]], id="relative-name"),
        pytest.param(
            "import importlib\nHOMES = {'x': 'pkg.a'}\n"
            "def f():\n    return importlib.import_module(HOMES['x'])\n",
            [["pkg.a", "pkg.b"]],
            id="imported-by-name",
        ),
        pytest.param("module = 'pkg.a'\n", [], id="a-name-not-imported"),
        pytest.param("import json\n", [], id="no-cycle"),
    ],
)
def test_the_checker_sees_cycles(tmp_path: Path, b_source: str, expected: list[list[str]]) -> None:
    root = tmp_path / "pkg"
    _write(tmp_path, "pkg/__init__.py", "")
    _write(tmp_path, "pkg/a.py", "from pkg.b import y\nx = 1\n")
    _write(tmp_path, "pkg/b.py", b_source + "y = 2\n")
    assert cycles(import_graph(root)) == expected


def test_the_checker_sees_a_long_cycle(tmp_path: Path) -> None:
    root = tmp_path / "pkg"
    _write(tmp_path, "pkg/__init__.py", "")
    _write(tmp_path, "pkg/sub/__init__.py", "")
    _write(tmp_path, "pkg/a.py", "from pkg.sub import c\n")
    _write(tmp_path, "pkg/sub/c.py", "def f():\n    import pkg.d\n")
    _write(tmp_path, "pkg/d.py", "from pkg import a\n")
    assert cycles(import_graph(root)) == [["pkg.a", "pkg.d", "pkg.sub.c"]]
