"""Compare two run *files* with memory bounded by the number of records, not their content.

:func:`compare_run_files` streams each canonical run file once
(:class:`~sealeval.captured.run.RunReader`: validated and hashed as read)
into a columnar :class:`~.table.RunTable`, then pairs the tables and
finishes exactly like :func:`~sealeval.captured.comparison.compare_runs`:
same report bytes, same refusals in the same order. A file that is strict
JSON but not canonical is read whole (:func:`~sealeval.captured.run.read_run`)
and tabled from memory.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from typing import IO, Any

from sealeval import _validate
from sealeval._progress import Progress
from sealeval.captured.comparison.engine import (
    ScopeValues,
    check_budget,
    finish_report,
    scope_results,
)
from sealeval.captured.comparison.model import (
    DECISION_ORDERS,
    DEFAULT_MAX_BOOTSTRAP_DRAWS,
    Bindings,
    ComparisonError,
    ComparisonReport,
)
from sealeval.captured.comparison.pairing import as_policy, bootstrap_budget
from sealeval.captured.comparison.parallel import worker_count
from sealeval.captured.comparison.table import RunTable, pair_tables, table_values
from sealeval.captured.errors import CapturedRunError
from sealeval.captured.policy import ComparisonPolicy, MetricScorer, check_runtime
from sealeval.captured.run import UNLIMITED, Limits, Record, Run, RunHeader, RunReader, read_run
from sealeval.captured.run.document import paused_full_collections

#: A run source: a path, or a binary handle positioned at the run's first byte.
RunSource = str | os.PathLike[str] | IO[bytes]


class _RelayoutError(Exception):
    """A path's bytes are not canonical: read the document whole instead."""


def _stream(
    source: RunSource, side: str, limits: Limits, add: Callable[[Record], None]
) -> tuple[RunHeader, str]:
    """Feed every record of one run to ``add``; return its header and digest.

    Raises :class:`_RelayoutError` when a *path* holds strict JSON that is not
    canonical (handles must be canonical).
    """
    with _validate.rebased("run", side, error=CapturedRunError), paused_full_collections():
        reader = RunReader(source, limits=limits)
        try:
            for record in reader:
                add(record)
        except CapturedRunError as error:
            if error.code == "not_canonical" and isinstance(source, str | os.PathLike):
                raise _RelayoutError from None
            raise
        return reader.header, reader.summary.run_digest


def _whole(path: str | os.PathLike[str], side: str, limits: Limits) -> Run:
    with _validate.rebased("run", side, error=CapturedRunError):
        return read_run(path, limits=limits)


def _table(
    source: RunSource,
    side: str,
    checked: tuple[ComparisonPolicy, tuple[MetricScorer, ...]],
    limits: Limits,
    *,
    rows: bool,
) -> RunTable:
    approved, scorers = checked
    table = RunTable(approved, scorers, side=side, rows=rows)
    try:
        try:
            header, digest = _stream(source, side, limits, table.add)
        except _RelayoutError:
            table.close()
            table = RunTable(approved, scorers, side=side, rows=rows)
            run = _whole(source, side, limits)  # type: ignore[arg-type]
            for record in run.records:
                table.add(record)
            header, digest = run.header, run.digest
    except BaseException:
        table.close()
        raise
    table.finish(header, digest)
    return table


def _validated(source: RunSource, side: str, limits: Limits) -> None:
    try:
        _stream(source, side, limits, lambda _record: None)
    except _RelayoutError:
        _whole(source, side, limits)  # type: ignore[arg-type]


