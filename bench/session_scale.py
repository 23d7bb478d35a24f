"""Session run at scale: time and peak memory against the number of cases and their content.

Runs one complete evaluation session (``EvaluationSession.run``: verify,
run and score every case, overlap forensics, blinded adjudication, release
charged to the durable ledger of a real SQLite store) per configuration, each
in a fresh child process, and prints the wall time and the child's peak
resident set size (``ru_maxrss``) next to the bytes of content the session is
given (source evidence, reference outputs and runner outputs).

A session holds its cases by design (the caller passes them; the reviewer
receives every blinded packet at once), so its memory is the content plus a
fixed cost per case. ``--whole-text-digests`` replaces the step digests that
hash outputs and packets item by item (``digest_openmed_items``) with the
whole-text digest they equal, to show what building each step's canonical
text costs; ``--steps`` prints each step's traced peak (``tracemalloc``),
which shows where the memory goes (overlap forensics' trigram index).

Usage: python bench/session_scale.py [--cases 2000,8000] [--content 200,2000]
       [--whole-text-digests] [--steps]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from sealeval.canonical import OpenmedItems, digest_openmed
from sealeval.manifest.sealed import COMPONENTS, seal_workflow_manifest
from sealeval.session.cases import ComparisonCase, SourceEvidence
from sealeval.session.durable_ledger import DurableBudgetLedger
from sealeval.session.session import EvaluationSession
from sealeval.session.store_factory import open_session_store

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _session import bench_digest, build_session, holdout_and_policy

CTX = multiprocessing.get_context("fork")
_WORDS = [
    "patient",
    "reports",
    "chest",
    "pain",
    "radiating",
    "left",
    "arm",
    "onset",
    "two",
    "hours",
    "ago",
    "history",
    "of",
    "hypertension",
    "smoker",
    "denies",
    "fever",
    "vitals",
    "stable",
    "troponin",
    "pending",
    "ecg",
    "shows",
    "sinus",
    "rhythm",
    "advise",
    "admission",
]


def _text(index: int, size: int, salt: str) -> str:
    """Deterministic clinical-style text of about ``size`` characters, distinct per case."""
    words = [salt, str(index)]
    step = index % len(_WORDS)
    while sum(len(word) + 1 for word in words) < size:
        words.append(_WORDS[step % len(_WORDS)])
        step += 7
    return " ".join(words)[:size]


def _whole_text(value: Any) -> str:
    """The whole-text digest ``digest_openmed_items`` equals (every array built first)."""

    def built(member: Any) -> Any:
        if isinstance(member, OpenmedItems):
            return list(member.items)
        if isinstance(member, dict):
            return {key: built(item) for key, item in member.items()}
        if isinstance(member, list):
            return [built(item) for item in member]
        return member

    return digest_openmed(built(value))


def run_once(
    cases: int, size: int, *, whole_text: bool, folder: Path, steps: bool = False
) -> tuple[float, int]:
    """Run one session in this process; return (seconds, peak RSS in KiB)."""
    if whole_text:
        import sealeval.session.session as session_module  # noqa: PLC0415

        session_module.digest_openmed_items = _whole_text  # type: ignore[assignment]
    components = {name: bench_digest(name) for name in COMPONENTS}
    manifest = seal_workflow_manifest(components)
    built = tuple(
        ComparisonCase(
            case_ref=f"case-{index}",
            source_evidence=(
                SourceEvidence(evidence_ref=f"source-{index}", content=_text(index, size, "src")),
            ),
            candidate_outputs={"candidate": "placeholder", "reference": _text(index, size, "ref")},
        )
        for index in range(cases)
    )
    outputs = {f"source-{index}": _text(index, size, "out") for index in range(cases)}
    holdout_manifests, holdout, policy = holdout_and_policy(built, rerun_limit=10)
    store = open_session_store(os.fspath(folder / "sessions.sqlite3"))
    ledger = DurableBudgetLedger(store, [policy])
    ticks = iter(range(1, 10**9))
    session = build_session(
        key=bench_digest(f"session-{cases}-{size}"),
        manifest=manifest,
        components=components,
        cases=built,
        holdout=holdout,
        holdout_manifests=holdout_manifests,
        outputs=outputs,
        scorer=lambda case, _output: (int(case.case_ref.split("-")[1]) % 10) / 10,
        ledger=ledger,
        store=store,
        clock=lambda: next(ticks),
    )
    started = time.perf_counter()
    if steps:
        _traced_steps(session)
    else:
        session.run()
    seconds = time.perf_counter() - started
    return seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


STEPS = ("verify", "run_cases", "run_forensics", "build_adjudication", "release_feedback")


def _traced_steps(session: EvaluationSession) -> None:
    """Run the five steps one by one, printing each step's traced peak (``tracemalloc``)."""
    tracemalloc.start()
    try:
        for step in STEPS:
            tracemalloc.reset_peak()
            before = tracemalloc.get_traced_memory()[0]
            getattr(session, step)()
            peak = tracemalloc.get_traced_memory()[1]
            print(f"    {step:<20} peak over its start: {(peak - before) / 1_048_576:8.1f} MiB")
    finally:
        tracemalloc.stop()


def _child(cases: int, size: int, whole_text: bool, steps: bool, sender: Any) -> None:
    with tempfile.TemporaryDirectory(prefix="sealeval-bench-session-") as folder:
        sender.send(run_once(cases, size, whole_text=whole_text, folder=Path(folder), steps=steps))


def measure(cases: int, size: int, *, whole_text: bool, steps: bool = False) -> tuple[float, int]:
    """Run one configuration in a fresh child; return (seconds, peak RSS KiB)."""
    receiver, sender = CTX.Pipe(duplex=False)
    process = CTX.Process(target=_child, args=(cases, size, whole_text, steps, sender))
    process.start()
    result: tuple[float, int] = receiver.recv()
    process.join()
    if process.exitcode != 0:
        raise SystemExit(f"session run failed (exit {process.exitcode})")
    return result


def _baseline_kib() -> int:
    """Peak RSS of a child that only imported sealeval (the fixed cost)."""
    receiver, sender = CTX.Pipe(duplex=False)

    def idle(out: Any) -> None:
        out.send(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)

    process = CTX.Process(target=idle, args=(sender,))
    process.start()
    value: int = receiver.recv()
    process.join()
    return value


def main(argv: list[str] | None = None) -> int:
    """Print one row per (cases, content size)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="2000,8000")
    parser.add_argument("--content", default="200,2000", help="characters per text")
    parser.add_argument("--whole-text-digests", action="store_true")
    parser.add_argument(
        "--steps", action="store_true", help="also print each step's traced peak (slower)"
    )
    options = parser.parse_args(argv)
    base = _baseline_kib()
    print(f"fixed cost (imports): {base / 1024:.0f} MiB")
    print(
        f"{'cases':>8} {'chars/text':>10} {'content MiB':>11} {'seconds':>8} "
        f"{'peak MiB':>9} {'over fixed':>10} {'KiB/case':>9}"
    )
    for cases in (int(value) for value in options.cases.split(",")):
        for size in (int(value) for value in options.content.split(",")):
            seconds, peak = measure(
                cases, size, whole_text=options.whole_text_digests, steps=options.steps
            )
            content = cases * size * 3 / 1_048_576
            over = max(peak - base, 0)
            print(
                f"{cases:>8,} {size:>10,} {content:>11.1f} {seconds:>8.2f} "
                f"{peak / 1024:>9.0f} {over / 1024:>10.0f} {over / cases:>9.1f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
