"""Streaming run input: :class:`RunReader` and :func:`read_canonical_run`.

The reader walks the records of a canonical run file one at a time, checking
the canonical prefix, every record and the tail, so a large run is never held
as one decoded document.
"""

from __future__ import annotations

import codecs
import hashlib
import os
import re
from collections.abc import Iterator
from typing import IO, Any, Final

from sealeval._validate import check_closed
from sealeval.canonical import JSONDecodeError, decode, scan_raw
from sealeval.captured.errors import CapturedRunError
from sealeval.captured.likelihood import (
    LikelihoodFacts,
    check_input,
    check_reference,
    check_service,
    check_source,
    check_tail,
)
from sealeval.captured.run.document import (
    Run,
    RunSummary,
    canonical_record,
    header_from_document,
    open_run_file,
    parse_run,
    paused_full_collections,
    read_run,
)
from sealeval.captured.run.model import (
    COMPAT_MAX_BYTES,
    TAIL_REQUIRED,
    UNLIMITED,
    Limits,
    Record,
    RunHeader,
)
from sealeval.errors import CanonicalError

_PREFIX: Final = re.compile(
    r'\{"artifact_digest":(null|"sha256:[0-9a-f]{64}"),'
    r'"format":"invarlock/evaluation-run-v1","records":\['
)
_PREFIX_MAX: Final = 160
_SUFFIX_MAX: Final = 8 * 1_048_576


class _Scanner:
    """A UTF-8 text window over a binary file, growing only for the record being read."""

    def __init__(self, handle: IO[bytes], chunk_size: int) -> None:
        self.handle = handle
        self.chunk_size = chunk_size
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.text = ""
        self.pos = 0
        self.eof = False

    def fill(self, wanted: int) -> None:
        """Read until ``wanted`` characters are available after ``pos`` or EOF."""
        if self.pos > self.chunk_size and self.pos * 2 > len(self.text):
            self.text = self.text[self.pos :]
            self.pos = 0
        while not self.eof and len(self.text) - self.pos < wanted:
            try:
                raw = self.handle.read(max(self.chunk_size, wanted - (len(self.text) - self.pos)))
            except OSError:  # pragma: no cover - a read error after a successful open
                raise CapturedRunError("unreadable", "run") from None
            self.eof = not raw
            try:
                self.text += self.decoder.decode(raw, final=self.eof)
            except UnicodeDecodeError:
                raise CapturedRunError("not_canonical", "run") from None

    def peek(self) -> str:
        """Return the next character ('' at EOF)."""
        self.fill(1)
        return self.text[self.pos : self.pos + 1]


