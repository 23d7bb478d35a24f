"""The tree is the architecture: sized modules, faces, a page naming every module, tests apart.

* no module under ``src/sealeval`` is over :data:`MAX_LINES` lines;
* ``docs/architecture.md`` names every module and package by its path
  relative to ``src/sealeval`` (``captured/run/reader.py``, ``captured/run/``);
* every family package (each public package directly under ``sealeval``) has a
  face: an ``__init__.py`` declaring ``__all__``, every name of which it binds;
* no test module imports another test module (shared helpers live in
  ``tests/support/``, shared fixtures in ``tests/conftest.py``);
* no module imports another module's underscore names (an allow-list, which
  may only shrink, names the packages still being cleaned);
* tests go through public functions: only the test modules listed in
  :data:`TESTS_REACHING_PRIVATE_NAMES` (each with why) reach underscore names.
"""

from __future__ import annotations

import ast
import functools
import importlib
import re
from pathlib import Path

import pytest

import sealeval
from support.vectors import PROJECT_ROOT

PACKAGE = Path(sealeval.__file__).resolve().parent
TESTS = PROJECT_ROOT / "tests"
ARCHITECTURE = PROJECT_ROOT / "docs" / "architecture.md"
MAX_LINES = 1_000

#: Modules still over the limit while their split is under way, each with the
#: reason. An entry must name a module that exists and is STILL over the limit
#: (checked below), so the list cannot outlive the split it waits for.
OVER_LIMIT_UNTIL_SPLIT: dict[str, str] = {}


def _is_code(path: Path) -> bool:
    # _data/ holds packaged data (demo artifacts may be .py files), not modules.
    return "_data" not in path.relative_to(PACKAGE).parts


def _modules() -> list[Path]:
    return sorted(path for path in PACKAGE.rglob("*.py") if _is_code(path))


def _packages() -> list[Path]:
    return sorted(path.parent for path in PACKAGE.rglob("__init__.py") if _is_code(path))


def _relative(path: Path) -> str:
    return path.relative_to(PACKAGE).as_posix()


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_the_tree_is_found() -> None:
    assert len(_modules()) > 50
    assert len(_packages()) > 10


def test_no_module_is_over_the_limit() -> None:
    over = {
        _relative(path): _lines(path)
        for path in _modules()
        if _lines(path) > MAX_LINES and _relative(path) not in OVER_LIMIT_UNTIL_SPLIT
    }
    assert over == {}, f"modules over {MAX_LINES} lines: split them along their seams"
    for relative in OVER_LIMIT_UNTIL_SPLIT:
        path = PACKAGE / relative
        assert path.is_file(), f"{relative} is gone: drop its OVER_LIMIT_UNTIL_SPLIT entry"
        assert _lines(path) > MAX_LINES, (
            f"{relative} is split: drop its OVER_LIMIT_UNTIL_SPLIT entry"
        )


def _named_paths() -> set[str]:
    return set(re.findall(r"`([A-Za-z0-9_./]+)`", ARCHITECTURE.read_text(encoding="utf-8")))


def test_architecture_page_names_every_module() -> None:
    named = _named_paths()
    missing = [
        _relative(path)
        for path in _modules()
        if path.name != "__init__.py" and _relative(path) not in named
    ]
    assert missing == [], (
        "docs/architecture.md: name these modules (scripts/dev/architecture_tree.py)"
    )


def test_architecture_page_names_every_package() -> None:
    named = _named_paths()
    missing = [
        _relative(path) + "/"
        for path in _packages()
        if path != PACKAGE and _relative(path) + "/" not in named
    ]
    assert missing == [], "docs/architecture.md: name these packages"


def test_architecture_page_names_nothing_that_is_gone() -> None:
    top = {path.name for path in PACKAGE.iterdir()}
    stale = sorted(
        name
        for name in _named_paths()
        if name.endswith((".py", "/"))
        and name.split("/")[0] in top
        and not (PACKAGE / name).exists()
    )
    assert stale == [], "docs/architecture.md names modules that no longer exist"


def _families() -> list[str]:
    return sorted(
        path.name
        for path in PACKAGE.iterdir()
        if (path / "__init__.py").is_file() and not path.name.startswith("_")
    )


