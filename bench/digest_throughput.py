"""Component digest throughput against ``sha256sum`` on the same data, same run.

Digests a 1 GiB file and a folder of 1,000 files with sealeval's streaming
helpers and with coreutils ``sha256sum``, after one warm-up read so both read
from the page cache, and prints each throughput and the ratio
``sealeval / sha256sum`` (target: at least 0.9; hashing is the physical limit).

Usage: python bench/digest_throughput.py [--size-mib 1024] [--files 1000]
       [--file-kib 256] [--repeat 3] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from sealeval.manifest.components import digest_file, digest_tree

TARGET = 0.9


def _write_random(path: Path, size: int) -> None:
    block = os.urandom(1 << 20)
    with path.open("wb") as handle:
        remaining = size
        counter = 0
        while remaining > 0:
            # Vary each block cheaply so the data is not one repeated block.
            chunk = counter.to_bytes(8, "little") + block[8:]
            handle.write(chunk[:remaining])
            remaining -= len(chunk)
            counter += 1


def _best_of(repeat: int, action: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - start)
    return best


def _sha256sum(paths: list[Path]) -> None:
    # xargs-style batching keeps the command line short for 1,000 files.
    for start in range(0, len(paths), 500):
        subprocess.run(
            ["sha256sum", "--", *map(str, paths[start : start + 500])],
            check=True,
            stdout=subprocess.DEVNULL,
        )


def _report(name: str, size: int, ours: float, theirs: float) -> float:
    mib = size / (1 << 20)
    ratio = theirs / ours
    print(
        f"{name:<28} sealeval {mib / ours:8.1f} MiB/s   sha256sum {mib / theirs:8.1f} MiB/s"
        f"   ratio {ratio:5.2f}  ({'ok' if ratio >= TARGET else 'BELOW'} target {TARGET})"
    )
    return ratio


def main() -> int:
    """Run the benchmark and print the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--file-kib", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    if shutil.which("sha256sum") is None:
        print("sha256sum not found", file=sys.stderr)
        return 2
    workdir = Path(tempfile.mkdtemp(prefix="sealeval-bench-", dir=args.workdir))
    try:
        big = workdir / "big.bin"
        _write_random(big, args.size_mib << 20)
        tree = workdir / "tree"
        tree.mkdir()
        files = []
        for index in range(args.files):
            path = tree / f"shard-{index:05d}.bin"
            _write_random(path, args.file_kib << 10)
            files.append(path)
        # Warm the page cache once for both tools.
        digest_file(big)
        digest_tree(tree)
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, best of {args.repeat}")
        ratios = [
            _report(
                f"1 file, {args.size_mib} MiB",
                args.size_mib << 20,
                _best_of(args.repeat, lambda: digest_file(big)),
                _best_of(args.repeat, lambda: _sha256sum([big])),
            ),
            _report(
                f"{args.files} files x {args.file_kib} KiB",
                args.files * (args.file_kib << 10),
                _best_of(args.repeat, lambda: digest_tree(tree)),
                _best_of(args.repeat, lambda: _sha256sum(files)),
            ),
        ]
    finally:
        shutil.rmtree(workdir)
    return 0 if min(ratios) >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
