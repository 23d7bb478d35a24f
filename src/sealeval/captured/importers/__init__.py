"""Import recorded evaluation results as canonical runs: ``load_run`` and its adapters.

:func:`load_run` turns a file in one of the supported formats into a
validated :class:`~sealeval.captured.run.Run` without re-running anything;
:func:`import_run_streaming` writes the canonical run file instead, streaming
records from the source into a :class:`~sealeval.captured.run.RunWriter`
while it is hashed (the ``sealeval import`` command). Both take the same
arguments (spec ``11-adapters.md`` §1):

* ``adapter``: one of :data:`SPECIFIED_ADAPTERS` (``invarlock``, ``jsonl``,
  ``inspect-json``, ``lm-eval-samples``, ``promptfoo-jsonl``,
  ``langfuse-json``, ``evaluator-json``, ``evaluator-native-json``), a native
  format of :mod:`sealeval.captured.importers.native`, or ``"auto"``
  (recognised from the file's content: ``unknown_format`` when nothing
  matches, ``ambiguous_format`` when several formats do).
* ``source`` (``{name, version}``), ``run_id`` and ``artifact_digest`` or
  ``service_identity``: required for every adapter but ``invarlock``
  (``identities_required``), which refuses them all (``identity_override``);
  plus optional ``score_provenance`` and ``input_projection``.
* ``limits``: :data:`~sealeval.captured.run.UNLIMITED` (default: no record
  cap) or :data:`~sealeval.captured.run.INVARLOCK_LIMITS` (the reference's
  50,000 records / 128 MiB, for runs meant for invarlock).
* ``options``: :class:`~sealeval.captured.importers.base.ImportOptions`.

``source_digest`` is the SHA-256 of the raw source bytes. Single-document
formats are read once (≤ ``limits.max_file_bytes``). JSONL formats are
streamed line by line: :func:`load_run` reads them once, hashing as it goes;
:func:`import_run_streaming` must know the digest before the run header is
fixed, so it hashes the file first and re-hashes the bytes it parses,
refusing a file that changed in between (``source_changed``). Large JSONL
sources are streamed with a worker process that encodes part of the records
(see "Two processes for large JSONL imports" below); the output and every
refusal are those of the one-process import. Streamed sources have no size
cap unless ``limits`` caps records (then the reference's file cap applies
too).

Refusals are :class:`~sealeval.errors.SealevalError` subclasses with closed
codes and library-chosen fields (never file content or paths):
:class:`~sealeval.captured.importers.base.ImportRefusalError` (files, formats,
adapters), :class:`~sealeval.captured.CapturedRunError` (run rules),
:class:`~sealeval.errors.OutputError` (the destination).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import mmap
import os
import signal
import struct
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Final

from sealeval.canonical import digest_bytes
from sealeval.captured.errors import fail, rebased
from sealeval.captured.importers.base import (
    DETECT_BYTES,
    Importer,
    ImportOptions,
    ImportRefusalError,
    RecordSource,
)
from sealeval.captured.importers.evaluator_json import (
    EvaluatorJsonImporter,
    EvaluatorNativeJsonImporter,
)
from sealeval.captured.importers.inspect_json import InspectJsonImporter
from sealeval.captured.importers.invarlock_doc import InvarlockImporter
from sealeval.captured.importers.jsonl import (
    Binding,
    DocumentImporter,
    JsonlImporter,
    LinesImporter,
    decode_line,
    is_blank,
    iter_lines,
    open_source,
    read_source,
    refuse,
)
from sealeval.captured.importers.langfuse_json import LangfuseJsonImporter
from sealeval.captured.importers.lm_eval_samples import LmEvalSamplesImporter
from sealeval.captured.importers.profiles import PROFILES, EvaluatorNativeProfile, profile_for
from sealeval.captured.importers.promptfoo_jsonl import PromptfooJsonlImporter
from sealeval.captured.likelihood import Source
from sealeval.captured.run import (
    UNLIMITED,
    InputProjection,
    Limits,
    Record,
    Run,
    RunHeader,
    RunWriter,
    ScoreProvenance,
    paused_full_collections,
    plain_record_bytes,
    project_record,
    write_run,
)
from sealeval.captured.service_identity import ServiceIdentity
from sealeval.errors import CanonicalError, OutputError, SealevalError

__all__ = [
    "AUTO",
    "DETECT_BYTES",
    "PROFILES",
    "SPECIFIED_ADAPTERS",
    "EvaluatorNativeProfile",
    "ImportOptions",
    "ImportRefusalError",
    "ImportSummary",
    "Importer",
    "Progress",
    "adapter_names",
    "detect_adapter",
    "get_importer",
    "import_run_streaming",
    "importers",
    "load_run",
    "profile_for",
]

#: ``adapter="auto"``: recognise the format from the file's content.
AUTO: Final = "auto"
#: The adapters of the specification, in its order.
SPECIFIED_ADAPTERS: Final = (
    "invarlock",
    "jsonl",
    "inspect-json",
    "lm-eval-samples",
    "promptfoo-jsonl",
    "langfuse-json",
    "evaluator-json",
    "evaluator-native-json",
)
_CHUNK: Final = 1 << 20
_DECODE_CODES: Final = {
    "not_utf8": "not_utf8",
    "byte_order_mark": "byte_order_mark",
    "duplicate_key": "duplicate_key",
    "non_standard_constant": "non_finite_number",
    "non_finite_number": "non_finite_number",
    "too_deep": "too_deep",
    "too_large": "too_large",
    "string_too_long": "too_large",
    "integer_too_long": "integer_too_long",
}

#: ``progress(completed, total)``: bytes processed so far out of ``total``
#: (JSONL sources streamed to a file count their two passes).
Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportSummary:
    """What :func:`import_run_streaming` wrote."""

    adapter: str
    run_digest: str
    record_count: int
    canonical_size: int
    source_digest: str | None

    def __repr__(self) -> str:
        """Show the adapter and the record count."""
        return f"ImportSummary(adapter={self.adapter!r}, record_count={self.record_count})"


# ---------------------------------------------------------------------------
# The registry


def _specified() -> tuple[Any, ...]:
    return (
        InvarlockImporter(),
        JsonlImporter(),
        InspectJsonImporter(),
        LmEvalSamplesImporter(),
        PromptfooJsonlImporter(),
        LangfuseJsonImporter(),
        EvaluatorJsonImporter(),
        EvaluatorNativeJsonImporter(),
    )


def _native() -> tuple[Importer, ...]:
    """Return the native formats (``sealeval.captured.importers.native.NATIVE_IMPORTERS``)."""
    from sealeval.captured.importers.native import NATIVE_IMPORTERS  # noqa: PLC0415 - import cycle

    return tuple(NATIVE_IMPORTERS)


@functools.cache
def importers() -> Mapping[str, Any]:
    """Every importer by adapter name: the specified adapters, then the native formats."""
    registry: dict[str, Any] = {importer.name: importer for importer in _specified()}
    for importer in _native():
        if not isinstance(importer, Importer) or importer.name in registry:
            raise RuntimeError("native importer missing or duplicating an adapter name")
        if importer.name == AUTO:
            raise RuntimeError("an importer cannot be named 'auto'")
        registry[importer.name] = importer
    return registry


def adapter_names() -> tuple[str, ...]:
    """Every adapter name ``load_run`` accepts (without ``"auto"``)."""
    return tuple(importers())


def get_importer(adapter: str) -> Any:
    """Return the importer of an adapter name (``unknown_adapter`` otherwise)."""
    importer = importers().get(adapter) if type(adapter) is str else None
    if importer is None:
        raise refuse("unknown_adapter", "adapter")
    return importer


def detect_adapter(path: str | os.PathLike[str]) -> str:
    """Recognise a file's format from its first :data:`DETECT_BYTES` bytes.

    Raises:
        ImportRefusalError: ``unknown_format`` (no importer recognises it),
            ``ambiguous_format`` (several do), ``importer_failed`` (a
            detector raised), or a file refusal (``not_found``, …).
    """
    with open_source(path) as handle:
        try:
            head = handle.read(DETECT_BYTES)
        except OSError:  # pragma: no cover - a read error after a successful open
            raise refuse("unreadable", "source") from None
    target = Path(path)
    matches: list[str] = []
    for name, importer in importers().items():
        try:
            found = importer.detect(head, target)
        except SealevalError:
            raise
        except Exception:  # noqa: BLE001 - a detector's exception may quote input
            raise refuse("importer_failed", "adapter") from None
        if found is True:
            matches.append(name)
    if not matches:
        raise refuse("unknown_format", "adapter")
    if len(matches) > 1:
        raise refuse("ambiguous_format", "adapter")
    return matches[0]


def _resolve(adapter: str, path: str | os.PathLike[str]) -> tuple[str, Any]:
    name = detect_adapter(path) if adapter == AUTO else adapter
    return name, get_importer(name)


# ---------------------------------------------------------------------------
# Requests


@dataclass(frozen=True, slots=True)
class _Request:
    """The caller's arguments, checked once."""

    path: Path
    name: str
    importer: Any
    source: Source | None
    run_id: str | None
    artifact_digest: str | None
    service_identity: ServiceIdentity | Mapping[str, Any] | None
    score_provenance: Mapping[str, Any] | None
    projection: InputProjection | None
    limits: Limits
    options: ImportOptions

    @property
    def binding(self) -> Binding:
        return Binding(self.source, self.run_id)

    def header(self, source_digest: str | None) -> RunHeader:
        """Build the run header (identities must have been supplied)."""
        if self.source is None:
            raise refuse("identities_required", "source")
        if self.run_id is None:
            raise refuse("identities_required", "run_id")
        if self.artifact_digest is None and self.service_identity is None:
            raise refuse("identities_required", "artifact_digest")
        return RunHeader(
            source=self.source,
            run_id=self.run_id,
            artifact_digest=self.artifact_digest,
            source_digest=source_digest,
            score_provenance=self.score_provenance or {},
            service_identity=self.service_identity,  # type: ignore[arg-type]
        )

    @property
    def streamed_cap(self) -> int | None:
        """Streamed sources are capped only in compatibility mode (a record cap)."""
        return self.limits.max_file_bytes if self.limits.max_records is not None else None


