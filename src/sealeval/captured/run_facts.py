"""The facts of a canonical run read once, never held: :class:`RunFacts`.

A :class:`RunFacts` is built while a canonical run streams past
(:class:`~sealeval.captured.run.RunReader`: every record validated and
hashed as it is read) and keeps only what ``evaluate``, ``verify``,
``report`` and the request binding (``30-request.md`` §4) use of a run whose
records are not held:

* the header (source, run id, identities), the run digest, the record count
  and the canonical size;
* when asked, the set of record ids (the report checks that its missing ids
  are ids of the runs);
* the case-set digest, when the policy pins one (seed rows are spilled to
  an unlinked temporary file and hashed in id order, as the streamed
  comparison does);
* the distinct input-projection configurations of the records (at most
  two are kept: one is all the binding check needs);
* per slice of the policy, how many records it selects;
* when read from a file descriptor, that descriptor: every later pass
  (:meth:`RunFacts.open`, :meth:`RunFacts.iter_canonical`) reads the *same*
  file (never re-opened by name), by position (``pread``), in bounded chunks.
  A file changed after the pass is caught where its bytes are used: the
  comparison report binds the digest it read and the pack writer re-hashes
  what it copied, both checked against :attr:`RunFacts.digest`.

Memory is bounded by the number of records (the ids, when kept), never by
their content. :meth:`RunFacts.of_run` gives the same facts for a
:class:`~sealeval.captured.run.Run` already in memory, so the consumers
treat both alike.
"""

from __future__ import annotations

import io
import os
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
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

__all__ = ["CHUNK_BYTES", "RunFacts", "read_run_facts", "run_source"]

#: Bytes per read when a run's bytes are copied or re-read.
CHUNK_BYTES: Final = 1_048_576
#: Distinct projection configurations kept (one is all the binding check compares).
_MAX_PROJECTIONS: Final = 2


class _PositionalReader(io.RawIOBase):
    """A read-only raw stream over a shared descriptor with its own offset (``pread``)."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd
        self._offset = 0

    def readable(self) -> bool:
        """Return ``True``: the stream is readable."""
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        """Read at this stream's own offset."""
        view = memoryview(buffer).cast("B")
        data = os.pread(self._fd, len(view), self._offset)
        view[: len(data)] = data
        self._offset += len(data)
        return len(data)


