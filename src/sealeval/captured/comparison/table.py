"""Columnar run tables: what a comparison keeps of a streamed run (22-comparison.md §2-§4).

A :class:`RunTable` is built while the records of one run stream past
(:class:`~sealeval.captured.run.RunReader` over a canonical file, or any
iterable of records): every record's content is hashed and scored as it is
read, and only fixed-size data per record stays in memory:

* the id (its list position is its file position);
* three SHA-256 digests — canonical ``input``, ``expected`` and ``metadata``
  — which is what the pairing rule compares (first difference named);
* the error flag, slice membership (one byte per slice) and, per metric, a
  float64 value, an availability flag and, only where a scorer refused, the
  held-back refusal.

Projected records keep their two projection digests in a sparse map. The
seed rows (canonical ``{id, input, expected, metadata}``) that the scope
seeds and the pinned case-set digest hash *in id order* are spilled to an
unlinked temporary file and read back in pair order, so content is never
held in memory: about 260 bytes per record with two metrics and one slice,
the id included (``docs/scaling.md``), against ~1.5 KB for a held record
with a ~1.4 KB input.

Each side is scored on its own: a deterministic metric prepares the record's
own ``expected`` — equal on both sides once the pair passes the pairing rule,
which is checked before any held refusal is reported — so the values equal
the in-memory engine's, which prepares the baseline's once per pair.
Equivalence with :mod:`.pairing` is exact, including which refusal is
reported first: every per-record outcome is recorded per side and the first
one in pair order is chosen when the tables are paired (:func:`pair_tables`,
:func:`table_values`); the streaming tests pin this on the comparison vectors
and on seeded random pairs.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Final, TypeAlias

import numpy as np
import numpy.typing as npt

from sealeval import canonical
from sealeval.canonical import encode_invarlock_string
from sealeval.captured.case_set import CASE_SET_FORMAT
from sealeval.captured.comparison.model import (
    HASH_CHUNK,
    BoolArray,
    ComparisonError,
    IndexArray,
)
from sealeval.captured.comparison.pairing import (
    MetricValues,
    Pairs,
    ScopeHash,
    held_error,
    record_seed_row,
)
from sealeval.captured.errors import CapturedRunError
from sealeval.captured.policy import ComparisonPolicy, MetricScorer, PolicyMetric
from sealeval.captured.run import Record, RunHeader
from sealeval.captured.scorers import NormalizedNll, RecordedScore, ScorerError
from sealeval.errors import SealevalError

_DIGEST: Final = 32
_IDENTITY: Final = 3 * _DIGEST

_Positions: TypeAlias = npt.NDArray[np.int64]


def _value_digest(value: object) -> bytes:
    """SHA-256 identifying a frozen JSON value by its canonical bytes.

    A string is hashed as its UTF-8 text behind a ``0`` tag byte (string
    equality is canonical equality), any other value as its canonical bytes
    behind a ``1`` tag byte, so values of different types never collide.
    """
    if type(value) is str:
        return hashlib.sha256(b"\x00" + value.encode("utf-8", "surrogatepass")).digest()
    data = canonical.frozen_canonical(value, error=CapturedRunError)
    return hashlib.sha256(b"\x01" + data).digest()


def _metadata_digest(metadata: Mapping[str, str]) -> bytes:
    """SHA-256 of the metadata's members in key order (string values: equality is exact)."""
    text = ",".join(
        encode_invarlock_string(key) + ":" + encode_invarlock_string(metadata[key])
        for key in sorted(metadata)
    )
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


@dataclass(slots=True)
class _Column:
    """One metric's per-record outcome on one side (file order)."""

    present: bytearray  # 1: available output / score key present / facts present
    values: array[float]
    faults: dict[int, SealevalError] = field(default_factory=dict)  # scoring refusals
    bindings: dict[int, SealevalError] = field(default_factory=dict)  # nll binding refusals