def _request(
    path: str | os.PathLike[str],
    adapter: str,
    *,
    source: Source | Mapping[str, Any] | None,
    run_id: str | None,
    artifact_digest: str | None,
    service_identity: ServiceIdentity | Mapping[str, Any] | None,
    score_provenance: Mapping[str, ScoreProvenance | Mapping[str, Any]] | None,
    input_projection: InputProjection | Mapping[str, Any] | None,
    limits: Limits,
    options: ImportOptions | None,
) -> _Request:
    if type(adapter) is not str:
        raise refuse("unknown_adapter", "adapter")
    if adapter != AUTO:
        get_importer(adapter)
    if not isinstance(limits, Limits):
        raise refuse("adapter_option_invalid", "limits")
    if options is None:
        options = ImportOptions()
    elif not isinstance(options, ImportOptions):
        raise refuse("adapter_option_invalid", "options")
    if adapter in ("invarlock", AUTO):
        supplied = (
            source,
            run_id,
            artifact_digest,
            service_identity,
            score_provenance,
            input_projection,
        )
        overridden = any(value is not None for value in supplied)
    else:
        overridden = False
    name, importer = _resolve(adapter, path)
    if name == "invarlock" and overridden:
        raise refuse("identity_override", "adapter")
    checked_source = None if source is None else Source.from_document(source)
    if run_id is not None and type(run_id) is not str:
        raise fail("invalid_type", "run_id")
    if checked_source is not None and options.source_name is None:
        options = dataclasses.replace(options, source_name=checked_source.name)
    projection = (
        None if input_projection is None else InputProjection.from_document(input_projection)
    )
    return _Request(
        path=Path(path),
        name=name,
        importer=importer,
        source=checked_source,
        run_id=run_id,
        artifact_digest=artifact_digest,
        service_identity=service_identity,
        score_provenance=score_provenance,
        projection=projection,
        limits=limits,
        options=options,
    )


