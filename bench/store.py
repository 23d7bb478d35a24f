"""Session store throughput: full sessions per second on SQLite and on PostgreSQL.

Runs complete evaluation sessions (``verify``, ``run_cases``,
``run_forensics``, ``build_adjudication``, ``release_feedback``: every step
durable, the release charged to the durable feedback ledger in the same
database) with 1 and 8 concurrent worker processes, on a SQLite file and on a
PostgreSQL database, and prints a table of attempts per second.

Each configuration runs ``--attempts`` sessions split over the workers.
"per-worker" budget keys give each worker its own submission (the usual
multi-host load: claims never contend); "shared" makes all 8 workers charge
one budget key, so their claims serialise and a worker whose claim is refused
(``budget_state_unverified``: another session holds it) retries after a short
random pause. Every policy allows every attempt, so every session releases
feedback. Time is measured from the moment all workers are ready (stores
opened, inputs built) until the last one finishes.

The PostgreSQL server is ``--dsn`` (a ``postgresql://`` URI; a fresh schema
is created in it and dropped afterwards), else ``SEALEVAL_BENCH_POSTGRES_DSN``,
else a throwaway local cluster started with the test suite's helper
(``tests/_postgres.py``: needs the PostgreSQL server binaries, e.g. the
Debian ``postgresql`` package; ``fsync`` is off there, so its numbers are an
upper bound for a real server). The DSN is never printed.

Usage: python bench/store.py [--attempts 200] [--repeat 1] [--dsn postgresql://...]
       [--workdir DIR]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import secrets
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from sealeval.manifest.sealed import COMPONENTS, SealedWorkflowManifest, seal_workflow_manifest
from sealeval.session.budget import FeedbackBudgetPolicy
from sealeval.session.cases import ComparisonCase, SourceEvidence
from sealeval.session.durable_ledger import DurableBudgetLedger
from sealeval.session.holdout import HoldoutCommitment
from sealeval.session.session import EvaluationSessionError
from sealeval.session.store_factory import open_session_store

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _session import bench_digest, build_session, holdout_and_policy  # noqa: E402

CTX = multiprocessing.get_context("fork")
CASES = 4
#: Every attempt is allowed (the benchmark measures the store, not the budget).
RERUN_LIMIT = 1_000_000


@dataclass(frozen=True)
class Inputs:
    """One submission's session inputs (its own budget key)."""

    manifest: SealedWorkflowManifest
    components: dict[str, str]
    cases: tuple[ComparisonCase, ...]
    holdout_manifests: dict[str, tuple[str, ...]]
    holdout: HoldoutCommitment
    policy: FeedbackBudgetPolicy
    outputs: dict[str, str]


def build_inputs(submission: str) -> Inputs:
    components = {name: bench_digest(f"{submission}:{name}") for name in COMPONENTS}
    manifest = seal_workflow_manifest(components)
    cases, outputs = [], {}
    for index in range(CASES):
        reference = f"source-{index}"
        cases.append(
            ComparisonCase(
                case_ref=f"case-{index}",
                source_evidence=(
                    SourceEvidence(
                        evidence_ref=reference,
                        content=f"Patient {index} reports chest pain radiating to the left arm.",
                    ),
                ),
                candidate_outputs={
                    "candidate": "placeholder",
                    "reference": f"Reference summary {index}: suspected angina, ECG advised.",
                },
            )
        )
        outputs[reference] = f"Summary {index}: chest pain, consider cardiac work-up and ECG."
    holdout_manifests, holdout, policy = holdout_and_policy(cases, rerun_limit=RERUN_LIMIT)
    return Inputs(manifest, components, tuple(cases), holdout_manifests, holdout, policy, outputs)


def run_session(
    inputs: Inputs, store: Any, ledger: Any, key: str, clock: Callable[[], int]
) -> None:
    """Run one full session; retry the release while another session holds the claim."""
    session = build_session(
        key=key,
        manifest=inputs.manifest,
        components=inputs.components,
        cases=inputs.cases,
        holdout=inputs.holdout,
        holdout_manifests=inputs.holdout_manifests,
        outputs=inputs.outputs,
        scorer=lambda case, _output: 0.25 + 0.1 * int(case.case_ref.split("-")[1]),
        ledger=ledger,
        store=store,
        clock=clock,
    )
    session.verify()
    session.run_cases()
    session.run_forensics()
    session.build_adjudication()
    while True:
        try:
            session.release_feedback()
        except EvaluationSessionError as error:
            if error.code != "budget_state_unverified":
                raise
            time.sleep(random.uniform(0.0005, 0.003))
            continue
        return


