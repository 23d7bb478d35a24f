"""Streaming run output: :class:`RunEncoder`, :class:`RunWriter` and :func:`write_run`.

The encoder builds a canonical run record by record while hashing it, so memory
does not grow with the text already written; plain ``dict`` records take the
fast path. Files are published atomically, never replacing anything, mode 0600.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from typing import Any

from sealeval._fs import ExclusiveWriter, translated
from sealeval.captured.errors import CapturedRunError
from sealeval.captured.run.document import Run, RunSummary
from sealeval.captured.run.fast import plain_record_bytes
from sealeval.captured.run.model import (
    UNLIMITED,
    Limits,
    Record,
    RunHeader,
    check_record_likelihood,
    rebased_record,
    record_chunk,
)
from sealeval.errors import OutputError

# ---------------------------------------------------------------------------
# Streaming: encoder, writer, reader


class RunEncoder:
    """Encode and hash a canonical run one record at a time (pure, no I/O).

    ``add`` validates a record against the header (likelihood bindings, id
    uniqueness, limits) and returns the bytes to append — the run prefix
    before the first record, a ``,`` before later ones. ``finish`` returns the
    suffix. The concatenation is byte-identical to :meth:`Run.to_canonical`
    of the same run and :attr:`digest` equals its digest. Memory: one set of
    record ids (at most 128 code points each) and one record at a time.
    After any refusal the encoder is unusable (``invalid_state``).
    """

    def __init__(self, header: RunHeader, *, limits: Limits = UNLIMITED) -> None:
        """Start a run with a validated header."""
        if not isinstance(header, RunHeader):
            raise CapturedRunError("invalid_type", "header")
        self._header = header
        self._limits = limits
        self._prefix, self._suffix = header.canonical_parts()
        self._hash = hashlib.sha256()
        self._ids: set[str] = set()
        self._size = 0
        self._state = "open"

    @property
    def header(self) -> RunHeader:
        """The run header."""
        return self._header

    @property
    def record_count(self) -> int:
        """Records accepted so far."""
        return len(self._ids)

    def _emit(self, chunk: bytes) -> bytes:
        self._size += len(chunk)
        self._limits.check_size(self._size)
        self._hash.update(chunk)
        return chunk

    def add(self, record: Record | Mapping[str, Any]) -> bytes:
        """Validate one record and return the bytes that append it to the run.

        Mappings are built with make_run semantics (:meth:`Record.from_mapping`).
        A plain ``dict`` of plain JSON values (as ``json.loads`` makes them)
        takes the fast path, :func:`plain_record_bytes`: the same bytes and
        the same refusals, without building a :class:`Record`.
        """
        if self._state != "open":
            raise CapturedRunError("invalid_state", "encoder")
        try:
            return self._accept(record)
        except BaseException:
            self._state = "failed"
            raise

    def _accept(self, record: Record | Mapping[str, Any]) -> bytes:
        position = len(self._ids)
        limit = self._limits.max_records
        if limit is not None and position >= limit:
            raise CapturedRunError("too_many_records", "records")
        if type(record) is dict:
            plain = plain_record_bytes(record)
            if plain is not None:
                return self._append(plain[0], plain[1])
        with rebased_record(position):
            typed = Record.from_mapping(record)
        check_record_likelihood(typed, self._header, f"records[{position}]")
        if typed.id in self._ids:
            raise CapturedRunError("duplicate_id", f"records[{position}].id")
        chunk = (self._prefix if position == 0 else b",") + record_chunk(typed)
        self._emit(chunk)
        self._ids.add(typed.id)
        return chunk

    def _append(self, record_id: str, data: bytes, *, count: bool = False) -> bytes:
        """Append a record that :func:`plain_record_bytes` accepted (its id and bytes).

        The record-count limit is checked first when ``count`` (else by the caller).
        """
        position = len(self._ids)
        limit = self._limits.max_records
        if count and limit is not None and position >= limit:
            raise CapturedRunError("too_many_records", "records")
        if record_id in self._ids:
            raise CapturedRunError("duplicate_id", f"records[{position}].id")
        chunk = (self._prefix if position == 0 else b",") + data
        self._emit(chunk)
        self._ids.add(record_id)
        return chunk

    def _add_plain_bytes(self, record_id: str, data: bytes) -> bytes:
        """Append ``plain_record_bytes(record)`` computed elsewhere (a worker process).

        Internal: the pair must come from :func:`plain_record_bytes` (which
        accepted the record); the run-level checks (count limit, unique id,
        size limit) happen here exactly as in :meth:`add`.
        """
        if self._state != "open":
            raise CapturedRunError("invalid_state", "encoder")
        try:
            return self._append(record_id, data, count=True)
        except BaseException:
            self._state = "failed"
            raise

    def finish(self) -> bytes:
        """Close the record list and return the suffix (final LF included)."""
        if self._state != "open":
            raise CapturedRunError("invalid_state", "encoder")
        if not self._ids:
            self._state = "failed"
            raise CapturedRunError("no_records", "records")
        try:
            self._emit(self._suffix)
        except BaseException:
            self._state = "failed"
            raise
        self._state = "finished"
        return self._suffix

    @property
    def summary(self) -> RunSummary:
        """Digest, count and size; available after :meth:`finish`."""
        if self._state != "finished":
            raise CapturedRunError("invalid_state", "encoder")
        return RunSummary(
            run_digest="sha256:" + self._hash.hexdigest(),
            record_count=len(self._ids),
            canonical_size=self._size,
        )


class _ExclusiveFile:
    """``sealeval._fs.ExclusiveWriter`` with the shared ``OutputError`` codes.

    A temporary file beside the destination, hard-linked into place on
    publish; the destination's folder chain is opened without following
    symlinks (``unsafe_destination``), the name must not exist.
    """

    def __init__(self, destination: str | os.PathLike[str], mode: int) -> None:
        with translated(OutputError, "output", default="output_unwritable"):
            self._writer: ExclusiveWriter | None = ExclusiveWriter(destination, mode=mode)

    def write(self, data: bytes) -> None:
        if self._writer is None:
            raise CapturedRunError("invalid_state", "output")
        with translated(OutputError, "output", default="output_unwritable"):
            self._writer.write(data)

    def publish(self) -> None:
        writer, self._writer = self._writer, None
        assert writer is not None  # write() refuses a discarded file first
        with translated(OutputError, "output", default="output_unwritable"):
            writer.publish()

    def discard(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.discard()


class RunWriter:
    """Write a canonical run file record by record, hashing the same bytes.

    The bytes go to a fresh temporary file beside ``destination`` (mode
    0600); :meth:`finish` appends the suffix, flushes, and hard-links the file
    into place, refusing an existing destination (atomic, no clobber).
    Leaving the ``with`` block without :meth:`finish` — or any refusal —
    discards the temporary file; nothing is published. The file is
    byte-identical to :func:`write_run` of the same run.

    Example::

        header = RunHeader(source=Source("acme", "1.0"), run_id="r1", artifact_digest=digest)
        with RunWriter(path, header) as writer:
            for row in rows:
                writer.add({"id": row.id, "input": row.prompt, "expected": row.ref,
                            "output": row.answer})
            summary = writer.finish()
    """

    def __init__(
        self,
        destination: str | os.PathLike[str],
        header: RunHeader,
        *,
        limits: Limits = UNLIMITED,
        mode: int = 0o600,
    ) -> None:
        """Validate the header and open the temporary file."""
        self._encoder = RunEncoder(header, limits=limits)
        self._file = _ExclusiveFile(destination, mode)
        self._summary: RunSummary | None = None

    def __enter__(self) -> RunWriter:
        """Return the writer."""
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Discard the temporary file unless :meth:`finish` succeeded."""
        if self._summary is None:
            self.abort()

    @property
    def record_count(self) -> int:
        """Records written so far."""
        return self._encoder.record_count

    def add(self, record: Record | Mapping[str, Any]) -> None:
        """Validate and append one record (see :meth:`RunEncoder.add`)."""
        try:
            chunk = self._encoder.add(record)
        except BaseException:
            self.abort()
            raise
        self._file.write(chunk)

    def _add_plain_bytes(self, record_id: str, data: bytes) -> None:
        """Append a record encoded by :func:`plain_record_bytes` elsewhere (internal)."""
        try:
            chunk = self._encoder._add_plain_bytes(record_id, data)
        except BaseException:
            self.abort()
            raise
        self._file.write(chunk)

    def finish(self) -> RunSummary:
        """Append the suffix, publish the file and return its digest, count and size."""
        try:
            self._file.write(self._encoder.finish())
            self._file.publish()
        except BaseException:
            self.abort()
            raise
        self._summary = self._encoder.summary
        return self._summary

    def abort(self) -> None:
        """Discard everything written; safe to call more than once."""
        self._file.discard()


def write_run(run: Run, destination: str | os.PathLike[str], *, limits: Limits = UNLIMITED) -> str:
    """Write ``canonical_bytes(run)`` with atomic no-clobber publication (mode 0600).

    Memory stays at one record's bytes. Returns the run digest, which is
    also the SHA-256 of the file.

    Raises:
        CapturedRunError: ``invalid_type``, ``too_many_records``, ``too_large``
            (limits).
        OutputError: ``output_exists``, ``output_parent_missing``,
            ``output_unwritable``.
    """
    if not isinstance(run, Run):
        raise CapturedRunError("invalid_type", "run")
    limits.check_count(len(run.records))
    limits.check_size(run.canonical_size)
    target = _ExclusiveFile(destination, 0o600)
    try:
        for chunk in run.iter_canonical():
            target.write(chunk)
        target.publish()
    except BaseException:
        target.discard()
        raise
    return run.digest
