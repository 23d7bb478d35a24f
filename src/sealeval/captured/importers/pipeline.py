"""The import pipeline: ``load_run`` and ``import_run_streaming``.

Both check the caller's arguments once (:func:`~sealeval.captured.importers.inputs.build_request`),
pick the importer (by name or ``auto``), hash the source, and turn the
importer's rows into a validated run (``load_run``) or a canonical run file
(``import_run_streaming``; large parallel-safe JSONL sources go through
:mod:`sealeval.captured.importers.parallel`). See the package docstring for
the arguments and refusals.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final, TypeVar

from sealeval import _validate
from sealeval.canonical import EVALUATOR_CODES, digest_bytes
from sealeval.captured.errors import CapturedRunError
from sealeval.captured.importers import parallel
from sealeval.captured.importers.base import ImportOptions, ImportRefusalError, RecordSource
from sealeval.captured.importers.inputs import (
    ImportRequest,
    ImportSummary,
    Progress,
    Sink,
    Tally,
    build_request,
    file_size,
    guarded,
    hash_file,
    unchanged,
)
from sealeval.captured.importers.jsonl import (
    DocumentImporter,
    LinesImporter,
    open_source,
    read_source,
    refuse,
)
from sealeval.captured.importers.native.folders import FolderImporter
from sealeval.captured.importers.registry import AUTO, FALLBACKS, get_importer
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
from sealeval.errors import CanonicalError, CapturedError, OutputError, SealevalError

_T = TypeVar("_T")

__all__ = ["import_run_streaming", "load_run"]

_CHUNK: Final = 1 << 20


def _typed(item: Any, position: int, request: ImportRequest) -> Record:
    limit = request.limits.max_records
    if limit is not None and position >= limit:
        raise CapturedRunError("too_many_records", "records")
    with _validate.rebased("record", f"records[{position}]", error=CapturedRunError):
        record = Record.from_mapping(item)
        if request.projection is not None:
            record = project_record(record, request.projection)
    return record


def _records(request: ImportRequest, source: RecordSource) -> Iterator[Record]:
    for position, item in enumerate(guarded(source)):
        yield _typed(item, position, request)


def _load_invarlock(request: ImportRequest) -> Run:
    try:
        return request.importer.load(request.path, request.limits)  # type: ignore[no-any-return]
    except CanonicalError as error:
        raise refuse(EVALUATOR_CODES.get(error.code, "invalid_json"), "file") from None


def _document(request: ImportRequest, progress: Progress | None) -> tuple[Any, str]:
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
        raise refuse("importer_failed", "file") from None
    return prepared, source_digest


def _finish_run(request: ImportRequest, header: RunHeader, records: list[Record]) -> Run:
    if not records:
        raise refuse("no_records", "file")
    run = Run(header, tuple(records))
    request.limits.check_size(run.canonical_size)
    return run


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
    request = build_request(
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
        return _with_fallback(adapter, request, lambda chosen: _load(chosen, progress))


def _load(request: ImportRequest, progress: Progress | None) -> Run:
    if request.name == "invarlock":
        return _load_invarlock(request)
    importer = request.importer
    if isinstance(importer, FolderImporter):
        request.header(None)
        plan = importer.plan(request.path, request.options)
        header = request.header(plan.digest)
        records = list(_records(request, importer.read(plan, request.options)))
        plan.check_unchanged()
        return _finish_run(request, header, records)
    if isinstance(importer, LinesImporter):
        request.header(None)  # identities first: nothing is read without them
        total = file_size(request.path)
        cap = request.streamed_cap
        sink = Sink(progress, 0, total, cap)
        with open_source(request.path) as handle:
            if cap is not None and os.fstat(handle.fileno()).st_size > cap:
                raise refuse("too_large", "file")
            records = list(_records(request, importer.rows(handle, request.options, sink)))
        return _finish_run(request, request.header(sink.digest), records)
    if isinstance(importer, DocumentImporter):
        prepared, source_digest = _document(request, progress)
        header = request.header(source_digest)
        return _finish_run(
            request, header, list(_records(request, importer.rows(prepared, request.options)))
        )
    request.header(None)
    source_digest, before, _ = _hashed(request, progress, file_size(request.path))
    header = request.header(source_digest)
    records = list(_records(request, importer.records(request.path, request.options)))
    unchanged(request.path, before)
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
    request = build_request(
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
    return _with_fallback(adapter, request, lambda chosen: _stream(chosen, destination, progress))


#: Refusals about the file itself (not its format): no other reader can do better.
_FILE_CODES: Final = frozenset(
    {"not_found", "not_regular_file", "unreadable", "too_large", "source_changed"}
)


#: Native-reader refusals that ``auto`` reports over the specified adapter's.
_NATIVE_VERDICTS: Final = frozenset({"incomplete_export", "not_results"})


def _with_fallback(
    adapter: str, request: ImportRequest, attempt: Callable[[ImportRequest], _T]
) -> _T:
    """Run ``attempt``; ``auto`` reads with the native fallback what a specified adapter refuses.

    Detection claims files such as lm-eval >= 0.4.3 samples for the specified
    adapter; when it refuses the file (several filters, a list target...),
    ``auto`` reads it with the native importer of the same files
    (:data:`~sealeval.captured.importers.registry.FALLBACKS`). When both
    refuse, the specified adapter's refusal is reported, unless the native
    reader found the file short of what it states (``incomplete_export``) or
    holding no per-sample results at all (``not_results``: an Inspect log
    written without its ``samples``), which say more. A named adapter never
    falls back.
    """
    fallback = FALLBACKS.get(request.name) if adapter == AUTO else None
    if fallback is None:
        return attempt(request)
    native = get_importer(fallback)
    if _falls_short(native, request):
        # the file states more records than it holds (lm-eval ``n-samples``): only the
        # native reader checks that (``incomplete_export``, or the counts with allow_partial)
        return attempt(dataclasses.replace(request, name=fallback, importer=native))
    try:
        return attempt(request)
    except CapturedError as error:
        if error.code in _FILE_CODES:
            raise
        refusal = error
    try:
        return attempt(dataclasses.replace(request, name=fallback, importer=native))
    except CapturedError as error:
        if error.code in _NATIVE_VERDICTS:
            raise  # fewer records than the file states, or none at all: that is the fault
        if error.code == "identities_required" and (verdict := _native_verdict(native, request)):
            raise verdict from None
        if isinstance(error, ImportRefusalError) and isinstance(refusal, ImportRefusalError):
            # what lifts the native reader's refusal lifts ``auto``'s (it falls back again)
            refusal.remedy = refusal.remedy or error.remedy
        raise refusal from None


def _native_verdict(native: Any, request: ImportRequest) -> CapturedError | None:
    """Return the native reader's :data:`_NATIVE_VERDICTS` refusal of the file, if any.

    Read only to name the fault when the native attempt stopped at the
    identities it needs (a file that states none): a file holding no
    per-sample results is refused as such, not sent back for identities.
    """
    records: Any = None
    try:
        records = native.records(request.path, request.options)
        next(iter(records), None)
    except CapturedError as error:
        return error if error.code in _NATIVE_VERDICTS else None
    finally:
        close = getattr(records, "close", None)
        if callable(close):
            close()
    return None


def _falls_short(native: object, request: ImportRequest) -> bool:
    """Whether the native reader finds fewer records in the file than it states.

    A file it cannot read this way states nothing: the import names the fault.
    """
    falls_short = getattr(native, "falls_short", None)
    if not callable(falls_short):
        return False
    try:
        return bool(falls_short(request.path, request.options))
    except SealevalError:
        return False


def _stream(
    request: ImportRequest, destination: str | os.PathLike[str], progress: Progress | None
) -> ImportSummary:
    if request.name == "invarlock":
        run = _load_invarlock(request)
        digest = write_run(run, destination, limits=request.limits)
        tally = Tally()
        for record in run:
            tally.note(record)
        return ImportSummary(
            adapter=request.name,
            run_digest=digest,
            record_count=len(run),
            canonical_size=run.canonical_size,
            source_digest=run.source_digest,
            error_count=tally.errors,
            tasks=tuple(sorted(tally.tasks)),
        )
    importer = request.importer
    if isinstance(importer, FolderImporter):
        request.header(None)
        plan = importer.plan(request.path, request.options)

        def planned() -> Iterator[Any]:
            yield from importer.read(plan, request.options)
            plan.check_unchanged()

        return _write(request, destination, request.header(plan.digest), planned())
    if isinstance(importer, DocumentImporter):
        prepared, source_digest = _document(request, progress)
        header = request.header(source_digest)
        return _write(request, destination, header, importer.rows(prepared, request.options))
    request.header(None)  # identities first: nothing is read without them
    total = file_size(request.path)
    lines = isinstance(importer, LinesImporter) or _streams_lines(request)
    passes = 2 * total if lines else total
    source_digest, before, size = _hashed(request, progress, passes)
    header = request.header(source_digest)
    if lines:
        sink = Sink(progress, size, size * 2)
        written = _stream_lines(request, destination, header, sink, size)
        if written is not None:
            return written
    return _stream_records(request, destination, header, before)


def _hashed(
    request: ImportRequest, progress: Progress | None, total: int
) -> tuple[str, tuple[int, ...], int]:
    """:func:`hash_file` once per import: ``auto``'s fallback reuses the first attempt's.

    The file must be unchanged since (``source_changed``); the records are
    then read checked against this digest (line by line) or the file's
    identity (``unchanged``) as on a first attempt.
    """
    done: tuple[str, tuple[int, ...], int] | None = request.memo.get("hashed")
    if done is not None:
        unchanged(request.path, done[1])
        return done
    done = hash_file(request.path, request.streamed_cap, progress, total)
    request.memo["hashed"] = done
    return done


def _stream_lines(
    request: ImportRequest,
    destination: str | os.PathLike[str],
    header: RunHeader,
    sink: Sink,
    size: int,
) -> ImportSummary | None:
    """Stream a JSONL source line by line: a ``LinesImporter``, or a native reader's mapper.

    ``None`` when the native reader has no mapper for the file (it changed since
    :func:`_streams_lines`): its records then say why.
    """
    importer = request.importer
    if not isinstance(importer, LinesImporter):
        mapper = importer.line_mapper(request.path, request.options)
        if mapper is None:
            return None
        return parallel.write_lines(
            request, destination, header, sink, parallel=parallel.can_fork(size), mapper=mapper
        )
    if parallel.mappable(request):
        worker = parallel.use_worker(request, size)
        return parallel.write_lines(request, destination, header, sink, parallel=worker)
    source_digest = header.source_digest
    with open_source(request.path) as handle:

        def verified() -> Iterator[Any]:
            yield from importer.rows(handle, request.options, sink)
            if sink.digest != source_digest:
                raise refuse("source_changed", "file")

        return _write(request, destination, header, verified())


def _streams_lines(request: ImportRequest) -> bool:
    """Whether a native reader maps this file line by line (``line_mapper``, base.LineMapper)."""
    streams = getattr(request.importer, "streams_lines", None)
    return request.projection is None and callable(streams) and bool(streams(request.path))


def _stream_records(
    request: ImportRequest,
    destination: str | os.PathLike[str],
    header: RunHeader,
    before: Any,
) -> ImportSummary:
    """Write a native reader's records, checking the file is unchanged at the end."""
    decoded_records = getattr(request.importer, "decoded_records", None)
    if callable(decoded_records) and request.projection is None:

        def checked_pairs() -> Iterator[Any]:
            yield from decoded_records(request.path, request.options)
            unchanged(request.path, before)

        return _write_decoded(request, destination, header, checked_pairs())

    def checked() -> Iterator[Any]:
        yield from request.importer.records(request.path, request.options)
        unchanged(request.path, before)

    return _write(request, destination, header, checked())