def _worker(location: str, inputs: Inputs, prefix: str, count: int, ready: Any, go: Any) -> None:
    store = open_session_store(location)
    ledger = DurableBudgetLedger(store)
    ticks = iter(range(1, 10**9))
    ready.wait()
    go.wait()
    for index in range(count):
        run_session(inputs, store, ledger, bench_digest(f"{prefix}:{index}"), lambda: next(ticks))


def measure(location: str, workers: int, attempts: int, *, shared: bool) -> float:
    """Return full sessions per second for one configuration (a fresh store location)."""
    submissions = ["shared"] if shared else [f"w{index}" for index in range(workers)]
    inputs = {name: build_inputs(name) for name in submissions}
    # One epoch (the holdout), one policy; each submission is its own budget key.
    DurableBudgetLedger(open_session_store(location), [next(iter(inputs.values())).policy])
    ready, go = CTX.Barrier(workers + 1), CTX.Event()
    run = secrets.token_hex(4)
    per_worker = [attempts // workers + (index < attempts % workers) for index in range(workers)]
    processes = [
        CTX.Process(
            target=_worker,
            args=(
                location,
                inputs[submissions[index % len(submissions)]],
                f"{run}:{index}",
                per_worker[index],
                ready,
                go,
            ),
        )
        for index in range(workers)
    ]
    for process in processes:
        process.start()
    ready.wait()
    start = time.perf_counter()
    go.set()
    for process in processes:
        process.join()
    seconds = time.perf_counter() - start
    if any(process.exitcode != 0 for process in processes):
        raise SystemExit("a worker failed")
    return attempts / seconds


@contextmanager
def postgres_location(dsn: str | None) -> Iterator[str]:
    """Yield a ``postgresql://`` URI of a fresh schema on the chosen server; drop it afterwards."""
    import psycopg  # noqa: PLC0415 - only needed for the PostgreSQL rows

    managed = False
    if dsn is None:
        sys.path.insert(0, str(HERE.parent / "tests"))
        import _postgres  # noqa: PLC0415 - the test suite's throwaway cluster

        cluster = _postgres._acquire()
        managed = True
        dsn = cluster.dsn(_postgres.SESSION_DATABASE)
    schema = f"bench_{secrets.token_hex(4)}"
    try:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f"CREATE SCHEMA {schema}")
        parts = psycopg.conninfo.conninfo_to_dict(dsn)
        query = urlencode({"options": f"-c search_path={schema}"}, quote_via=quote)
        secret = quote(str(parts.get("password", "")), safe="")
        credentials = quote(str(parts.get("user", "")), safe="") + (f":{secret}" if secret else "")
        host = quote(str(parts.get("host", "127.0.0.1")), safe="")
        database = quote(str(parts.get("dbname", "postgres")), safe="")
        yield f"postgresql://{credentials}@{host}:{parts.get('port', 5432)}/{database}?{query}"
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        if managed:
            _postgres._release()


def main() -> int:
    """Run every configuration and print the table."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--attempts", type=int, default=200)
    parser.add_argument("--dsn", default=os.environ.get("SEALEVAL_BENCH_POSTGRES_DSN"))
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=1, help="runs per configuration (best kept)")
    arguments = parser.parse_args()
    rows: list[tuple[str, int, str, float]] = []
    configurations = ((1, False), (8, False), (8, True))
    with tempfile.TemporaryDirectory(dir=arguments.workdir) as workdir:
        for index, (workers, shared) in enumerate(configurations):
            rate = max(
                measure(
                    str(Path(workdir) / f"bench-{index}-{repeat}.sqlite3"),
                    workers,
                    arguments.attempts,
                    shared=shared,
                )
                for repeat in range(arguments.repeat)
            )
            rows.append(("SQLite", workers, "shared" if shared else "per-worker", rate))
    with postgres_location(arguments.dsn) as location:
        for workers, shared in configurations:
            rate = max(
                measure(location, workers, arguments.attempts, shared=shared)
                for _repeat in range(arguments.repeat)
            )
            rows.append(("PostgreSQL", workers, "shared" if shared else "per-worker", rate))
    print(
        f"full sessions (5 steps, durable ledger, {CASES} cases each), {arguments.attempts} "
        f"per configuration, best of {arguments.repeat}, {os.cpu_count()} CPUs"
    )
    print()
    print(f"{'store':<12}{'workers':>8}  {'budget keys':<12}{'attempts/s':>12}")
    for store, workers, keys, rate in rows:
        print(f"{store:<12}{workers:>8}  {keys:<12}{rate:>12.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
