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
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import json
import math
import multiprocessing
import os
import sys
import threading
from array import array
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias

import numpy as np
import numpy.typing as npt

from sealeval.canonical import digest_bytes, encode_invarlock
from sealeval.captured.case_set import validate_run_case_set
from sealeval.captured.errors import CapturedRunError, frozen_canonical, rebased
from sealeval.captured.intervals import (
    MASS,
    REPLICATES,
    SHAKE_METHOD,
    Interval,
    IntervalError,
    PairedCounts,
    newcombe_interval,
    nll_ratio_interval,
    required_bootstrap_draws,
    shake256_bootstrap_interval,
    shake256_replicate_indices,
)
from sealeval.captured.policy import (
    OVERALL,
    ComparisonPolicy,
    MetricScorer,
    PolicyMetric,
    check_runtime,
    parse_comparison_policy,
)
from sealeval.captured.run import Record, Run, run_from_document
from sealeval.captured.scorers import NormalizedNll, RecordedScore, Scorer, ScorerError
from sealeval.errors import CapturedError, SealevalError

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
    "compare_runs",
]

REPORT_FORMAT: Final = "invarlock/multi-metric-comparison-v1"
#: The reference's default local work budget (draws), 22-comparison.md §7.
DEFAULT_MAX_BOOTSTRAP_DRAWS: Final = 102_400_000
#: Largest total of the missing-ID arrays (§7.1) and of the report's canonical bytes.
MAX_MISSING_ID_BYTES: Final = 134_217_728
MAX_REPORT_BYTES: Final = 134_217_728
#: ``reference`` (invarlock: bounds before width) or ``width_first`` (sealeval opt-in).
DECISION_ORDERS: Final = ("reference", "width_first")
#: Report member that marks a width-first report (absent from reference reports).
WIDTH_FIRST_RULE: Final = "sealeval/width-first-v1"
PASS: Final = "pass"  # noqa: S105 - a decision, not a secret
REGRESSION: Final = "regression"
INSUFFICIENT: Final = "insufficient_evidence"
DECISIONS: Final = (PASS, REGRESSION, INSUFFICIENT)

#: The four fixed limitations every report carries, in order.
LIMITATIONS: Final = (
    "Recorded scores retain source judgments; only their aggregation is recomputed.",
    "Intervals describe the paired schedule under the stated method; representativeness "
    "requires an external sampling design.",
    "Metric and slice intervals are marginal, not a simultaneous family-wide confidence guarantee.",
    "A policy pass does not establish truthful model execution, general quality, safety or "
    "compliance.",
)
HOSTED_LIMITATION: Final = (
    "Hosted identity digests authenticate declared service descriptors and observation "
    "windows; they do not identify underlying weights or establish hidden configuration or "
    "later service behavior."
)
NLL_LIMITATION: Final = (
    "Normalized NLL replays captured reference-continuation likelihood facts; their model "
    "execution, tokenizer and configuration claims are source assertions, not independently "
    "established runtime facts."
)

REASON_LOWER: Final = "lower interval bound exceeds allowed regression"
REASON_UPPER: Final = "upper interval bound exceeds allowed regression"
REASON_RATIO: Final = "upper ratio interval bound exceeds ratio_max"
REASON_BOUNDS: Final = "subject mean fails absolute bounds"
REASON_WIDE: Final = "interval is too wide"
REASON_MISSING: Final = "missing results"
REASON_MISSING_NLL: Final = (
    "missing reference-continuation likelihood facts or errored results; supply typed "
    "likelihood for every pair"
)
REASON_MINIMUM: Final = "minimum record count not met"

_FloatArray: TypeAlias = npt.NDArray[np.float64]
_IndexArray: TypeAlias = npt.NDArray[np.intp]
_BoolArray: TypeAlias = npt.NDArray[np.bool_]
# Scope hashing: buffer canonical rows and hash them in chunks of about this size.
_HASH_CHUNK: Final = 1 << 20
# Parallel SHAKE-256 replicates: only for scopes at least this large, at most this many
# worker processes, and differences with at most this many distinct values.
PARALLEL_MIN_PAIRS: Final = 10_000
_MAX_WORKERS: Final = 8
_MAX_DISTINCT: Final = 4096
# Exact totals stay far from binary64 overflow below this bound on n * max|d|.
_SAFE_TOTAL: Final = 2.0**1000
# c_encode_basestring with ensure_ascii off: the string layout of the canonical encoder.
_STRING: Final = json.encoder.encode_basestring