class RowSpill:
    """Seed rows written to an unlinked temporary file, read back by position."""

    def __init__(self) -> None:
        """Open the unlinked file (mode 0600, the system temporary directory)."""
        self._file: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 - closed by close()
        self._buffer = bytearray()
        self._written = 0
        self.offsets = array("q")
        self.lengths = array("l")

    def add(self, row: bytes) -> None:
        """Append ``row`` (its file position is the number of rows added before)."""
        self.offsets.append(self._written + len(self._buffer))
        self.lengths.append(len(row))
        self._buffer += row
        if len(self._buffer) >= HASH_CHUNK:
            self._file.write(self._buffer)
            self._written += len(self._buffer)
            self._buffer.clear()

    def rows(self, positions: Iterable[int]) -> Iterator[bytes]:
        """Yield the rows at ``positions`` (file positions), in the order given."""
        if self._buffer:
            self._file.write(self._buffer)
            self._written += len(self._buffer)
            self._buffer.clear()
        self._file.flush()
        fd = self._file.fileno()
        offsets = self.offsets
        lengths = self.lengths
        for position in positions:
            length = lengths[position]
            row = os.pread(fd, length, offsets[position])
            if len(row) != length:  # pragma: no cover - our own unlinked file
                raise CapturedRunError("unreadable", "run")
            yield row

    def close(self) -> None:
        """Close (and so delete) the file."""
        self._file.close()


def spilled_case_set_digest(spill: RowSpill, ids: list[str]) -> str:
    """Return the case-set digest of spilled seed rows (``case_set_of_run``): rows in id order."""
    hasher = ScopeHash(b'{"cases":[')
    for row in spill.rows(_id_order(ids).tolist()):
        hasher.add(row)
    return hasher.seed(
        b'],"format":' + encode_invarlock_string(CASE_SET_FORMAT).encode("utf-8") + b"}\n"
    )


class RunTable:
    """The fixed-size columns of one run for one policy (see the module docstring).

    Build with :meth:`add` per record (file order), then :meth:`finish` with the
    run's header and digest. Close (or use as a context manager) to drop the
    spilled rows.
    """

    def __init__(
        self,
        policy: ComparisonPolicy,
        scorers: Sequence[MetricScorer],
        *,
        side: str,
        rows: bool,
    ) -> None:
        """Prepare empty columns; ``rows`` spills the seed rows (scope seeds, case set)."""
        self.side = side
        self.ids: list[str] = []
        self.identity = bytearray()
        self.projections: dict[int, tuple[str, str]] = {}
        self.errored = bytearray()
        self._slices = [tuple(item.where.items()) for item in policy.slices]
        self.members = [bytearray() for _ in self._slices]
        self._scorers = tuple(scorers)
        self._baseline = side == "baseline"
        self.columns = [_Column(bytearray(), array("d")) for _ in self._scorers]
        self.spill: RowSpill | None = RowSpill() if rows else None
        self.header: RunHeader | None = None
        self.digest = ""

    def __enter__(self) -> RunTable:
        """Return the table."""
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Drop the spilled rows."""
        self.close()

    def close(self) -> None:
        """Drop the spilled rows (idempotent)."""
        if self.spill is not None:
            self.spill.close()
            self.spill = None

    def __len__(self) -> int:
        """Return the number of records added."""
        return len(self.ids)

    def add(self, record: Record) -> None:
        """Hash, classify and score one record (file order; ids are unique in a valid run)."""
        position = len(self.ids)
        self.ids.append(record.id)
        self.identity += _value_digest(record.input)
        self.identity += _value_digest(record.expected)
        self.identity += _metadata_digest(record.metadata)
        projection = record.projection
        if projection is not None:
            self.projections[position] = (
                projection.configuration_digest,
                projection.source_input_digest,
            )
        errored = record.error is not None
        self.errored.append(errored)
        metadata = record.metadata
        for members, conditions in zip(self.members, self._slices, strict=True):
            members.append(all(metadata.get(key) == value for key, value in conditions))
        if self.spill is not None:
            self.spill.add(record_seed_row(record))
        for scorer, column in zip(self._scorers, self.columns, strict=True):
            self._score(scorer, column, record, position, errored)

    def _score(
        self,
        scorer: MetricScorer,
        column: _Column,
        record: Record,
        position: int,
        errored: bool,
    ) -> None:
        value = 0.0
        if isinstance(scorer, RecordedScore):
            scores = record.scores
            present = scorer.score_key in scores
            if present and not errored:
                try:
                    value = scorer.value(scores)
                except ScorerError as error:
                    column.faults[position] = error
        elif isinstance(scorer, NormalizedNll):
            facts = record.likelihood
            check = scorer.check_baseline if self._baseline else scorer.check_subject
            try:
                check(facts)
            except ScorerError as error:
                column.bindings[position] = error
            present = facts is not None
            if present and not errored:
                assert facts is not None
                try:
                    value = scorer.value(facts)
                except ScorerError as error:
                    column.faults[position] = error
        else:
            output = record.output
            present = scorer.is_available(output)
            if present and not errored:
                try:
                    reference = scorer.prepare(record.expected)
                except ScorerError as error:
                    column.faults[position] = error
                else:
                    value = reference.score(output)
        column.present.append(present)
        column.values.append(value)

    def finish(self, header: RunHeader, digest: str) -> None:
        """Record the run's header and digest (after the last record)."""
        self.header = header
        self.digest = digest

    def case_set_digest(self) -> str:
        """Return the digest of the case set this run covers (``case_set_of_run``)."""
        assert self.spill is not None
        return spilled_case_set_digest(self.spill, self.ids)