def test_the_families_are_found() -> None:
    assert {"manifest", "session", "gates", "captured"} <= set(_families())


@pytest.mark.parametrize("family", _families())
def test_every_family_has_a_face(family: str) -> None:
    face = PACKAGE / family / "__init__.py"
    tree = ast.parse(face.read_text(encoding="utf-8"))
    assert ast.get_docstring(tree), f"sealeval.{family}: the face needs a docstring"
    declared = [
        node
        for node in tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign)
        and any(
            isinstance(target, ast.Name) and target.id == "__all__"
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        )
    ]
    assert declared, f"sealeval.{family}: the face declares no __all__"
    module = importlib.import_module(f"sealeval.{family}")
    names = module.__all__
    assert names, f"sealeval.{family}: __all__ is empty"
    assert len(names) == len(set(names))
    unbound = [name for name in names if not hasattr(module, name)]
    assert unbound == [], f"sealeval.{family}: __all__ names what the face does not bind"


def _test_files() -> list[Path]:
    return sorted(
        path for path in TESTS.rglob("*.py") if "fixtures" not in path.relative_to(TESTS).parts
    )


@functools.cache
def _test_tree(path: Path) -> ast.Module:
    """A test module's syntax tree, parsed once per session (two checks walk every one)."""
    return ast.parse(path.read_text(encoding="utf-8"))


