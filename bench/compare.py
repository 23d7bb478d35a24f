"""Paired comparison: sealeval's ``compare_runs`` against invarlock 0.17.1's on the same runs.

Generates a deterministic (seeded) pair of canonical runs of ``--records``
cases (default 50,000, the reference's cap): short factual questions with
1-6 word answers (a few with accented words, so Unicode normalization is
exercised), a baseline and a subject whose outputs are exact, re-cased,
partially right or wrong with correlated per-case difficulty. Then, for an
``exact_match`` policy and a ``token_f1`` policy (one metric, no slices; the
token_f1 policy needs exactly the default budget of 102,400,000 draws):

* sealeval: ``read_run`` + ``compare_runs`` in a fresh subprocess of this
  interpreter;
* invarlock: its public ``load_run`` (``invarlock.evaluation_records.adapters``)
  + ``compare_runs`` (``invarlock.evaluation_comparison.comparison``) in a
  subprocess of a separate virtualenv;

each child times ``compare_runs`` alone (runs already loaded; with ``--repeat
N`` each side runs N times in fresh processes and the fastest run counts) and
measures its peak resident memory during the call (Linux: the high-water mark
is reset through ``/proc/self/clear_refs`` just before the call; the figure is
the peak above the resident size at the start of the call; sealeval's
bootstrap worker processes, which share the parent's pages, are not included).
The script asserts that the two canonical reports are byte-identical and
prints both times, the time ratio (target: at least 10 for ``exact_match``, 15 for
``token_f1``: ``bench/_targets.py``, the table ``bench/margins.py`` checks), the peak-memory ratio
and the ``load+compare`` ratio. On a shared machine, use ``--repeat 3``.

The reference virtualenv is created when missing under
``bench/.work/invarlock-venv`` with ``/root/.pyenv/versions/3.12.1/bin/python``
(or ``python3.12`` on PATH) and ``pip install invarlock==0.17.1``. If that
fails the script says so and exits with status 2.

``--scale`` runs sealeval alone on ``--scale-records`` (default 1,000,000)
cases with the token_f1 policy (the reference refuses more than 50,000
records): the two runs are built in memory (``make_run``; without the unused
slice tag unless ``--scale-metadata``), compared once, and the script prints
the ``compare_runs`` time, the memory the two runs hold and the process's peak
RSS, which must stay under 2 GiB.

``--realistic`` compares lm-eval-like runs (``bench/_realistic.py``: ~1.4 KB
few-shot inputs, ``doc-N`` ids out of code-point order, ``task``/``topic``
tags) of ``--records`` cases with the usual metrics (``exact_match`` +
``token_f1``, overall and one slice, no work budget): the pair is written
record by record under ``--work-dir`` (default ``bench/.work``; about 2.8 GB
for 1,000,000 records, deleted afterwards), then each command runs in its own
child process and the script prints its wall time and peak RSS (``os.wait4``
rusage of that child): ``compare_run_files`` (streamed, columnar), and with
``--in-memory`` also ``read_canonical_run`` + ``compare_runs`` (both runs held). Target:
streamed under 1 GiB at 1,000,000 records.

Usage: python bench/compare.py [--records 50000] [--seed 7] [--repeat 1] [--workers auto|N]
       python bench/compare.py --scale [--scale-records 1000000] [--scale-metadata]
       python bench/compare.py --realistic [--records N] [--in-memory] [--work-dir DIR]
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sealeval.captured import make_run, write_run
from sealeval.captured.comparison import compare_runs

RSS_LIMIT_BYTES = 2 * 1024**3
HERE = Path(__file__).resolve().parent
WORK = HERE / ".work"
VENV = WORK / "invarlock-venv"
sys.path.insert(0, str(HERE))
from _targets import SPEED_TARGETS  # noqa: E402

PYENV_PYTHON = Path("/root/.pyenv/versions/3.12.1/bin/python")
REFERENCE_PACKAGE = "invarlock==0.17.1"
ARTIFACTS = ("sha256:" + "1" * 64, "sha256:" + "2" * 64)

# Shared by both children: the peak resident memory of one call.
MEMORY_PROBE = """
import re