def _id_order(ids: list[str]) -> _Positions:
    """Return the file positions of ``ids`` in code-point order of the ids."""
    keys = np.empty(len(ids), dtype=object)
    keys[:] = ids
    order: _Positions = np.argsort(keys, kind="stable").astype(np.int64)
    return order


def _mismatch(left: RunTable, right: RunTable, lpos: int, rpos: int) -> None:
    where = f"subject.records[{rpos}]."
    left_projection = left.projections.get(lpos)
    right_projection = right.projections.get(rpos)
    if (left_projection is not None or right_projection is not None) and (
        left_projection != right_projection
    ):
        raise ComparisonError("projection_mismatch", where + "context.input_projection")
    base_l = lpos * _IDENTITY
    base_r = rpos * _IDENTITY
    for offset, code, member in (
        (0, "input_changed", "input"),
        (_DIGEST, "expected_changed", "expected"),
        (2 * _DIGEST, "metadata_changed", "metadata"),
    ):
        start_l = base_l + offset
        start_r = base_r + offset
        if (
            left.identity[start_l : start_l + _DIGEST]
            != right.identity[start_r : start_r + _DIGEST]
        ):
            raise ComparisonError(code, where + member)


@dataclass(slots=True)
class TablePairs:
    """Two paired tables: the engine's pairs plus the file positions of each pair."""

    pairs: Pairs
    left_positions: _Positions
    right_positions: _Positions


def pair_tables(
    baseline: RunTable, subject: RunTable, policy: ComparisonPolicy, seeded: bool
) -> TablePairs:
    """Pair two tables exactly like :func:`~.pairing.pair_records` pairs two runs."""
    if len(baseline.ids) != len(subject.ids):
        raise ComparisonError("record_ids_differ", "subject")
    # Ids are unique within a run (the reader refuses duplicates): sorting both sides
    # (code-point order, no id -> position dictionaries) pairs them, or shows they differ.
    left_positions = _id_order(baseline.ids)
    right_positions = _id_order(subject.ids)
    ids = [baseline.ids[position] for position in left_positions.tolist()]
    if any(
        subject.ids[position] != record_id
        for position, record_id in zip(right_positions.tolist(), ids, strict=True)
    ):
        raise ComparisonError("record_ids_differ", "subject")
    left_identity = baseline.identity
    right_identity = subject.identity
    left_projected = baseline.projections
    right_projected = subject.projections
    projected = bool(left_projected or right_projected)
    for lpos, rpos in zip(left_positions.tolist(), right_positions.tolist(), strict=True):
        if projected and (lpos in left_projected or rpos in right_projected):
            _mismatch(baseline, subject, lpos, rpos)
        start_l = lpos * _IDENTITY
        start_r = rpos * _IDENTITY
        if (
            left_identity[start_l : start_l + _IDENTITY]
            != right_identity[start_r : start_r + _IDENTITY]
        ):
            _mismatch(baseline, subject, lpos, rpos)
    errored_l = np.frombuffer(baseline.errored, dtype=np.uint8)[left_positions]
    errored_r = np.frombuffer(subject.errored, dtype=np.uint8)[right_positions]
    slice_members = [np.frombuffer(members, dtype=np.uint8) for members in baseline.members]
    scopes: list[IndexArray | None] = [None]
    for members in slice_members:
        scopes.append(np.flatnonzero(members[left_positions]).astype(np.intp))
    seeds: list[str | None] = [None] * len(scopes)
    if seeded:
        assert baseline.spill is not None
        hashes = [ScopeHash() for _ in scopes]
        order = left_positions.tolist()
        for lpos, row in zip(order, baseline.spill.rows(order), strict=True):
            hashes[0].add(row)
            for number, members in enumerate(slice_members):
                if members[lpos]:
                    hashes[number + 1].add(row)
        seeds = [scope.seed() for scope in hashes]
    pairs = Pairs(
        ids=ids,
        baseline=[],
        subject=[],
        baseline_index={},  # positions are in left/right_positions (errors name them)
        subject_index={},
        errored=bytearray((errored_l | errored_r).tobytes()),
        scopes=scopes,
        seeds=seeds,
    )
    return TablePairs(pairs, left_positions, right_positions)