# ---------------------------------------------------------------------------
# Reading sources


def _stat_key(stat_result: os.stat_result) -> tuple[int, ...]:
    return (
        stat_result.st_dev,
        stat_result.st_ino,
        stat_result.st_size,
        stat_result.st_mtime_ns,
        stat_result.st_ctime_ns,
    )


def _hash_file(
    path: Path, cap: int | None, progress: Progress | None, total: int
) -> tuple[str, tuple[int, ...], int]:
    """SHA-256 of a file, read in chunks; returns the digest, its identity and its size."""
    digest = hashlib.sha256()
    size = 0
    with open_source(path) as handle:
        before = _stat_key(os.fstat(handle.fileno()))
        while True:
            try:
                chunk = handle.read(_CHUNK)
            except OSError:  # pragma: no cover - a read error after a successful open
                raise refuse("unreadable", "source") from None
            if not chunk:
                break
            size += len(chunk)
            if cap is not None and size > cap:
                raise refuse("too_large", "source")
            digest.update(chunk)
            if progress is not None:
                progress(size, total)
    return "sha256:" + digest.hexdigest(), before, size


def _unchanged(path: Path, before: tuple[int, ...]) -> None:
    try:
        after = _stat_key(path.lstat())
    except OSError:
        raise refuse("source_changed", "source") from None
    if after != before:
        raise refuse("source_changed", "source")


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


