"""``inspect-eval``: Inspect AI's default ``.eval`` log (a ZIP archive), read without Inspect.

An ``.eval`` log holds ``header.json`` (the EvalLog without samples: version,
status, eval spec, results), one ``samples/<id>_epoch_<n>.json`` member per
sample and epoch, plus ``summaries.json``, ``reductions.json`` and a
``_journal/``. Members are Zstandard-compressed (ZIP method 93, read with the
``zstandard`` package) in current Inspect releases and deflate-compressed in
older ones; stored, deflate, bzip2 and LZMA members are read by ``zipfile``.
Every member's size and CRC-32 are checked; an encrypted member or any other
method is refused.

Each sample member becomes one record with the reference ``inspect-json``
rules (spec 11 §4) where they overlap, so a ``.eval`` log and the JSON log of
the same run give the same ``id``/``input``/``expected``/``output``/
``scores``/``metadata``/``error``:

* ``id``: the sample id (string, or integer as its decimal string); when the
  run has more than one epoch, ``<id>#<epoch>`` for every record.
* ``input``: ``sample.input`` (text or chat messages, as stored).
* ``expected``: ``sample.target``; a one-element list is unwrapped.
* ``output``: the text of ``output.choices[0].message.content`` (text parts
  concatenated, other parts skipped); ``null`` without a choice; the list of
  choice texts when there are several.
* ``scores``: ``scores.<scorer>.value`` as floats: numbers, ``"C"``/``"I"``
  (1/0), and beyond the reference ``"P"`` (0.5), ``"N"`` (0) and booleans; a
  dict value is flattened to ``<scorer>.<key>``; other values are skipped.
* ``metadata``: the string members of ``sample.metadata``.
* ``error``: ``"upstream_error"`` when the sample has an ``error`` (the
  message stays in context).
* ``context``: ``upstream_record`` (the sample without ``events``,
  ``events_data`` and ``attachments``, attachment references resolved) and
  ``inspect`` (``eval_id``, ``run_id``, ``task``, ``model``).

Attachment references (``attachment://<hash>``) are replaced by the sample's
``attachments`` entry; one without an entry is refused
(``attachment_unresolved``). A log whose status is not ``success``, or
without ``header.json`` (still running, crashed), is refused
(``incomplete_run``): its missing samples cannot be told apart from samples
that never existed. With ``allow_partial``, a ``cancelled`` or ``error`` run
is read: its records' ``context.inspect`` holds its ``status``,
``present_samples`` (the samples in the log) and ``stated_samples`` (the
samples the run planned: ``eval.dataset.sample_ids`` times the epochs, else
the header's ``results`` count, else not stated).

The central directory is bounded before ``zipfile`` reads it: at most
:data:`MAX_ARCHIVE_ENTRIES` members and :data:`MAX_DIRECTORY_BYTES` bytes
(``too_large``), whatever the end record states.

Memory: the ZIP central directory and one sample member (compressed and
decompressed, at most ``max_line_bytes``) at a time.
"""

from __future__ import annotations

import io
import lzma
import re
import struct
import zipfile
import zlib
from pathlib import Path
from typing import IO, Any, Final

import zstandard

from sealeval.captured.importers.base import ImportOptions, ImportRefusalError, RecordSource
from sealeval.captured.importers.native._common import (
    Ids,
    Scores,
    as_float,
    build_record,
    check_complete,
    identifier,
    loads,
    number,
    open_regular,
    refuse,
    tags,
    task_error,
    without_nan,
    zip_first_member,
)
from sealeval.captured.importers.native._skeleton import NativeImporter, Stated
from sealeval.captured.run import Record

__all__ = [
    "MAX_ARCHIVE_ENTRIES",
    "MAX_DIRECTORY_BYTES",
    "InspectEvalImporter",
    "check_directory",
    "log_header",
    "sample_record",
    "stated_by_header",
    "unfinished",
]

