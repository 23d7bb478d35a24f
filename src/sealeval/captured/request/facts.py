"""A large canonical run read once for its facts, never held: :class:`RunFacts`.

``evaluate`` needs, per side, the run's header, digest, record count and
canonical size (normalization, pack sizes, bindings), the case-set digest
when the policy pins one, the run's bytes for the pack and a source for the
streamed comparison (:func:`~sealeval.captured.comparison.compare_run_files`).
:func:`read_run_facts` gathers the facts in one streamed pass
(:class:`~sealeval.captured.run.RunReader`: every record validated and hashed
as read) and keeps the opened file descriptor, so every later pass reads the
*same* file (never re-opened by name), by position (``pread``), in bounded
chunks. A file changed after the pass is caught where its bytes are used: the
comparison report binds the digest it read and the pack writer re-hashes
what it copied, both checked against :attr:`RunFacts.digest`.
"""

from __future__ import annotations

import io
import os
import weakref
from collections.abc import Iterator
from typing import IO, Final

from sealeval.captured.comparison.table import RunTable
from sealeval.captured.errors import CapturedRunError
from sealeval.captured.policy import ComparisonPolicy
from sealeval.captured.run import Limits, Run, RunHeader, RunReader
from sealeval.captured.run.document import paused_full_collections

__all__ = ["CHUNK_BYTES", "RunFacts", "read_run_facts", "run_source"]

#: Bytes per read when a run's bytes are copied or re-read.
CHUNK_BYTES: Final = 1_048_576


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


class RunFacts:
    """What ``evaluate`` needs of a canonical run it never holds.

    Construct with :func:`read_run_facts`. The descriptor stays open until
    :meth:`close` (or until the object is collected).

    Attributes:
        header: the run header (validated).
        digest: the run digest (SHA-256 of exactly the bytes read).
        record_count: the number of records.
        canonical_size: the run's byte length (its canonical size).
    """

    __slots__ = (
        "__weakref__",
        "_closer",
        "_fd",
        "canonical_size",
        "digest",
        "header",
        "record_count",
    )

    def __init__(
        self, fd: int, header: RunHeader, digest: str, record_count: int, canonical_size: int
    ) -> None:
        """Keep ``fd`` (owned from now on) and the facts of its one streamed pass."""
        self._fd = fd
        self.header = header
        self.digest = digest
        self.record_count = record_count
        self.canonical_size = canonical_size
        self._closer = weakref.finalize(self, os.close, fd)

    def __repr__(self) -> str:
        """Show the run digest only."""
        return f"RunFacts(digest={self.digest!r})"

    def open(self) -> IO[bytes]:
        """Return a fresh binary reader of the run's bytes from the first byte (own offset)."""
        return io.BufferedReader(_PositionalReader(self._fd), buffer_size=CHUNK_BYTES)

    def iter_canonical(self) -> Iterator[bytes]:
        """Yield the run's bytes in chunks of at most :data:`CHUNK_BYTES` (exactly its size)."""
        offset = 0
        while offset < self.canonical_size:
            chunk = os.pread(self._fd, min(CHUNK_BYTES, self.canonical_size - offset), offset)
            if not chunk:  # shrunk since the pass: the copy's size check refuses it
                return
            offset += len(chunk)
            yield chunk

    def case_set_digest(self, policy: ComparisonPolicy) -> str:
        """Return the digest of the case set this run covers (a second streamed pass).

        The seed rows are spilled to an unlinked temporary file and hashed in
        id order (:meth:`~sealeval.captured.comparison.table.RunTable.case_set_digest`);
        nothing is scored.
        """
        with self.open() as handle, RunTable(policy, (), side="run", rows=True) as table:
            reader = RunReader(handle)
            with paused_full_collections():
                for record in reader:
                    table.add(record)
            if reader.summary.run_digest != self.digest:
                raise CapturedRunError("case_set_mismatch", "run")
            return table.case_set_digest()

    def close(self) -> None:
        """Close the descriptor (idempotent)."""
        self._closer()


def read_run_facts(fd: int, *, limits: Limits) -> RunFacts:
    """Stream a canonical run from ``fd`` once; return its facts (``fd`` is then owned).

    The descriptor is read by position from offset 0 (its own offset is not
    moved). On any refusal the descriptor is left open for the caller.

    Raises:
        CapturedRunError: as :class:`~sealeval.captured.run.RunReader`
            (``not_canonical`` for strict JSON that is not canonical).
    """
    with _PositionalReader(fd) as raw, io.BufferedReader(raw, buffer_size=CHUNK_BYTES) as handle:
        reader = RunReader(handle, limits=limits)
        with paused_full_collections():
            for _record in reader:
                pass
        summary = reader.summary
        header = reader.header
    return RunFacts(fd, header, summary.run_digest, summary.record_count, summary.canonical_size)


def run_source(run: Run | RunFacts) -> IO[bytes]:
    """Return a binary reader of a side's canonical bytes (for a streamed comparison).

    A :class:`RunFacts` re-reads its open file; a held
    :class:`~sealeval.captured.run.Run` is encoded chunk by chunk (its bytes
    are never held whole).
    """
    if isinstance(run, RunFacts):
        return run.open()
    return io.BufferedReader(_ChunkReader(iter(run.iter_canonical())), buffer_size=CHUNK_BYTES)
