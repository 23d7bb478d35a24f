"""Realistic-content runs for the scale modes of ``bench/compare.py`` and ``bench/pack.py``.

lm-eval-like records: every input is a few-shot prompt (a task
instruction, ``shots`` solved exemplars drawn from a shared pool, then the
question; about 1.4 KB at the default 5 shots, 2 KB at 10), answers are 1-6
words, outputs are exact, re-cased, partially right or wrong with correlated
per-case difficulty, and every record carries
a ``task`` and a ``topic`` tag. Ids are lm-eval's ``doc-N`` (not in code-point
order, as real imports are not). The pair is written record by record
(``RunWriter``), so generating 1,000,000 records holds no run in memory; a
run of 1,000,000 such records is about 1.3 GB on disk at 5 shots.

Also: :func:`measured` runs one command in a child process and returns its
wall time, exit status, peak RSS (``os.wait4`` rusage of that child) and
parsed JSON standard output.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sealeval.captured import RunHeader, RunWriter, Source

TOPICS = ("geography", "history", "science", "arithmetic", "literature")
ARTIFACTS = ("sha256:" + "1" * 64, "sha256:" + "2" * 64)

#: The comparison policy of the pack and pipeline benches: exact_match and token_f1
#: over the whole run and one slice.
POLICY: dict[str, Any] = {
    "format": "invarlock/comparison-policy-v1",
    "metrics": [
        {
            "name": "exact",
            "kind": "exact_match",
            "configuration": {},
            "direction": "higher",
            "unit": "score",
            "aggregation": "mean",
            "minimum_count": 100,
            "maximum_regression": 0.02,
            "maximum_interval_width": 0.05,
        },
        {
            "name": "f1",
            "kind": "token_f1",
            "configuration": {"unicode_version": "15.0.0"},
            "direction": "higher",
            "unit": "score",
            "aggregation": "mean",
            "minimum_count": 100,
            "maximum_regression": 0.02,
            "maximum_interval_width": 0.05,
        },
    ],
    "slices": [{"name": "geography", "where": {"topic": "geography"}}],
}


def _vocabulary(rng: random.Random, size: int) -> list[str]:
    consonants = ("", "b", "d", "k", "l", "m", "n", "p", "r", "s", "t", "v")
    syllables = [consonant + vowel for consonant in consonants for vowel in "aeiou"]
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(1, 4))))
    return sorted(words)


def realistic_cases(
    records: int, seed: int, shots: int = 5
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Yield ``(baseline record, subject record)`` plain mappings (~1.4 KB inputs at 5 shots)."""
    rng = random.Random(seed)
    vocabulary = _vocabulary(rng, 5000)

    def sentence(low: int, high: int) -> str:
        return " ".join(rng.choice(vocabulary) for _ in range(rng.randint(low, high)))

    exemplars = [f"Question: {sentence(14, 24)}?\nAnswer: {sentence(1, 5)}" for _ in range(400)]
    instruction = (
        "The following are questions with short answers. Answer each question with the "
        "fewest words that are fully correct, in lower case, without punctuation.\n\n"
    )
    for index in range(records):
        prompt = "\n\n".join(rng.choice(exemplars) for _ in range(shots))
        question = sentence(16, 30)
        answer = [rng.choice(vocabulary) for _ in range(rng.randint(1, 6))]
        expected = " ".join(answer)
        shared = {
            "id": f"doc-{index}",
            "input": f"{instruction}{prompt}\n\nQuestion: {question}?\nAnswer:",
            "expected": expected,
            "metadata": {"task": "bench_qa", "topic": TOPICS[index % len(TOPICS)]},
        }
        difficulty = rng.random()
        outputs = []
        for skill in (0.60, 0.61):
            roll = difficulty + rng.gauss(0.0, 0.05)
            if roll < skill:
                outputs.append(expected if rng.random() < 0.8 else expected.upper())
            elif roll < skill + 0.25:
                outputs.append(" ".join([*answer[:-1], rng.choice(vocabulary)]))
            else:
                outputs.append(rng.choice(vocabulary))
        yield {**shared, "output": outputs[0]}, {**shared, "output": outputs[1]}


def write_realistic_pair(
    folder: Path, records: int, seed: int, shots: int = 5
) -> tuple[Path, Path]:
    """Write ``baseline.json`` and ``subject.json`` (canonical runs) record by record."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = (folder / "baseline.json", folder / "subject.json")
    writers = [
        RunWriter(
            path,
            RunHeader(source=Source("bench", "1"), run_id=name, artifact_digest=artifact),
        )
        for path, name, artifact in zip(paths, ("baseline", "subject"), ARTIFACTS, strict=True)
    ]
    for left, right in realistic_cases(records, seed, shots):
        writers[0].add(left)
        writers[1].add(right)
    for writer in writers:
        writer.finish()
        writer.__exit__(None, None, None)
    return paths


def measured(argv: list[str], cwd: Path) -> tuple[float, int, int, str, float]:
    """Run one command; return (wall s, exit code, peak RSS KiB, stdout text, CPU s).

    CPU seconds (user + system of the child and its waited-for children) are
    what to compare on a loaded machine; wall time is what a user waits.
    """
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 7) and stderr:
        print(stderr[-2000:], file=sys.stderr)
    return seconds, code, usage.ru_maxrss, stdout, usage.ru_utime + usage.ru_stime


def verify_arguments(
    pack: str,
    built: dict[str, Any],
    signer: str,
    verifier: Path,
    receipt: str,
    *options: str,
) -> list[str]:
    """``verify``'s arguments for a bench pack (anchors from ``evaluate --json``), then options."""
    return [
        pack,
        "--policy",
        "policy.json",
        "--expected-baseline-run",
        built["baseline_run_digest"],
        "--expected-subject-run",
        built["subject_run_digest"],
        "--expected-request-digest",
        built["request_digest"],
        "--expected-signer",
        signer,
        "--verifier-signing-key",
        str(verifier),
        "--verifier-identity",
        "bench",
        "--receipt",
        receipt,
        *options,
    ]


def json_or_empty(text: str) -> dict[str, Any]:
    """The JSON object printed on standard output, or ``{}``."""
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