_ZSTD_METHOD: Final = 93
#: Inspect log format versions read: 1 and 2, and 3 (Inspect AI >= 0.3.135,
#: which adds a per-sample ``message_pool`` and the header's ``invalidated``;
#: the members records are built from are unchanged).
_LOG_VERSIONS: Final = (1, 2, 3)
#: Statuses of a run that did not finish: read only with ``allow_partial``.
_UNFINISHED: Final = ("cancelled", "error")
_ZIPFILE_METHODS: Final = frozenset(
    {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA}
)
_SAMPLE_MEMBER: Final = re.compile(r"samples/[^/]+_epoch_[0-9]+\.json")
_FIRST_MEMBERS: Final = frozenset(
    {"_journal/start.json", "header.json", "summaries.json", "reductions.json"}
)
_ATTACHMENT: Final = "attachment://"
_GRADES: Final = {"C": 1.0, "I": 0.0, "P": 0.5, "N": 0.0}
_DROPPED: Final = frozenset({"events", "events_data", "attachments"})
_MEMBER_ERRORS: Final = (
    zipfile.BadZipFile,
    zlib.error,
    lzma.LZMAError,
    EOFError,
    OSError,
    ValueError,
    NotImplementedError,
)


class InspectEvalImporter(NativeImporter):
    """Inspect AI ``.eval`` logs (ZIP; Zstandard or deflate members)."""

    name = "inspect-eval"

    def detect(self, head: bytes, path: Path) -> bool:
        """Recognise a ZIP archive whose first member is one Inspect writes first."""
        del path
        first = zip_first_member(head)
        return first is not None and (
            first in _FIRST_MEMBERS or _SAMPLE_MEMBER.fullmatch(first) is not None
        )

    def stated(self, path: Path, options: ImportOptions) -> Stated:
        """Return what ``header.json`` states (run id, Inspect version)."""
        with open_regular(path) as handle:
            check_directory(handle)
            try:
                archive = zipfile.ZipFile(handle)
            except (zipfile.BadZipFile, OSError, ValueError, EOFError):
                raise refuse("invalid_archive", "file") from None
            with archive:
                info = next((i for i in archive.infolist() if i.filename == "header.json"), None)
                if info is None:
                    return Stated()
                header, _ = loads(_member(archive, handle, info, options, "header"), "header")
        return stated_by_header(header)

    def records(self, path: Path, options: ImportOptions) -> RecordSource:
        """Yield one record per sample member, in archive order."""
        with open_regular(path) as handle:
            check_directory(handle)
            try:
                archive = zipfile.ZipFile(handle)
            except (zipfile.BadZipFile, OSError, ValueError, EOFError):
                raise refuse("invalid_archive", "file") from None
            with archive:
                yield from _records(archive, handle, options)


#: Most members an archive may list (its central directory is read before any member).
MAX_ARCHIVE_ENTRIES: Final = 250_000
#: Largest central directory read (bytes); each entry takes at least 46.
MAX_DIRECTORY_BYTES: Final = 64 << 20
_END: Final = b"PK\x05\x06"
_END_SIZE: Final = 22
_ZIP64_LOCATOR: Final = b"PK\x06\x07"
_ZIP64_END: Final = b"PK\x06\x06"
_ENTRY: Final = b"PK\x01\x02"
_ENTRY_SIZE: Final = 46


