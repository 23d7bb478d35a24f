"""What an import starts from: the caller's arguments checked once, and the source's bytes.

:class:`ImportRequest` holds the checked arguments of ``load_run`` and
``import_run_streaming`` (built by :func:`build_request`);
:func:`hash_file`, :func:`unchanged` and :class:`Sink` hash the source and
notice a change; :func:`guarded` turns an importer's unexpected exception into
``importer_failed``; :class:`ImportSummary` is what a streamed import wrote.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypedDict

from sealeval.captured.errors import CapturedRunError
from sealeval.captured.importers.base import ImportOptions
from sealeval.captured.importers.jsonl import Binding, open_source, refuse
from sealeval.captured.importers.registry import (
    AUTO,
    FALLBACKS,
    SPECIFIED_ADAPTERS,
    check_fits,
    get_importer,
    resolve,
)
from sealeval.captured.likelihood import Source
from sealeval.captured.run import InputProjection, Limits, RunHeader, ScoreProvenance
from sealeval.captured.service_identity import ServiceIdentity
from sealeval.errors import CanonicalError, SealevalError

__all__ = [
    "ImportArguments",
    "ImportRequest",
    "ImportSummary",
    "Progress",
    "Sink",
    "Tally",
    "build_request",
    "file_size",
    "guarded",
    "hash_file",
    "stat_key",
    "unchanged",
]

_CHUNK: Final = 1 << 20


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
    #: Records whose ``error`` is set (the tool recorded a failure for them).
    error_count: int = 0
    #: The distinct ``metadata.task`` values, sorted (empty when records name none).
    tasks: tuple[str, ...] = ()

    def document(self) -> dict[str, Any]:
        """Return the summary line's facts as a JSON-ready object (``sealeval import --json``)."""
        return {
            "adapter": self.adapter,
            "records": self.record_count,
            "errored_records": self.error_count,
            "tasks": list(self.tasks),
            "run_digest": self.run_digest,
        }

    def line(self) -> str:
        """Return the one-line summary printed after an import (no file content)."""
        tasks = f"{len(self.tasks)} task{'s' if len(self.tasks) != 1 else ''}"
        return (
            f"sealeval: imported {self.record_count} records ({self.error_count} errored, "
            f"{tasks}) with {self.adapter}; run digest {self.run_digest}"
        )

    def __repr__(self) -> str:
        """Show the adapter and the record count."""
        return f"ImportSummary(adapter={self.adapter!r}, record_count={self.record_count})"


@dataclass(frozen=True, slots=True)
class ImportRequest:
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
    #: What one attempt learned about the file that another may reuse
    #: (``auto``'s fallback: the source digest); shared by ``dataclasses.replace``.
    memo: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def binding(self) -> Binding:
        """The declared source and run id, for importers that check them against the file."""
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


class ImportArguments(TypedDict, total=False):
    """The keyword arguments every import takes besides the file and the adapter.

    ``load_run`` and ``import_run_streaming`` name them one by one (their
    documented signatures); a caller that passes them on
    (:func:`~sealeval.captured.importers.per_task.import_inspect_tasks`, the
    CLI) types them with this one list.
    """

    source: Source | Mapping[str, Any] | None
    run_id: str | None
    artifact_digest: str | None
    service_identity: ServiceIdentity | Mapping[str, Any] | None
    score_provenance: Mapping[str, ScoreProvenance | Mapping[str, Any]] | None
    input_projection: InputProjection | Mapping[str, Any] | None
    limits: Limits
    options: ImportOptions | None