def compare_run_files(
    *,
    baseline: RunSource,
    subject: RunSource,
    policy: ComparisonPolicy | Mapping[str, Any],
    max_bootstrap_draws: int | None = DEFAULT_MAX_BOOTSTRAP_DRAWS,
    decision_order: str = "reference",
    workers: int | None = None,
    limits: Limits = UNLIMITED,
    progress: Progress | None = None,
) -> ComparisonReport:
    """Compare two run files like :func:`~sealeval.captured.comparison.compare_runs`, streamed.

    Memory holds, per record and run, the id, three identity digests, the
    error flag, slice membership and one value per metric (about 260 bytes
    with two metrics, the id included), never the records' content; the
    seed rows that the scope
    seeds hash in id order are spilled to an unlinked temporary file. The
    report is byte-identical to :func:`compare_runs` on the same runs and
    every refusal is the same, in the same order, except that a refusal of a
    run *file* comes first (as when the runs are read before comparing).

    Args:
        baseline: the baseline run: a path or a binary handle (canonical
            runs stream; other strict JSON is read whole).
        subject: the subject run, same forms.
        policy: as :func:`compare_runs`.
        max_bootstrap_draws: as :func:`compare_runs`.
        decision_order: as :func:`compare_runs`.
        workers: as :func:`compare_runs`.
        limits: the run limits (records, bytes); none by default.
        progress: optional :data:`sealeval._progress.Progress` callback (the
            planned draws, then ``intervals``), counts only.

    Raises:
        CapturedRunError: a run file is missing, unreadable or invalid (the
            field names ``baseline`` or ``subject``).
        ComparisonError: as :func:`compare_runs`.
        ComparisonPolicyError: as :func:`compare_runs`.
    """
    budget = bootstrap_budget(max_bootstrap_draws)
    if type(decision_order) is not str or decision_order not in DECISION_ORDERS:
        raise ComparisonError("invalid_decision_order", "decision_order")
    processes = worker_count(workers)
    try:
        approved = as_policy(policy)
        scorers = check_runtime(approved)
    except Exception:
        # The runs are refused before the policy, as when they are read first.
        for source, side in ((baseline, "baseline"), (subject, "subject")):
            _validated(source, side, limits)
        raise
    pinned = approved.expected_case_set_digest
    seeded = approved.bootstrap_metric_count > 0
    with ExitStack() as stack:
        left = stack.enter_context(
            _table(
                baseline, "baseline", (approved, scorers), limits, rows=seeded or pinned is not None
            )
        )
        right = stack.enter_context(
            _table(subject, "subject", (approved, scorers), limits, rows=pinned is not None)
        )
        if pinned is not None:
            for side, table in (("baseline", left), ("subject", right)):
                if table.case_set_digest() != pinned:
                    raise ComparisonError("case_set_mismatch", side)
        paired = pair_tables(left, right, approved, seeded)
        required = check_budget(paired.pairs, approved, budget, progress)
        metric_values = [
            table_values(number, metric, scorer, (left, right), paired)
            for number, (metric, scorer) in enumerate(zip(approved.metrics, scorers, strict=True))
        ]
        assert left.header is not None
        assert right.header is not None
        hosted = (
            left.header.service_identity is not None or right.header.service_identity is not None
        )
        return finish_report(
            paired.pairs,
            metric_values,
            approved,
            Bindings(left.digest, right.digest, approved.digest),
            required=required,
            hosted=hosted,
            decision_order=decision_order,
            workers=processes,
            progress=progress,
        )


def scope_values_files(
    *,
    baseline: RunSource,
    subject: RunSource,
    policy: ComparisonPolicy | Mapping[str, Any],
    limits: Limits = UNLIMITED,
    digests: Bindings | None = None,
) -> tuple[ScopeValues, ...]:
    """:func:`~sealeval.captured.comparison.scope_values` over two run files, streamed.

    Same values, seeds and refusals as the in-memory function on the same
    runs (a refusal of a run file first), with the memory of
    :func:`compare_run_files`: the per-record columns, never the records.

    ``digests`` are the run digests an earlier pass over the same sources
    read (its report's ``bindings``): a side whose digest now differs was
    rewritten between the passes and is refused ``unreadable`` (field: the
    side, as for any run file that cannot be read stably), before anything
    is scored.
    """
    try:
        approved = as_policy(policy)
        scorers = check_runtime(approved)
    except Exception:
        for source, side in ((baseline, "baseline"), (subject, "subject")):
            _validated(source, side, limits)
        raise
    pinned = approved.expected_case_set_digest
    with ExitStack() as stack:
        left = stack.enter_context(
            _table(baseline, "baseline", (approved, scorers), limits, rows=True)
        )
        right = stack.enter_context(
            _table(subject, "subject", (approved, scorers), limits, rows=pinned is not None)
        )
        if digests is not None:
            for side, table, digest in (
                ("baseline", left, digests.baseline),
                ("subject", right, digests.subject),
            ):
                if table.digest != digest:
                    raise CapturedRunError("unreadable", side)
        if pinned is not None:
            for side, table in (("baseline", left), ("subject", right)):
                if table.case_set_digest() != pinned:
                    raise ComparisonError("case_set_mismatch", side)
        paired = pair_tables(left, right, approved, True)
        metric_values = [
            table_values(number, metric, scorer, (left, right), paired)
            for number, (metric, scorer) in enumerate(zip(approved.metrics, scorers, strict=True))
        ]
        return scope_results(approved, paired.pairs, metric_values)
