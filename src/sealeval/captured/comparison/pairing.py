"""Pairing, scopes, scope seeds, per-metric values and capacity (22-comparison.md §2-§4, §7.1).

One pairing pass checks identities (exact fast paths), selects scopes on the
baseline record's metadata and hashes the scope seeds as it encodes; then one
scoring loop per metric fills compact float64 buffers.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from sealeval import _validate, canonical
from sealeval.canonical import encode_invarlock_string
from sealeval.captured.comparison.model import (
    HASH_CHUNK,
    BoolArray,
    ComparisonError,
    FloatArray,
    IndexArray,
)
from sealeval.captured.errors import CapturedRunError
from sealeval.captured.policy import (
    ComparisonPolicy,
    MetricScorer,
    PolicyMetric,
    parse_comparison_policy,
)
from sealeval.captured.run import Record, Run, run_from_document
from sealeval.captured.scorers import NormalizedNll, RecordedScore, Scorer, ScorerError
from sealeval.errors import SealevalError

# ---------------------------------------------------------------------------
# Arguments


def bootstrap_budget(value: object) -> int | None:
    """Check the ``max_bootstrap_draws`` argument (``None`` or an ``int`` >= 0)."""
    if value is None:
        return None
    if type(value) is not int:
        raise ComparisonError("invalid_budget", "max_bootstrap_draws")
    assert isinstance(value, int)
    if value < 0:
        raise ComparisonError("invalid_budget", "max_bootstrap_draws")
    return value


def as_run(value: object, side: str) -> Run:
    """Return a :class:`Run` argument, or validate a run document into one (at ``side``)."""
    if isinstance(value, Run):
        return value
    if isinstance(value, Mapping):
        with _validate.rebased("run", side, error=CapturedRunError):
            return run_from_document(value)
    raise ComparisonError("invalid_type", side)


def as_policy(value: object) -> ComparisonPolicy:
    """Return a :class:`ComparisonPolicy` argument, or parse a policy document into one."""
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
    return canonical.frozen_canonical(left, error=CapturedRunError) == canonical.frozen_canonical(
        right, error=CapturedRunError
    )


def record_seed_row(record: Record) -> bytes:
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
                encode_invarlock_string(key) + ":" + encode_invarlock_string(metadata[key])
                for key in sorted(metadata)
            )
            encoded_metadata = "{" + members + "}"
        else:
            encoded_metadata = "{}"
        text = (
            '{"expected":'
            + encode_invarlock_string(expected)
            + ',"id":'
            + encode_invarlock_string(record.id)
            + ',"input":'
            + encode_invarlock_string(record_input)
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
    return canonical.frozen_canonical(row, error=CapturedRunError)[:-1]


class ScopeHash:
    """Streams ``digest([row, row, ...])`` (canonical array of rows) in large chunks."""

    __slots__ = ("_buffer", "_empty", "_hasher")

    def __init__(self, prefix: bytes = b"[") -> None:
        """Start the array with ``prefix`` (a wrapping object may open it)."""
        self._hasher = hashlib.sha256()
        self._buffer = bytearray(prefix)
        self._empty = True

    def add(self, row: bytes) -> None:
        """Append one row (canonical bytes, no LF)."""
        buffer = self._buffer
        if not self._empty:
            buffer += b","
        self._empty = False
        buffer += row
        if len(buffer) >= HASH_CHUNK:
            self._hasher.update(buffer)
            buffer.clear()

    def seed(self, suffix: bytes = b"]\n") -> str:
        """Close the array with ``suffix``; return its ``sha256:`` digest."""
        self._buffer += suffix
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
class Pairs:
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
    scopes: list[IndexArray | None]  # None: every pair (overall)
    seeds: list[str | None]


def pair_records(baseline: Run, subject: Run, policy: ComparisonPolicy, seeded: bool) -> Pairs:
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
    hashes = [ScopeHash() for _ in range(len(slices) + 1)] if seeded else []
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
            row = record_seed_row(left)
            hashes[0].add(row)
        for slice_index, conditions in enumerate(slices):
            # Metadata values are strings: ``get`` equality is the slice rule.
            if all(left_metadata.get(key) == value for key, value in conditions):
                members[slice_index].append(index)
                if seeded:
                    hashes[slice_index + 1].add(row)
    scopes: list[IndexArray | None] = [None]
    scopes.extend(np.array(indices, dtype=np.intp) for indices in members)
    seeds: list[str | None] = [scope.seed() for scope in hashes] if seeded else []
    if not seeded:
        seeds = [None] * len(scopes)
    return Pairs(
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
class MetricValues:
    """Per-pair missing flags and values of one metric, and its held-back error."""

    missing: bytearray
    baseline: array[float]
    subject: array[float]
    error: SealevalError | None = None

    def missing_mask(self) -> BoolArray:
        """Return the per-pair missing flags as a boolean array."""
        mask: BoolArray = np.frombuffer(self.missing, dtype=np.uint8).astype(np.bool_)
        return mask

    def arrays(self) -> tuple[FloatArray, FloatArray]:
        """Return the baseline and subject values as float64 arrays (no copy)."""
        left: FloatArray = np.frombuffer(self.baseline, dtype=np.float64)
        right: FloatArray = np.frombuffer(self.subject, dtype=np.float64)
        return left, right


def held_error(error: SealevalError, where: str) -> ComparisonError:
    """Return a held scorer refusal as a comparison error at ``where`` (same code if declared)."""
    code = error.code if error.code in ComparisonError.codes else "invalid_type"
    return ComparisonError(code, where)


def _deterministic_values(scorer: Scorer, pairs: Pairs, values: MetricValues, where: str) -> None:
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
            values.error = held_error(error, f"{where}.baseline.records[{position}].expected")
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
    pairs: Pairs,
    values: MetricValues,
    where: str,
) -> None:
    """Provenance of both runs (held back), then ``float(scores[score_key])`` per side."""
    for side, run in zip(("baseline", "subject"), runs, strict=True):
        try:
            scorer.check_provenance(run.score_provenance)
        except ScorerError as error:
            values.error = held_error(error, f"{where}.{side}.score_provenance")
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
                values.error = held_error(error, f"{where}.{side}.records[{position}].scores")
                scoring = False
                break


def _nll_values(scorer: NormalizedNll, pairs: Pairs, values: MetricValues, where: str) -> None:
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
                    binding_error = held_error(
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
                value_error = held_error(error, f"{where}.{side}.records[{position}].likelihood")
                break
    values.error = binding_error if binding_error is not None else value_error


def metric_pair_values(
    metric: PolicyMetric,
    scorer: MetricScorer,
    baseline: Run,
    subject: Run,
    pairs: Pairs,
) -> MetricValues:
    """Score one metric over the pairs: per-pair values, missing flags and any held-back error."""
    size = len(pairs.ids)
    values = MetricValues(
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


def _id_costs(pairs: Pairs, any_missing: BoolArray) -> npt.NDArray[np.int64]:
    """``len(canonical JSON of the id) + 1`` for every pair missing somewhere, else 0."""
    costs = np.zeros(len(pairs.ids), dtype=np.int64)
    for index in np.flatnonzero(any_missing).tolist():
        costs[index] = len(encode_invarlock_string(pairs.ids[index]).encode("utf-8")) + 1
    return costs


def count_missing_id_bytes(pairs: Pairs, masks: Sequence[BoolArray]) -> int:
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
