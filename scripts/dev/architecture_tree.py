"""Print the module tree of ``src/sealeval`` with each module's first docstring line.

``docs/architecture.md`` keeps this output between the markers
``<!-- tree:start -->`` and ``<!-- tree:end -->``; regenerate it after adding,
moving or renaming a module::

    python scripts/dev/architecture_tree.py --write docs/architecture.md

Without ``--write`` the tree is printed. ``--check FILE`` exits 1 when the
section in FILE differs from the tree. Every path is relative to
``src/sealeval`` (``captured/run/reader.py``; packages end in ``/`` and show
their face's docstring), the form ``tests/test_architecture.py`` looks for.
The script only reads files (``ast``); it imports nothing from the package.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "sealeval"
START = "<!-- tree:start -->"
END = "<!-- tree:end -->"


def first_line(path: Path) -> str:
    """Return the first line of the module docstring of ``path`` (or a marker)."""
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    if not docstring:
        return "(no docstring)"
    return docstring.strip().splitlines()[0].strip()


def _entries(directory: Path) -> list[Path]:
    children = [
        child
        for child in directory.iterdir()
        if (child.suffix == ".py" and child.name != "__init__.py")
        or (child.is_dir() and (child / "__init__.py").is_file())
    ]
    return sorted(children, key=lambda child: (child.is_dir(), child.name))


def tree_lines(directory: Path = PACKAGE, depth: int = 0) -> list[str]:
    """Return the Markdown list of ``directory``'s modules and packages, recursively."""
    lines: list[str] = []
    for child in _entries(directory):
        relative = child.relative_to(PACKAGE).as_posix()
        indent = "  " * depth
        if child.is_dir():
            lines.append(f"{indent}- `{relative}/`: {first_line(child / '__init__.py')}")
            lines += tree_lines(child, depth + 1)
        else:
            lines.append(f"{indent}- `{relative}`: {first_line(child)}")
    return lines


def render() -> str:
    """Return the generated section, markers included."""
    head = f"- `src/sealeval/` (`__init__.py`): {first_line(PACKAGE / '__init__.py')}"
    return "\n".join([START, head, *("  " + line for line in tree_lines()), END])


def _replace(text: str, section: str) -> str:
    start, end = text.index(START), text.index(END) + len(END)
    return text[:start] + section + text[end:]


def main(argv: list[str] | None = None) -> int:
    """Print, write or check the tree section."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", type=Path, metavar="FILE", help="replace the section in FILE")
    group.add_argument("--check", type=Path, metavar="FILE", help="exit 1 on drift")
    arguments = parser.parse_args(argv)
    section = render()
    if arguments.write is not None:
        text = arguments.write.read_text(encoding="utf-8")
        arguments.write.write_text(_replace(text, section), encoding="utf-8")
        return 0
    if arguments.check is not None:
        text = arguments.check.read_text(encoding="utf-8")
        if _replace(text, section) != text:
            print(f"{arguments.check}: tree drifted; rerun with --write", file=sys.stderr)
            return 1
        return 0
    print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