def build_request(
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
) -> ImportRequest:
    """Check the caller's arguments once and resolve the adapter (``auto``: detected)."""
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
    name, importer = resolve(adapter, path)
    if adapter != AUTO:
        check_fits(adapter, path)
    if name == "invarlock" and overridden:
        raise refuse("identity_override", "adapter")
    checked_source = None if source is None else Source.from_document(source)
    if run_id is not None and type(run_id) is not str:
        raise CapturedRunError("invalid_type", "run_id")
    if adapter == AUTO or name not in SPECIFIED_ADAPTERS:
        checked_source, run_id = _with_stated(
            _stater(adapter, name, importer), path, options, checked_source, run_id
        )
    if checked_source is not None and options.source_name is None:
        options = dataclasses.replace(options, source_name=checked_source.name)
    projection = (
        None if input_projection is None else InputProjection.from_document(input_projection)
    )
    return ImportRequest(
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


def _stater(adapter: str, name: str, importer: Any) -> Any:
    """Return the importer whose ``stated`` identities apply (``auto``: a fallback)."""
    if name in FALLBACKS and adapter == AUTO:
        return get_importer(FALLBACKS[name])
    return importer


def _with_stated(
    stater: Any,
    path: str | os.PathLike[str],
    options: ImportOptions,
    source: Source | None,
    run_id: str | None,
) -> tuple[Source | None, str | None]:
    """Fill identities the user left out from what the file states; refuse contradictions.

    Only the version and the run id are compared (``identity_mismatch`` on
    ``source.version`` / ``run_id``); the source name is the user's label and
    the file's tool name is used only when no ``source`` is given. A file
    that cannot be read here states nothing: the import itself names the
    fault.
    """
    stated_of = getattr(stater, "stated", None)
    if not callable(stated_of):
        return source, run_id
    try:
        stated = stated_of(Path(path), options)
    except SealevalError:
        return source, run_id
    version, stated_run = stated.source_version, stated.run_id
    if source is not None and version is not None and source.version != version:
        raise refuse("identity_mismatch", "source.version")
    if run_id is not None and stated_run is not None and run_id != stated_run:
        raise refuse("identity_mismatch", "run_id")
    if source is None and version is not None and stated.source_name is not None:
        source = Source(name=stated.source_name, version=version)
    return source, run_id if run_id is not None else stated_run


def stat_key(stat_result: os.stat_result) -> tuple[int, ...]:
    """Return a file's identity and version: device, inode, size, mtime and ctime."""
    return (
        stat_result.st_dev,
        stat_result.st_ino,
        stat_result.st_size,
        stat_result.st_mtime_ns,
        stat_result.st_ctime_ns,
    )


def hash_file(
    path: Path, cap: int | None, progress: Progress | None, total: int
) -> tuple[str, tuple[int, ...], int]:
    """SHA-256 of a file, read in chunks; returns the digest, its identity and its size."""
    digest = hashlib.sha256()
    size = 0
    with open_source(path) as handle:
        before = stat_key(os.fstat(handle.fileno()))
        while True:
            try:
                chunk = handle.read(_CHUNK)
            except OSError:  # pragma: no cover - a read error after a successful open
                raise refuse("unreadable", "file") from None
            if not chunk:
                break
            size += len(chunk)
            if cap is not None and size > cap:
                raise refuse("too_large", "file")
            digest.update(chunk)
            if progress is not None:
                progress(size, total)
    return "sha256:" + digest.hexdigest(), before, size


def unchanged(path: Path, before: tuple[int, ...]) -> None:
    """Refuse (``source_changed``) a source whose :func:`stat_key` moved since ``before``."""
    try:
        after = stat_key(path.lstat())
    except OSError:
        raise refuse("source_changed", "file") from None
    if after != before:
        raise refuse("source_changed", "file")


def file_size(path: Path) -> int:
    """Return a source's size for progress (0 when it cannot be stated)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


class Sink:
    """Counts and hashes the lines a JSONL importer reads; reports progress."""

    def __init__(
        self, progress: Progress | None, offset: int, total: int, cap: int | None = None
    ) -> None:
        """Start at ``offset`` of ``total`` bytes; more than ``cap`` bytes is ``too_large``."""
        self.hash = hashlib.sha256()
        self.size = 0
        self._progress = progress
        self._offset = offset
        self._total = total
        self._cap = cap

    def __call__(self, line: bytes) -> None:
        """Count and hash one line."""
        self.hash.update(line)
        self.size += len(line)
        if self._cap is not None and self.size > self._cap:
            raise refuse("too_large", "file")
        if self._progress is not None:
            self._progress(self._offset + self.size, self._total)

    @property
    def digest(self) -> str:
        """``sha256:<hex>`` of the lines so far."""
        return "sha256:" + self.hash.hexdigest()


class Tally:
    """Counts errored records and collects the tasks named in records' metadata."""

    __slots__ = ("errors", "tasks")

    def __init__(self) -> None:
        """Start with nothing counted."""
        self.errors = 0
        self.tasks: set[str] = set()

    def note(self, item: Any) -> None:
        """Count one record (a :class:`Record` or a record mapping)."""
        if isinstance(item, Mapping):
            error, metadata = item.get("error"), item.get("metadata")
        else:
            error, metadata = getattr(item, "error", None), getattr(item, "metadata", None)
        self.mark(
            error is not None, metadata.get("task") if isinstance(metadata, Mapping) else None
        )

    def mark(self, errored: bool, task: object) -> None:
        """Count one record from its two facts."""
        self.errors += errored
        if type(task) is str:
            self.tasks.add(task)

    def summary(self, adapter: str, written: Any, source_digest: str | None) -> ImportSummary:
        """Return the summary of a finished write (``written``: a ``RunSummary``)."""
        return ImportSummary(
            adapter=adapter,
            run_digest=written.run_digest,
            record_count=written.record_count,
            canonical_size=written.canonical_size,
            source_digest=source_digest,
            error_count=self.errors,
            tasks=tuple(sorted(self.tasks)),
        )


def guarded(source: Iterable[Any]) -> Iterator[Any]:
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
            raise refuse("importer_failed", "file") from None
        yield item