def check_directory(
    handle: IO[bytes],
    *,
    max_entries: int = MAX_ARCHIVE_ENTRIES,
    max_bytes: int = MAX_DIRECTORY_BYTES,
) -> None:
    """Refuse an archive whose central directory is too large before ``zipfile`` reads it.

    ``zipfile`` builds one object per listed member while it opens an
    archive, so millions of empty entries cost gigabytes before any other
    check. This reads the end record (and the ZIP64 one), refuses a stated
    directory over ``max_bytes`` or over ``max_entries`` members
    (``too_large``), then walks the directory's entry headers (at most
    ``max_bytes`` read) and refuses one listing more than ``max_entries``,
    whatever the end record states. Anything it cannot make sense of is left
    to ``zipfile``, which refuses it (``invalid_archive``).
    """
    try:
        size = handle.seek(0, io.SEEK_END)
        tail_start = max(0, size - (_END_SIZE + 0xFFFF))
        handle.seek(tail_start)
        tail = handle.read(size - tail_start)
    except OSError:
        raise refuse("invalid_archive", "file") from None
    end = tail.rfind(_END)
    if end < 0 or len(tail) - end < _END_SIZE:
        return
    entries, directory_size, directory_offset = struct.unpack_from("<HII", tail, end + 10)
    if (entries == 0xFFFF or directory_size == 0xFFFFFFFF or directory_offset == 0xFFFFFFFF) and (
        end >= 20 and tail[end - 20 : end - 16] == _ZIP64_LOCATOR
    ):
        zip64 = _zip64_end(handle, struct.unpack_from("<Q", tail, end - 12)[0])
        if zip64 is not None:
            entries, directory_size, directory_offset = zip64
    if entries > max_entries or directory_size > max_bytes:
        raise refuse("too_large", "file")
    try:
        handle.seek(directory_offset)
        directory = handle.read(directory_size)
    except (OSError, OverflowError, ValueError):
        return
    count = 0
    position = 0
    while position + _ENTRY_SIZE <= len(directory) and directory.startswith(_ENTRY, position):
        count += 1
        if count > max_entries:
            raise refuse("too_large", "file")
        name, extra, comment = struct.unpack_from("<HHH", directory, position + 28)
        position += _ENTRY_SIZE + name + extra + comment


def _zip64_end(handle: IO[bytes], offset: int) -> tuple[int, int, int] | None:
    try:
        handle.seek(offset)
        record = handle.read(56)
    except (OSError, OverflowError, ValueError):
        return None
    if len(record) != 56 or not record.startswith(_ZIP64_END):
        return None
    entries, directory_size, directory_offset = struct.unpack_from("<QQQ", record, 32)
    return entries, directory_size, directory_offset


def _records(archive: zipfile.ZipFile, handle: IO[bytes], options: ImportOptions) -> RecordSource:
    infos = archive.infolist()
    names = [info.filename for info in infos]
    if len(set(names)) != len(names):
        raise refuse("invalid_archive", "file")
    header_info = next((info for info in infos if info.filename == "header.json"), None)
    if header_info is None:
        raise refuse("incomplete_run", "header")
    header, _ = loads(_member(archive, handle, header_info, options, "header"), "header")
    epochs, facts, stated = log_header(header, "header", allow_partial=options.allow_partial)
    present = sum(1 for info in infos if _SAMPLE_MEMBER.fullmatch(info.filename) is not None)
    facts.update(check_complete(stated, present, options, partial=unfinished(facts)))
    ids = Ids()
    position = 0
    for info in infos:
        if _SAMPLE_MEMBER.fullmatch(info.filename) is None:
            continue
        where = f"samples[{position}]"
        sample, nan = loads(_member(archive, handle, info, options, where), where)
        record = sample_record(sample, where, epochs=epochs, options=options, nan=nan, facts=facts)
        ids.add(record.id, f"{where}.id")
        position += 1
        yield record
    if position == 0:
        raise refuse("no_records", "samples")


def log_header(
    header: Any, root: str, *, allow_partial: bool = False
) -> tuple[int, dict[str, Any], int | None]:
    """Check an Inspect log's header members; return its epochs, run facts and stated samples.

    ``root`` names the header in refusals (``header`` in a ``.eval``
    archive; the empty root of a JSON log gives ``status``, ``eval``...).
    The stated count is ``results.completed_samples`` (else
    ``total_samples``) when the log states one. A run that did not finish
    (``status`` ``cancelled`` or ``error``) is refused (``incomplete_run``)
    unless ``allow_partial``, which reads the samples it holds: the facts then
    hold the ``status`` (:func:`unfinished`) and the stated count is the
    number of samples the run planned.
    """
    prefix = f"{root}." if root else ""
    if type(header) is not dict:
        raise refuse("invalid_document", root or "file")
    version = header.get("version")
    if type(version) is not int or version not in _LOG_VERSIONS:
        raise refuse("unsupported_version", f"{prefix}version")
    status = header.get("status")
    if status != "success" and not (allow_partial and status in _UNFINISHED):
        # a run that stopped (not one still running) is read with allow_partial
        lifted = "allow_partial" if status in _UNFINISHED else None
        raise ImportRefusalError("incomplete_run", f"{prefix}status", remedy=lifted)
    if header.get("invalidated", False) is not False:
        raise refuse("incomplete_run", f"{prefix}invalidated")
    spec = header.get("eval")
    if type(spec) is not dict:
        raise refuse("missing_field", f"{prefix}eval")
    config = spec.get("config")
    epochs = config.get("epochs", 1) if type(config) is dict else 1
    if epochs is None:
        epochs = 1
    if type(epochs) is not int or epochs < 1:
        raise refuse("invalid_field", f"{prefix}eval.config.epochs")
    facts = {key: spec[key] for key in ("eval_id", "run_id", "task", "model") if key in spec}
    if status != "success":
        facts["status"] = status
    results = header.get("results")
    stated = None
    if type(results) is dict:
        for key in ("completed_samples", "total_samples"):
            if type(results.get(key)) is int and results[key] >= 0:
                stated = results[key]
                break
    if status != "success":
        planned = _planned(spec.get("dataset"), epochs)
        stated = stated if planned is None else planned
    return epochs, facts, stated


