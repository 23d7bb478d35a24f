"""What an evidence pack's consumers need of a run, read without holding its records.

A :class:`RunOutline` is built while a canonical run file streams past
(:class:`~sealeval.captured.run.RunReader`: every record validated and
hashed as it is read) and keeps only what ``report``, the pack's request
binding (``30-request.md`` §4) and ``verify``'s work budget use:

* the header (source, run id, identities) and the run digest;
* the record count and, when asked, the set of record ids (the report
  checks that its missing ids are ids of the runs);
* the case-set digest, when the policy pins one (seed rows are spilled to
  an unlinked temporary file and hashed in id order, as the streamed
  comparison does);
* the distinct input-projection configurations of the records (at most
  two are kept: one is all the binding check needs);
* per slice of the policy, how many records it selects.

Memory is bounded by the number of records (the ids, when kept), never by
their content. :meth:`RunOutline.of_run` gives the same facts for a
:class:`~sealeval.captured.run.Run` already in memory, so the consumers
treat both alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO, Final

from sealeval.canonical import frozen_canonical
from sealeval.captured.case_set import case_set_of_run
from sealeval.captured.comparison.table import RowSpill, spilled_case_set_digest
from sealeval.captured.errors import CapturedRunError
from sealeval.captured.intervals import seed_row
from sealeval.captured.policy import ComparisonPolicy
from sealeval.captured.run import (
    UNLIMITED,
    Limits,
    Record,
    Run,
    RunHeader,
    RunReader,
)
from sealeval.captured.run.document import paused_full_collections
from sealeval.captured.run.model import HeaderFacts

__all__ = ["RunOutline", "outline_run"]

#: Distinct projection configurations kept (one is all the binding check compares).
_MAX_PROJECTIONS: Final = 2


class _CaseRows:
    """The case rows (``{id, input, expected, metadata}``) of a run, spilled to disk.

    Rows go to the comparison's :class:`RowSpill` (an unlinked temporary file) as
    they stream past and are hashed back in id order, so the case-set digest
    never needs the records' content in memory.
    """

    def __init__(self) -> None:
        self._spill = RowSpill()
        self._ids: list[str] = []

    def add(self, record: Record) -> None:
        self._ids.append(record.id)
        self._spill.add(seed_row(record))

    def digest(self) -> str:
        """Return the digest of the case set: the rows in code-point order of their ids."""
        return spilled_case_set_digest(self._spill, self._ids)

    def close(self) -> None:
        self._spill.close()


@dataclass(frozen=True, slots=True, eq=False, repr=False, kw_only=True)
class RunOutline(HeaderFacts):
    """The facts of one run that a pack's consumers use, without its records.

    Attributes:
        header: the run's header.
        digest: the run digest (SHA-256 of the canonical bytes read).
        canonical_size: the canonical byte length.
        record_count: the number of records.
        ids: the record ids, or ``None`` when they were not kept.
        case_set_digest: the digest of the case set the run covers, or
            ``None`` when the policy pins none.
        projections: the canonical bytes of the distinct input-projection
            configurations of the records (at most two kept).
        unprojected: whether some record has no projection binding.
        slice_counts: per slice of the policy, the records it selects.
    """

    header: RunHeader
    digest: str
    canonical_size: int
    record_count: int
    ids: frozenset[str] | None
    case_set_digest: str | None
    projections: frozenset[bytes]
    unprojected: bool
    slice_counts: tuple[int, ...]

    def __repr__(self) -> str:
        """Show the record count and the digest only."""
        return f"RunOutline(records={self.record_count}, digest={self.digest!r})"

    def __len__(self) -> int:
        """Return the number of records."""
        return self.record_count

    def __contains__(self, record_id: object) -> bool:
        """Return whether ``record_id`` is the id of a record (see :meth:`has_id`)."""
        return isinstance(record_id, str) and self.has_id(record_id)

    def has_id(self, record_id: str) -> bool:
        """Return whether ``record_id`` is the id of a record (ids must have been kept)."""
        if self.ids is None:
            raise CapturedRunError("invalid_type", "ids")
        return record_id in self.ids

    def projections_equal(self, configuration: object) -> bool:
        """Return whether every record's projection configuration equals ``configuration``."""
        wanted = frozen_canonical(configuration, error=CapturedRunError)
        return not self.unprojected and all(item == wanted for item in self.projections)

    @classmethod
    def of_run(cls, run: Run, policy: ComparisonPolicy | None) -> RunOutline:
        """Return the outline of a run held in memory (same facts as :func:`outline_run`)."""
        builder = _Builder(policy, keep_ids=True, spill=False)
        for record in run.records:
            builder.add(record)
        pinned = policy is not None and policy.expected_case_set_digest is not None
        return builder.finish(
            run.header,
            run.digest,
            run.canonical_size,
            case_set=case_set_of_run(run).digest if pinned else None,
        )