class _Sink:
    """Counts and hashes the lines a JSONL importer reads; reports progress."""

    def __init__(
        self, progress: Progress | None, offset: int, total: int, cap: int | None = None
    ) -> None:
        self.hash = hashlib.sha256()
        self.size = 0
        self._progress = progress
        self._offset = offset
        self._total = total
        self._cap = cap

    def __call__(self, line: bytes) -> None:
        self.hash.update(line)
        self.size += len(line)
        if self._cap is not None and self.size > self._cap:
            raise refuse("too_large", "source")
        if self._progress is not None:
            self._progress(self._offset + self.size, self._total)

    @property
    def digest(self) -> str:
        return "sha256:" + self.hash.hexdigest()


def _guarded(source: Iterable[Any]) -> Iterator[Any]:
    """Iterate an importer's records; a non-refusal exception becomes ``importer_failed``."""
    iterator = iter(source)
    while True:
        try:
            item = next(iterator)
        except StopIteration:
            return
        except SealevalError:
            raise
        except CanonicalError:  # pragma: no cover - a SealevalError, kept for clarity
            raise
        except Exception:  # noqa: BLE001 - an importer's exception may quote input
            raise refuse("importer_failed", "source") from None
        yield item


def _typed(item: Any, position: int, request: _Request) -> Record:
    limit = request.limits.max_records
    if limit is not None and position >= limit:
        raise fail("too_many_records", "records")
    with rebased("record", f"records[{position}]"):
        record = Record.from_mapping(item)
        if request.projection is not None:
            record = project_record(record, request.projection)
    return record


def _records(request: _Request, source: RecordSource) -> Iterator[Record]:
    for position, item in enumerate(_guarded(source)):
        yield _typed(item, position, request)


def _load_invarlock(request: _Request) -> Run:
    try:
        return request.importer.load(request.path, request.limits)  # type: ignore[no-any-return]
    except CanonicalError as error:
        raise refuse(_DECODE_CODES.get(error.code, "invalid_json"), "source") from None


def _document(request: _Request, progress: Progress | None) -> tuple[Any, str]:
    """Read, hash, parse and bind a single-document source."""
    data = read_source(request.path, request.limits.max_file_bytes)
    source_digest = digest_bytes(data)
    if progress is not None:
        progress(len(data), len(data))
    importer: DocumentImporter = request.importer
    try:
        document = importer.parse(data, request.options)
        del data
        prepared = importer.bind(document, request.binding, request.options)
    except SealevalError:
        raise
    except Exception:  # noqa: BLE001 - an importer's exception may quote input
        raise refuse("importer_failed", "source") from None
    return prepared, source_digest


def _finish_run(request: _Request, header: RunHeader, records: list[Record]) -> Run:
    if not records:
        raise refuse("no_records", "source")
    run = Run(header, tuple(records))
    request.limits.check_size(run.canonical_size)
    return run


# ---------------------------------------------------------------------------
# Public entry points


def load_run(
    path: str | os.PathLike[str],
    adapter: str = "invarlock",
    *,
    source: Source | Mapping[str, Any] | None = None,
    run_id: str | None = None,
    artifact_digest: str | None = None,
    service_identity: ServiceIdentity | Mapping[str, Any] | None = None,
    score_provenance: Mapping[str, ScoreProvenance | Mapping[str, Any]] | None = None,
    input_projection: InputProjection | Mapping[str, Any] | None = None,
    limits: Limits = UNLIMITED,
    options: ImportOptions | None = None,
    progress: Progress | None = None,
) -> Run:
    """Import a recorded result file as a validated run (spec 11 §1).

    Args:
        path: the source file (a regular file, not a symlink).
        adapter: an adapter name (:func:`adapter_names`) or ``"auto"``.
        source: ``{name, version}`` of the evaluator (required but for ``invarlock``).
        run_id: the run's id (required but for ``invarlock``).
        artifact_digest: the evaluated artifact's digest, or ``None`` with
            ``service_identity`` for hosted runs.
        service_identity: the hosted service descriptor.
        score_provenance: ``{score name: provenance}``.
        input_projection: ``{kind: "json-pointer", pointer}`` applied to every record.
        limits: ``UNLIMITED`` or ``INVARLOCK_LIMITS`` (compatibility).
        options: adapter options (``nan_as_missing_score``, ``max_line_bytes``).
        progress: called with ``(bytes read, file size)`` while reading.

    Returns:
        The run; its records are in source order and every record of the
        source is present (errored and null-output cases included).

    Raises:
        ImportRefusalError: the file, the format or the identities are refused.
        CapturedRunError: the records or the run break a run rule.
    """
    request = _request(
        path,
        adapter,
        source=source,
        run_id=run_id,
        artifact_digest=artifact_digest,
        service_identity=service_identity,
        score_provenance=score_provenance,
        input_projection=input_projection,
        limits=limits,
        options=options,
    )
    with paused_full_collections():
        return _load(request, progress)


