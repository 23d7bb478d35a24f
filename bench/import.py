"""Import benchmark: ``sealeval import`` against invarlock 0.17.1's ``load_run``, same files.

Generates two deterministic (seeded) synthetic sources of 50,000 records
each — an lm-evaluation-harness ``--log_samples`` file (adapter
``lm-eval-samples``, realistic rows with docs, arguments, responses, hashes,
metrics and metadata) and a record-per-line JSONL file (adapter ``jsonl``) —
and imports each

* with sealeval, in a subprocess of this interpreter:
  :func:`sealeval.captured.importers.import_run_streaming` (what ``sealeval
  import`` runs: canonical run file written while hashed) and
  :func:`~sealeval.captured.importers.load_run` (the run in memory);
* with the reference, in a subprocess of a separate virtualenv: invarlock's
  public ``load_run`` (``invarlock.evaluation_records.adapters``) followed by
  its public ``run_digest`` (``invarlock.evaluation_records.io``).

It asserts that every run digest is identical and prints the machine's load
average before and after (the ratios of a busy machine are not an idle
one's), the import times
(measured inside each subprocess, interpreter start and imports excluded),
the wall times, the CPU seconds each import spent (user and system, the
import's worker process included: the ratio a busy machine changes least),
the peak resident set size of each subprocess (``os.wait4`` rusage of that
child) and the ratios. Target: sealeval at least 10x faster at
50,000 records.

The reference virtualenv is created when missing under
``bench/.work/invarlock-venv`` with the pyenv interpreter
``/root/.pyenv/versions/3.12.1/bin/python`` (or ``python3.12`` on PATH) and
``pip install invarlock==0.17.1``. If that fails the script says so and exits
with status 2.

The paths added for ``--adapter auto`` are measured too, each against the
reference's named import of a file of the same size: ``auto`` on the lm-eval
file (recognition by content, then the specified adapter: same digest as the
reference), and ``auto`` on an lm-eval file with two filters per document
(the specified adapter refuses it at the first repeated document, then the
native ``lm-eval-log-samples`` reader reads it, streaming its lines through
the same two-process line writer as the specified adapters; the reference
cannot read that file at all, so its time on the one-filter file of the same
record count is the yardstick).

A ragas result table written with pandas ``to_csv`` (``auto`` picks the
native ``ragas-result-csv`` reader) is measured the same way: the reference
has no CSV reader, so its time on the lm-eval file of the same record count
is the yardstick.

``--scale`` imports a 1,000,000-record lm-eval samples file with sealeval
alone (``import_run_streaming``) and prints its time and peak RSS (target:
under 1 GiB).

Usage: python bench/import.py [--records 50000] [--seed 7] [--repeat 1]
       python bench/import.py --scale [--records 1000000]
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TARGET = 10.0
RSS_LIMIT_KIB = 1024 * 1024
HERE = Path(__file__).resolve().parent
WORK = HERE / ".work"
VENV = WORK / "invarlock-venv"
PYENV_PYTHON = Path("/root/.pyenv/versions/3.12.1/bin/python")
REFERENCE_PACKAGE = "invarlock==0.17.1"
ARTIFACT = "sha256:" + hashlib.sha256(b"bench-artifact").hexdigest()
SOURCE = {"name": "lm-evaluation-harness", "version": "0.4.9"}
RUN_ID = "bench-run"

# Runs in the reference virtualenv: arguments as JSON in argv[1], result as JSON on stdout.
REFERENCE_RUNNER = """
import json, resource, sys, time
from invarlock.evaluation_records.adapters import load_run
from invarlock.evaluation_records.io import run_digest
def cpu():
    own, children = (resource.getrusage(who) for who in
                     (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
args = json.loads(sys.argv[1])
cpu_start, start = cpu(), time.perf_counter()
run = load_run(args["path"], adapter=args["adapter"], source=args["source"],
               run_id=args["run_id"], artifact_digest=args["artifact_digest"])
loaded = time.perf_counter() - start
digest = run_digest(run)
seconds = time.perf_counter() - start
print(json.dumps({"digest": digest, "seconds": seconds, "load_seconds": loaded,
                  "records": len(run["records"]), "cpu_seconds": cpu() - cpu_start}))
"""

# Runs with this interpreter (sealeval installed): same protocol.
SEALEVAL_RUNNER = """
import json, resource, sys, time
from sealeval.captured.importers import import_run_streaming, load_run
def cpu():  # this process and its reaped children (the import's worker process)
    own, children = (resource.getrusage(who) for who in
                     (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
args = json.loads(sys.argv[1])
kwargs = dict(adapter=args["adapter"], source=args["source"], run_id=args["run_id"],
              artifact_digest=args["artifact_digest"])
cpu_start, start = cpu(), time.perf_counter()
if args["mode"] == "stream":
    summary = import_run_streaming(args["path"], args["output"], **kwargs)
    digest, count = summary.run_digest, summary.record_count
else:
    run = load_run(args["path"], **kwargs)
    digest, count = run.digest, len(run)
seconds = time.perf_counter() - start
print(json.dumps({"digest": digest, "seconds": seconds, "records": count,
                  "cpu_seconds": cpu() - cpu_start}))
"""

WORDS = (  # noqa: SIM905 - a word list reads best as text
    "patient chest heart lung fever cough pain blood pressure oxygen rate pulse imaging "
    "scan report history allergy medication dose tablet daily review clinic follow plan "
    "discharge ward nurse doctor assessment exam normal stable mild moderate severe acute "
    "chronic left right upper lower glucose insulin renal hepatic function sodium count "
    "culture negative positive pending result labs within limits noted denies reports since "
    "days weeks months year Paris Everest façade straße 東京 タワー café naïve"
).split()


def _text(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def lm_eval_rows(count: int, seed: int) -> Any:
    """Yield harness ``--log_samples`` rows (generation tasks, some errored or multi-field)."""
    rng = random.Random(seed)
    subtasks = ("alpha", "bravo", "charlie", "delta")
    for index in range(count):
        question = _text(rng, 6, 24) + "?"
        answer = _text(rng, 1, 4)
        prompt = f"Q: {question}\nA:"
        response = answer if rng.random() < 0.6 else _text(rng, 1, 6)
        row: dict[str, Any] = {
            "doc_id": index,
            "doc": {"question": question, "answer": answer, "id": f"q-{index}"},
            "target": answer,
            "arguments": {
                "gen_args_0": {"arg_0": prompt, "arg_1": {"until": ["\n"], "do_sample": False}}
            },
            "resps": [[response]],
            "filtered_resps": [response],
            "filter": "none",
            "metrics": ["exact_match"],
            "doc_hash": _sha(question),
            "prompt_hash": _sha(prompt),
            "target_hash": _sha(answer),
            "exact_match": 1.0 if response == answer else 0.0,
            "metadata": {"subtask": rng.choice(subtasks), "shard": str(index % 7)},
        }
        if rng.random() < 0.01:
            row["error"] = "rate limited"
            row["filtered_resps"] = []
        yield row


def lm_eval_filter_rows(count: int, seed: int) -> Any:
    """Yield harness rows with two filters per document (``count`` rows, ``count // 2`` docs)."""
    for row in lm_eval_rows(count // 2, seed):
        for name in ("strict-match", "flexible-extract"):
            yield {**row, "filter": name}


def jsonl_rows(count: int, seed: int) -> Any:
    """Yield record rows for the ``jsonl`` adapter."""
    rng = random.Random(seed + 1)
    for index in range(count):
        expected = _text(rng, 1, 6)
        output = expected if rng.random() < 0.5 else _text(rng, 1, 8)
        row: dict[str, Any] = {
            "id": f"case-{index:07d}",
            "input": {"messages": [{"role": "user", "content": _text(rng, 10, 40)}]},
            "expected": expected,
            "output": output,
            "scores": {"bleu": round(rng.random(), 6), "latency_ms": rng.randint(50, 900)},
            "metadata": {"topic": rng.choice(("alpha", "bravo", "charlie")), "lang": "en"},
        }
        if rng.random() < 0.02:
            row["output"] = None
            row["error"] = "upstream timeout"
        yield row


RAGAS_HEADER = (
    "user_input",
    "retrieved_contexts",
    "response",
    "reference",
    "faithfulness",
    "answer_relevancy",
    "context_precision",
    "context_recall",
)


def ragas_csv_rows(count: int, seed: int) -> Any:
    """Yield ragas ``to_pandas()`` rows as pandas writes them (a failed metric: empty cell)."""
    rng = random.Random(seed)
    yield RAGAS_HEADER
    for _ in range(count):
        contexts = [_text(rng, 20, 60) + ', "quoted"\nline' for _ in range(rng.randint(1, 3))]
        yield (
            _text(rng, 5, 20) + "?",
            repr(contexts),
            _text(rng, 5, 40),
            _text(rng, 3, 15),
            repr(rng.random()),
            "" if rng.random() < 0.1 else repr(rng.random()),
            repr(rng.choice((0.0, 0.5, 0.9999999999))),
            repr(rng.choice((0.0, 1.0))),
        )


def write_csv(path: Path, rows: Any) -> int:
    with path.open("w", encoding="utf-8", newline="") as handle:
        csv.writer(handle, lineterminator="\n").writerows(rows)
    return path.stat().st_size


def write_jsonl(path: Path, rows: Any) -> int:
    size = 0
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            line = json.dumps(row, ensure_ascii=False) + "\n"
            handle.write(line)
            size += len(line.encode("utf-8"))
    return size


def generate(kind: str, path: Path, records: int, seed: int) -> int:
    """Write a source file in a subprocess, so that this process stays small.

    A child's peak RSS (``ru_maxrss``) counts the pages it shares with its
    parent at fork time; generating the data here would inflate every
    measurement that follows.
    """
    done = subprocess.run(
        [sys.executable, __file__, "--generate", kind, str(path), str(records), str(seed)],
        check=True,
        capture_output=True,
    )
    return int(done.stdout)


def ensure_reference() -> Path:
    python = VENV / "bin" / "python"
    if python.exists():
        return python
    base = str(PYENV_PYTHON) if PYENV_PYTHON.exists() else shutil.which("python3.12")
    if base is None:
        sys.exit("bench/import.py: no Python 3.12 for the invarlock reference (status 2)")
    print(f"creating the reference virtualenv with {REFERENCE_PACKAGE} ...", flush=True)
    try:
        subprocess.run([base, "-m", "venv", str(VENV)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", REFERENCE_PACKAGE],
            check=True,
        )
    except (subprocess.CalledProcessError, OSError):
        shutil.rmtree(VENV, ignore_errors=True)
        print("bench/import.py: could not install the invarlock reference", file=sys.stderr)
        sys.exit(2)
    return python


def measure(python: str | Path, runner: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Run one import in a subprocess; add its wall time and peak RSS (KiB, from wait4)."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(
            [str(python), "-c", runner, json.dumps(arguments)],
            stdout=subprocess.PIPE,
            stderr=errors,
            cwd=WORK,
        )
        assert process.stdout is not None
        out = process.stdout.read()
        # wait4 reaps this child and returns its own rusage (peak RSS in KiB on Linux)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        errors.seek(0)
        err = errors.read()
    wall = time.perf_counter() - started
    if process.returncode != 0:
        sys.stderr.write(err.decode("utf-8", "replace")[-2000:])
        sys.exit(f"bench/import.py: subprocess failed ({process.returncode})")
    result: dict[str, Any] = json.loads(out)
    result["wall"] = wall
    result["maxrss_kib"] = usage.ru_maxrss
    return result


def arguments(
    path: Path, adapter: str, mode: str = "", output: Path | None = None
) -> dict[str, Any]:
    return {
        "path": str(path),
        "adapter": adapter,
        "source": SOURCE,
        "run_id": RUN_ID,
        "artifact_digest": ARTIFACT,
        "mode": mode,
        "output": str(output) if output is not None else "",
    }


def file_digest(path: Path) -> str:
    """``sha256:<hex>`` of a file, read in chunks (this process must stay small, see generate)."""
    with path.open("rb") as handle:
        return "sha256:" + hashlib.file_digest(handle, "sha256").hexdigest()


def best(results: list[dict[str, Any]]) -> dict[str, Any]:
    return min(results, key=lambda result: result["seconds"])


def compare(
    name: str,
    path: Path,
    adapter: str,
    reference: Path,
    repeat: int,
    *,
    ours: str | None = None,
    yardstick: Path | None = None,
) -> float:
    """Time sealeval (adapter ``ours``, default ``adapter``) against the reference.

    With ``yardstick``, the reference imports that file instead (same record
    count) and digests are not compared.
    """
    output = WORK / f"{name}.run.json"
    mine = ours or adapter
    streams, loads, refs = [], [], []
    for _ in range(repeat):
        output.unlink(missing_ok=True)
        streams.append(
            measure(sys.executable, SEALEVAL_RUNNER, arguments(path, mine, "stream", output))
        )
        loads.append(measure(sys.executable, SEALEVAL_RUNNER, arguments(path, mine, "load")))
        refs.append(measure(reference, REFERENCE_RUNNER, arguments(yardstick or path, adapter)))
    stream, load, ref = best(streams), best(loads), best(refs)
    digests = {stream["digest"], load["digest"]} | (set() if yardstick else {ref["digest"]})
    assert len(digests) == 1, f"{name}: run digests differ"
    assert file_digest(output) == stream["digest"]
    output.unlink()
    ratio = ref["seconds"] / stream["seconds"]
    print(f"\n{name}: {stream['records']:,} records, {path.stat().st_size / 1e6:.1f} MB")
    same = "sealeval's two" if yardstick else "all three"
    print(f"  run digest ({same} identical): {stream['digest']}")
    if yardstick is not None:
        print(f"  (reference timed on the one-filter lm-eval file of {ref['records']:,} records)")
    header = f"  {'':34}{'import s':>10}{'wall s':>10}{'peak RSS MiB':>14}"
    print(header)
    for label, result in (
        ("invarlock 0.17.1 load_run+digest", ref),
        ("sealeval import (stream to file)", stream),
        ("sealeval load_run (in memory)", load),
    ):
        print(
            f"  {label:34}{result['seconds']:10.2f}{result['wall']:10.2f}"
            f"{result['maxrss_kib'] / 1024:14.1f}"
        )
    print(
        f"  speed-up (import time): stream {ratio:.1f}x, load_run "
        f"{ref['seconds'] / load['seconds']:.1f}x; wall {ref['wall'] / stream['wall']:.1f}x"
    )
    print(
        f"  (invarlock load_run alone, digest not computed: {ref['load_seconds']:.2f} s, "
        f"{ref['load_seconds'] / stream['seconds']:.1f}x sealeval's full import)"
    )
    print(
        f"  peak RSS ratio (reference / sealeval stream): "
        f"{ref['maxrss_kib'] / stream['maxrss_kib']:.1f}x"
    )
    print(
        f"  CPU seconds (user+sys, the worker process included): reference "
        f"{ref['cpu_seconds']:.2f}, sealeval stream {stream['cpu_seconds']:.2f} "
        f"({ref['cpu_seconds'] / stream['cpu_seconds']:.1f}x: the work ratio, which a busy "
        f"machine changes least)"
    )
    return ratio


def scale(records: int, seed: int) -> None:
    WORK.mkdir(parents=True, exist_ok=True)
    path = WORK / f"lm-eval-{records}.jsonl"
    output = WORK / "scale.run.json"
    print(f"generating {records:,} lm-eval samples ...", flush=True)
    size = generate("lm-eval-samples", path, records, seed)
    output.unlink(missing_ok=True)
    try:
        result = measure(
            sys.executable, SEALEVAL_RUNNER, arguments(path, "lm-eval-samples", "stream", output)
        )
        assert result["records"] == records
        assert file_digest(output) == result["digest"]
        print(f"scale: {records:,} records, {size / 1e6:.0f} MB source")
        print(f"  run digest: {result['digest']}")
        print(f"  import time: {result['seconds']:.1f} s (wall {result['wall']:.1f} s)")
        print(f"  peak RSS: {result['maxrss_kib'] / 1024:.0f} MiB (limit 1024 MiB)")
        if result["maxrss_kib"] >= RSS_LIMIT_KIB:
            sys.exit("bench/import.py: peak RSS over 1 GiB")
    finally:
        path.unlink(missing_ok=True)
        output.unlink(missing_ok=True)


def _load() -> str:
    """The 1, 5 and 15 minute load averages, or ``unknown`` where the platform has none."""
    try:
        return ", ".join(f"{value:.2f}" for value in os.getloadavg())
    except OSError:
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=None)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--scale", action="store_true")
    parser.add_argument("--generate", nargs=4, metavar=("KIND", "PATH", "RECORDS", "SEED"))
    options = parser.parse_args()
    if options.generate:
        kind, path, count, seed = options.generate
        if kind == "ragas-csv":
            print(write_csv(Path(path), ragas_csv_rows(int(count), int(seed))))
            return
        rows = {
            "lm-eval-samples": lm_eval_rows,
            "lm-eval-filters": lm_eval_filter_rows,
        }.get(kind, jsonl_rows)
        print(write_jsonl(Path(path), rows(int(count), int(seed))))
        return
    if options.scale:
        scale(options.records or 1_000_000, options.seed)
        return
    records = options.records or 50_000
    reference = ensure_reference()
    print(f"load average (1, 5, 15 min) at the start: {_load()}")
    WORK.mkdir(parents=True, exist_ok=True)
    lm_eval = WORK / "bench-lm-eval-samples.jsonl"
    filters = WORK / "bench-lm-eval-filters.jsonl"
    plain = WORK / "bench-records.jsonl"
    ragas = WORK / "bench-ragas.csv"
    generate("lm-eval-samples", lm_eval, records, options.seed)
    generate("lm-eval-filters", filters, records, options.seed)
    generate("jsonl", plain, records, options.seed)
    generate("ragas-csv", ragas, records, options.seed)
    try:
        ratios = [
            compare("lm-eval-samples", lm_eval, "lm-eval-samples", reference, options.repeat),
            compare("jsonl", plain, "jsonl", reference, options.repeat),
            compare(
                "lm-eval-samples, --adapter auto",
                lm_eval,
                "lm-eval-samples",
                reference,
                options.repeat,
                ours="auto",
            ),
            compare(
                "lm-eval two filters, --adapter auto (native fallback)",
                filters,
                "lm-eval-samples",
                reference,
                options.repeat,
                ours="auto",
                yardstick=lm_eval,
            ),
            compare(
                "ragas CSV, --adapter auto (ragas-result-csv)",
                ragas,
                "lm-eval-samples",
                reference,
                options.repeat,
                ours="auto",
                yardstick=lm_eval,
            ),
        ]
    finally:
        lm_eval.unlink(missing_ok=True)
        filters.unlink(missing_ok=True)
        plain.unlink(missing_ok=True)
        ragas.unlink(missing_ok=True)
    worst = min(ratios)
    print(f"\nload average (1, 5, 15 min) at the end: {_load()}")
    print(f"worst speed-up: {worst:.1f}x (target {TARGET:.0f}x)")
    if worst < TARGET:
        sys.exit(1)


if __name__ == "__main__":
    main()
