"""How the streamed comparison's cost grows: records, content size, metrics, slices.

For ``--records`` realistic cases (``bench/_realistic.py``), one knob at a
time is varied around a base configuration (5-shot ~1.4 KB inputs,
``exact_match`` + ``token_f1``, one slice): the number of records (1/4, 1/2,
1x), the content size (0, 5, 20 few-shot exemplars), the metrics (1, 2, 4:
``exact_match``, ``token_f1``, ``normalized_match``, a second ``token_f1``) and the
slices (0, 1, 3). Each configuration runs :func:`compare_run_files` in a
child process (no work budget, bootstrap on one core, so CPU time is not
hidden by parallel workers) and the script prints its wall time, its CPU
time (user + system: the figure to compare on a loaded machine), the CPU
time per record (interpreter start and imports included) and the child's
peak RSS. The bootstrap draws 2,048 replicates
per scope and bootstrap metric (the reference's fixed count), so its share
grows with scopes x bootstrap metrics x records; reading, hashing and
scoring grow with records x content.

Usage: python bench/scaling.py [--records 10000] [--seed 3] [--work-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _realistic import json_or_empty, measured, write_realistic_pair  # noqa: E402

CHILD = """
import json, sys
from sealeval.captured.comparison import compare_run_files
baseline, subject, policy = sys.argv[1:4]
report = compare_run_files(baseline=baseline, subject=subject, policy=json.load(open(policy)),
                           max_bootstrap_draws=None, workers=1)
print(json.dumps({"decision": report.decision}))
"""

KINDS = ("exact_match", "token_f1", "normalized_match", "token_f1")
TOPICS = ("geography", "history", "science")


def _policy(metrics: int, slices: int) -> dict[str, Any]:
    entries = []
    for number, kind in enumerate(KINDS[:metrics]):
        configuration = (
            {"unicode_version": "15.0.0"} if kind in ("token_f1", "normalized_match") else {}
        )
        entries.append(
            {
                "name": f"{kind}_{number}",
                "kind": kind,
                "configuration": configuration,
                "direction": "higher",
                "unit": "score",
                "aggregation": "mean",
                "minimum_count": 100,
                "maximum_regression": 0.02,
                "maximum_interval_width": 0.05,
            }
        )
    return {
        "format": "invarlock/comparison-policy-v1",
        "metrics": entries,
        "slices": [{"name": topic, "where": {"topic": topic}} for topic in TOPICS[:slices]],
    }


def main() -> int:
    """Run every configuration; print one row each."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--work-dir", type=Path, default=HERE / ".work")
    args = parser.parse_args()
    base = {"records": args.records, "shots": 5, "metrics": 2, "slices": 1}
    grid = [("base", base)]
    grid += [("records", {**base, "records": args.records // d}) for d in (4, 2)]
    grid += [("content", {**base, "shots": shots}) for shots in (0, 20)]
    grid += [("metrics", {**base, "metrics": metrics}) for metrics in (1, 4)]
    grid += [("slices", {**base, "slices": slices}) for slices in (0, 3)]
    args.work_dir.mkdir(parents=True, exist_ok=True)
    print(
        f"{'knob':8} {'records':>9} {'shots':>5} {'input':>8} {'metrics':>7} {'slices':>6}"
        f" {'wall s':>7} {'CPU s':>6} {'CPU us/rec':>10} {'peak RSS':>9}"
    )
    failed = False
    for knob, config in grid:
        with tempfile.TemporaryDirectory(dir=args.work_dir, prefix="scaling-") as folder:
            root = Path(folder)
            baseline, subject = write_realistic_pair(
                root, config["records"], args.seed, config["shots"]
            )
            per_record = baseline.stat().st_size / config["records"]
            policy = root / "policy.json"
            policy.write_text(json.dumps(_policy(config["metrics"], config["slices"])))
            seconds, status, peak, out, cpu = measured(
                [sys.executable, "-c", CHILD, str(baseline), str(subject), str(policy)], root
            )
            if status != 0 or not json_or_empty(out):
                failed = True
            print(
                f"{knob:8} {config['records']:9,} {config['shots']:5} {per_record:7,.0f}B"
                f" {config['metrics']:7} {config['slices']:6} {seconds:7.1f} {cpu:6.1f}"
                f" {cpu / config['records'] * 1e6:10,.0f} {peak / 1024:6,.0f} MiB",
                flush=True,
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