class RunReader:
    """Stream the records of a *canonical* run file with bounded memory.

    Iterate once; each yielded :class:`Record` is fully validated on its own
    and checked against everything known so far (ids unique, likelihood facts
    bound to the artifact digest in the file prefix and consistent with each
    other). The run header follows the records in canonical order, so the
    remaining run-level checks (likelihood facts against ``source`` and the
    service identity, canonical form of the suffix, limits) happen when the
    iteration ends: **records are provisional until the iterator is
    exhausted without error**; then :attr:`header` and :attr:`summary`
    (digest, count, size) are available.

    Only canonical bytes are accepted (``not_canonical`` otherwise: use
    :func:`read_run` for other encodings). Memory: the set of ids, one record
    (at most ``max_record_bytes``) and one read chunk.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | IO[bytes],
        *,
        limits: Limits = UNLIMITED,
        max_record_bytes: int = COMPAT_MAX_BYTES,
        chunk_size: int = 1_048_576,
    ) -> None:
        """Remember the file (a path, or a binary handle the caller owns and closes).

        Nothing is read until iteration; a handle is read from its current
        position to its end.
        """
        self._path = path
        self._limits = limits
        self._max_record_bytes = max_record_bytes
        self._chunk_size = chunk_size
        self._started = False
        self._header: RunHeader | None = None
        self._summary: RunSummary | None = None

    @property
    def header(self) -> RunHeader:
        """The validated header (after complete iteration)."""
        if self._header is None:
            raise CapturedRunError("invalid_state", "reader")
        return self._header

    @property
    def summary(self) -> RunSummary:
        """Digest, count and size (after complete iteration)."""
        if self._summary is None:
            raise CapturedRunError("invalid_state", "reader")
        return self._summary

    def __iter__(self) -> Iterator[Record]:
        """Yield the records in file order (single use)."""
        if self._started:
            raise CapturedRunError("invalid_state", "reader")
        self._started = True
        source = self._path
        if not isinstance(source, str | os.PathLike):
            yield from self._records(_Scanner(source, self._chunk_size))
            return
        fd = open_run_file(source, "run")
        with os.fdopen(fd, "rb") as handle:
            yield from self._records(_Scanner(handle, self._chunk_size))

    def _next_object(self, scanner: _Scanner) -> tuple[Any, int]:
        """Decode the record at the scanner's position, reading more text while it is cut off.

        :data:`sealeval.canonical.scan_raw` is lax (Python's own grammar): the
        caller proves the record by comparing its span with its canonical bytes.
        """
        grow = self._chunk_size
        while True:
            try:
                return scan_raw(scanner.text, scanner.pos)
            except JSONDecodeError:
                if scanner.eof:
                    raise CapturedRunError("not_canonical", "run") from None
                if len(scanner.text) - scanner.pos > self._max_record_bytes:
                    raise CapturedRunError("too_large", "run") from None
                scanner.fill(len(scanner.text) - scanner.pos + grow)
                grow *= 2
            except (ValueError, RecursionError):
                raise CapturedRunError("not_canonical", "run") from None

    def _records(self, scanner: _Scanner) -> Iterator[Record]:
        limits = self._limits
        hasher = hashlib.sha256()
        size = 0
        scanner.fill(_PREFIX_MAX)
        match = _PREFIX.match(scanner.text)
        if match is None:
            raise CapturedRunError("not_canonical", "run")
        prefix = match.group(0).encode("utf-8")
        artifact = None if match.group(1) == "null" else match.group(1)[1:-1]
        hasher.update(prefix)
        size += len(prefix)
        scanner.pos = match.end()
        ids: set[str] = set()
        bound: tuple[int, LikelihoodFacts] | None = None
        if scanner.peek() == "]":
            raise CapturedRunError("no_records", "records")
        while True:
            position = len(ids)
            if limits.max_records is not None and position >= limits.max_records:
                raise CapturedRunError("too_many_records", "records")
            if scanner.peek() != "{":
                raise CapturedRunError("not_canonical", f"records[{position}]")
            start = scanner.pos
            document, end = self._next_object(scanner)
            chunk = scanner.text[start:end].encode("utf-8")
            record = canonical_record(document, chunk, position)
            scanner.pos = end
            if record.id in ids:
                raise CapturedRunError("duplicate_id", f"records[{position}].id")
            bound = _check_streamed_likelihood(record, artifact, bound, position)
            ids.add(record.id)
            separator = scanner.peek()
            if separator not in (",", "]"):
                raise CapturedRunError("not_canonical", "run")
            hasher.update(chunk)
            size += len(chunk)
            if separator == ",":
                hasher.update(b",")
                size += 1
                scanner.pos += 1
            limits.check_size(size)
            yield record
            if separator == "]":
                break
        self._header = self._finish(scanner, artifact, (hasher, size), bound, len(ids))

    def _finish(
        self,
        scanner: _Scanner,
        artifact: str | None,
        digested: tuple[Any, int],
        bound: tuple[int, LikelihoodFacts] | None,
        count: int,
    ) -> RunHeader:
        hasher, size = digested
        scanner.fill(_SUFFIX_MAX + 1)
        rest = scanner.text[scanner.pos :]
        if len(rest) > _SUFFIX_MAX or not scanner.eof:
            raise CapturedRunError("too_large", "run")
        if not rest.startswith("],"):
            raise CapturedRunError("not_canonical", "run")
        try:
            tail = decode("{" + rest[2:])
        except CanonicalError:
            raise CapturedRunError("not_canonical", "run") from None
        doc = check_closed(
            tail, "run", TAIL_REQUIRED, ("service_identity",), error=CapturedRunError
        )
        header = header_from_document(doc, artifact)
        suffix = rest.encode("utf-8")
        if suffix != header.canonical_parts()[1]:
            raise CapturedRunError("not_canonical", "run")
        if bound is not None:
            position, facts = bound
            where = f"records[{position}].likelihood"
            check_service(facts, header.service_identity, where)
            check_source(facts, header.source, where)
        hasher.update(suffix)
        size += len(suffix)
        self._limits.check_size(size)
        self._summary = RunSummary(
            run_digest="sha256:" + hasher.hexdigest(), record_count=count, canonical_size=size
        )
        return header


#: Uncapped canonical run files at least this large are streamed into a run
#: (:func:`read_canonical_run`) instead of being held whole next to their document.
STREAM_MIN_BYTES: Final = 32 * 1_048_576


def read_canonical_run(
    source: str | os.PathLike[str] | IO[bytes], *, limits: Limits = UNLIMITED
) -> Run:
    """Read a *canonical* run file into a :class:`Run` without holding its text.

    :class:`RunReader` validates and hashes the records as they stream in, so
    the memory is the run's records themselves, not the file bytes and a
    decoded document next to them (what :func:`read_run` holds for a
    moment). Non-canonical bytes are refused with ``not_canonical``; callers
    that accept any strict JSON fall back to :func:`read_run`.

    Raises:
        CapturedRunError: as :class:`RunReader`.
    """
    reader = RunReader(source, limits=limits)
    with paused_full_collections():
        records = tuple(reader)
    summary = reader.summary
    return Run._hashed(reader.header, records, summary.run_digest, summary.canonical_size)


def read_run_file(path: str | os.PathLike[str], *, uncapped: bool = False) -> Run:
    """Read a run file for a comparison: within 128 MiB, or of any size when ``uncapped``.

    Without ``uncapped`` this is :func:`read_run` (the reference's 128 MiB
    file cap, ``too_large`` beyond it). With it, a canonical file of
    :data:`STREAM_MIN_BYTES` or more is streamed (:func:`read_canonical_run`);
    any other file is read whole, bounded by its own size.

    Raises:
        CapturedRunError: as :func:`read_run` (field ``run``).
        CanonicalError: the bytes are not strict JSON.
    """
    if not uncapped:
        return read_run(path)
    fd = open_run_file(path, "run")
    with os.fdopen(fd, "rb") as handle:
        size = os.fstat(fd).st_size
        if size >= STREAM_MIN_BYTES:
            try:
                return read_canonical_run(handle)
            except CapturedRunError:
                handle.seek(0)  # not canonical: read it whole and name the refusal there
        try:
            data = handle.read(size + 1)
        except OSError:  # pragma: no cover - a read error after a successful open
            raise CapturedRunError("unreadable", "run") from None
    return parse_run(data, limits=Limits(max_file_bytes=max(len(data), 1)))


def _check_streamed_likelihood(
    record: Record,
    artifact: str | None,
    bound: tuple[int, LikelihoodFacts] | None,
    position: int,
) -> tuple[int, LikelihoodFacts] | None:
    """Check what can be checked before the header is known; keep the first facts.

    Every valid run binds all likelihood facts to one source, one service
    identity digest (or none) and, when hosted, one configuration digest, so
    later facts must agree with the first ones; the first ones are checked
    against the header at the end.
    """
    facts = record.likelihood
    if facts is None:
        return bound
    where = f"records[{position}].likelihood"
    check_reference(facts, record.expected, where)
    check_input(facts, record.captured_input, where)
    check_tail(facts, record.expected, artifact, where)
    if bound is None:
        return (position, facts)
    first = bound[1]
    if facts.service_identity_digest != first.service_identity_digest:
        raise CapturedRunError("likelihood_binding_mismatch", f"{where}.service_identity_digest")
    if (
        first.service_identity_digest is not None
        and facts.configuration_digest != first.configuration_digest
    ):
        raise CapturedRunError("likelihood_binding_mismatch", f"{where}.configuration_digest")
    if facts.source != first.source:
        raise CapturedRunError("likelihood_binding_mismatch", f"{where}.source")
    return bound