def _write_decoded(
    request: ImportRequest,
    destination: str | os.PathLike[str],
    header: RunHeader,
    pairs: Iterator[Any],
) -> ImportSummary:
    """:func:`_write` for ``(record, decoded)`` pairs (a native reader's ``decoded_records``).

    A record given with its decoded row takes the fast path without walking
    the row's members again (``plain_record_bytes(decoded=...)``, the same
    bytes and refusals); any other goes through :meth:`RunWriter.add`.
    """
    tally = Tally()
    with RunWriter(destination, header, limits=request.limits) as writer:
        for item, decoded in guarded(pairs):
            tally.note(item)
            plain = None
            if decoded is not None and type(item) is dict:
                plain = plain_record_bytes(item, decoded=decoded)
            if plain is None:
                writer.add(item)
            else:
                writer._add_plain_bytes(plain[0], plain[1])  # internal, as in parallel.py
        if writer.record_count == 0:
            raise refuse("no_records", "file")
        summary = writer.finish()
    return tally.summary(request.name, summary, header.source_digest)


def _write(
    request: ImportRequest,
    destination: str | os.PathLike[str],
    header: RunHeader,
    source: RecordSource,
) -> ImportSummary:
    tally = Tally()
    with RunWriter(destination, header, limits=request.limits) as writer:
        if request.projection is None:
            # The writer builds each record with make_run semantics and the same
            # ``records[<position>]`` error fields as _typed; plain dict records
            # take its fast path (RunEncoder.add).
            for item in guarded(source):
                tally.note(item)
                writer.add(item)
        else:
            for position, item in enumerate(guarded(source)):
                tally.note(item)
                writer.add(_typed(item, position, request))
        if writer.record_count == 0:
            raise refuse("no_records", "file")
        summary = writer.finish()
    return tally.summary(request.name, summary, header.source_digest)