class _ChunkReader(io.RawIOBase):
    """A read-only raw stream over an iterator of byte chunks."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        super().__init__()
        self._chunks = chunks
        self._pending = b""

    def readable(self) -> bool:
        """Return ``True``: the stream is readable."""
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        """Copy the next bytes of the chunks (0 at the end)."""
        view = memoryview(buffer).cast("B")
        while not self._pending:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._pending = chunk
        size = min(len(view), len(self._pending))
        view[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size


def _positional(fd: int) -> IO[bytes]:
    return io.BufferedReader(_PositionalReader(fd), buffer_size=CHUNK_BYTES)


class _Descriptor:
    """An owned file descriptor, closed once (explicitly or when collected)."""

    __slots__ = ("__weakref__", "closer", "fd")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.closer = weakref.finalize(self, os.close, fd)


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
class RunFacts(HeaderFacts):
    """The facts of one canonical run, without its records.

    Construct with :func:`read_run_facts` (streamed) or :meth:`of_run` (a
    held run). Read from a descriptor, the facts keep it open until
    :meth:`close` (or until the object is collected).

    Attributes:
        header: the run's header (validated).
        digest: the run digest (SHA-256 of exactly the canonical bytes read).
        canonical_size: the canonical byte length.
        record_count: the number of records.
        ids: the record ids, or ``None`` when they were not kept.
        case_set_digest: the digest of the case set the run covers, or
            ``None`` when the policy read with pins none (see
            :meth:`case_set_for`).
        projections: the canonical bytes of the distinct input-projection
            configurations of the records (at most two kept).
        unprojected: whether some record has no projection binding.
        slice_counts: per slice of the policy read with, the records it selects.
    """

    header: RunHeader
    digest: str
    canonical_size: int
    record_count: int
    ids: frozenset[str] | None = None
    case_set_digest: str | None = None
    projections: frozenset[bytes] = frozenset()
    unprojected: bool = False
    slice_counts: tuple[int, ...] = ()
    _source: _Descriptor | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        """Show the record count and the digest only."""
        return f"RunFacts(records={self.record_count}, digest={self.digest!r})"

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

    @property
    def rereadable(self) -> bool:
        """Whether the run's bytes can be read again (read from a descriptor, still open)."""
        return self._source is not None and self._source.closer.alive

    def _fd(self) -> int:
        if not self.rereadable:
            raise CapturedRunError("invalid_type", "run")
        assert self._source is not None
        return self._source.fd

    def open(self) -> IO[bytes]:
        """Return a fresh binary reader of the run's bytes from the first byte (own offset).

        Raises:
            CapturedRunError: ``invalid_type`` (field ``run``) when the facts
                keep no open descriptor.
        """
        return _positional(self._fd())

    def iter_canonical(self) -> Iterator[bytes]:
        """Yield the run's bytes in chunks of at most :data:`CHUNK_BYTES` (exactly its size)."""
        fd = self._fd()
        offset = 0
        while offset < self.canonical_size:
            chunk = os.pread(fd, min(CHUNK_BYTES, self.canonical_size - offset), offset)
            if not chunk:  # shrunk since the pass: the copy's size check refuses it
                return
            offset += len(chunk)
            yield chunk

    def case_set_for(self, policy: ComparisonPolicy) -> str:
        """Return the digest of the case set this run covers.

        The digest read with the facts when there is one; otherwise a second
        streamed pass over the kept descriptor (seed rows spilled to an
        unlinked temporary file and hashed in id order; nothing is scored).

        Raises:
            CapturedRunError: ``case_set_mismatch`` when the bytes re-read
                are not the run's; ``invalid_type`` when nothing can be re-read.
        """
        if self.case_set_digest is not None:
            return self.case_set_digest
        with self.open() as handle:
            builder = _Builder(policy, keep_ids=False, case_set=True)
            try:
                reader = RunReader(handle)
                with paused_full_collections():
                    for record in reader:
                        builder.add(record)
                if reader.summary.run_digest != self.digest:
                    raise CapturedRunError("case_set_mismatch", "run")
                digest = builder.case_set()
            finally:
                builder.close()
        assert digest is not None
        return digest

    def close(self) -> None:
        """Close the kept descriptor, if any (idempotent)."""
        if self._source is not None:
            self._source.closer()

    @classmethod
    def of_canonical_file(cls, run: Run, fd: int) -> RunFacts:
        """Return the facts of a held run whose open file ``fd`` holds exactly its canonical bytes.

        Only for a caller that read ``run`` whole from ``fd`` and checked that
        those bytes are ``run.canonical_size`` long and hash to
        ``run.digest``: the facts own ``fd``, and :meth:`iter_canonical`
        copies the file (by position) instead of re-encoding the run; a file
        changed since is caught by whoever checks the copy's digest. No slice
        count, id or case set is computed (a copy source needs none).
        """
        return cls(
            header=run.header,
            digest=run.digest,
            canonical_size=run.canonical_size,
            record_count=len(run.records),
            _source=_Descriptor(fd),
        )

    @classmethod
    def of_run(cls, run: Run, policy: ComparisonPolicy | None) -> RunFacts:
        """Return the facts of a run held in memory (same facts as :func:`read_run_facts`)."""
        builder = _Builder(policy, keep_ids=True, case_set=False)
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
    """Accumulates a run's facts record by record."""

    def __init__(self, policy: ComparisonPolicy | None, *, keep_ids: bool, case_set: bool) -> None:
        self.slices = () if policy is None else policy.slices
        self.counts = [0] * len(self.slices)
        self.ids: list[str] = []
        self.keep_ids = keep_ids
        self.spill = _CaseRows() if case_set else None
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
        self,
        header: RunHeader,
        digest: str,
        size: int,
        *,
        case_set: str | None = None,
        source: _Descriptor | None = None,
    ) -> RunFacts:
        try:
            case_set = self.case_set() if case_set is None else case_set
        finally:
            self.close()
        return RunFacts(
            header=header,
            digest=digest,
            canonical_size=size,
            record_count=self.count,
            ids=frozenset(self.ids) if self.keep_ids else None,
            case_set_digest=case_set,
            projections=frozenset(self.projections),
            unprojected=self.unprojected,
            slice_counts=tuple(self.counts),
            _source=source,
        )


def read_run_facts(
    source: int | IO[bytes],
    *,
    policy: ComparisonPolicy | None = None,
    limits: Limits = UNLIMITED,
    keep_ids: bool = False,
) -> RunFacts:
    """Stream one canonical run once and return its facts.

    Every record is validated and hashed as it is read (the run's own checks:
    header, records, unique ids, likelihood bindings, canonical bytes,
    ``limits``); only the facts stay in memory.

    Args:
        source: a file descriptor, read by position from offset 0 (its own
            offset is not moved) and, on success, owned by the facts (kept
            open for later passes; on a refusal it is left open for the
            caller); or a binary handle at the run's first byte, read once
            and not kept.
        policy: the policy whose slices are counted and whose case-set pin
            is hashed (``None``: no slice, no case set).
        limits: the run limits (records, bytes).
        keep_ids: keep the set of record ids (the report's missing-id check).

    Raises:
        CapturedRunError: the run is invalid or not canonical (as
            :class:`~sealeval.captured.run.RunReader`).
    """
    pinned = policy is not None and policy.expected_case_set_digest is not None
    builder = _Builder(policy, keep_ids=keep_ids, case_set=pinned)
    try:
        handle = _positional(source) if isinstance(source, int) else source
        try:
            with paused_full_collections():
                reader = RunReader(handle, limits=limits)
                for record in reader:
                    builder.add(record)
                summary = reader.summary
                header = reader.header
        finally:
            if isinstance(source, int):
                handle.close()
    except BaseException:
        builder.close()
        raise
    kept = _Descriptor(source) if isinstance(source, int) else None
    return builder.finish(header, summary.run_digest, summary.canonical_size, source=kept)


def run_source(run: Run | RunFacts) -> IO[bytes]:
    """Return a binary reader of a side's canonical bytes (for a streamed comparison).

    A :class:`RunFacts` re-reads its open file; a held
    :class:`~sealeval.captured.run.Run` is encoded chunk by chunk (its bytes
    are never held whole).
    """
    if isinstance(run, RunFacts):
        return run.open()
    return io.BufferedReader(_ChunkReader(iter(run.iter_canonical())), buffer_size=CHUNK_BYTES)
