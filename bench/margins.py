"""The speed margins against invarlock 0.17.1, measured in one run and printed as ratios.

Runs, one after the other and each against the reference in the same run:

* ``bench/pack.py --repeat N``: ``evaluate`` and ``verify`` of a 50,000-record
  pack (the reference's cap), each side in fresh processes through its
  command line (sealeval's library pipelines, the reference's console script),
  packs and receipts byte-identical; the fastest of N per command;
* ``bench/compare.py --repeat N``: ``compare_runs`` on the same 50,000-record
  pair with an ``exact_match`` and a ``token_f1`` policy, reports
  byte-identical; the fastest of N per side.

and prints one table: each ratio (reference time / sealeval time; wall
time, what a user waits for, and CPU time, user + system of the command and
of the bootstrap workers it waited for, the steadier figure on a busy host),
its target (``verify`` and ``evaluate`` at least 10x, ``compare`` with
``token_f1`` at least 15x; ``import`` is ``bench/import.py``'s) and the load
average before and after, since on a shared machine the other jobs slow both
sides. Exit status 0 when every wall-time target is met and every output
was byte-identical.

The reference virtualenv is the one those scripts use
(``bench/.work/invarlock-venv``; created when missing).

Usage: python bench/margins.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _targets import SPEED_TARGETS  # noqa: E402

#: (label, script, pattern of its wall and CPU ratios in that script's output); the
#: targets are SPEED_TARGETS (the figures bench/compare.py prints).
MARGINS = (
    (
        "evaluate",
        "pack.py",
        r"^\s+evaluate\s+sealeval.*?\sratio\s+(?P<wall>[\d.]+)x.*?CPU ratio\s+(?P<cpu>[\d.]+)x",
    ),
    (
        "verify",
        "pack.py",
        r"^\s+verify\s+sealeval.*?\sratio\s+(?P<wall>[\d.]+)x.*?CPU ratio\s+(?P<cpu>[\d.]+)x",
    ),
    (
        "compare exact_match",
        "compare.py",
        r"^exact_match \([^\n]*\n(?:[^\n]*\n)*?[^\n]*CPU ratio (?P<cpu>[\d.]+)x\n"
        r"\s+time ratio (?P<wall>[\d.]+)x",
    ),
    (
        "compare token_f1",
        "compare.py",
        r"^token_f1 \([^\n]*\n(?:[^\n]*\n)*?[^\n]*CPU ratio (?P<cpu>[\d.]+)x\n"
        r"\s+time ratio (?P<wall>[\d.]+)x",
    ),
)


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text(encoding="ascii").split()[:3])


def main() -> int:
    """Run both scripts, print their output and the table of ratios."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    outputs: dict[str, str] = {}
    identical = True
    print(f"load average at start: {_load()}", flush=True)
    for script in ("pack.py", "compare.py"):
        done = subprocess.run(
            [sys.executable, str(HERE / script), "--repeat", str(args.repeat)],
            capture_output=True,
            text=True,
            check=False,
        )
        outputs[script] = done.stdout
        print(f"--- bench/{script} --repeat {args.repeat}\n{done.stdout.rstrip()}", flush=True)
        identical = identical and "byte-identical: False" not in done.stdout
        if "byte-identical: True" not in done.stdout:
            print(done.stderr[-2000:], file=sys.stderr)
            identical = False
    print(f"load average at end: {_load()}")
    print(f"\nspeed margins against invarlock 0.17.1 (fastest of {args.repeat}, 50,000 records)")
    print(f"  {'command':20} {'wall':>7} {'CPU':>7}   target")
    met = True
    for label, script, pattern in MARGINS:
        target = SPEED_TARGETS[label]
        found = re.search(pattern, outputs[script], re.MULTILINE)
        wall = float(found.group("wall")) if found else 0.0
        cpu = float(found.group("cpu")) if found else 0.0
        met = met and wall >= target
        verdict = "met" if wall >= target else ("CPU only" if cpu >= target else "SHORT")
        print(f"  {label:20} {wall:6.1f}x {cpu:6.1f}x   >= {target:2.0f}x  {verdict}")
    print(f"  outputs byte-identical: {identical}")
    return 0 if met and identical else 1


if __name__ == "__main__":
    sys.exit(main())
