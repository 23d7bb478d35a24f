"""One realistic pair through the whole pipeline: import, compare, evaluate, verify, report.

What a new user with lm-evaluation-harness results does, at ``--records``
cases per run (default 1,000,000):

1. two lm-eval ``--log_samples`` result files (JSONL, one row per document)
   are generated, deterministically (seeded), in a child process: the
   ``bench/_realistic.py`` content with ``--shots`` exemplars (default 8, a
   few-shot prompt of about 2 KB in ``arguments``, the question in ``doc``),
   1-6 word answers, a baseline and a subject whose outputs are exact,
   re-cased, partially right or wrong, a ``task`` and a ``topic`` tag in each
   row's ``metadata`` and lm-eval's integer ``doc_id`` (not in code-point order
   once read as an id);
2. each command runs as the ``sealeval`` console script in its own child
   process (standard error not a terminal, so no progress bar), and the
   script records its wall time, CPU time (user + system of the child and of
   the bootstrap workers it waited for) and peak resident set size
   (``os.wait4`` rusage of that child):

   * ``sealeval import FILE --adapter lm-eval-samples -o RUN --json`` for
     each side (streamed: the canonical run is written while hashed);
   * ``sealeval compare BASELINE SUBJECT --policy P --uncapped --json``;
   * ``sealeval evaluate REQUEST --signing-key K --output pack --uncapped
     --json``;
   * ``sealeval verify pack ... --uncapped --json`` (the recipient's anchors:
     the digests ``evaluate`` printed, the signer's fingerprint, a verifier
     key);
   * ``sealeval report pack --uncapped --json``.

The policy is the usual one (``exact_match`` + ``token_f1``, overall and one
slice ``topic: geography``) under the commands' default work budget. The
script checks that ``compare`` and ``evaluate`` agree on the decision and that
``verify`` finds the pack intact, prints one line per command and exits
non-zero if any command failed or peaked at 1 GiB or more. Everything is
written under ``--work-dir`` (default ``bench/.work``; about 7 GB at
1,000,000 records: the two result files, the two runs, the pack) and deleted
afterwards unless ``--keep``. Check the free space first (``df -h``).

Usage: python bench/realistic_pipeline.py [--records 1000000] [--seed 5] [--shots 8]
                                          [--work-dir DIR] [--keep]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _realistic import (  # noqa: E402
    POLICY,
    json_or_empty,
    measured,
    realistic_cases,
    verify_arguments,
)

WORK = HERE / ".work"
RSS_LIMIT_KIB = 1024 * 1024
SIDES = ("baseline", "subject")
ADAPTERS = ("jsonl", "lm-eval-samples")
ARTIFACTS = {"baseline": "sha256:" + "1" * 64, "subject": "sha256:" + "2" * 64}
QUESTION = "\n\nQuestion: "


REQUEST = """format_version: invarlock/evaluation-request-v2
execution: {mode: captured}
comparison:
  baseline: {path: runs/baseline.json, adapter: invarlock}
  subject: {path: runs/subject.json, adapter: invarlock}
  policy: policy.json
output: {evidence: evidence}
"""


def lm_eval_row(record: dict[str, Any]) -> dict[str, Any]:
    """One harness ``--log_samples`` row (a ``generate_until`` task) for one record."""
    prompt = record["input"]
    question = prompt.rsplit(QUESTION, 1)[1].removesuffix("?\nAnswer:")
    output, expected = record["output"], record["expected"]
    return {
        "doc_id": int(record["id"].removeprefix("doc-")),
        "doc": {"question": question + "?", "answer": expected},
        "target": expected,
        "arguments": {
            "gen_args_0": {
                "arg_0": prompt,
                "arg_1": {"until": ["\n\n", "Question:"], "do_sample": False},
            }
        },
        "resps": [[output]],
        "filtered_resps": [output],
        "filter": "none",
        "metrics": ["exact_match"],
        "exact_match": 1.0 if output == expected else 0.0,
        "metadata": dict(record["metadata"]),
    }


def jsonl_row(record: dict[str, Any]) -> dict[str, Any]:
    """One record-per-line row (adapter ``jsonl``): the prompt is the record's input."""
    output, expected = record["output"], record["expected"]
    return {**record, "scores": {"exact_match": 1.0 if output == expected else 0.0}}


def _rows(records: int, seed: int, shots: int, adapter: str) -> Iterator[tuple[str, str, int]]:
    shape = lm_eval_row if adapter == "lm-eval-samples" else jsonl_row
    for left, right in realistic_cases(records, seed, shots):
        yield (
            json.dumps(shape(left), ensure_ascii=False) + "\n",
            json.dumps(shape(right), ensure_ascii=False) + "\n",
            len(left["input"].encode("utf-8")),
        )


def generate(folder: Path, records: int, seed: int, shots: int, adapter: str) -> None:
    """Write ``baseline.jsonl`` and ``subject.jsonl``; print the mean prompt size (bytes)."""
    prompt_bytes = 0
    with (
        (folder / "baseline.jsonl").open("w", encoding="utf-8") as baseline,
        (folder / "subject.jsonl").open("w", encoding="utf-8") as subject,
    ):
        for left, right, size in _rows(records, seed, shots, adapter):
            baseline.write(left)
            subject.write(right)
            prompt_bytes += size
    print(prompt_bytes // max(records, 1))


def _line(label: str, result: tuple[float, int, int, str, float]) -> str:
    seconds, status, peak, _, cpu = result
    return (
        f"  {label:10} {seconds:9.1f} s wall {cpu:9.1f} s CPU"
        f"  peak RSS {peak / 1024:7,.0f} MiB  exit {status}"
    )


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text(encoding="ascii").split()[:3])