def _load(request: _Request, progress: Progress | None) -> Run:
    if request.name == "invarlock":
        return _load_invarlock(request)
    importer = request.importer
    if isinstance(importer, LinesImporter):
        request.header(None)  # identities first: nothing is read without them
        total = _file_size(request.path)
        cap = request.streamed_cap
        sink = _Sink(progress, 0, total, cap)
        with open_source(request.path) as handle:
            if cap is not None and os.fstat(handle.fileno()).st_size > cap:
                raise refuse("too_large", "source")
            records = list(_records(request, importer.rows(handle, request.options, sink)))
        return _finish_run(request, request.header(sink.digest), records)
    if isinstance(importer, DocumentImporter):
        prepared, source_digest = _document(request, progress)
        header = request.header(source_digest)
        return _finish_run(
            request, header, list(_records(request, importer.rows(prepared, request.options)))
        )
    request.header(None)
    source_digest, before, _ = _hash_file(
        request.path, request.streamed_cap, progress, _file_size(request.path)
    )
    header = request.header(source_digest)
    records = list(_records(request, importer.records(request.path, request.options)))
    _unchanged(request.path, before)
    return _finish_run(request, header, records)


def import_run_streaming(
    path: str | os.PathLike[str],
    destination: str | os.PathLike[str],
    *,
    adapter: str,
    source: Source | Mapping[str, Any] | None = None,
    run_id: str | None = None,
    artifact_digest: str | None = None,
    service_identity: ServiceIdentity | Mapping[str, Any] | None = None,
    score_provenance: Mapping[str, ScoreProvenance | Mapping[str, Any]] | None = None,
    input_projection: InputProjection | Mapping[str, Any] | None = None,
    limits: Limits = UNLIMITED,
    options: ImportOptions | None = None,
    progress: Progress | None = None,
) -> ImportSummary:
    """Import a source file straight into a canonical run file at ``destination``.

    Same arguments and refusals as :func:`load_run`, plus the destination
    (exclusive creation, mode 0600, atomic: nothing is published on any
    refusal). Records stream from the source into the run while it is
    hashed; memory does not grow with the records already written (JSONL:
    one line and one record at a time, plus the set of record ids; other
    formats: the decoded document).

    Raises:
        OutputError: ``output_exists`` (checked before any work and again at
            publication), ``output_parent_missing``, ``output_unwritable``.
    """
    if os.path.lexists(destination):
        raise OutputError("output_exists", "output")
    request = _request(
        path,
        adapter,
        source=source,
        run_id=run_id,
        artifact_digest=artifact_digest,
        service_identity=service_identity,
        score_provenance=score_provenance,
        input_projection=input_projection,
        limits=limits,
        options=options,
    )
    return _stream(request, destination, progress)


def _stream(
    request: _Request, destination: str | os.PathLike[str], progress: Progress | None
) -> ImportSummary:
    if request.name == "invarlock":
        run = _load_invarlock(request)
        digest = write_run(run, destination, limits=request.limits)
        return ImportSummary(
            adapter=request.name,
            run_digest=digest,
            record_count=len(run),
            canonical_size=run.canonical_size,
            source_digest=run.source_digest,
        )
    importer = request.importer
    if isinstance(importer, DocumentImporter):
        prepared, source_digest = _document(request, progress)
        header = request.header(source_digest)
        return _write(request, destination, header, importer.rows(prepared, request.options))
    request.header(None)  # identities first: nothing is read without them
    total = _file_size(request.path)
    passes = 2 * total if isinstance(importer, LinesImporter) else total
    source_digest, before, size = _hash_file(request.path, request.streamed_cap, progress, passes)
    header = request.header(source_digest)
    if isinstance(importer, LinesImporter):
        sink = _Sink(progress, size, size * 2)
        if _lines_loop(request):
            parallel = _parallel(request, size)
            return _write_lines(request, destination, header, sink, parallel=parallel)
        with open_source(request.path) as handle:

            def verified() -> Iterator[Any]:
                yield from importer.rows(handle, request.options, sink)
                if sink.digest != source_digest:
                    raise refuse("source_changed", "source")

            return _write(request, destination, header, verified())

    def unchanged() -> Iterator[Any]:
        yield from importer.records(request.path, request.options)
        _unchanged(request.path, before)

    return _write(request, destination, header, unchanged())


