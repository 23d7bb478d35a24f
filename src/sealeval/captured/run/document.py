"""Run documents: :class:`Run`, :func:`make_run`, parsing, whole-file reading and digests.

:func:`make_run` builds a run from caller records (defaults for ``scores``,
``metadata``, ``error`` and ``context``; closed members);
:func:`run_from_document` / :func:`parse_run` / :func:`read_run` take a run
document (parsed value / strict JSON bytes / file) and validate it once;
:func:`run_digest` is ``digest(run)``, computed once at construction.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import types
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sealeval._fs import open_regular, read_regular, translated
from sealeval._validate import EMPTY, check_closed
from sealeval.canonical import DecodeLimits, decode
from sealeval.captured.errors import CapturedRunError
from sealeval.captured.likelihood import (
    Source,
)
from sealeval.captured.run.fast import PLAIN_MEMBER_COUNT, plain_record_bytes
from sealeval.captured.run.model import (
    RUN_FORMAT,
    RUN_REQUIRED,
    UNLIMITED,
    HeaderFacts,
    InputProjection,
    Limits,
    Record,
    RunHeader,
    ScoreProvenance,
    check_record_likelihood,
    project_record,
    rebased_record,
    record_chunk,
    refuse_null,
)
from sealeval.captured.service_identity import ServiceIdentity


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSummary:
    """What a streaming write or read established about a run."""

    run_digest: str
    record_count: int
    canonical_size: int


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Run(HeaderFacts):
    """A validated, immutable evaluation run.

    Construction performs the run-level checks (at least one record, every
    record's likelihood facts bound to this run, unique ids) and hashes the
    canonical bytes once: :attr:`digest` is the run digest and
    :attr:`canonical_size` its byte length. Records keep the caller's order.
    Equality and hashing use the digest.
    """

    header: RunHeader
    records: tuple[Record, ...]
    digest: str = field(init=False)
    canonical_size: int = field(init=False)
    index: Mapping[str, int] = field(init=False)

    def __post_init__(self) -> None:
        """Check the records against the header and each other; hash once."""
        header = self.header
        if not isinstance(header, RunHeader):
            raise CapturedRunError("invalid_type", "header")
        records = self.records
        if not isinstance(records, tuple):
            if isinstance(records, str | bytes | Mapping) or not isinstance(records, Iterable):
                raise CapturedRunError("invalid_type", "records")
            records = tuple(records)
            object.__setattr__(self, "records", records)
        self._check_records()
        hasher = hashlib.sha256()
        size = 0
        for chunk in self.iter_canonical():
            hasher.update(chunk)
            size += len(chunk)
        object.__setattr__(self, "digest", "sha256:" + hasher.hexdigest())
        object.__setattr__(self, "canonical_size", size)

    def _check_records(self) -> None:
        """Run the run-level record checks: typed records, likelihood bindings, unique ids."""
        header = self.header
        records = self.records
        if not records:
            raise CapturedRunError("no_records", "records")
        for position, record in enumerate(records):
            if not isinstance(record, Record):
                raise CapturedRunError("invalid_type", f"records[{position}]")
            check_record_likelihood(record, header, f"records[{position}]")
        index: dict[str, int] = {}
        for position, record in enumerate(records):
            if record.id in index:
                raise CapturedRunError("duplicate_id", f"records[{position}].id")
            index[record.id] = position
        object.__setattr__(self, "index", types.MappingProxyType(index))

    @classmethod
    def _hashed(cls, header: RunHeader, records: tuple[Record, ...], digest: str, size: int) -> Run:
        """Build a run whose canonical bytes were already hashed record by record.

        Only for callers that encoded exactly :meth:`iter_canonical`'s bytes
        (``run_from_document``'s fast path): every check but the hashing runs.
        """
        run = object.__new__(cls)
        object.__setattr__(run, "header", header)
        object.__setattr__(run, "records", records)
        run._check_records()
        object.__setattr__(run, "digest", digest)
        object.__setattr__(run, "canonical_size", size)
        return run

    def __repr__(self) -> str:
        """Show the record count and the digest only."""
        return f"Run(records={len(self.records)}, digest={self.digest!r})"

    def __eq__(self, other: object) -> bool:
        """Compare by digest."""
        if not isinstance(other, Run):
            return NotImplemented
        return self.digest == other.digest

    def __hash__(self) -> int:
        """Hash by digest."""
        return hash(self.digest)

    def __len__(self) -> int:
        """Return the number of records."""
        return len(self.records)

    def __iter__(self) -> Iterator[Record]:
        """Iterate the records in stored order."""
        return iter(self.records)

    @property
    def ids(self) -> tuple[str, ...]:
        """Record ids in stored order."""
        return tuple(self.index)

    def record(self, record_id: str) -> Record:
        """Return the record with this id (``KeyError`` if absent)."""
        return self.records[self.index[record_id]]

    def iter_canonical(self) -> Iterator[bytes]:
        """Yield the canonical bytes in pieces: prefix, each record (with separators), suffix."""
        prefix, suffix = self.header.canonical_parts()
        separator = prefix
        for record in self.records:
            yield separator + record_chunk(record)
            separator = b","
        yield suffix

    def to_canonical(self) -> bytes:
        """Return the canonical bytes (final LF included); ``sha256`` of them is the digest."""
        return b"".join(self.iter_canonical())

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh plain wire document."""
        document = self.header.to_dict()
        document["records"] = [record.to_dict() for record in self.records]
        return document


def _build_records(records: object, limits: Limits) -> list[Record]:
    """Count first, then build each record with make_run semantics."""
    if isinstance(records, str | bytes | Mapping) or not isinstance(records, Iterable):
        raise CapturedRunError("invalid_type", "records")
    if isinstance(records, Sequence):
        limits.check_count(len(records))
    built: list[Record] = []
    for position, item in enumerate(records):
        if limits.max_records is not None and position >= limits.max_records:
            raise CapturedRunError("too_many_records", "records")
        with rebased_record(position):
            built.append(Record.from_mapping(item))
    limits.check_count(len(built))
    return built


def make_run(
    records: Iterable[Record | Mapping[str, Any]],
    *,
    source: Source | Mapping[str, Any],
    run_id: str,
    artifact_digest: str | None,
    service_identity: ServiceIdentity | Mapping[str, Any] | None = None,
    source_digest: str | None = None,
    score_provenance: Mapping[str, ScoreProvenance | Mapping[str, Any]] | None = None,
    input_projection: InputProjection | Mapping[str, Any] | None = None,
    limits: Limits = UNLIMITED,
) -> Run:
    """Build and validate a run from caller records (spec 10 §1.2).

    Args:
        records: :class:`Record` objects or mappings with at most the nine
            record members (defaults: ``scores={}``, ``metadata={}``,
            ``error=None``, ``context={}``). Order is kept, never sorted.
        source: ``{name, version}`` of the evaluator.
        run_id: the run's identifier (text128).
        artifact_digest: the evaluated artifact, or ``None`` for a hosted run.
        service_identity: the hosted-service descriptor (then
            ``artifact_digest`` must be ``None``).
        source_digest: ``sha256:`` of the raw native bytes, or ``None``.
        score_provenance: provenance per recorded score name.
        input_projection: optional projection applied to every record after
            it is built (:func:`project_record`).
        limits: record-count and canonical-size caps (none by default).

    Raises:
        CapturedRunError: the first refusal; fields name the member
            (``records[<position>].<member>`` for records).
    """
    projection = (
        None if input_projection is None else InputProjection.from_document(input_projection)
    )
    built = _build_records(records, limits)
    header = RunHeader(
        source=source,  # type: ignore[arg-type]
        run_id=run_id,
        artifact_digest=artifact_digest,
        source_digest=source_digest,
        score_provenance=EMPTY if score_provenance is None else score_provenance,  # type: ignore[arg-type]
        service_identity=service_identity,  # type: ignore[arg-type]
    )
    if projection is not None:
        for position, record in enumerate(built):
            with rebased_record(position):
                built[position] = project_record(record, projection)
    run = Run(header, tuple(built))
    limits.check_size(run.canonical_size)
    return run


def header_from_document(document: Mapping[str, Any], artifact_digest: object) -> RunHeader:
    """Build the header of a run document whose closed members were checked.

    ``artifact_digest`` is passed apart (the streamed reader takes it from the
    head object, the rest from the tail); an explicit ``null``
    ``service_identity`` is refused.
    """
    refuse_null(document, "service_identity", "service_identity")
    return RunHeader(
        source=document["source"],
        run_id=document["run_id"],
        artifact_digest=artifact_digest,  # type: ignore[arg-type]
        source_digest=document["source_digest"],
        score_provenance=document["score_provenance"],
        service_identity=document.get("service_identity"),
    )


@contextlib.contextmanager
def paused_full_collections() -> Iterator[None]:
    """Suspend full (oldest-generation) garbage collections while a run is built.

    Building a run keeps every record alive, and the collector's full passes
    over every live container, repeated as the heap grows, dominated the time
    (50,000 harness rows through ``load_run``: 12.7 s with them, 8.2 s
    without). Young collections still run, so short-lived cycles are freed as
    usual. The previous thresholds are restored on exit.
    """
    thresholds = gc.get_threshold()
    gc.set_threshold(thresholds[0] or 700, thresholds[1] or 10, 1 << 30)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


def run_from_document(document: object, *, limits: Limits = UNLIMITED) -> Run:
    """Validate a parsed run document once and return the typed run.

    The document need not have been canonical bytes; every member is
    required except ``service_identity`` (records: all eight members,
    ``likelihood`` optional). A :class:`Run` is returned as is (after the
    limits check).

    Raises:
        CapturedRunError: the first refusal (``too_many_records`` is checked
            before anything else, as the reference does).
    """
    with paused_full_collections():
        return _run_from(document, limits, decoded=False)


def run_from_decoded(document: object, *, limits: Limits = UNLIMITED) -> Run:
    """Validate a decoded run document once and return the typed run.

    :func:`run_from_document` for a document exactly as
    :func:`~sealeval.canonical.decode` returned it (default depth limit, not
    modified since). Such a document holds only exact JSON types within the depth limit, so
    plain records are not walked again before they are encoded; the result
    and every refusal are those of :func:`run_from_document`.
    """
    with paused_full_collections():
        return _run_from(document, limits, decoded=True)


def _run_from(document: object, limits: Limits, *, decoded: bool) -> Run:
    if isinstance(document, Run):
        limits.check_count(len(document.records))
        limits.check_size(document.canonical_size)
        return document
    if not isinstance(document, Mapping):
        raise CapturedRunError("invalid_type", "run")
    records = document.get("records")
    if (
        isinstance(records, list | tuple)
        and limits.max_records is not None
        and len(records) > limits.max_records
    ):
        raise CapturedRunError("too_many_records", "records")
    doc = check_closed(document, "run", RUN_REQUIRED, ("service_identity",), error=CapturedRunError)
    if doc["format"] != RUN_FORMAT or type(doc["format"]) is not str:
        raise CapturedRunError("invalid_constant", "format")
    if not isinstance(records, list | tuple):
        raise CapturedRunError("invalid_type", "records")
    header = header_from_document(doc, doc["artifact_digest"])
    built: list[Record] = []
    # Each record is validated once: a plain record (as decoded from JSON) through
    # plain_record_bytes, which also gives its canonical bytes, anything else through
    # Record.from_document. The run digest is hashed from those bytes as they come.
    hasher = hashlib.sha256()
    prefix, suffix = header.canonical_parts()
    separator = prefix
    size = 0
    for position, item in enumerate(records):
        record, chunk = _document_record(item, position, decoded=decoded)
        built.append(record)
        hasher.update(separator)
        hasher.update(chunk)
        size += len(separator) + len(chunk)
        separator = b","
    if not built:
        raise CapturedRunError("no_records", "records")
    hasher.update(suffix)
    size += len(suffix)
    run = Run._hashed(header, tuple(built), "sha256:" + hasher.hexdigest(), size)
    limits.check_count(len(run.records))
    limits.check_size(run.canonical_size)
    return run


def parse_run(data: bytes | bytearray | memoryview, *, limits: Limits = UNLIMITED) -> Run:
    """Strictly decode run bytes (canonical or not) and validate them.

    Raises:
        CanonicalError: the bytes are not strict JSON (or exceed
            ``limits.max_file_bytes``).
        CapturedRunError: the document is not a valid run.
    """
    with paused_full_collections():
        document = decode(data, limits=DecodeLimits(max_bytes=limits.max_file_bytes))
        return _run_from(document, limits, decoded=True)


def open_run_file(path: str | os.PathLike[str], field_name: str) -> int:
    """Open a regular file to read (:func:`sealeval._fs.open_regular`), refusing at ``field_name``.

    Symlinks, directories, FIFOs and devices are ``not_regular_file``; a
    missing file ``not_found``; anything else ``unreadable``.
    """
    with translated(CapturedRunError, field_name):
        return open_regular(path)


def read_file_bytes(path: str | os.PathLike[str], max_bytes: int, field_name: str) -> bytes:
    """Read a whole regular file (not a symlink) of at most ``max_bytes`` bytes.

    The read is :func:`sealeval._fs.read_regular`: bounded before a byte is
    read and stable (a file changed while read is ``unreadable``).
    """
    with translated(CapturedRunError, field_name):
        return read_regular(path, limit=max_bytes)


def read_run(path: str | os.PathLike[str], *, limits: Limits = UNLIMITED) -> Run:
    """Read a run file (regular file, not a symlink, ≤ ``limits.max_file_bytes``).

    The file is read once and validated once; it need not be canonical (the
    run's digest is that of its canonical form). For files too large for
    memory use :class:`RunReader`.

    Raises:
        CapturedRunError: ``not_found``, ``not_regular_file``, ``unreadable``,
            ``too_large`` (field ``run``), or any run refusal.
        CanonicalError: the bytes are not strict JSON.
    """
    return parse_run(read_file_bytes(path, limits.max_file_bytes, "run"), limits=limits)


def run_digest(run: Run | Mapping[str, Any]) -> str:
    """Return ``digest(run)`` — the run's identity in requests, packs and receipts.

    A :class:`Run` carries its digest already; a parsed document is validated
    first (:func:`run_from_document`).
    """
    if isinstance(run, Run):
        return run.digest
    return run_from_document(run).digest


def _document_record(item: object, position: int, *, decoded: bool) -> tuple[Record, bytes]:
    """Build one record object of a run document; return it and its canonical bytes.

    A plain record (all eight members, no ``likelihood``) is validated and
    encoded by :func:`plain_record_bytes` and frozen without a second check;
    anything else goes through :meth:`Record.from_document`, which names the
    refusal. ``decoded``: ``item`` is exactly as the strict decoder returned it.
    """
    if type(item) is dict and len(item) == PLAIN_MEMBER_COUNT:
        accepted = plain_record_bytes(item, decoded=(item, 0) if decoded else None)
        if accepted is not None:
            return Record._accepted(item), accepted[1]
    with rebased_record(position):
        record = Record.from_document(item)
    return record, record_chunk(record)


def canonical_record(document: object, chunk: bytes, position: int) -> Record:
    """Build the record decoded from ``chunk``; refuse unless ``chunk`` is its canonical form."""
    record, canonical = _document_record(document, position, decoded=False)
    if chunk != canonical:
        raise CapturedRunError("not_canonical", f"records[{position}]")
    return record