def unfinished(facts: dict[str, Any]) -> bool:
    """Whether :func:`log_header`'s facts are an unfinished run's (read with allow_partial)."""
    return "status" in facts


def _planned(dataset: Any, epochs: int) -> int | None:
    """Return the samples a run planned: ``eval.dataset.sample_ids`` times the epochs."""
    ids = dataset.get("sample_ids") if type(dataset) is dict else None
    return len(ids) * epochs if type(ids) is list else None


def stated_by_header(header: Any) -> Stated:
    """Return what an Inspect header states: ``eval.run_id``, ``eval.packages.inspect_ai``, task."""
    spec = header.get("eval") if type(header) is dict else None
    if type(spec) is not dict:
        return Stated()
    packages = spec.get("packages")
    version = packages.get("inspect_ai") if type(packages) is dict else None
    run_id = spec.get("run_id")
    task = spec.get("task")
    return Stated(
        source_name="inspect_ai",
        source_version=version if type(version) is str and version else None,
        run_id=run_id if type(run_id) is str and run_id else None,
        task=task if type(task) is str and task else None,
    )


def _member(
    archive: zipfile.ZipFile,
    handle: IO[bytes],
    info: zipfile.ZipInfo,
    options: ImportOptions,
    where: str,
) -> bytes:
    """One member's bytes: size-bounded, decompressed, length- and CRC-checked."""
    if info.flag_bits & 0x1:
        raise refuse("invalid_archive", where)
    if info.file_size > options.max_line_bytes:
        raise refuse("too_large", where)
    if info.compress_type == _ZSTD_METHOD:
        data = _zstd_member(handle, info, where)
    elif info.compress_type in _ZIPFILE_METHODS:
        try:
            with archive.open(info) as member:
                data = member.read(info.file_size + 1)
        except _MEMBER_ERRORS:
            raise refuse("invalid_archive", where) from None
    else:
        raise refuse("unsupported_compression", where)
    if len(data) != info.file_size or zlib.crc32(data) != info.CRC:
        raise refuse("invalid_archive", where)
    return data


def _zstd_member(handle: IO[bytes], info: zipfile.ZipInfo, where: str) -> bytes:
    """Read a method-93 member's raw bytes after its local header and decompress them."""
    try:
        handle.seek(info.header_offset)
        local = handle.read(30)
        if len(local) != 30 or not local.startswith(b"PK\x03\x04"):
            raise refuse("invalid_archive", where)
        name_length, extra_length = struct.unpack_from("<HH", local, 26)
        handle.seek(info.header_offset + 30 + name_length + extra_length)
        raw = handle.read(info.compress_size)
    except OSError:
        raise refuse("invalid_archive", where) from None
    if len(raw) != info.compress_size:
        raise refuse("invalid_archive", where)
    chunks: list[bytes] = []
    total = 0
    try:
        with zstandard.ZstdDecompressor().stream_reader(
            io.BytesIO(raw), read_across_frames=True
        ) as reader:
            while chunk := reader.read(1 << 20):
                total += len(chunk)
                if total > info.file_size:
                    raise refuse("invalid_archive", where)
                chunks.append(chunk)
    except zstandard.ZstdError:
        raise refuse("invalid_archive", where) from None
    return b"".join(chunks)