def _write(
    request: _Request, destination: str | os.PathLike[str], header: RunHeader, source: RecordSource
) -> ImportSummary:
    with RunWriter(destination, header, limits=request.limits) as writer:
        if request.projection is None:
            # The writer builds each record with make_run semantics and the same
            # ``records[<position>]`` error fields as _typed; plain dict records
            # take its fast path (RunEncoder.add).
            for item in _guarded(source):
                writer.add(item)
        else:
            for position, item in enumerate(_guarded(source)):
                writer.add(_typed(item, position, request))
        if writer.record_count == 0:
            raise refuse("no_records", "source")
        summary = writer.finish()
    return ImportSummary(
        adapter=request.name,
        run_digest=summary.run_digest,
        record_count=summary.record_count,
        canonical_size=summary.canonical_size,
        source_digest=header.source_digest,
    )


# ---------------------------------------------------------------------------
# Two processes for large JSONL imports
#
# A forked worker reads the same source file on its own and turns the rows of batches
# of physical lines ahead of the parent into ``plain_record_bytes`` results: ``(id,
# canonical bytes)`` per line, or ``None`` ("not shown valid": blank, undecodable,
# refused by the adapter, or outside the fast path). The parent reads every line
# itself (hashing, progress, line limits). At each batch it takes the worker's results
# when they are there, waits only for a batch the worker is encoding, and otherwise
# encodes the batch itself: the split follows the speed of each process, and on a busy
# machine the parent never waits for a worker that has not started. It maps its own
# batches and the worker's ``None`` lines exactly as the one-process import does and
# appends everything in file order through the same RunWriter (ids, limits, size,
# output hash), so every refusal is the parent's own, raised at the same line as
# without the worker. With each batch the worker sends the SHA-256 of the bytes it read
# through that batch; the parent compares it with its own at the same line and refuses
# a mismatch (``source_changed``): records the worker encoded always come from the
# bytes the parent hashed. A worker that dies or sends a malformed message only stops
# helping: the parent maps the remaining lines itself. Memory: one batch in each
# process and the pipe (1 MiB).

#: JSONL sources of at least this many bytes are imported with a worker process (when
#: the machine has two CPUs, the process one thread, and the adapter is parallel_safe).
PARALLEL_MIN_BYTES: Final = 4 << 20
_BATCH_LINES: Final = 256
_BATCH_BYTES: Final = 128 << 10
_PIPE_BYTES: Final = 1 << 20
# The worker encodes only batches at least this far ahead of the parent, so that they
# are ready when the parent reaches them; the parent encodes the batches it skipped.
_LEAD = 4
_PARALLEL_ENABLED = True  # tests switch the worker off or force it on small files
_parallel_min_bytes = PARALLEL_MIN_BYTES


def _lines_loop(request: _Request) -> bool:
    """Whether the rows can be mapped line by line here (``_write_lines``).

    True for a parallel-safe adapter (its ``rows`` is ``LinesImporter.rows``:
    decode each non-blank line, ``map_row``) without an input projection.
    """
    importer = request.importer
    return (
        request.projection is None
        and getattr(type(importer), "parallel_safe", False) is True
        and type(importer).rows is LinesImporter.rows
    )


def _parallel(request: _Request, size: int) -> bool:
    return (
        _PARALLEL_ENABLED
        and size >= _parallel_min_bytes
        and _lines_loop(request)
        and sys.platform.startswith("linux")
        and threading.active_count() == 1
        and len(os.sched_getaffinity(0)) > 1
    )


def _tolerance(importer: LinesImporter, options: ImportOptions) -> Callable[[str], bool] | None:
    """Return the NaN rule ``LinesImporter.rows`` passes to ``iter_rows``."""
    tolerant = type(importer).nan_member is not LinesImporter.nan_member
    return importer.nan_member if tolerant and options.nan_as_missing_score else None


class _Batches:
    """Cuts physical lines into numbered batches, identically in both processes."""

    __slots__ = ("index", "lines", "size")

    def __init__(self) -> None:
        self.index = 0
        self.lines = 0
        self.size = 0

    def add(self, line: bytes) -> bool:
        """Count a line; return whether it ends the current batch."""
        self.lines += 1
        self.size += len(line)
        if self.lines < _BATCH_LINES and self.size < _BATCH_BYTES:
            return False
        self.index += 1
        self.lines = 0
        self.size = 0
        return True