def _status():
    with open("/proc/self/status") as handle:
        text = handle.read()
    return {key: int(re.search(key + r":\\s+(\\d+)", text).group(1)) * 1024
            for key in ("VmRSS", "VmHWM")}

def _cpu():
    import os
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system

def measured(call):
    import gc, time
    gc.collect()
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        resettable = True
    except OSError:
        resettable = False
    start_rss = _status()["VmRSS"]
    start, start_cpu = time.perf_counter(), _cpu()
    result = call()
    seconds, cpu = time.perf_counter() - start, _cpu() - start_cpu
    peak = _status()["VmHWM"]
    return result, seconds, (peak - start_rss) if resettable else None, cpu
"""

SEALEVAL_RUNNER = (
    MEMORY_PROBE
    + """
import json, sys, time
from sealeval.captured import read_run
from sealeval.captured.comparison import compare_runs
baseline_path, subject_path, policy_path, out_path, workers = sys.argv[1:6]
policy = json.loads(open(policy_path, encoding="utf-8").read())
start = time.perf_counter()
baseline = read_run(baseline_path)
subject = read_run(subject_path)
load_seconds = time.perf_counter() - start
report, seconds, peak, cpu = measured(
    lambda: compare_runs(
        baseline=baseline,
        subject=subject,
        policy=policy,
        workers=None if workers == "auto" else int(workers),
    )
)
open(out_path, "wb").write(report.canonical_bytes)
print(json.dumps({"load_seconds": load_seconds, "compare_seconds": seconds, "peak_bytes": peak,
                  "cpu_seconds": cpu}))
"""
)

REFERENCE_RUNNER = (
    MEMORY_PROBE
    + """
import json, sys, time
from invarlock.evaluation_records.adapters import load_run
from invarlock.evaluation_comparison.comparison import compare_runs
baseline_path, subject_path, policy_path, out_path = sys.argv[1:5]
policy = json.loads(open(policy_path, encoding="utf-8").read())
start = time.perf_counter()
baseline = load_run(baseline_path)
subject = load_run(subject_path)
load_seconds = time.perf_counter() - start
report, seconds, peak, cpu = measured(lambda: compare_runs(baseline, subject, policy))
# The canonical bytes (00-conventions.md §1): sorted keys, compact, raw UTF-8, final LF.
text = json.dumps(report, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                  allow_nan=False) + "\\n"
open(out_path, "wb").write(text.encode("utf-8"))
print(json.dumps({"load_seconds": load_seconds, "compare_seconds": seconds, "peak_bytes": peak,
                  "cpu_seconds": cpu}))
"""
)


def policy(kind: str) -> dict[str, Any]:
    configuration = {"unicode_version": "15.0.0"} if kind == "token_f1" else {}
    return {
        "format": "invarlock/comparison-policy-v1",
        "metrics": [
            {
                "name": kind,
                "kind": kind,
                "configuration": configuration,
                "direction": "higher",
                "unit": "score",
                "aggregation": "mean",
                "minimum_count": 100,
                "maximum_regression": 0.02,
                "maximum_interval_width": 0.05,
            }
        ],
        "slices": [],
    }


# ---------------------------------------------------------------------------
# Deterministic synthetic cases


def _vocabulary(rng: random.Random, size: int) -> list[str]:
    consonants = ("", "b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v")
    syllables = [consonant + vowel for consonant in consonants for vowel in "aeiou"]
    words: set[str] = set()
    while len(words) < size:
        word = "".join(rng.choice(syllables) for _ in range(rng.randint(1, 4)))
        if rng.random() < 0.04:  # a few accented words: NFKC and case folding do real work
            word = unicodedata.normalize("NFD", word.replace("e", "é", 1))
        words.add(word)
    return sorted(words)


def cases(
    records: int, seed: int, *, metadata: bool = True
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Yield ``(baseline record, subject record)`` mappings for ``records`` cases.

    ``metadata`` adds a slice tag (``topic``) to every record; the policies here
    have no slices, so it only costs memory (about 0.15 KB per record and run).
    """
    rng = random.Random(seed)
    vocabulary = _vocabulary(rng, 4000)
    topics = ("geography", "history", "science", "arithmetic", "literature")
    for index in range(records):
        question = " ".join(rng.choice(vocabulary) for _ in range(rng.randint(8, 14)))
        answer_words = [rng.choice(vocabulary) for _ in range(rng.randint(1, 6))]
        expected = " ".join(answer_words)
        difficulty = rng.random()
        shared = {
            "id": f"case-{index:07d}",
            "input": f"Q{index}: {question}?",
            "expected": expected,
        }
        if metadata:
            shared["metadata"] = {"topic": topics[index % len(topics)]}
        outputs = []
        for skill in (0.60, 0.62):
            roll = difficulty + rng.gauss(0.0, 0.05)
            if roll < skill:
                output = expected if rng.random() < 0.8 else expected.upper() + "."
            elif roll < skill + 0.25:
                kept = answer_words[: max(1, len(answer_words) - 1)]
                output = " ".join([*kept, rng.choice(vocabulary)])
            else:
                output = " ".join(rng.choice(vocabulary) for _ in range(rng.randint(1, 5)))
            outputs.append(output)
        yield {**shared, "output": outputs[0]}, {**shared, "output": outputs[1]}