class ComparisonError(CapturedError):
    """Refusal of a comparison (the report is not produced)."""

    module = "sealeval.captured.comparison"
    field_in_message = True
    codes = frozenset(
        {
            # arguments
            "invalid_type",
            "invalid_budget",
            "invalid_decision_order",
            "invalid_workers",
            # pairing and the planned schedule
            "case_set_mismatch",
            "record_ids_differ",
            "projection_mismatch",
            "input_changed",
            "expected_changed",
            "metadata_changed",
            # capacity
            "work_budget_exceeded",
            "missing_id_capacity_exceeded",
            "report_too_large",
            # attributed values
            "provenance_mismatch",
            "likelihood_configuration_mismatch",
            "likelihood_tokenizer_mismatch",
            "invalid_score",
            "invalid_likelihood",
            # invalid references (abort the comparison)
            "reference_not_text",
            "reference_not_numeric",
            "reference_not_json",
            "reference_missing_field",
            # arithmetic
            "non_finite_value",
            "overflow",
            "non_positive_baseline_mean",
        }
    )


# ---------------------------------------------------------------------------
# Report objects


@dataclass(frozen=True, slots=True)
class Bindings:
    """The report's ``bindings``: digests of the baseline run, the subject run and the policy."""

    baseline: str
    subject: str
    policy: str

    def to_dict(self) -> dict[str, str]:
        """Return the report member ``bindings``."""
        return {"baseline": self.baseline, "subject": self.subject, "policy": self.policy}


@dataclass(frozen=True, slots=True)
class MetricSummary:
    """One CLI metric summary (22-comparison.md §9): counts and reasons, no id lists."""

    name: str = field(repr=False)
    slice: str = field(repr=False)
    decision: str
    usable_count: int
    missing_count: int
    reasons: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """Return ``{name, slice, decision, usable_count, missing_count, reasons}``."""
        return {
            "name": self.name,
            "slice": self.slice,
            "decision": self.decision,
            "usable_count": self.usable_count,
            "missing_count": self.missing_count,
            "reasons": list(self.reasons),
        }


