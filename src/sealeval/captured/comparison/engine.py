"""One entry per scope x metric, the decision rule and :func:`compare_runs`.

22-comparison.md §1 (order of work), §4-§6 (entries, intervals, decisions).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sealeval._progress import PLANNED_DRAWS, Progress, notify
from sealeval.canonical import digest_bytes, encode_invarlock
from sealeval.captured.case_set import validate_run_case_set
from sealeval.captured.comparison.model import (
    DECISION_ORDERS,
    DEFAULT_MAX_BOOTSTRAP_DRAWS,
    HOSTED_LIMITATION,
    INSUFFICIENT,
    LIMITATIONS,
    MAX_MISSING_ID_BYTES,
    MAX_REPORT_BYTES,
    NLL_LIMITATION,
    PASS,
    REASON_BOUNDS,
    REASON_LOWER,
    REASON_MINIMUM,
    REASON_MISSING,
    REASON_MISSING_NLL,
    REASON_RATIO,
    REASON_UPPER,
    REASON_WIDE,
    REGRESSION,
    Bindings,
    BoolArray,
    ComparisonError,
    ComparisonReport,
    FloatArray,
    IndexArray,
    MetricEntry,
    report_document,
)
from sealeval.captured.comparison.pairing import (
    MetricValues,
    Pairs,
    as_policy,
    as_run,
    bootstrap_budget,
    count_missing_id_bytes,
    metric_pair_values,
    pair_records,
)
from sealeval.captured.comparison.parallel import shake_interval, worker_count
from sealeval.captured.errors import CapturedRunError
from sealeval.captured.intervals import (
    Interval,
    IntervalError,
    PairedCounts,
    newcombe_interval,
    nll_ratio_interval,
    required_bootstrap_draws,
)
from sealeval.captured.policy import (
    OVERALL,
    ComparisonPolicy,
    PolicyMetric,
    check_runtime,
)
from sealeval.captured.run import Run
from sealeval.errors import SealevalError

# ---------------------------------------------------------------------------
# One entry (§4 steps 4-11) and the decision rule (§6)


def _finite(*numbers: float) -> bool:
    return all(math.isfinite(number) for number in numbers)


def _mean(values: FloatArray, count: int, where: str) -> float:
    """``fsum(values) / n``; the array is streamed (no list of a million floats)."""
    try:
        return math.fsum(values) / count
    except OverflowError:
        raise ComparisonError("overflow", where) from None


def decide(
    metric: PolicyMetric,
    interval: Interval,
    subject_mean: float,
    decision_order: str,
) -> tuple[str, tuple[str, ...]]:
    """Decide one entry from its interval and subject mean; return the decision and its reasons.

    ``decision_order`` is the policy's (``width_first`` checks the interval
    width before the bound).
    """
    lower = interval.lower
    upper = interval.upper
    reasons: list[str] = []
    if metric.direction == "higher":
        assert metric.maximum_regression is not None
        if lower < -metric.maximum_regression:
            reasons.append(REASON_LOWER)
    elif metric.is_nll:
        assert metric.ratio_max is not None
        if upper > metric.ratio_max:
            reasons.append(REASON_RATIO)
    else:
        assert metric.maximum_regression is not None
        if upper > metric.maximum_regression:
            reasons.append(REASON_UPPER)
    minimum = metric.subject_minimum
    maximum = metric.subject_maximum
    if (minimum is not None and subject_mean < minimum) or (
        maximum is not None and subject_mean > maximum
    ):
        reasons.append(REASON_BOUNDS)
    too_wide = upper - lower > metric.maximum_interval_width
    if decision_order == "width_first" and too_wide:
        return INSUFFICIENT, (REASON_WIDE,)
    if reasons:
        return REGRESSION, tuple(reasons)
    if too_wide:
        return INSUFFICIENT, (REASON_WIDE,)
    return PASS, ()


def _interval_failure(error: IntervalError, where: str) -> SealevalError:
    if error.code in ComparisonError.codes:
        return ComparisonError(error.code, where)
    return error


def _entry(
    metric: PolicyMetric,
    *,
    scope_name: str,
    scope: IndexArray | None,
    seed: str | None,
    values: MetricValues,
    mask: BoolArray,
    pairs: Pairs,
    decision_order: str,
    workers: int,
    where: str,
) -> MetricEntry:
    count = len(pairs.ids) if scope is None else int(scope.size)
    missing_positions = np.flatnonzero(mask) if scope is None else scope[mask[scope]]
    ids = pairs.ids
    missing_ids = tuple(ids[index] for index in missing_positions.tolist())
    if missing_ids:
        reason = REASON_MISSING_NLL if metric.is_nll else REASON_MISSING
    else:
        reason = REASON_MINIMUM
    skeleton = MetricEntry(
        name=metric.name,
        slice=scope_name,
        kind=metric.kind,
        unit=metric.unit,
        direction=metric.direction,
        scoring_assurance=metric.scoring_assurance,
        count=count,
        missing_ids=missing_ids,
        baseline_mean=None,
        subject_mean=None,
        delta=None,
        interval=None,
        decision=INSUFFICIENT,
        reasons=(reason,),
    )
    if missing_ids or count < metric.minimum_count:
        return skeleton
    left, right = values.arrays()
    if scope is not None:
        left = left[scope]
        right = right[scope]
    baseline_mean = _mean(left, count, where)
    subject_mean = _mean(right, count, where)
    delta = subject_mean - baseline_mean
    ratio: float | None = None
    try:
        if metric.is_binary:
            interval = newcombe_interval(PairedCounts.from_values(left, right)).interval
        elif metric.is_nll:
            assert seed is not None
            result = nll_ratio_interval(left, right, seed)
            ratio = result.ratio
            interval = result.interval
        else:
            assert seed is not None
            interval = shake_interval(left, right, seed, workers)
    except IntervalError as error:
        raise _interval_failure(error, where) from None
    if not _finite(baseline_mean, subject_mean, delta, interval.lower, interval.upper):
        raise ComparisonError("non_finite_value", where)
    if ratio is not None and not math.isfinite(ratio):
        raise ComparisonError("non_finite_value", where)
    decision, reasons = decide(metric, interval, subject_mean, decision_order)
    return dataclasses.replace(
        skeleton,
        baseline_mean=baseline_mean,
        subject_mean=subject_mean,
        delta=delta,
        interval=interval,
        decision=decision,
        reasons=reasons,
        ratio=ratio,
    )


def _overall(entries: Sequence[MetricEntry]) -> str:
    decisions = {entry.decision for entry in entries}
    if REGRESSION in decisions:
        return REGRESSION
    if INSUFFICIENT in decisions:
        return INSUFFICIENT
    return PASS


def _scope_names(policy: ComparisonPolicy) -> Iterator[tuple[str, str]]:
    """Yield ``(scope name, field prefix)`` in report order."""
    yield OVERALL, ""
    for index, item in enumerate(policy.slices):
        yield item.name, f"slices[{index}]."


# ---------------------------------------------------------------------------
# Public entry point


def compare_runs(
    *,
    baseline: Run | Mapping[str, Any],
    subject: Run | Mapping[str, Any],
    policy: ComparisonPolicy | Mapping[str, Any],
    max_bootstrap_draws: int | None = DEFAULT_MAX_BOOTSTRAP_DRAWS,
    decision_order: str = "reference",
    workers: int | None = None,
    progress: Progress | None = None,
) -> ComparisonReport:
    """Compare a subject run with a baseline run under an approved policy (22-comparison.md).

    Args:
        baseline: the baseline run (a :class:`~sealeval.captured.run.Run`, used
            as is, or a run document, validated first).
        subject: the subject run, same forms.
        policy: a :class:`~sealeval.captured.policy.ComparisonPolicy` or a
            policy document (validated at the portable level first); runtime
            validation (:func:`~sealeval.captured.policy.check_runtime`) always runs.
        max_bootstrap_draws: the local work budget in draws, ``None`` for
            unlimited; the default is the reference's 102,400,000.
        decision_order: ``"reference"`` (invarlock: regression bounds before
            interval width; byte-compatible reports) or ``"width_first"``
            (sealeval opt-in; the report carries ``decision_rule``).
        workers: processes for the SHAKE-256 bootstrap replicates of large
            scopes (at least :data:`PARALLEL_MIN_PAIRS` pairs); ``None`` uses
            the available CPUs (at most 8), ``1`` computes in this process.
            The report is bit-identical for every value.
        progress: optional :data:`sealeval._progress.Progress` callback:
            the planned draws (announced before the budget is checked), then
            the phases ``pairing``, ``scoring`` (metrics) and ``intervals``
            (entries), counts only.

    Returns:
        The report; ``canonical_bytes`` is what an evidence pack stores.

    Raises:
        ComparisonError: see ``docs/errors.md`` (budget, pairing, case set,
            capacity, attributed values, invalid references, arithmetic).
        ComparisonPolicyError: an invalid policy document, or a pinned
            ``unicode_version`` this installation cannot provide.
        CapturedRunError: an invalid run document.
    """
    budget = bootstrap_budget(max_bootstrap_draws)
    if type(decision_order) is not str or decision_order not in DECISION_ORDERS:
        raise ComparisonError("invalid_decision_order", "decision_order")
    processes = worker_count(workers)
    baseline_run = as_run(baseline, "baseline")
    subject_run = as_run(subject, "subject")
    approved = as_policy(policy)
    scorers = check_runtime(approved)
    pinned = approved.expected_case_set_digest
    if pinned is not None:
        for side, run in (("baseline", baseline_run), ("subject", subject_run)):
            try:
                validate_run_case_set(run, pinned)
            except CapturedRunError:
                raise ComparisonError("case_set_mismatch", side) from None
    seeded = approved.bootstrap_metric_count > 0
    pairs = pair_records(baseline_run, subject_run, approved, seeded)
    notify(progress, "pairing", len(pairs.ids), len(pairs.ids))
    required = check_budget(pairs, approved, budget, progress)
    metric_values: list[MetricValues] = []
    for metric, scorer in zip(approved.metrics, scorers, strict=True):
        notify(progress, "scoring", len(metric_values), len(approved.metrics))
        metric_values.append(metric_pair_values(metric, scorer, baseline_run, subject_run, pairs))
    hosted = baseline_run.service_identity is not None or subject_run.service_identity is not None
    return finish_report(
        pairs,
        metric_values,
        approved,
        Bindings(baseline_run.digest, subject_run.digest, approved.digest),
        required=required,
        hosted=hosted,
        decision_order=decision_order,
        workers=processes,
        progress=progress,
    )


def check_budget(
    pairs: Pairs,
    approved: ComparisonPolicy,
    budget: int | None,
    progress: Progress | None = None,
) -> int:
    """Charge the work budget (§1 step 7, before any scoring); return the draws required.

    The planned draws are announced to ``progress`` first (budget -1: unlimited).
    """
    counts = [len(pairs.ids) if scope is None else int(scope.size) for scope in pairs.scopes]
    required = required_bootstrap_draws(counts, approved.bootstrap_metric_count)
    notify(progress, PLANNED_DRAWS, required, -1 if budget is None else budget)
    if budget is not None and required > budget:
        raise ComparisonError("work_budget_exceeded", "max_bootstrap_draws")
    return required


def finish_report(
    pairs: Pairs,
    metric_values: Sequence[MetricValues],
    approved: ComparisonPolicy,
    bindings: Bindings,
    *,
    required: int,
    hosted: bool,
    decision_order: str,
    workers: int,
    progress: Progress | None = None,
) -> ComparisonReport:
    """Capacity, one entry per scope x metric, the decision and the report (§1 steps 8-10).

    ``required`` is what :func:`check_budget` charged; ``progress`` hears the
    ``intervals`` phase (entries).
    """
    entry_count = len(pairs.scopes) * len(approved.metrics)
    masks = [values.missing_mask() for values in metric_values]
    missing_bytes = count_missing_id_bytes(pairs, masks)
    if missing_bytes > MAX_MISSING_ID_BYTES:
        raise ComparisonError("missing_id_capacity_exceeded", "missing_ids")
    entries: list[MetricEntry] = []
    for scope_position, (scope_name, prefix) in enumerate(_scope_names(approved)):
        scope = pairs.scopes[scope_position]
        seed = pairs.seeds[scope_position]
        for metric, values, mask in zip(approved.metrics, metric_values, masks, strict=True):
            if values.error is not None:
                # The overall scope holds every pair, so a held-back error is
                # reached there, at this metric's turn.
                raise values.error
            notify(progress, "intervals", len(entries), entry_count)
            entries.append(
                _entry(
                    metric,
                    scope_name=scope_name,
                    scope=scope,
                    seed=seed,
                    values=values,
                    mask=mask,
                    pairs=pairs,
                    decision_order=decision_order,
                    workers=workers,
                    where=f"{prefix}metrics[{metric.index}]",
                )
            )
    notify(progress, "intervals", len(entries), entry_count)
    limitations = list(LIMITATIONS)
    if hosted:
        limitations.append(HOSTED_LIMITATION)
    if approved.has_nll:
        limitations.append(NLL_LIMITATION)
    decision = _overall(entries)
    document = report_document(decision, bindings, entries, limitations, decision_order)
    canonical = encode_invarlock(document)
    if len(canonical) > MAX_REPORT_BYTES:
        raise ComparisonError("report_too_large", "report")
    return ComparisonReport(
        decision=decision,
        bindings=bindings,
        metrics=tuple(entries),
        limitations=tuple(limitations),
        decision_order=decision_order,
        canonical_bytes=canonical,
        digest=digest_bytes(canonical),
        required_bootstrap_draws=required,
        missing_id_bytes=missing_bytes,
    )


@dataclass(frozen=True, slots=True)
class ScopeValues:
    """Per-pair values of one metric in one scope (for opt-in analyses, never a report).

    Attributes:
        metric: the policy metric.
        scope: ``"overall"`` or the slice name.
        seed: the scope seed (``None`` when the policy has no bootstrap metric).
        ids: the scope's pair ids in pair (code-point) order.
        baseline: the baseline values (``0.0`` where missing).
        subject: the subject values (``0.0`` where missing).
        missing: ``True`` where either side is missing or errored.
    """

    metric: PolicyMetric
    scope: str
    seed: str | None
    ids: tuple[str, ...]
    baseline: FloatArray
    subject: FloatArray
    missing: BoolArray


def scope_values(
    *,
    baseline: Run | Mapping[str, Any],
    subject: Run | Mapping[str, Any],
    policy: ComparisonPolicy | Mapping[str, Any],
) -> tuple[ScopeValues, ...]:
    """Pair and score two runs like :func:`compare_runs` and return the per-scope values.

    Same checks and refusals as :func:`compare_runs` (runs, policy, case set,
    pairing, attributed values) but no interval, budget or report; scope seeds
    are always computed. Order: scope-major (overall, then slices), metric order.
    """
    baseline_run = as_run(baseline, "baseline")
    subject_run = as_run(subject, "subject")
    approved = as_policy(policy)
    scorers = check_runtime(approved)
    pinned = approved.expected_case_set_digest
    if pinned is not None:
        for side, run in (("baseline", baseline_run), ("subject", subject_run)):
            try:
                validate_run_case_set(run, pinned)
            except CapturedRunError:
                raise ComparisonError("case_set_mismatch", side) from None
    pairs = pair_records(baseline_run, subject_run, approved, True)
    metric_values = [
        metric_pair_values(metric, scorer, baseline_run, subject_run, pairs)
        for metric, scorer in zip(approved.metrics, scorers, strict=True)
    ]
    return scope_results(approved, pairs, metric_values)


def scope_results(
    approved: ComparisonPolicy, pairs: Pairs, metric_values: Sequence[MetricValues]
) -> tuple[ScopeValues, ...]:
    """Split paired metric values into :class:`ScopeValues` (scope-major, metric order).

    Shared by :func:`scope_values` and the streamed
    :func:`~sealeval.captured.comparison.streaming.scope_values_files`; a
    metric's held refusal is raised here, in that order.
    """
    result: list[ScopeValues] = []
    for scope_position, (scope_name, _prefix) in enumerate(_scope_names(approved)):
        scope = pairs.scopes[scope_position]
        ids = tuple(pairs.ids) if scope is None else tuple(pairs.ids[i] for i in scope.tolist())
        for metric, values in zip(approved.metrics, metric_values, strict=True):
            if values.error is not None:
                raise values.error
            left, right = values.arrays()
            mask = values.missing_mask()
            if scope is not None:
                left, right, mask = left[scope], right[scope], mask[scope]
            result.append(
                ScopeValues(
                    metric=metric,
                    scope=scope_name,
                    seed=pairs.seeds[scope_position],
                    ids=ids,
                    baseline=left,
                    subject=right,
                    missing=mask,
                )
            )
    return tuple(result)