def build_runs(records: int, seed: int, *, metadata: bool = True) -> tuple[Any, Any]:
    """Build the two runs in memory (records stream into ``make_run``)."""
    runs = []
    for side in (0, 1):
        # Generated twice (deterministic) rather than held: memory stays at the runs.
        rows = (pair[side] for pair in cases(records, seed, metadata=metadata))
        runs.append(
            make_run(
                rows,
                source={"name": "bench-evaluator", "version": "1.0"},
                run_id=("baseline", "subject")[side],
                artifact_digest=ARTIFACTS[side],
            )
        )
    return runs[0], runs[1]


# ---------------------------------------------------------------------------
# Reference environment


def ensure_reference() -> Path:
    python = VENV / "bin" / "python"
    if python.exists():
        return python
    base = str(PYENV_PYTHON) if PYENV_PYTHON.exists() else shutil.which("python3.12")
    if base is None:
        print("bench/compare.py: no Python 3.12 for the invarlock reference", file=sys.stderr)
        sys.exit(2)
    print(f"creating the reference virtualenv with {REFERENCE_PACKAGE} ...", flush=True)
    try:
        subprocess.run([base, "-m", "venv", str(VENV)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", REFERENCE_PACKAGE], check=True
        )
    except (OSError, subprocess.CalledProcessError):
        print("bench/compare.py: could not install the invarlock reference", file=sys.stderr)
        sys.exit(2)
    return python


def run_child(python: str, runner: str, arguments: list[Path | str]) -> dict[str, Any]:
    done = subprocess.run(
        [python, "-c", runner, *map(str, arguments)],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _status(key: str) -> int:
    """A ``/proc/self/status`` memory figure in bytes (Linux)."""
    with Path("/proc/self/status").open(encoding="ascii") as handle:
        for line in handle:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _mib(value: int | None) -> str:
    return "n/a" if value is None else f"{value / 1024**2:.1f} MiB"


def compare_with_reference(records: int, seed: int, repeat: int, workers: str) -> int:
    reference_python = ensure_reference()
    WORK.mkdir(parents=True, exist_ok=True)
    failures = 0
    with tempfile.TemporaryDirectory(dir=WORK, prefix="compare-") as folder:
        root = Path(folder)
        print(f"generating {records:,} paired cases (seed {seed}) ...", flush=True)
        baseline, subject = build_runs(records, seed)
        paths = [root / "baseline.json", root / "subject.json"]
        write_run(baseline, paths[0])
        write_run(subject, paths[1])
        del baseline, subject
        gc.collect()
        size = sum(path.stat().st_size for path in paths)
        print(f"runs: 2 x {records:,} records, {size / 1024**2:.1f} MiB canonical")
        for kind in ("exact_match", "token_f1"):
            policy_path = root / f"{kind}.policy.json"
            policy_path.write_text(json.dumps(policy(kind)), encoding="utf-8")
            ours_path = root / f"{kind}.sealeval.json"
            theirs_path = root / f"{kind}.invarlock.json"
            arguments = [*paths, policy_path]
            ours_all = [
                run_child(sys.executable, SEALEVAL_RUNNER, [*arguments, ours_path, workers])
                for _ in range(repeat)
            ]
            theirs_all = [
                run_child(str(reference_python), REFERENCE_RUNNER, [*arguments, theirs_path])
                for _ in range(repeat)
            ]
            ours = min(ours_all, key=lambda item: item["compare_seconds"])
            theirs = min(theirs_all, key=lambda item: item["compare_seconds"])
            cpu_ratio = min(item["cpu_seconds"] for item in theirs_all) / min(
                item["cpu_seconds"] for item in ours_all
            )
            identical = ours_path.read_bytes() == theirs_path.read_bytes()
            target = SPEED_TARGETS[f"compare {kind}"]
            ratio = theirs["compare_seconds"] / ours["compare_seconds"]
            end_to_end = (theirs["load_seconds"] + theirs["compare_seconds"]) / (
                ours["load_seconds"] + ours["compare_seconds"]
            )
            memory = (
                "n/a"
                if not ours["peak_bytes"] or theirs["peak_bytes"] is None
                else f"{theirs['peak_bytes'] / ours['peak_bytes']:.2f}x"
            )
            decision = json.loads(ours_path.read_bytes())["decision"]
            print(f"\n{kind} ({records:,} pairs, decision {decision})")
            print(
                f"  sealeval  compare_runs {ours['compare_seconds']:8.3f} s  "
                f"peak +{_mib(ours['peak_bytes'])}  (read_run x2 {ours['load_seconds']:.2f} s)"
            )
            print(
                f"  invarlock compare_runs {theirs['compare_seconds']:8.3f} s  "
                f"peak +{_mib(theirs['peak_bytes'])}  (load_run x2 {theirs['load_seconds']:.2f} s)"
            )
            print(
                f"  CPU seconds of the call (workers included): sealeval"
                f" {min(item['cpu_seconds'] for item in ours_all):.3f}, invarlock"
                f" {min(item['cpu_seconds'] for item in theirs_all):.3f},"
                f" CPU ratio {cpu_ratio:.1f}x"
            )
            print(
                f"  time ratio {ratio:.1f}x (target >= {target:.0f}x), memory ratio {memory}, "
                f"load+compare ratio {end_to_end:.1f}x, reports byte-identical: {identical}"
            )
            if not identical:
                print("  FAIL: the reports differ", file=sys.stderr)
                failures += 1
            elif ratio < target:
                print("  below target", file=sys.stderr)
                failures += 1
    return 1 if failures else 0


def scale(records: int, seed: int, *, metadata: bool) -> int:
    print(f"building 2 x {records:,} records in memory (token_f1) ...", flush=True)
    start = time.perf_counter()
    gc.disable()  # millions of acyclic containers: collection passes would only cost time
    try:
        baseline, subject = build_runs(records, seed, metadata=metadata)
    finally:
        gc.enable()
    print(
        f"  built in {time.perf_counter() - start:.1f} s; resident {_mib(_status('VmRSS'))}, "
        f"peak so far {_mib(_status('VmHWM'))}"
    )
    before = _status("VmRSS")
    start = time.perf_counter()
    report = compare_runs(
        baseline=baseline, subject=subject, policy=policy("token_f1"), max_bootstrap_draws=None
    )
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    entry = report.metrics[0]
    print(
        f"sealeval compare_runs, {records:,} pairs, token_f1: {seconds:.1f} s "
        f"(decision {report.decision}, delta {entry.delta!r})"
    )
    print(
        f"peak RSS of the whole process: {_mib(peak)} (limit {_mib(RSS_LIMIT_BYTES)}); "
        f"the two runs held {_mib(before)} before compare_runs"
    )
    if peak >= RSS_LIMIT_BYTES:
        print("  FAIL: over the memory limit", file=sys.stderr)
        return 1
    return 0


REALISTIC_RSS_LIMIT_KIB = 1024 * 1024

STREAMED_CHILD = """
import json, sys
from sealeval.captured.comparison import compare_run_files
baseline, subject, policy = sys.argv[1:4]
report = compare_run_files(baseline=baseline, subject=subject,
                           policy=json.load(open(policy)), max_bootstrap_draws=None)
print(json.dumps({"decision": report.decision, "digest": report.digest}))
"""

IN_MEMORY_CHILD = """
import json, sys
from sealeval.captured import read_canonical_run
from sealeval.captured.comparison import compare_runs
baseline, subject, policy = sys.argv[1:4]
report = compare_runs(baseline=read_canonical_run(baseline), subject=read_canonical_run(subject),
                      policy=json.load(open(policy)), max_bootstrap_draws=None)
print(json.dumps({"decision": report.decision, "digest": report.digest}))
"""


def realistic(records: int, seed: int, *, in_memory: bool, work_dir: Path) -> int:
    """Compare a realistic-content pair in child processes; print time and peak RSS."""
    sys.path.insert(0, str(HERE))
    from _realistic import json_or_empty, measured, write_realistic_pair  # noqa: PLC0415

    work_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=work_dir, prefix="compare-realistic-") as folder:
        root = Path(folder)
        start = time.perf_counter()
        baseline, subject = write_realistic_pair(root, records, seed)
        size = baseline.stat().st_size + subject.stat().st_size
        print(
            f"wrote 2 x {records:,} realistic records ({size / 1024**2:,.0f} MiB) "
            f"in {time.perf_counter() - start:.1f} s"
        )
        both = {
            **policy("exact_match"),
            "slices": [{"name": "geo", "where": {"topic": "geography"}}],
        }
        both["metrics"] = [policy("exact_match")["metrics"][0], policy("token_f1")["metrics"][0]]
        policy_path = root / "policy.json"
        policy_path.write_text(json.dumps(both), encoding="utf-8")
        children = [("compare_run_files (streamed)", STREAMED_CHILD)]
        if in_memory:
            children.append(("read_canonical_run + compare_runs", IN_MEMORY_CHILD))
        worst = 0
        digests = set()
        for label, child in children:
            seconds, status, peak, out, cpu = measured(
                [sys.executable, "-c", child, str(baseline), str(subject), str(policy_path)], root
            )
            result = json_or_empty(out)
            if status != 0 or not result:
                print(f"{label} failed (exit {status})", file=sys.stderr)
                return 1
            digests.add(result["digest"])
            worst = max(worst, peak) if "streamed" in label else worst
            print(
                f"  {label:36} {seconds:8.1f} s wall {cpu:8.1f} s CPU"
                f"  peak RSS {peak / 1024:7,.0f} MiB  decision {result['decision']}"
            )
        if len(digests) != 1:
            print("  FAIL: the reports differ", file=sys.stderr)
            return 1
        print(f"  streamed peak RSS limit {REALISTIC_RSS_LIMIT_KIB / 1024:.0f} MiB")
        return 0 if worst < REALISTIC_RSS_LIMIT_KIB else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument(
        "--workers",
        default="auto",
        help="compare_runs(workers=...) for sealeval: auto (the CPUs) or a number (1: serial)",
    )
    parser.add_argument("--scale", action="store_true")
    parser.add_argument("--scale-records", type=int, default=1_000_000)
    parser.add_argument(
        "--scale-metadata",
        action="store_true",
        help="keep the (unused) slice tag on every record of the --scale runs",
    )
    parser.add_argument("--realistic", action="store_true")
    parser.add_argument("--in-memory", action="store_true")
    parser.add_argument("--work-dir", type=Path, default=WORK)
    arguments = parser.parse_args()
    if arguments.realistic:
        return realistic(
            arguments.records,
            arguments.seed,
            in_memory=arguments.in_memory,
            work_dir=arguments.work_dir,
        )
    if arguments.scale:
        return scale(arguments.scale_records, arguments.seed, metadata=arguments.scale_metadata)
    return compare_with_reference(
        arguments.records, arguments.seed, arguments.repeat, arguments.workers
    )


if __name__ == "__main__":
    sys.exit(main())