@dataclass(frozen=True, slots=True)
class MetricEntry:
    """One report entry (one scope x one metric).

    ``baseline_mean``, ``subject_mean``, ``delta``, ``interval`` (and ``ratio``
    for the NLL metric) are ``None`` when the entry did not reach the
    interval (missing results or too few pairs). ``missing_ids`` lists the
    missing pairs in pair order.
    """

    name: str = field(repr=False)
    slice: str = field(repr=False)
    kind: str
    unit: str = field(repr=False)
    direction: str
    scoring_assurance: str
    count: int
    missing_ids: tuple[str, ...] = field(repr=False)
    baseline_mean: float | None
    subject_mean: float | None
    delta: float | None
    interval: Interval | None
    decision: str
    reasons: tuple[str, ...]
    ratio: float | None = None
    aggregation: str = "mean"

    @property
    def is_nll(self) -> bool:
        """Whether this is a normalized-NLL entry (``ratio``, ``interval_unit``)."""
        return self.kind == "normalized_nll_per_utf8_byte"

    @property
    def usable_count(self) -> int:
        """Pairs in the scope minus missing pairs."""
        return self.count - len(self.missing_ids)

    def summary(self) -> MetricSummary:
        """Return the CLI summary of this entry (§9)."""
        return MetricSummary(
            name=self.name,
            slice=self.slice,
            decision=self.decision,
            usable_count=self.usable_count,
            missing_count=len(self.missing_ids),
            reasons=self.reasons,
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the report entry (canonical encoding sorts the members)."""
        document: dict[str, Any] = {
            "name": self.name,
            "slice": self.slice,
            "kind": self.kind,
            "unit": self.unit,
            "direction": self.direction,
            "aggregation": self.aggregation,
            "scoring_assurance": self.scoring_assurance,
            "count": self.count,
            "missing_ids": list(self.missing_ids),
            "baseline_mean": self.baseline_mean,
            "subject_mean": self.subject_mean,
            "delta": self.delta,
            "interval": None if self.interval is None else self.interval.to_dict(),
            "decision": self.decision,
            "reasons": list(self.reasons),
        }
        if self.is_nll:
            document["ratio"] = self.ratio
            document["interval_unit"] = "ratio"
        return document


@dataclass(frozen=True, slots=True, eq=False)
class ComparisonReport:
    """A comparison report and its canonical bytes (built by :func:`compare_runs` only).

    Attributes:
        decision: the overall decision (``pass``, ``regression``, ``insufficient_evidence``).
        bindings: digests of the baseline run, the subject run and the policy.
        metrics: the entries, scope-major (``overall`` first), metrics in policy order.
        limitations: the fixed limitation texts (4 to 6).
        decision_order: ``"reference"`` or ``"width_first"``.
        canonical_bytes: the invarlock canonical bytes (what a pack stores).
        digest: ``sha256:`` + hex SHA-256 of ``canonical_bytes``.
        required_bootstrap_draws: the work the policy was charged (§7).
        missing_id_bytes: the missing-ID capacity total (§7.1).
    """

    decision: str
    bindings: Bindings
    metrics: tuple[MetricEntry, ...] = field(repr=False)
    limitations: tuple[str, ...] = field(repr=False)
    decision_order: str
    canonical_bytes: bytes = field(repr=False)
    digest: str
    required_bootstrap_draws: int = field(repr=False)
    missing_id_bytes: int = field(repr=False)

    @property
    def format(self) -> str:
        """The report format string."""
        return REPORT_FORMAT

    @property
    def passed(self) -> bool:
        """Whether the overall decision is ``pass``."""
        return self.decision == PASS

    def __eq__(self, other: object) -> bool:
        """Compare canonical bytes."""
        if not isinstance(other, ComparisonReport):
            return NotImplemented
        return self.canonical_bytes == other.canonical_bytes

    def __hash__(self) -> int:
        """Hash the report digest."""
        return hash(self.digest)

    def metric_summaries(self) -> tuple[MetricSummary, ...]:
        """Return the per-entry summaries in report order (§9)."""
        return tuple(entry.summary() for entry in self.metrics)

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh plain copy of the report document."""
        return _document(
            self.decision, self.bindings, self.metrics, self.limitations, self.decision_order
        )

    def to_canonical(self) -> bytes:
        """Return the canonical bytes (final LF included)."""
        return self.canonical_bytes


def _document(
    decision: str,
    bindings: Bindings,
    entries: Sequence[MetricEntry],
    limitations: Sequence[str],
    decision_order: str,
) -> dict[str, Any]:
    document: dict[str, Any] = {
        "format": REPORT_FORMAT,
        "decision": decision,
        "bindings": bindings.to_dict(),
        "metrics": [entry.to_dict() for entry in entries],
        "limitations": list(limitations),
    }
    if decision_order == "width_first":
        document["decision_rule"] = WIDTH_FIRST_RULE
    return document


# ---------------------------------------------------------------------------
# Arguments


def _budget(value: object) -> int | None:
    if value is None:
        return None
    if type(value) is not int:
        raise ComparisonError("invalid_budget", "max_bootstrap_draws")
    assert isinstance(value, int)
    if value < 0:
        raise ComparisonError("invalid_budget", "max_bootstrap_draws")
    return value


def _run(value: object, side: str) -> Run:
    if isinstance(value, Run):
        return value
    if isinstance(value, Mapping):
        with rebased("run", side):
            return run_from_document(value)
    raise ComparisonError("invalid_type", side)


def _policy(value: object) -> ComparisonPolicy:
    if isinstance(value, ComparisonPolicy):
        return value
    if isinstance(value, Mapping):
        return parse_comparison_policy(value)
    raise ComparisonError("invalid_type", "policy")


# ---------------------------------------------------------------------------
# Pairing (§2), scopes (§2.1) and scope seeds (§4 step 7)


def _same_value(left: object, right: object) -> bool:
    """Whether two frozen JSON values have identical canonical bytes.

    Strings compare by code points; other values of the same Python type
    compare by canonical bytes (``1`` vs ``1.0``, ``-0.0`` vs ``0.0`` and
    ``true`` vs ``1`` differ). Frozen values of different types never share
    canonical bytes.
    """
    if left is right:
        return True
    kind = type(left)
    if kind is not type(right):
        return False
    if kind is str:
        return left == right
    return frozen_canonical(left) == frozen_canonical(right)


def _seed_row(record: Record) -> bytes:
    """Canonical bytes (no LF) of ``{id, input, expected, metadata}`` of a record.

    Equals :func:`sealeval.captured.intervals.seed_row` (tested); the common
    text-only shape is laid out directly with the encoder's own string
    function, anything else goes through the canonical encoder.
    """
    expected = record.expected
    record_input = record.input
    if type(expected) is str and type(record_input) is str:
        metadata = record.metadata
        if metadata:
            members = ",".join(
                _STRING(key) + ":" + _STRING(metadata[key]) for key in sorted(metadata)
            )
            encoded_metadata = "{" + members + "}"
        else:
            encoded_metadata = "{}"
        text = (
            '{"expected":'
            + _STRING(expected)
            + ',"id":'
            + _STRING(record.id)
            + ',"input":'
            + _STRING(record_input)
            + ',"metadata":'
            + encoded_metadata
            + "}"
        )
        return text.encode("utf-8")
    row = {
        "id": record.id,
        "input": record_input,
        "expected": expected,
        "metadata": record.metadata,
    }
    return frozen_canonical(row)[:-1]


class _ScopeHash:
    """Streams ``digest([row, row, ...])`` (canonical array of rows) in large chunks."""

    __slots__ = ("_buffer", "_empty", "_hasher")

    def __init__(self) -> None:
        self._hasher = hashlib.sha256()
        self._buffer = bytearray(b"[")
        self._empty = True

    def add(self, row: bytes) -> None:
        buffer = self._buffer
        if not self._empty:
            buffer += b","
        self._empty = False
        buffer += row
        if len(buffer) >= _HASH_CHUNK:
            self._hasher.update(buffer)
            buffer.clear()

    def seed(self) -> str:
        self._buffer += b"]\n"
        self._hasher.update(self._buffer)
        return "sha256:" + self._hasher.hexdigest()


def _check_projection(baseline: Record, subject: Record, where: str) -> None:
    left = baseline.projection
    right = subject.projection
    if left is None or right is None:
        raise ComparisonError("projection_mismatch", where)
    if left.configuration_digest != right.configuration_digest:
        raise ComparisonError("projection_mismatch", where)
    if left.source_input_digest != right.source_input_digest:
        raise ComparisonError("projection_mismatch", where)


def _where(subject_position: int, member: str) -> str:
    return f"subject.records[{subject_position}].{member}"


def _check_pair(left: Record, right: Record, subject_position: int) -> None:
    """Apply the pairing rule to one id: projection, then input, expected, metadata."""
    if left.projection is not None or right.projection is not None:
        _check_projection(left, right, _where(subject_position, "context.input_projection"))
    if not _same_value(left.input, right.input):
        raise ComparisonError("input_changed", _where(subject_position, "input"))
    if not _same_value(left.expected, right.expected):
        raise ComparisonError("expected_changed", _where(subject_position, "expected"))
    left_metadata = left.metadata
    right_metadata = right.metadata
    # Metadata values are strings (run validation), so mapping equality is exact.
    if left_metadata is not right_metadata and left_metadata != right_metadata:
        raise ComparisonError("metadata_changed", _where(subject_position, "metadata"))


@dataclass(slots=True)
class _Pairs:
    """The paired records in pair order (ids ascending) and the scopes over them.

    Record positions (for error fields) are looked up in the runs' indexes
    only when an error is reported.
    """

    ids: list[str]
    baseline: list[Record]
    subject: list[Record]
    baseline_index: Mapping[str, int]
    subject_index: Mapping[str, int]
    errored: bytearray
    scopes: list[_IndexArray | None]  # None: every pair (overall)
    seeds: list[str | None]


def _pair(baseline: Run, subject: Run, policy: ComparisonPolicy, seeded: bool) -> _Pairs:
    """Pair the records (§2), select the scopes (§2.1) and hash the scope seeds."""
    baseline_index = baseline.index
    subject_index = subject.index
    if len(baseline_index) != len(subject_index) or baseline_index.keys() != subject_index.keys():
        raise ComparisonError("record_ids_differ", "subject")
    ids = sorted(baseline_index)
    baseline_records = baseline.records
    subject_records = subject.records
    slices = [tuple(item.where.items()) for item in policy.slices]
    members: list[list[int]] = [[] for _ in slices]
    hashes = [_ScopeHash() for _ in range(len(slices) + 1)] if seeded else []
    pairs_baseline: list[Record] = []
    pairs_subject: list[Record] = []
    errored = bytearray(len(ids))
    for index, record_id in enumerate(ids):
        left_position = baseline_index[record_id]
        right_position = subject_index[record_id]
        left = baseline_records[left_position]
        right = subject_records[right_position]
        _check_pair(left, right, right_position)
        left_metadata = left.metadata
        pairs_baseline.append(left)
        pairs_subject.append(right)
        if left.error is not None or right.error is not None:
            errored[index] = 1
        row = b""
        if seeded:
            row = _seed_row(left)
            hashes[0].add(row)
        for slice_index, conditions in enumerate(slices):
            # Metadata values are strings: ``get`` equality is the slice rule.
            if all(left_metadata.get(key) == value for key, value in conditions):
                members[slice_index].append(index)
                if seeded:
                    hashes[slice_index + 1].add(row)
    scopes: list[_IndexArray | None] = [None]
    scopes.extend(np.array(indices, dtype=np.intp) for indices in members)
    seeds: list[str | None] = [scope.seed() for scope in hashes] if seeded else []
    if not seeded:
        seeds = [None] * len(scopes)
    return _Pairs(
        ids=ids,
        baseline=pairs_baseline,
        subject=pairs_subject,
        baseline_index=baseline_index,
        subject_index=subject_index,
        errored=errored,
        scopes=scopes,
        seeds=seeds,
    )


# ---------------------------------------------------------------------------
# Per-metric values (§3, §4 steps 1-3)


@dataclass(slots=True)
class _Values:
    """Per-pair missing flags and values of one metric, and its held-back error."""

    missing: bytearray
    baseline: array[float]
    subject: array[float]
    error: SealevalError | None = None

    def missing_mask(self) -> _BoolArray:
        mask: _BoolArray = np.frombuffer(self.missing, dtype=np.uint8).astype(np.bool_)
        return mask

    def arrays(self) -> tuple[_FloatArray, _FloatArray]:
        left: _FloatArray = np.frombuffer(self.baseline, dtype=np.float64)
        right: _FloatArray = np.frombuffer(self.subject, dtype=np.float64)
        return left, right


def _held(error: SealevalError, where: str) -> ComparisonError:
    code = error.code if error.code in ComparisonError.codes else "invalid_type"
    return ComparisonError(code, where)


def _deterministic_values(scorer: Scorer, pairs: _Pairs, values: _Values, where: str) -> None:
    """Availability, then ``prepare(expected)`` once per pair and both outputs."""
    available = scorer.is_available
    prepare = scorer.prepare
    missing = values.missing
    left_values = values.baseline
    right_values = values.subject
    errored = pairs.errored
    scoring = True
    for index, (left, right) in enumerate(zip(pairs.baseline, pairs.subject, strict=True)):
        left_output = left.output
        right_output = right.output
        if errored[index] or not (available(left_output) and available(right_output)):
            missing[index] = 1
            continue
        if not scoring:
            continue
        try:
            reference = prepare(left.expected)
        except ScorerError as error:
            position = pairs.baseline_index[pairs.ids[index]]
            values.error = _held(error, f"{where}.baseline.records[{position}].expected")
            scoring = False
            continue
        score = reference.score(left_output)
        left_values[index] = score
        if left_output is right_output or (
            type(left_output) is str and type(right_output) is str and left_output == right_output
        ):
            right_values[index] = score
        else:
            right_values[index] = reference.score(right_output)


def _recorded_values(
    scorer: RecordedScore,
    runs: tuple[Run, Run],
    pairs: _Pairs,
    values: _Values,
    where: str,
) -> None:
    """Provenance of both runs (held back), then ``float(scores[score_key])`` per side."""
    for side, run in zip(("baseline", "subject"), runs, strict=True):
        try:
            scorer.check_provenance(run.score_provenance)
        except ScorerError as error:
            values.error = _held(error, f"{where}.{side}.score_provenance")
            break
    key = scorer.score_key
    missing = values.missing
    errored = pairs.errored
    scoring = values.error is None
    for index, (left, right) in enumerate(zip(pairs.baseline, pairs.subject, strict=True)):
        left_scores = left.scores
        right_scores = right.scores
        if errored[index] or key not in left_scores or key not in right_scores:
            missing[index] = 1
            continue
        if not scoring:
            continue
        for side, scores, target, positions in (
            ("baseline", left_scores, values.baseline, pairs.baseline_index),
            ("subject", right_scores, values.subject, pairs.subject_index),
        ):
            try:
                target[index] = scorer.value(scores)
            except ScorerError as error:
                position = positions[pairs.ids[index]]
                values.error = _held(error, f"{where}.{side}.records[{position}].scores")
                scoring = False
                break


def _nll_values(scorer: NormalizedNll, pairs: _Pairs, values: _Values, where: str) -> None:
    """Bindings of every record with facts (held back), then ``-logprob_sum / bytes``."""
    missing = values.missing
    errored = pairs.errored
    binding_error: SealevalError | None = None
    value_error: SealevalError | None = None
    for index, (left, right) in enumerate(zip(pairs.baseline, pairs.subject, strict=True)):
        left_facts = left.likelihood
        right_facts = right.likelihood
        if binding_error is None:
            for side, facts, check, positions in (
                ("baseline", left_facts, scorer.check_baseline, pairs.baseline_index),
                ("subject", right_facts, scorer.check_subject, pairs.subject_index),
            ):
                try:
                    check(facts)
                except ScorerError as error:
                    position = positions[pairs.ids[index]]
                    binding_error = _held(
                        error, f"{where}.{side}.records[{position}].{error.field}"
                    )
                    break
        if errored[index] or left_facts is None or right_facts is None:
            missing[index] = 1
            continue
        if binding_error is not None or value_error is not None:
            continue
        for side, facts, target, positions in (
            ("baseline", left_facts, values.baseline, pairs.baseline_index),
            ("subject", right_facts, values.subject, pairs.subject_index),
        ):
            try:
                target[index] = scorer.value(facts)
            except ScorerError as error:
                position = positions[pairs.ids[index]]
                value_error = _held(error, f"{where}.{side}.records[{position}].likelihood")
                break
    values.error = binding_error if binding_error is not None else value_error


def _metric_values(
    metric: PolicyMetric,
    scorer: MetricScorer,
    baseline: Run,
    subject: Run,
    pairs: _Pairs,
) -> _Values:
    size = len(pairs.ids)
    values = _Values(
        missing=bytearray(size),
        baseline=array("d", [0.0]) * size,
        subject=array("d", [0.0]) * size,
    )
    where = f"metrics[{metric.index}]"
    if isinstance(scorer, RecordedScore):
        _recorded_values(scorer, (baseline, subject), pairs, values, where)
    elif isinstance(scorer, NormalizedNll):
        _nll_values(scorer, pairs, values, where)
    else:
        _deterministic_values(scorer, pairs, values, where)
    return values


# ---------------------------------------------------------------------------
# Capacity (§7.1)


def _id_costs(pairs: _Pairs, any_missing: _BoolArray) -> npt.NDArray[np.int64]:
    """``len(canonical JSON of the id) + 1`` for every pair missing somewhere, else 0."""
    costs = np.zeros(len(pairs.ids), dtype=np.int64)
    for index in np.flatnonzero(any_missing).tolist():
        costs[index] = len(_STRING(pairs.ids[index]).encode("utf-8")) + 1
    return costs


def _missing_id_bytes(pairs: _Pairs, masks: Sequence[_BoolArray]) -> int:
    """Σ over scope x metric of ``2 + Σ(len(id JSON)) + commas`` (§7.1)."""
    total = 2 * len(pairs.scopes) * len(masks)
    if not masks:
        return total
    any_missing = np.logical_or.reduce(masks)
    if not any_missing.any():
        return total
    costs = _id_costs(pairs, any_missing)
    for scope in pairs.scopes:
        scope_costs = costs if scope is None else costs[scope]
        for mask in masks:
            selected = mask if scope is None else mask[scope]
            count = int(np.count_nonzero(selected))
            if count:
                total += int(scope_costs[selected].sum()) - 1
    return total


# ---------------------------------------------------------------------------
# Parallel SHAKE-256 bootstrap (bit-identical to shake256_bootstrap_interval)
#
# Each replicate's draws depend only on (seed, n, replicate), so replicates can
# be computed in any process. A worker draws the indices with the public
# shake256_replicate_indices, counts how often each *distinct* difference was
# drawn, and forms the exact sum as an integer over a common power-of-two
# denominator; Python's int / int division rounds it once, correctly, which is
# exactly math.fsum of the drawn values (the definition the primitive
# implements). The percentile step below is 22-comparison.md §5.2 verbatim.
# Any failure to run workers falls back to the serial primitive.


@dataclass(frozen=True, slots=True)
class _Grouped:
    """Differences as codes into their distinct values, each an integer over ``denominator``."""

    codes: _IndexArray
    numerators: tuple[int, ...]
    denominator: int


def _grouped(differences: _FloatArray) -> _Grouped | None:
    distinct = np.unique(differences)
    if distinct.size > _MAX_DISTINCT:
        return None
    codes: _IndexArray = np.searchsorted(distinct, differences).astype(np.intp, copy=False)
    ratios = [value.as_integer_ratio() for value in distinct.tolist()]
    denominator = max(den for _, den in ratios)  # powers of two: a common multiple
    numerators = tuple(num * (denominator // den) for num, den in ratios)
    return _Grouped(codes, numerators, denominator)


_WORKER_STATE: dict[str, Any] = {}


def _start_worker(seed: str, size: int, grouped: _Grouped) -> None:
    """Process-pool initializer: keep one bootstrap's inputs in the worker.

    A forked worker shares the parent's heap (the runs) copy-on-write; the
    cyclic collector would walk, and so copy, all of it. The worker creates
    no reference cycles, so collection is switched off for its short life.
    """
    gc.disable()
    _WORKER_STATE.clear()
    _WORKER_STATE.update(seed=seed, size=size, grouped=grouped)


def _replicate_means(replicates: range) -> list[float]:
    """Return the means of the given replicates (runs in a worker process)."""
    seed: str = _WORKER_STATE["seed"]
    size: int = _WORKER_STATE["size"]
    grouped: _Grouped = _WORKER_STATE["grouped"]
    codes = grouped.codes
    numerators = grouped.numerators
    groups = len(numerators)
    means = []
    for replicate in replicates:
        drawn = np.bincount(
            codes[shake256_replicate_indices(seed, size, replicate)], minlength=groups
        )
        exact = sum(
            count * numerator
            for count, numerator in zip(drawn.tolist(), numerators, strict=True)
            if count
        )
        means.append((exact / grouped.denominator) / size)
    return means


def _percentile(draws: Sequence[float], q: float) -> float:
    position = (REPLICATES - 1) * q
    low = math.floor(position)
    high = min(low + 1, REPLICATES - 1)
    return draws[low] + (draws[high] - draws[low]) * (position - low)


def _pool_context() -> Any:
    methods = multiprocessing.get_all_start_methods()
    # fork is instant and the workers only hash and count; it is used on Linux when no
    # other Python thread could hold a lock at fork time. Elsewhere: fresh interpreters.
    if sys.platform == "linux" and "fork" in methods and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


def _parallel_shake(
    differences: _FloatArray, seed: str, grouped: _Grouped, workers: int
) -> Interval | None:
    size = int(differences.size)
    step = -(-REPLICATES // (4 * workers))
    chunks = [range(start, min(start + step, REPLICATES)) for start in range(0, REPLICATES, step)]
    # Forked workers share this process's heap copy-on-write; freezing the tracked
    # objects keeps any collection (here or in a worker) from walking, and so
    # copying, all of it. Collection of the frozen objects resumes afterwards.
    frozen = gc.get_freeze_count() == 0  # never thaw objects a caller froze
    if frozen:
        gc.freeze()
    try:
        pool: Executor = ProcessPoolExecutor(
            max_workers=workers,
            mp_context=_pool_context(),
            initializer=_start_worker,
            initargs=(seed, size, grouped),
        )
        with pool:
            means = [mean for chunk in pool.map(_replicate_means, chunks) for mean in chunk]
    except (OSError, RuntimeError, ValueError, ImportError, Warning):
        # No processes here (sandbox, limits, a warning raised as an error, a broken
        # pool): the serial primitive gives the same interval.
        return None
    finally:
        if frozen:
            gc.unfreeze()
    if len(means) != REPLICATES:  # pragma: no cover - defensive
        return None
    draws = sorted(means)
    return Interval(
        _percentile(draws, 0.025), _percentile(draws, 0.975), SHAKE_METHOD, MASS, REPLICATES
    )


def _shake_interval(left: _FloatArray, right: _FloatArray, seed: str, workers: int) -> Interval:
    """``shake256_bootstrap_interval``, with the replicates spread over processes when it pays."""
    if workers > 1 and left.size >= PARALLEL_MIN_PAIRS:
        with np.errstate(over="ignore", invalid="ignore"):
            differences = right - left
        if np.isfinite(differences).all():
            magnitude = max(-float(differences.min()), float(differences.max()))
            if (
                differences.min() != differences.max()
                and magnitude * (differences.size + 1) < _SAFE_TOTAL
            ):
                grouped = _grouped(differences)
                if grouped is not None:
                    interval = _parallel_shake(differences, seed, grouped, workers)
                    if interval is not None:
                        return interval
    return shake256_bootstrap_interval(left, right, seed)


def _workers(requested: object) -> int:
    if requested is None:
        try:
            available = len(os.sched_getaffinity(0))
        except AttributeError:  # pragma: no cover - not Linux
            available = os.cpu_count() or 1
        return max(1, min(available, _MAX_WORKERS))
    if type(requested) is not int:
        raise ComparisonError("invalid_workers", "workers")
    assert isinstance(requested, int)
    if requested < 1:
        raise ComparisonError("invalid_workers", "workers")
    return requested


# ---------------------------------------------------------------------------
# One entry (§4 steps 4-11) and the decision rule (§6)


def _finite(*numbers: float) -> bool:
    return all(math.isfinite(number) for number in numbers)


def _mean(values: _FloatArray, count: int, where: str) -> float:
    """``fsum(values) / n``; the array is streamed (no list of a million floats)."""
    try:
        return math.fsum(values) / count
    except OverflowError:
        raise ComparisonError("overflow", where) from None


def _decide(
    metric: PolicyMetric,
    interval: Interval,
    subject_mean: float,
    decision_order: str,
) -> tuple[str, tuple[str, ...]]:
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
    scope: _IndexArray | None,
    seed: str | None,
    values: _Values,
    mask: _BoolArray,
    pairs: _Pairs,
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
            interval = _shake_interval(left, right, seed, workers)
    except IntervalError as error:
        raise _interval_failure(error, where) from None
    if not _finite(baseline_mean, subject_mean, delta, interval.lower, interval.upper):
        raise ComparisonError("non_finite_value", where)
    if ratio is not None and not math.isfinite(ratio):
        raise ComparisonError("non_finite_value", where)
    decision, reasons = _decide(metric, interval, subject_mean, decision_order)
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

    Returns:
        The report; ``canonical_bytes`` is what an evidence pack stores.

    Raises:
        ComparisonError: see ``docs/errors.md`` (budget, pairing, case set,
            capacity, attributed values, invalid references, arithmetic).
        ComparisonPolicyError: an invalid policy document, or a pinned
            ``unicode_version`` this installation cannot provide.
        CapturedRunError: an invalid run document.
    """
    budget = _budget(max_bootstrap_draws)
    if type(decision_order) is not str or decision_order not in DECISION_ORDERS:
        raise ComparisonError("invalid_decision_order", "decision_order")
    processes = _workers(workers)
    baseline_run = _run(baseline, "baseline")
    subject_run = _run(subject, "subject")
    approved = _policy(policy)
    scorers = check_runtime(approved)
    pinned = approved.expected_case_set_digest
    if pinned is not None:
        for side, run in (("baseline", baseline_run), ("subject", subject_run)):
            try:
                validate_run_case_set(run, pinned)
            except CapturedRunError:
                raise ComparisonError("case_set_mismatch", side) from None
    seeded = approved.bootstrap_metric_count > 0
    pairs = _pair(baseline_run, subject_run, approved, seeded)
    counts = [len(pairs.ids) if scope is None else int(scope.size) for scope in pairs.scopes]
    required = required_bootstrap_draws(counts, approved.bootstrap_metric_count)
    if budget is not None and required > budget:
        raise ComparisonError("work_budget_exceeded", "max_bootstrap_draws")
    metric_values = [
        _metric_values(metric, scorer, baseline_run, subject_run, pairs)
        for metric, scorer in zip(approved.metrics, scorers, strict=True)
    ]
    masks = [values.missing_mask() for values in metric_values]
    missing_bytes = _missing_id_bytes(pairs, masks)
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
                    workers=processes,
                    where=f"{prefix}metrics[{metric.index}]",
                )
            )
    limitations = list(LIMITATIONS)
    if baseline_run.service_identity is not None or subject_run.service_identity is not None:
        limitations.append(HOSTED_LIMITATION)
    if approved.has_nll:
        limitations.append(NLL_LIMITATION)
    decision = _overall(entries)
    bindings = Bindings(baseline_run.digest, subject_run.digest, approved.digest)
    document = _document(decision, bindings, entries, limitations, decision_order)
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