def _encoded(
    importer: LinesImporter,
    line: bytes,
    number: int,
    options: ImportOptions,
    tolerate: Callable[[str], bool] | None,
) -> tuple[str, bytes] | None:
    """Return the worker's result for one line: its record's id and bytes, or ``None``."""
    if is_blank(line):
        return None
    where = f"line[{number}]"
    try:
        row, height = decode_line(line, where, tolerate)
        item = importer.map_row(row, where, options)
        if type(item) is not dict:
            return None
        return plain_record_bytes(item, decoded=None if height is None else (row, height))
    except Exception:  # noqa: BLE001 - the parent maps this line again and names the refusal
        return None


class _Board:
    """Two batch indexes shared with the worker (an anonymous shared mapping).

    ``position``: the batch the parent is at; ``working``: the batch the worker
    is encoding. The worker only starts batches ``_LEAD`` ahead of the parent.
    A stale read costs at most duplicate work, never a wrong record: the
    parent matches batches by index and drops one it encoded itself.
    """

    def __init__(self) -> None:
        self._map = mmap.mmap(-1, 16)  # MAP_SHARED: the forked worker sees the same bytes
        self.publish(-1)
        self.work(-1)

    def publish(self, index: int) -> None:
        struct.pack_into("q", self._map, 0, index)

    def position(self) -> int:
        return int(struct.unpack_from("q", self._map, 0)[0])

    def work(self, index: int) -> None:
        struct.pack_into("q", self._map, 8, index)

    def working(self) -> int:
        return int(struct.unpack_from("q", self._map, 8)[0])


def _work(
    fd: int,
    path: Path,
    importer: LinesImporter,
    options: ImportOptions,
    board: _Board | None = None,
) -> None:
    """Run the worker: encode batches ahead of the parent and send them in order.

    Without a board every batch is encoded.
    """
    tolerate = _tolerance(importer, options)
    hasher = hashlib.sha256()
    batches = _Batches()
    entries: list[tuple[str, bytes] | None] = []
    mine = False
    with Connection(fd, readable=False) as connection, open_source(path) as handle:
        for number, line in iter_lines(handle, options.max_line_bytes, hasher.update):
            index = batches.index
            if batches.lines == 0 and board is not None:
                mine = index >= board.position() + _LEAD
                if mine:
                    board.work(index)
            elif batches.lines == 0:
                mine = True
            if mine:
                entries.append(_encoded(importer, line, number, options, tolerate))
            if batches.add(line) and mine:
                connection.send((index, hasher.digest(), entries))
                entries = []
        if batches.lines and mine:
            connection.send((batches.index, hasher.digest(), entries))


_Entries = list[tuple[str, bytes] | None]


def _pin(cpus: list[int], which: int) -> set[int] | None:
    """On a two-CPU machine, keep this process on ``cpus[which]``; return the old set.

    The parent and the worker then never share a CPU while a third process
    (another job) takes the other one: each gets one CPU for itself half the
    time instead of both sharing one. Elsewhere the scheduler decides. The
    parent is single-threaded, so pinning it only fixes where it runs; its
    affinity is restored when the import ends.
    """
    if len(cpus) != 2:
        return None
    try:
        os.sched_setaffinity(0, {cpus[which]})
    except OSError:
        return None
    return set(cpus)


class _Worker:
    """The forked worker process, the read end of its pipe and the shared board."""

    def __init__(self, path: Path, importer: LinesImporter, options: ImportOptions) -> None:
        """Fork the worker; without a pipe or a process the parent simply works alone."""
        self._pid: int | None = None
        self._pending: tuple[int, bytes, _Entries] | None = None
        self._affinity: set[int] | None = None
        try:
            self._board = _Board()
            read_fd, write_fd = os.pipe()
        except OSError:
            return
        with contextlib.suppress(OSError, AttributeError, ImportError):
            import fcntl  # noqa: PLC0415 - Linux only, like the worker

            fcntl.fcntl(write_fd, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
        try:
            pid = os.fork()
        except OSError:
            os.close(read_fd)
            os.close(write_fd)
            return
        cpus = sorted(os.sched_getaffinity(0))
        if pid == 0:  # pragma: no cover - the child (coverage is not collected there)
            try:
                os.close(read_fd)
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                _pin(cpus, 1)
                _work(write_fd, path, importer, options, self._board)
            finally:
                os._exit(0)
        os.close(write_fd)
        self._pid = pid
        self._connection = Connection(read_fd, writable=False)
        self._affinity = _pin(cpus, 0)

    def batch(self, index: int) -> tuple[_Entries, bytes] | None:
        """Return the worker's batch ``index``: its entries and the source digest after it.

        ``None`` when the parent encodes that batch itself: the worker has not
        started it (the parent does not wait for a worker that may be
        descheduled on a busy machine), skipped it, or cannot work any more
        (then it is stopped). Only a batch the worker is encoding is waited for.
        """
        if self._pid is not None:
            self._board.publish(index)
        while self._pid is not None:
            message, self._pending = self._pending, None
            if message is None:
                if not self._connection.poll(0) and not self._encoding(index):
                    return None
                message = self._receive()
                if message is None:
                    return None
            if message[0] < index:
                continue  # a batch the parent encoded itself
            if message[0] > index:
                self._pending = message  # the worker skipped this one
                return None
            return message[2], message[1]
        return None

    def _encoding(self, index: int) -> bool:
        """Whether the worker is encoding batch ``index`` (the parent then waits for it)."""
        return self._board.working() == index

    def _receive(self) -> tuple[int, bytes, _Entries] | None:
        try:
            message = self._connection.recv()
        except Exception:  # noqa: BLE001 - EOF, a broken pipe: the parent goes on alone
            message = None
        if type(message) is not tuple or len(message) != 3 or type(message[0]) is not int:
            self.close()
            return None
        return message

    def close(self) -> None:
        """Stop the worker (it keeps no state worth waiting for) and reap it."""
        pid, self._pid = self._pid, None
        if pid is None:
            return
        self._connection.close()
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.waitpid(pid, 0)
        if self._affinity is not None:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, self._affinity)