def _first(
    faults: dict[int, SealevalError],
    positions: _Positions,
    candidates: BoolArray,
) -> tuple[int, int, SealevalError] | None:
    """Find the first pair (pair order, among ``candidates``) whose record has a fault.

    Returns ``(pair number, file position, fault)``.
    """
    if not faults:
        return None
    faulted = np.fromiter(faults, dtype=np.int64, count=len(faults))
    hits = np.flatnonzero(np.isin(positions, faulted) & candidates)
    if not hits.size:
        return None
    pair = int(hits[0])
    position = int(positions[pair])
    return pair, position, faults[position]


def _first_of_sides(
    columns: tuple[_Column, _Column],
    paired: TablePairs,
    candidates: BoolArray,
    where: str,
    member: str | None,
    *,
    bindings: bool = False,
) -> SealevalError | None:
    """Find the first refusal in pair order, the baseline's before the subject's in a pair.

    ``member`` ``None`` names the refusal's own field (binding refusals).
    """
    found: list[tuple[int, int, str, int, SealevalError]] = []
    for order, side, column, positions in (
        (0, "baseline", columns[0], paired.left_positions),
        (1, "subject", columns[1], paired.right_positions),
    ):
        hit = _first(column.bindings if bindings else column.faults, positions, candidates)
        if hit is not None:
            pair, position, fault = hit
            found.append((pair, order, side, position, fault))
    if not found:
        return None
    _pair, _order, side, position, fault = min(found, key=lambda item: (item[0], item[1]))
    name = fault.field if member is None else member
    return held_error(fault, f"{where}.{side}.records[{position}].{name}")


def table_values(
    number: int,
    metric: PolicyMetric,
    scorer: MetricScorer,
    tables: tuple[RunTable, RunTable],
    paired: TablePairs,
) -> MetricValues:
    """One metric's :class:`~.pairing.MetricValues` in pair order, with the same held refusal."""
    baseline, subject = tables
    left_positions = paired.left_positions
    right_positions = paired.right_positions
    columns = (baseline.columns[number], subject.columns[number])
    where = f"metrics[{metric.index}]"
    errored = np.frombuffer(paired.pairs.errored, dtype=np.uint8).astype(np.bool_)
    present_l = np.frombuffer(columns[0].present, dtype=np.uint8)[left_positions]
    present_r = np.frombuffer(columns[1].present, dtype=np.uint8)[right_positions]
    missing = errored | ~(present_l & present_r).astype(np.bool_)
    scored = ~missing
    left_values = np.frombuffer(columns[0].values, dtype=np.float64)[left_positions]
    right_values = np.frombuffer(columns[1].values, dtype=np.float64)[right_positions]
    left_values[missing] = 0.0
    right_values[missing] = 0.0
    error: SealevalError | None = None
    if isinstance(scorer, RecordedScore):
        for side, table in (("baseline", baseline), ("subject", subject)):
            assert table.header is not None
            try:
                scorer.check_provenance(table.header.score_provenance)
            except ScorerError as held:
                error = held_error(held, f"{where}.{side}.score_provenance")
                break
        if error is None:
            error = _first_of_sides(columns, paired, scored, where, "scores")
    elif isinstance(scorer, NormalizedNll):
        everyone = np.ones(len(left_positions), dtype=np.bool_)
        error = _first_of_sides(columns, paired, everyone, where, None, bindings=True)
        if error is None:
            error = _first_of_sides(columns, paired, scored, where, "likelihood")
    else:
        found = _first(columns[0].faults, left_positions, scored)
        if found is not None:
            _pair, position, fault = found
            error = held_error(fault, f"{where}.baseline.records[{position}].expected")
    values = MetricValues(
        missing=bytearray(missing.astype(np.uint8).tobytes()),
        baseline=array("d", left_values.tobytes()),
        subject=array("d", right_values.tobytes()),
    )
    values.error = error
    return values