def _imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(_test_tree(path)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_no_test_module_imports_another() -> None:
    assert len(_test_files()) > 50
    offenders = {
        path.relative_to(TESTS).as_posix(): sorted(
            name
            for name in _imported_modules(path)
            if name.split(".")[-1].startswith("test_")
            or name.split(".")[0] in {"tests", "conftest"}
        )
        for path in _test_files()
    }
    offenders = {name: found for name, found in offenders.items() if found}
    assert offenders == {}, "move what is shared into tests/support/ or tests/conftest.py"


def test_one_conftest() -> None:
    conftests = sorted(path.relative_to(TESTS).as_posix() for path in TESTS.rglob("conftest.py"))
    assert conftests == ["conftest.py"]


#: Folders of tests/ that are not a family: shared helpers and data files.
NOT_FAMILIES = {"support", "fixtures", "__pycache__"}


def test_tests_mirror_the_package() -> None:
    folders = {
        path.name for path in TESTS.iterdir() if path.is_dir() and path.name not in NOT_FAMILIES
    }
    assert {"manifest", "session", "gates", "captured", "cli", "attest"} <= folders
    assert folders <= set(_families()), "every tests/ folder mirrors a package of sealeval"
    misplaced = sorted(
        path.name
        for path in TESTS.glob("test_*.py")
        if any(path.stem.startswith(f"test_{family}") for family in folders)
    )
    assert misplaced == [], "a family's tests live in its folder; the top level is cross-cutting"


def test_test_module_basenames_are_unique() -> None:
    names = [path.name for path in _test_files() if path.name.startswith("test_")]
    assert len(names) == len(set(names)), "pytest imports test modules by basename"


# ---------------------------------------------------------------------------
# Underscore names stay in their module


#: Sub-packages of ``sealeval`` whose modules still import underscore names of
#: other modules, each with the most such imports it may hold while it is being
#: cleaned. None is left: ``captured/`` was the last (its importers' three went
#: with ``lm_eval_files``' public names). A count may only fall; lower it when a
#: package is cleaned and drop the entry at zero. Every package (``manifest/``,
#: ``session/``, ``gates/``, ``captured/``, ...) holds none: a helper two modules
#: share is public within its package, or lives in its home.
UNDERSCORE_IMPORTS_UNTIL_CLEANED: dict[str, int] = {}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_from(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    """The absolute module a ``from ... import`` names (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    parts = importer.split(".") if is_package else importer.split(".")[:-1]
    base = parts[: len(parts) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_uses(tree: ast.AST, importer: str, is_package: bool, modules: set[str]) -> list[str]:
    """Another ``sealeval`` module's underscore names that one module's source uses.

    ``from sealeval.x import _name`` anywhere in the module (deferred imports
    too, relative ones resolved), and ``x._name`` where ``x`` is a module it
    imported (``import sealeval.x as x``, ``from sealeval import x``).
    Importing a private *module* (``from sealeval import _fs``) is not a
    private name.
    """
    used: list[str] = []
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases.update(
                (alias.asname, alias.name)
                for alias in node.names
                if alias.asname and alias.name in modules and alias.name != importer
            )
        if not isinstance(node, ast.ImportFrom):
            continue
        source = _imported_from(node, importer, is_package)
        if source.split(".")[0] != "sealeval" or source == importer:
            continue
        for alias in node.names:
            target = f"{source}.{alias.name}"
            if target in modules:
                aliases[alias.asname or alias.name] = target
            elif _private(alias.name):
                used.append(target)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and _private(node.attr)
            and f"{aliases[node.value.id]}.{node.attr}" not in modules
        ):
            used.append(f"{aliases[node.value.id]}.{node.attr}")
    return used


def _underscore_imports() -> dict[str, list[str]]:
    """Map each sub-package to the underscore names of other modules its modules use."""
    modules = {_module_name(path) for path in _modules()}
    found: dict[str, list[str]] = {}
    for path in _modules():
        importer = _module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for name in _private_uses(tree, importer, path.name == "__init__.py", modules):
            package = importer.split(".")[1] if "." in importer else importer
            found.setdefault(package, []).append(f"{importer}: {name}")
    return found


def test_relative_imports_are_resolved() -> None:
    node = ast.parse("from ..run import _x").body[0]
    assert isinstance(node, ast.ImportFrom)
    assert _imported_from(node, "sealeval.captured.report.html", False) == "sealeval.captured.run"
    assert _imported_from(node, "sealeval.captured.report", True) == "sealeval.captured.run"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param("from sealeval.a import _x, y", ["sealeval.a._x"], id="from-import"),
        pytest.param("def f():\n    from .a import _x", ["sealeval.a._x"], id="deferred-relative"),
        pytest.param("import sealeval.a as a\na._x()", ["sealeval.a._x"], id="module-alias"),
        pytest.param("from sealeval import a\na._x", ["sealeval.a._x"], id="module-imported"),
        pytest.param("from sealeval import _fs\n_fs.open_regular", [], id="private-module"),
        pytest.param("from sealeval.b import _y\n_y._z", ["sealeval.b._y"], id="name-not-module"),
        pytest.param("from sealeval.a import __all__", [], id="dunder"),
        pytest.param("from os import _exit", [], id="not-sealeval"),
    ],
)
def test_the_private_name_scan(source: str, expected: list[str]) -> None:
    modules = {"sealeval", "sealeval.a", "sealeval.b", "sealeval._fs", "sealeval.c"}
    assert _private_uses(ast.parse(source), "sealeval.c", False, modules) == expected


def test_no_module_imports_another_modules_underscore_names() -> None:
    found = _underscore_imports()
    assert set(UNDERSCORE_IMPORTS_UNTIL_CLEANED) <= {_relative(path) for path in _packages()}
    offenders = {
        package: imports
        for package, imports in sorted(found.items())
        if len(imports) > UNDERSCORE_IMPORTS_UNTIL_CLEANED.get(package, 0)
    }
    assert offenders == {}, "make the shared name public within its package, or move it home"


def test_every_underscore_allowance_is_still_needed() -> None:
    # An allowance outlives nothing: a cleaned package's entry goes (and the scan sees imports).
    found = _underscore_imports()
    stale = sorted(name for name in UNDERSCORE_IMPORTS_UNTIL_CLEANED if not found.get(name))
    assert stale == [], "drop the entry of a package that is clean now"


#: Test modules that still reach a module's underscore names, each with its reason: the
#: private part is the unit under test (an oracle, a numeric kernel) or the only seam to
#: inject a fault or spy on a call. Every other test goes through public functions. The
#: list may only shrink: a listed module that no longer reaches one fails too.
TESTS_REACHING_PRIVATE_NAMES: dict[str, str] = {
    "captured/test_captured_comparison.py": "the worker path of the parallel bootstrap, "
    "checked without its silent fallback",
    "captured/test_captured_intervals.py": "the exact-summation kernel and the NLL percentile "
    "against math.fsum and the definition",
    "captured/test_captured_pack.py": "fault injection into the pack's staging and file writes",
    "captured/test_captured_request.py": "the positional streamed read of a request side",
    "captured/test_captured_run.py": "the strict JSONL decoder as the fast decoder's oracle; "
    "the import worker pool's internals (boards, workers, pinning)",
    "captured/test_captured_scorers.py": "the pinned-table numeral and canonical kernels "
    "against Decimal and the encoder; the interpreter-whitespace switch",
    "captured/test_captured_verify.py": "a spy replacing a run file during the replay",
    "captured/test_importers_fast_path.py": "the import worker pool's internals",
    "captured/test_unicode_tables_data.py": "the pinned Unicode table loader",
    "cli/test_cli_import.py": "the progress bar's callback on a faked terminal",
    "gates/test_gates_adversarial.py": "the detector's pinned-version folding",
    "gates/test_gates_json_source.py": "the JSON adapter's parser against Python's json",
    "session/test_session_config.py": "I/O failures injected into the bounded config read",
    "session/test_session_forensics.py": "the trigram engine's kernels and the normalizer",
    "session/test_session_holdout.py": "counting the Merkle node calls (linear tree building)",
    "session/test_session_store_contract.py": "a concurrent approval simulated at the check",
    "test_strict_yaml.py": "a spy on which YAML event parser runs",
}


#: ``from sealeval... import names`` (parenthesized or not) and ``import sealeval... [as x]``.
_SEALEVAL_IMPORT = re.compile(
    r"^\s*from\s+sealeval[\w.]*\s+import\s+(\([^)]*\)|[^\n]*)"
    r"|^\s*import\s+(sealeval[\w.]*)(?:\s+as\s+(\w+))?",
    re.MULTILINE,
)


def _may_reach_private_names(text: str) -> bool:
    """Cheap first pass (parsing is the cost): a private import, or ``alias._name``."""
    aliases = set()
    for names, module, alias in _SEALEVAL_IMPORT.findall(text):
        for name, renamed in re.findall(r"(\w+)(?:\s+as\s+(\w+))?", names):
            if name.startswith("_"):
                return True
            aliases.add(renamed or name)
        if module:
            aliases.add(alias or "sealeval")
    if not aliases:
        return False
    pattern = r"\b(?:" + "|".join(sorted(aliases)) + r")(?:\.\w+)*\._[A-Za-z]"
    return re.search(pattern, text) is not None


def _test_private_uses() -> dict[str, list[str]]:
    """Map each test module (relative to ``tests/``) to the underscore names it reaches."""
    modules = {_module_name(path) for path in _modules()}
    found: dict[str, list[str]] = {}
    for path in _test_files():
        if not _may_reach_private_names(path.read_text(encoding="utf-8")):
            continue
        used = _private_uses(_test_tree(path), "tests", False, modules)
        if used:
            found[path.relative_to(TESTS).as_posix()] = sorted(set(used))
    return found


def test_tests_use_public_functions() -> None:
    found = _test_private_uses()
    unexplained = {
        name: uses for name, uses in found.items() if name not in TESTS_REACHING_PRIVATE_NAMES
    }
    assert unexplained == {}, "test through the public function (or list the module, with why)"
    stale = sorted(set(TESTS_REACHING_PRIVATE_NAMES) - set(found))
    assert stale == [], "drop the entry of a test module that reaches no private name now"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("from sealeval.a import _x\n", True, id="private-import"),
        pytest.param("from sealeval.a import (\n    b,\n    _x,\n)\n", True, id="parenthesized"),
        pytest.param("from sealeval import a\na._x()\n", True, id="module-attribute"),
        pytest.param("import sealeval.a as m\nm._x\n", True, id="aliased-module"),
        pytest.param("import sealeval.a\nsealeval.a._x\n", True, id="dotted-module"),
        pytest.param("from sealeval.a import b\nvalue._x\n", False, id="other-attribute"),
        pytest.param("import os\nos._exit(0)\n", False, id="not-sealeval"),
    ],
)
def test_the_cheap_first_pass_misses_no_private_use(text: str, expected: bool) -> None:
    assert _may_reach_private_names(text) is expected