class _NoWorker(_Worker):
    """No worker process: every batch is the parent's."""

    def __init__(self) -> None:
        self._pid = None
        self._pending = None
        self._affinity = None


_NO_WORKER: Final = _NoWorker()


def _append_line(
    writer: RunWriter,
    importer: LinesImporter,
    line: bytes,
    number: int,
    *,
    options: ImportOptions,
    tolerate: Callable[[str], bool] | None,
) -> None:
    """Decode, map and append one line in the parent, with ``_guarded``'s refusals.

    A plain record mapped from a row the strict decoder produced is encoded
    without walking that row again (``plain_record_bytes(decoded=...)``);
    anything the fast path does not accept goes to ``RunWriter.add``.
    """
    where = f"line[{number}]"
    try:
        row, height = decode_line(line, where, tolerate)
        item = importer.map_row(row, where, options)
    except SealevalError:
        raise
    except Exception:  # noqa: BLE001 - an importer's exception may quote input
        raise refuse("importer_failed", "source") from None
    plain = None
    if type(item) is dict and height is not None:
        plain = plain_record_bytes(item, decoded=(row, height))
    if plain is None:
        writer.add(item)
    else:
        writer._add_plain_bytes(*plain)


def _write_lines(
    request: _Request,
    destination: str | os.PathLike[str],
    header: RunHeader,
    sink: _Sink,
    *,
    parallel: bool,
) -> ImportSummary:
    """Stream a parallel-safe JSONL source: ``LinesImporter.rows`` and ``_write`` in one loop.

    With ``parallel``, a worker process encodes batches ahead (see above).
    """
    importer: LinesImporter = request.importer
    options = request.options
    tolerate = _tolerance(importer, options)
    source_digest = header.source_digest
    worker = _Worker(request.path, importer, options) if parallel else _NO_WORKER
    try:
        with (
            open_source(request.path) as handle,
            RunWriter(destination, header, limits=request.limits) as writer,
        ):
            batches = _Batches()
            entries: _Entries = []
            offered: bytes | None = None  # the worker's digest through this batch
            expected: bytes | None = None  # the same, once a worker record is used
            lines = _guarded(iter_lines(handle, options.max_line_bytes, sink))
            for number, line in lines:
                if batches.lines == 0:
                    received = worker.batch(batches.index)
                    entries, offered = received if received is not None else ([], None)
                    entries.reverse()  # consumed from the end, one per line
                entry = entries.pop() if entries else None
                if entry is not None:
                    writer._add_plain_bytes(*entry)
                    expected = offered
                elif not is_blank(line):
                    _append_line(writer, importer, line, number, options=options, tolerate=tolerate)
                if batches.add(line) and expected is not None:
                    if sink.hash.digest() != expected:
                        raise refuse("source_changed", "source")
                    expected = None
            if expected is not None and sink.hash.digest() != expected:
                raise refuse("source_changed", "source")
            if sink.digest != source_digest:
                raise refuse("source_changed", "source")
            if writer.record_count == 0:
                raise refuse("no_records", "source")
            summary = writer.finish()
    finally:
        worker.close()
    return ImportSummary(
        adapter=request.name,
        run_digest=summary.run_digest,
        record_count=summary.record_count,
        canonical_size=summary.canonical_size,
        source_digest=source_digest,
    )
