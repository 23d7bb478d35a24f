"""Coverage-guided fuzz targets (atheris) for sealeval's decoders and file readers.

Each target feeds the fuzzer's bytes to one reader and accepts only success
or a closed-code ``SealevalError``; any other exception is a finding (atheris
stops and writes the crashing input). File readers get the bytes as a file in
a private temporary folder.

Usage (where atheris installs, e.g. CPython 3.11 on Linux with clang)::

    pip install atheris
    python scripts/fuzz/fuzz_readers.py canonical -max_total_time=600
    python scripts/fuzz/fuzz_readers.py --list

Targets: canonical, yaml, run, policy, request, trust, receipt, import-jsonl,
import-promptfoo, tree (bytes describe a small tree of files and links).
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from sealeval.canonical import DecodeLimits, decode
from sealeval.captured.importers import load_run
from sealeval.captured.policy import load_comparison_policy
from sealeval.captured.receipt import parse_receipt
from sealeval.captured.request import load_authored_request
from sealeval.captured.run import parse_run
from sealeval.captured.trust import parse_trust_profile
from sealeval.errors import SealevalError
from sealeval.manifest.components import TreeLimits, digest_tree
from sealeval.strict_yaml import load_strict_yaml


def _decoded(parse: Callable[[object], object]) -> Callable[[bytes], object]:
    return lambda data: parse(decode(data, limits=DecodeLimits(max_bytes=1 << 20)))


def _as_file(suffix: str, read: Callable[[Path], object]) -> Callable[[bytes], object]:
    folder = Path(tempfile.mkdtemp(prefix="sealeval-fuzz-"))
    path = folder / ("input" + suffix)

    def target(data: bytes) -> object:
        if path.exists():
            path.unlink()
        path.write_bytes(data)
        return read(path)

    return target


def _tree(data: bytes) -> object:
    """Build a small tree from ``data`` (names, files, links, folders) and digest it."""
    root = Path(tempfile.mkdtemp(prefix="sealeval-fuzz-tree-"))
    try:
        for index in range(0, min(len(data), 64) - 2, 3):
            kind, name, value = data[index] % 4, f"n{data[index + 1] % 8}", data[index + 2]
            parent = root / f"n{value % 4}" if value % 3 == 0 else root
            if not os.path.lexists(parent):
                parent.mkdir()
            if parent.is_symlink() or not parent.is_dir():
                continue
            target = parent / name
            if os.path.lexists(target):
                continue
            if kind == 0:
                target.write_bytes(bytes([value]))
            elif kind == 1:
                target.mkdir()
            elif kind == 2:
                target.symlink_to(f"../n{value % 8}" if value % 2 else f"n{value % 8}")
            else:
                target.symlink_to("/" if value % 5 == 0 else name)
        return digest_tree(root, limits=TreeLimits(max_depth=8, max_entries=256))
    finally:
        for path in sorted(root.rglob("*"), key=lambda p: len(p.parts), reverse=True):
            if path.is_symlink() or path.is_file():
                path.unlink()
            else:
                path.rmdir()
        root.rmdir()


def _targets() -> dict[str, Callable[[bytes], object]]:
    identities = {
        "source": {"name": "fuzz", "version": "1"},
        "run_id": "fuzz",
        "artifact_digest": "sha256:" + "0" * 64,
    }
    return {
        "canonical": decode,
        "yaml": load_strict_yaml,
        "run": parse_run,
        "policy": load_comparison_policy,
        "request": load_authored_request,
        "trust": _decoded(parse_trust_profile),
        "receipt": _decoded(parse_receipt),
        "import-jsonl": _as_file(".jsonl", lambda path: load_run(path, "jsonl", **identities)),
        "import-promptfoo": _as_file(
            ".jsonl", lambda path: load_run(path, "promptfoo-jsonl", **identities)
        ),
        "tree": _tree,
    }


def main() -> int:
    """Run the named target under atheris (``--list`` prints the targets)."""
    targets = _targets()
    if len(sys.argv) < 2 or sys.argv[1] not in targets:
        print("targets:", ", ".join(targets))
        return 0 if "--list" in sys.argv else 2
    import atheris  # noqa: PLC0415 - optional: pip install atheris

    target = targets[sys.argv.pop(1)]

    def one_input(data: bytes) -> None:
        try:
            target(data)
        except SealevalError as error:
            if error.code not in type(error).codes:
                raise AssertionError("code outside its closed set") from None

    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main())
