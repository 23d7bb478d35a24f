"""Golden-vector loading shared by the vector tests.

Vector files are read from ``$SEALEVAL_VECTORS`` (default ``../shared/vectors``
beside the project root), parsed once per test session (``functools.cache``),
and every case becomes its own parametrized test with the id
``<file stem>-<case name>``. Input conventions of the reference generators are
decoded here: ``{"$float": "nan"|"inf"|"-inf"}`` becomes a non-finite float,
``{"$bytes_hex": ".."}`` becomes bytes, and arrays become tuples unless a file
says otherwise.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def vectors_dir() -> Path:
    configured = os.environ.get("SEALEVAL_VECTORS")
    if configured:
        return Path(configured)
    return PROJECT_ROOT.parent / "shared" / "vectors"


def samples_dir() -> Path:
    """Real evaluator outputs: ``$SEALEVAL_SAMPLES`` (default ``../shared/samples/evaluators``)."""
    configured = os.environ.get("SEALEVAL_SAMPLES")
    if configured:
        return Path(configured)
    return PROJECT_ROOT.parent / "shared" / "samples" / "evaluators"


@functools.cache
def load(relative: str) -> dict[str, Any]:
    path = vectors_dir() / relative
    with path.open("rb") as handle:
        document = json.loads(handle.read().decode("utf-8"))
    assert isinstance(document, dict), f"{relative}: not a vector document"
    refuse_empty(relative, document)
    return document


def pack_case(name: str) -> dict[str, Any]:
    """The ``invarlock/packs.json`` case named ``name`` (exactly one must exist)."""
    found = [case for case in load("invarlock/packs.json")["cases"] if case["name"] == name]
    assert len(found) == 1, f"invarlock/packs.json: no single case named {name}"
    case: dict[str, Any] = found[0]
    return case


def pack_folder(name: str) -> Path:
    """The folder of the ``invarlock/packs.json`` case ``name`` (the parent of its request).

    A regenerated tree publishes a case's pack under another folder name while the
    case keeps its name, so a test takes the folder from the case, never from
    ``packs/<name>``.
    """
    return vectors_dir() / "invarlock" / Path(pack_case(name)["input"]["request_dir"]).parent


def refuse_empty(relative: str, document: Any) -> None:
    """Fail unless ``document`` holds a non-empty ``cases`` list: an empty file tests nothing.

    Every vector loader (this module's and a test module's private re-reader) calls this,
    so no vector test can pass on a file whose cases were dropped.
    """
    listed = document.get("cases") if isinstance(document, dict) else None
    if not isinstance(listed, list) or not listed:
        pytest.fail(f"{relative}: the vector file has no cases", pytrace=False)


def cases(relative: str) -> list[Any]:
    """Return one ``pytest.param`` per case, with the id ``<stem>-<name>``."""
    stem = Path(relative).stem
    document = load(relative)
    names = [case["name"] for case in document["cases"]]
    assert len(names) == len(set(names)), f"duplicate case names in {relative}"
    return [pytest.param(case, id=f"{stem}-{case['name']}") for case in document["cases"]]


def decode_input(value: Any, *, arrays_as_tuples: bool = True) -> Any:
    """Apply the reference generators' input conventions recursively."""
    if isinstance(value, dict):
        if set(value) == {"$float"}:
            return float(value["$float"])
        if set(value) == {"$bytes_hex"}:
            return bytes.fromhex(value["$bytes_hex"])
        return {
            key: decode_input(item, arrays_as_tuples=arrays_as_tuples)
            for key, item in value.items()
        }
    if isinstance(value, list):
        items = [decode_input(item, arrays_as_tuples=arrays_as_tuples) for item in value]
        return tuple(items) if arrays_as_tuples else items
    return value


def writable_copy(source: Path, target: Path) -> Path:
    """Copy a vector tree (read-only in shared/) as an ordinary writable tree; return ``target``."""
    shutil.copytree(source, target, symlinks=True)
    for path in [target, *target.rglob("*")]:
        if not path.is_symlink():
            path.chmod(0o755 if path.is_dir() else 0o644)
    return target


def tree_files(directory: Path) -> dict[str, bytes]:
    """Return every regular file below ``directory`` by relative POSIX path, with its bytes."""
    return {
        path.relative_to(directory).as_posix(): path.read_bytes()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


def reference_code(message: str, shapes: Iterable[tuple[str, ...]]) -> str:
    """Map a reference's error message to sealeval's closed code by the message's shape.

    ``shapes`` holds rows ``(prefix, code)`` or ``(prefix, fragment, code)``: a
    row matches a message that starts with ``prefix`` and holds ``fragment``.
    Exactly one row must match (else the test fails: a message not understood),
    so ids, counts and values inside the message never matter.
    """
    matches = [
        shape[-1]
        for shape in shapes
        if message.startswith(shape[0]) and (len(shape) == 2 or shape[1] in message)
    ]
    assert len(matches) == 1, "vector error message not understood"
    return matches[0]