def pipeline(records: int, seed: int, shots: int, adapter: str, work_dir: Path, keep: bool) -> int:
    """Run the five commands on one generated pair; print the table; 0 if all under 1 GiB."""
    from sealeval.captured.signing import generate_key_directory  # noqa: PLC0415

    sealeval = str(Path(sys.executable).with_name("sealeval"))
    work_dir.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(dir=work_dir, prefix="pipeline-"))
    try:
        results = root / "results"
        request = root / "request"
        results.mkdir()
        (request / "runs").mkdir(parents=True)
        print(f"load average at start: {_load()}", flush=True)
        start = time.perf_counter()
        done = subprocess.run(
            [
                *(sys.executable, __file__, "--generate", str(results), str(records), str(seed)),
                *("--shots", str(shots), "--adapter", adapter),
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        size = sum(path.stat().st_size for path in results.iterdir())
        print(
            f"wrote 2 x {records:,} lm-eval samples ({size / 1024**2:,.0f} MiB, mean prompt "
            f"{int(done.stdout):,} B, {shots} shots) in {time.perf_counter() - start:.1f} s",
            flush=True,
        )
        (request / "policy.json").write_text(json.dumps(POLICY), encoding="utf-8")
        (request / "request.yaml").write_text(REQUEST, encoding="utf-8")
        signer = generate_key_directory(root / "signer")
        verifier = generate_key_directory(root / "verifier")
        rows: list[tuple[str, tuple[float, int, int, str, float]]] = []

        def run(label: str, argv: list[str]) -> dict[str, Any]:
            result = measured([sealeval, *argv], request)
            rows.append((label, result))
            print(_line(label, result), flush=True)
            return json_or_empty(result[3])

        for side in SIDES:
            run(
                "import",
                [
                    "import",
                    str(results / f"{side}.jsonl"),
                    "--adapter",
                    adapter,
                    "--source",
                    "lm-evaluation-harness@0.4.9",
                    "--run-id",
                    side,
                    "--artifact-digest",
                    ARTIFACTS[side],
                    "-o",
                    f"runs/{side}.json",
                    "--json",
                ],
            )
            (results / f"{side}.jsonl").unlink()  # keep the peak disk use down
        runs = sum((request / "runs" / f"{side}.json").stat().st_size for side in SIDES)
        print(f"  canonical runs: {runs / 1024**2:,.0f} MiB together", flush=True)
        compared = run(
            "compare",
            [
                "compare",
                "runs/baseline.json",
                "runs/subject.json",
                "--policy",
                "policy.json",
                "--uncapped",
                "--json",
            ],
        )
        built = run(
            "evaluate",
            [
                "evaluate",
                "request.yaml",
                "--signing-key",
                str(signer.private_key),
                "--output",
                "pack",
                "--uncapped",
                "--json",
            ],
        )
        verified: dict[str, Any] = {}
        if built:
            verified = run(
                "verify",
                [
                    "verify",
                    *verify_arguments(
                        "pack",
                        built,
                        signer.fingerprint,
                        verifier.private_key,
                        str(root / "receipt.json"),
                        "--uncapped",
                        "--json",
                    ),
                ],
            )
            run("report", ["report", "pack", "--uncapped", "--json"])
        print(f"load average at end: {_load()}")
        print(
            f"\n{records:,} records per run, decision {built.get('decision')}"
            f" (compare: {compared.get('decision')}), pack intact:"
            f" {verified.get('integrity_ok')}"
        )
        print(f"  {'command':10} {'wall':>11} {'CPU':>15}  {'peak RSS':>17}")
        for label, result in rows:
            print(_line(label, result))
        worst = max(result[2] for _, result in rows)
        print(
            f"  worst peak RSS {worst / 1024:,.0f} MiB (target under {RSS_LIMIT_KIB // 1024} MiB)"
        )
        complete = len(rows) == 6 and all(result[1] in (0, 7) for _, result in rows)
        agreed = compared.get("decision") == built.get("decision")
        intact = verified.get("integrity_ok") is True
        return 0 if complete and agreed and intact and worst < RSS_LIMIT_KIB else 1
    finally:
        if keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    """Parse the options; generate (child mode) or run the pipeline."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--shots", type=int, default=10)
    parser.add_argument("--adapter", choices=ADAPTERS, default=ADAPTERS[0])
    parser.add_argument("--work-dir", type=Path, default=WORK)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--generate", nargs=3, metavar=("FOLDER", "RECORDS", "SEED"))
    args = parser.parse_args()
    if args.generate:
        folder, records, seed = args.generate
        generate(Path(folder), int(records), int(seed), args.shots, args.adapter)
        return 0
    return pipeline(
        args.records, args.seed, args.shots, args.adapter, args.work_dir.absolute(), args.keep
    )


if __name__ == "__main__":
    sys.exit(main())
