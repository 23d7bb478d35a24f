"""Paired multi-metric comparison of two captured runs (``invarlock/multi-metric-comparison-v1``).

Wire contract: ``22-comparison.md`` of the invarlock specification (threshold
semantics: ``20-policy.md`` §4; per-record values: ``21-scorers.md``); JSON
Schema ``contracts/invarlock.multi-metric-comparison-v1.schema.json``. The
report is stored byte for byte in evidence packs and must replay
byte-identically, so every step follows the reference's order and arithmetic.

:func:`compare_runs` runs, in this order (§1):

1. ``max_bootstrap_draws`` (``None`` = unlimited, else an ``int`` >= 0) and
   ``decision_order`` (``"reference"`` or the opt-in ``"width_first"``);
2. the runs (a :class:`~sealeval.captured.run.Run` is already validated and
   is never validated again; a mapping is validated as a run document);
3. the policy at runtime level (:func:`~sealeval.captured.policy.check_runtime`:
   one scorer per metric, Unicode tables resolved once);
4. the pinned case set (``expected_case_set_digest``) for baseline, then subject;
5. pairing by id in code-point order, with the input-projection rule and equal
   canonical ``input``, ``expected`` and ``metadata`` (first difference named);
6. the scopes (``overall``, then each slice in policy order; slices select on
   the **baseline** record's metadata);
7. the work budget (charged before any scoring);
8. the missing-ID capacity;
9. one entry per scope x metric (missing rule, means, interval, decision);
10. the overall decision and the report.

Errors abort the whole comparison. They are :class:`ComparisonError` (closed
codes; fields are positions such as ``metrics[2].baseline.records[7].expected``,
never ids or values), or the refusal of the layer that owns the rule:
:class:`~sealeval.captured.policy.ComparisonPolicyError` for the policy (an
unavailable ``unicode_version`` is ``unsupported_unicode_version``) and
:class:`~sealeval.captured.errors.CapturedRunError` for run *documents*.

Performance (the reference refuses more than 50,000 records; sealeval has no
cap): one pairing pass (identity checks with exact fast paths, scope
membership and the scope seeds, hashed as they are encoded), then one scoring
loop per metric over the paired records, where each reference is prepared
once per pair and an output identical to the other side's is scored once.
Scorer errors are held until the reference would reach them (scope-major,
metric order), so a multi-fault input reports the same first failure. Values
live in compact float64 buffers; the intervals are
:mod:`sealeval.captured.intervals` (bit-identical, numpy-accelerated).

``decision_order="width_first"`` (not invarlock-compatible, see
``docs/statistics.md``) checks the interval width before the regression
bounds, so a small exact tie is ``insufficient_evidence`` rather than a
``regression``; such reports carry ``decision_rule:
"sealeval/width-first-v1"`` so they can never pass for reference reports.

This package is the face; its homes are :mod:`.model` (report objects,
constants, :class:`ComparisonError`), :mod:`.pairing` (pairing, scopes, seeds,
values, capacity), :mod:`.parallel` (the parallel SHAKE-256 bootstrap) and
:mod:`.engine` (entries, the decision rule and :func:`compare_runs`);
:mod:`.table` (columnar per-run tables: fixed-size data per record) and
:mod:`.streaming` (:func:`compare_run_files`: two run files compared with
memory bounded by the number of records, not their content; same bytes).
"""

from __future__ import annotations

from sealeval.captured.comparison.engine import ScopeValues, compare_runs, scope_values
from sealeval.captured.comparison.model import (
    DECISION_ORDERS,
    DECISIONS,
    DEFAULT_MAX_BOOTSTRAP_DRAWS,
    LIMITATIONS,
    MAX_MISSING_ID_BYTES,
    MAX_REPORT_BYTES,
    REPORT_FORMAT,
    WIDTH_FIRST_RULE,
    Bindings,
    ComparisonError,
    ComparisonReport,
    MetricEntry,
    MetricSummary,
)
from sealeval.captured.comparison.parallel import PARALLEL_MIN_PAIRS
from sealeval.captured.comparison.streaming import (
    RunSource,
    compare_run_files,
    scope_values_files,
)

__all__ = [
    "DECISIONS",
    "DECISION_ORDERS",
    "DEFAULT_MAX_BOOTSTRAP_DRAWS",
    "LIMITATIONS",
    "MAX_MISSING_ID_BYTES",
    "MAX_REPORT_BYTES",
    "PARALLEL_MIN_PAIRS",
    "REPORT_FORMAT",
    "WIDTH_FIRST_RULE",
    "Bindings",
    "ComparisonError",
    "ComparisonReport",
    "MetricEntry",
    "MetricSummary",
    "RunSource",
    "ScopeValues",
    "compare_run_files",
    "compare_runs",
    "scope_values",
    "scope_values_files",
]