class _Builder:
    """Accumulates an outline's facts record by record."""

    def __init__(self, policy: ComparisonPolicy | None, *, keep_ids: bool, spill: bool) -> None:
        self.slices = () if policy is None else policy.slices
        self.counts = [0] * len(self.slices)
        self.ids: list[str] = []
        self.keep_ids = keep_ids
        pinned = policy is not None and policy.expected_case_set_digest is not None
        self.spill = _CaseRows() if spill and pinned else None
        self.projections: set[bytes] = set()
        self.unprojected = False
        self.count = 0

    def add(self, record: Record) -> None:
        self.count += 1
        if self.keep_ids:
            self.ids.append(record.id)
        for number, item in enumerate(self.slices):
            if item.matches(record.metadata):
                self.counts[number] += 1
        binding = record.projection
        if binding is None:
            self.unprojected = True
        elif len(self.projections) < _MAX_PROJECTIONS:
            self.projections.add(
                frozen_canonical(binding.configuration.to_dict(), error=CapturedRunError)
            )
        if self.spill is not None:
            self.spill.add(record)

    def case_set(self) -> str | None:
        return None if self.spill is None else self.spill.digest()

    def close(self) -> None:
        if self.spill is not None:
            self.spill.close()
            self.spill = None

    def finish(
        self, header: RunHeader, digest: str, size: int, *, case_set: str | None = None
    ) -> RunOutline:
        try:
            case_set = self.case_set() if case_set is None else case_set
        finally:
            self.close()
        return RunOutline(
            header=header,
            digest=digest,
            canonical_size=size,
            record_count=self.count,
            ids=frozenset(self.ids) if self.keep_ids else None,
            case_set_digest=case_set,
            projections=frozenset(self.projections),
            unprojected=self.unprojected,
            slice_counts=tuple(self.counts),
        )


def outline_run(
    source: IO[bytes],
    *,
    policy: ComparisonPolicy | None,
    limits: Limits = UNLIMITED,
    keep_ids: bool = True,
) -> RunOutline:
    """Stream one canonical run (a binary handle at its first byte) into its outline.

    Every record is validated and hashed as it is read (the run's own checks:
    header, records, unique ids, likelihood bindings, canonical bytes,
    ``limits``); only the outline's facts stay in memory.

    Args:
        source: the run's bytes (canonical; anything else is refused).
        policy: the policy whose slices are counted and whose case-set pin
            is hashed (``None``: no slice, no case set).
        limits: the run limits (records, bytes).
        keep_ids: keep the set of record ids (the report's missing-id check).

    Raises:
        CapturedRunError: the run is invalid or not canonical.
    """
    builder = _Builder(policy, keep_ids=keep_ids, spill=True)
    try:
        with paused_full_collections():
            reader = RunReader(source, limits=limits)
            for record in reader:
                builder.add(record)
            summary = reader.summary
            header = reader.header
    except BaseException:
        builder.close()
        raise
    return builder.finish(header, summary.run_digest, summary.canonical_size)