# ---------------------------------------------------------------------------
# Sample mapping (shared by the .eval reader and its tests against JSON logs)


def sample_record(
    sample: Any,
    where: str,
    *,
    epochs: int,
    options: ImportOptions,
    nan: bool,
    facts: dict[str, Any] | None = None,
) -> Record:
    """Map one Inspect sample object to a record (see the module docstring).

    ``nan`` says whether the decoded sample may hold bare ``NaN`` tokens;
    ``facts`` (run-level ``eval`` members) go to ``context.inspect``.
    """
    if type(sample) is not dict:
        raise refuse("invalid_document", where)
    base_id = identifier(sample.get("id"), f"{where}.id")
    epoch = sample.get("epoch", 1)
    if type(epoch) is not int or not 1 <= epoch <= epochs:
        raise refuse("invalid_field", f"{where}.epoch")
    record_id = f"{base_id}#{epoch}" if epochs > 1 else base_id
    scores = _scores(sample.get("scores"), f"{where}.scores", options)
    kept = {key: value for key, value in sample.items() if key not in _DROPPED}
    attachments = sample.get("attachments")
    resolved = _resolve(kept, attachments if type(attachments) is dict else {}, where)
    if nan:
        resolved = without_nan(resolved)
    error = task_error(resolved.get("error"), f"{where}.error")
    metadata = resolved.get("metadata")
    if metadata is not None and type(metadata) is not dict:
        raise refuse("invalid_field", f"{where}.metadata")
    target = resolved.get("target")
    if type(target) is list and len(target) == 1:
        target = target[0]
    return build_record(
        where,
        record_id=record_id,
        input_value=resolved.get("input"),
        expected=target,
        output=_output(resolved.get("output"), f"{where}.output"),
        scores=scores,
        metadata=tags(metadata),
        error=error,
        context={"upstream_record": resolved, **({"inspect": without_nan(facts)} if facts else {})},
    )


def _resolve(value: Any, attachments: dict[str, Any], where: str) -> Any:
    if type(value) is str:
        if value.startswith(_ATTACHMENT):
            content = attachments.get(value[len(_ATTACHMENT) :])
            if type(content) is not str:
                raise refuse("attachment_unresolved", where)
            return content
        return value
    if type(value) is dict:
        return {key: _resolve(item, attachments, where) for key, item in value.items()}
    if type(value) is list:
        return [_resolve(item, attachments, where) for item in value]
    return value


def _scores(value: Any, field: str, options: ImportOptions) -> dict[str, int | float]:
    scores = Scores(field)
    if value is None:
        return scores.values
    if type(value) is not dict:
        raise refuse("invalid_field", field)
    for name, score in value.items():
        if type(score) is not dict or "value" not in score:
            raise refuse("invalid_field", field)
        grade = score["value"]
        if type(grade) is dict:
            for key, item in grade.items():
                scores.add(f"{name}.{key}", _grade(item, field, options))
        else:
            scores.add(name, _grade(grade, field, options))
    return scores.values


def _grade(value: Any, field: str, options: ImportOptions) -> float | None:
    if type(value) is str:
        return _GRADES.get(value)
    return as_float(number(value, field, options, booleans=True), field)


def _output(value: Any, field: str) -> Any:
    if value is None:
        return None
    if type(value) is not dict:
        raise refuse("invalid_field", field)
    choices = value.get("choices")
    if choices is None:
        return None
    if type(choices) is not list:
        raise refuse("invalid_field", f"{field}.choices")
    texts = [_choice_text(choice, f"{field}.choices") for choice in choices]
    if not texts:
        return None
    return texts[0] if len(texts) == 1 else texts


def _choice_text(choice: Any, field: str) -> str:
    message = choice.get("message") if type(choice) is dict else None
    content = message.get("content") if type(message) is dict else None
    if type(content) is str:
        return content
    if type(content) is list:
        parts: list[str] = []
        for part in content:
            if type(part) is not dict:
                raise refuse("invalid_field", field)
            if part.get("type") == "text" and type(part.get("text")) is str:
                parts.append(part["text"])
        return "".join(parts)
    raise refuse("invalid_field", field)
