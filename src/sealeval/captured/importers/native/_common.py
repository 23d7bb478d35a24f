"""Machinery shared by the native importers: files, lenient JSON, sniffing, record building.

* **Files** (:func:`open_regular`, :func:`read_bounded`, :func:`sibling`):
  regular files only, opened without following symlinks; sizes bounded.
* **Lenient JSON** (:func:`loads`, :func:`iter_jsonl`): strict JSON plus the
  bare ``NaN`` token that Python's ``json.dump`` writes for a NaN float. A
  ``NaN`` decodes to the :data:`NAN` marker; where a format reads a score it
  becomes a missing score (or a ``non_finite_number`` refusal, see
  :class:`~sealeval.captured.importers.base.ImportOptions`), and anywhere else
  :func:`without_nan` turns it into ``null``. ``Infinity``, duplicate keys and
  invalid UTF-8 are refused. JSONL is read one line at a time. The decoding
  is :data:`sealeval.canonical.EVALUATOR_DECODER` (codes mapped by
  :data:`~sealeval.canonical.EVALUATOR_CODES`).
* **Sniffing** (:func:`scan`, :func:`zip_first_member`): what the first bytes
  of a file say about its first JSON value (member names at the first few
  levels, first array elements only) or its first ZIP member, for ``detect``.
* **Records** (:class:`Scores`, :class:`Ids`, :func:`build_record`,
  :func:`tags`, :func:`error_text`): the conventions every native importer
  follows, and the conversion of record-validation failures into
  :class:`~sealeval.captured.importers.base.ImportRefusalError` codes with
  library-chosen field names (positions, never ids or values).
"""

from __future__ import annotations

import functools
import hashlib
import stat
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final

from sealeval.canonical import EVALUATOR_CODES, EVALUATOR_DECODER, scan_raw
from sealeval.canonical import EVALUATOR_NAN as NAN
from sealeval.captured.errors import CapturedRunError
from sealeval.captured.importers.base import DETECT_BYTES, ImportOptions, ImportRefusalError
from sealeval.captured.importers.jsonl import (
    JSON_WHITESPACE,
    bound_containers,
    contains_nan,
    plain_row,
    refuse,
)
from sealeval.captured.importers.jsonl import open_source as open_regular
from sealeval.captured.run import Record
from sealeval.errors import CanonicalError

__all__ = [
    "INTERNAL_PREFIX",
    "MAX_ERROR_LENGTH",
    "NAN",
    "UPSTREAM_ERROR",
    "Ids",
    "Scores",
    "Shape",
    "as_float",
    "build_record",
    "check_complete",
    "contains_nan",
    "decode_jsonl_line",
    "error_text",
    "first_object",
    "identifier",
    "iter_jsonl",
    "iter_jsonl_rows",
    "iter_table",
    "loads",
    "number",
    "open_regular",
    "read_bounded",
    "read_companion",
    "record_row",
    "refuse",
    "scan",
    "sibling",
    "tags",
    "task_error",
    "without_nan",
    "zip_first_member",
]

#: Longest record ``error`` kept (code points); longer native messages are cut.
MAX_ERROR_LENGTH: Final = 4096
#: The fixed record error of formats whose native message stays in ``context``.
UPSTREAM_ERROR: Final = "upstream_error"
#: Metadata keys with this prefix are invarlock opt-ins, never slice tags.
INTERNAL_PREFIX: Final = "invarlock_"
#: Largest companion file (lm-eval results, MLflow meta) read into memory.
MAX_COMPANION_BYTES: Final = 16 * 1024 * 1024


# ---------------------------------------------------------------------------
# Files


def read_bounded(handle: IO[bytes], limit: int, field: str = "file") -> bytes:
    """Read the rest of ``handle``; more than ``limit`` bytes is ``too_large``."""
    try:
        data = handle.read(limit + 1)
    except OSError:  # pragma: no cover - a read error after a successful open
        raise refuse("unreadable", field) from None
    if len(data) > limit:
        raise refuse("too_large", field)
    return data


def sibling(path: Path, name: str) -> Path | None:
    """``path``'s directory entry ``name`` when it is a regular file (no symlink), else None."""
    candidate = path.parent / name
    try:
        mode = candidate.lstat().st_mode
    except OSError:
        return None
    return candidate if stat.S_ISREG(mode) else None


@dataclass(frozen=True, slots=True)
class Companion:
    """A companion file read beside the source: its decoded value and byte digest."""

    value: Any
    digest: str

    def __repr__(self) -> str:
        """Never show content."""
        return "Companion(...)"


def read_companion(path: Path, field: str) -> Companion:
    """Read and decode a companion JSON document (``invalid_companion`` on any fault).

    The digest (``sha256:<hex>`` of the bytes) goes into the records' context,
    so the run digest binds the companion even though ``source_digest`` covers
    the source file only.
    """
    try:
        with open_regular(path, field) as handle:
            data = read_bounded(handle, MAX_COMPANION_BYTES, field)
        value, _ = loads(data, field)
    except ImportRefusalError:
        raise refuse("invalid_companion", field) from None
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    return Companion(without_nan(value), digest)


# ---------------------------------------------------------------------------
# Lenient JSON


def loads(data: bytes, field: str, *, invalid: str = "invalid_json") -> tuple[Any, bool]:
    """Decode one JSON value from UTF-8 bytes; return it and whether it may hold :data:`NAN`.

    Raises:
        ImportRefusalError: ``not_utf8``, ``duplicate_key``,
            ``non_finite_number`` (``Infinity``), or ``invalid`` (grammar,
            byte order mark, nesting beyond the interpreter, integers of more
            than 4300 digits), ``too_large`` (more than
            :data:`~sealeval.captured.importers.jsonl.MAX_CONTAINERS` arrays and
            objects, refused before decoding).
    """
    bound_containers(data, field)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise refuse("not_utf8", field) from None
    try:
        value = EVALUATOR_DECODER.decode(text)
    except CanonicalError as error:
        raise refuse(EVALUATOR_CODES.get(error.code, invalid), field) from None
    except (ValueError, RecursionError):
        raise refuse(invalid, field) from None
    return value, b"NaN" in data


def without_nan(value: Any) -> Any:
    """Return ``value`` with every :data:`NAN` replaced by ``None`` (``null``)."""
    if value is NAN:
        return None
    if type(value) is dict:
        return {key: without_nan(item) for key, item in value.items()}
    if type(value) is list:
        return [without_nan(item) for item in value]
    return value


def iter_jsonl(
    handle: IO[bytes], options: ImportOptions
) -> Iterator[tuple[str, dict[str, Any], bool]]:
    """Yield ``(where, object, may_hold_nan)`` for every non-blank line, in order.

    Lines are split on LF only and read one at a time (``where`` is
    ``line[N]``, 1-based); lines of ASCII whitespace are skipped; a line over
    ``options.max_line_bytes`` is ``too_large``; a line that is not a JSON
    object is ``invalid_jsonl_line``.
    """
    for where, value, nan, _ in iter_jsonl_rows(handle, options):
        yield where, value, nan


def iter_jsonl_rows(
    handle: IO[bytes], options: ImportOptions
) -> Iterator[tuple[str, dict[str, Any], bool, int | None]]:
    """Yield what :func:`iter_jsonl` yields, plus the row's nesting bound when known.

    A line without ``NaN`` that the strict decoder's scanner reads the fast
    way (:func:`~sealeval.captured.importers.jsonl.plain_row`) gives its
    bracket count: the row is then exactly as the strict decoder returns it,
    and a record that reuses its members unmodified can skip walking them
    again (``plain_record_bytes(decoded=...)``). Other lines are decoded by
    :func:`loads` (same values, refusals named as before) and give ``None``.
    """
    limit = options.max_line_bytes
    number_ = 0
    while True:
        try:
            line = handle.readline(limit + 1)
        except OSError:  # pragma: no cover - a read error after a successful open
            raise refuse("unreadable", "file") from None
        if not line:
            return
        number_ += 1
        where = f"line[{number_}]"
        if len(line) > limit and not (len(line) == limit + 1 and line.endswith(b"\n")):
            raise refuse("too_large", where)
        if not line.strip(JSON_WHITESPACE):
            continue
        yield (where, *decode_jsonl_line(line, where))


def decode_jsonl_line(line: bytes, where: str) -> tuple[dict[str, Any], bool, int | None]:
    """Decode one non-blank JSONL line as :func:`iter_jsonl_rows` does.

    Returns the object, whether it may hold ``NaN`` and its nesting bound
    (``None`` unless the strict decoder's scanner read it the fast way).
    """
    if b"NaN" not in line:
        fast = plain_row(line)
        if fast is not None:
            return fast[0], False, fast[1]
    value, nan = loads(line, where, invalid="invalid_jsonl_line")
    if type(value) is not dict:
        raise refuse("invalid_jsonl_line", where)
    return value, nan, None


def iter_table(path: Path, options: ImportOptions) -> Iterator[tuple[str, dict[str, Any], bool]]:
    """Yield the rows of a table written as JSONL (``where`` = ``line[N]``) or as one JSON array.

    pandas ``to_json(orient="records", lines=True)`` gives the first,
    ``orient="records"`` the second (``where`` = ``rows[i]``; the array is
    held in memory, at most ``max_line_bytes``). Rows must be objects.
    """
    with open_regular(path) as handle:
        if scan(handle.read(DETECT_BYTES)).kind != "array":
            handle.seek(0)
            yield from iter_jsonl(handle, options)
            return
        handle.seek(0)
        raw = read_bounded(handle, options.max_line_bytes)
    rows, nan = loads(raw, "file")
    if type(rows) is not list:
        raise refuse("invalid_document", "file")
    for position, row in enumerate(rows):
        if type(row) is not dict:
            raise refuse("invalid_document", f"rows[{position}]")
        yield f"rows[{position}]", row, nan


# ---------------------------------------------------------------------------
# Sniffing


@dataclass(frozen=True, slots=True)
class Shape:
    """What the first bytes of a file say about its first JSON value.

    Attributes:
        kind: ``"object"``, ``"array"`` or ``"other"``.
        members: member names seen, per path from the root (object member
            names and ``0`` for the first element of an array); only the
            first element of each array is looked into, to a few levels.
        complete: whether the first value ended within the head.
    """

    kind: str
    members: Mapping[tuple[str | int, ...], tuple[str, ...]]
    complete: bool = False

    def __repr__(self) -> str:
        """Show the kind only."""
        return f"Shape(kind={self.kind!r})"

    def names(self, *path: str | int) -> frozenset[str]:
        """Return the member names seen in the object at ``path``."""
        return frozenset(self.members.get(tuple(path), ()))


_MAX_SCAN_DEPTH: Final = 4
_JSON_SPACE: Final = " \t\r\n"


def _prefix_text(head: bytes) -> str | None:
    try:
        return head.decode("utf-8")
    except UnicodeDecodeError as error:
        if error.start >= len(head) - 3:
            try:
                return head[: error.start].decode("utf-8")
            except UnicodeDecodeError:  # pragma: no cover - defensive
                return None
        return None


@dataclass(slots=True)
class _Frame:
    """One open array or object of the scanner."""

    is_object: bool
    path: tuple[str | int, ...]
    tracked: bool
    expecting_key: bool = True
    key: str = ""
    index: int = 0

    def child(self) -> tuple[tuple[str | int, ...], bool]:
        step: str | int = self.key if self.is_object else self.index
        tracked = (
            self.tracked
            and (self.is_object or self.index == 0)
            and len(self.path) < _MAX_SCAN_DEPTH
        )
        return (*self.path, step), tracked


class _Scanner:
    """A forgiving scan of a JSON prefix that records member names (never raises)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.position = 0
        self.stack: list[_Frame] = []
        self.members: dict[tuple[str | int, ...], list[str]] = {}
        self.complete = False

    def run(self) -> None:
        """Scan until the first value ends, the text ends or the grammar breaks."""
        handlers = {
            "{": self._open,
            "[": self._open,
            "}": self._close,
            "]": self._close,
            ",": self._comma,
            ":": self._colon,
            '"': self._string,
        }
        text, length = self.text, len(self.text)
        while self.position < length and not self.complete:
            char = text[self.position]
            if char in _JSON_SPACE:
                self.position += 1
                continue
            handler = handlers.get(char, self._scalar)
            if not handler(char):
                return

    def _open(self, char: str) -> bool:
        if self.stack:
            path, tracked = self.stack[-1].child()
        else:
            path, tracked = (), True
        self.stack.append(_Frame(char == "{", path, tracked))
        if char == "{" and tracked:
            self.members.setdefault(path, [])
        self.position += 1
        return True

    def _close(self, char: str) -> bool:
        del char
        if not self.stack:
            return False
        self.stack.pop()
        self.position += 1
        self.complete = not self.stack
        return True

    def _comma(self, char: str) -> bool:
        del char
        if not self.stack:
            return False
        top = self.stack[-1]
        if top.is_object:
            top.expecting_key = True
        else:
            top.index += 1
        self.position += 1
        return True

    def _colon(self, char: str) -> bool:
        del char
        if not self.stack or not self.stack[-1].is_object:
            return False
        self.stack[-1].expecting_key = False
        self.position += 1
        return True

    def _string(self, char: str) -> bool:
        del char
        text, end = self.text, self.position + 1
        while end < len(text) and text[end] != '"':
            end += 2 if text[end] == "\\" else 1
        if end >= len(text):
            return False
        top = self.stack[-1] if self.stack else None
        if top is not None and top.is_object and top.expecting_key:
            try:
                top.key = scan_raw(text, self.position)[0]
            except ValueError:
                return False
            if top.tracked:
                self.members.setdefault(top.path, []).append(top.key)
        self.position = end + 1
        return True

    def _scalar(self, char: str) -> bool:
        del char
        text = self.text
        while self.position < len(text) and text[self.position] not in ",}]" + _JSON_SPACE:
            self.position += 1
        return True


@functools.lru_cache(maxsize=4)
def scan(head: bytes) -> Shape:
    """Scan the first JSON value of ``head`` (possibly cut off) for its member names.

    Never raises: text that is not JSON gives ``kind == "other"`` or stops the
    scan where the grammar breaks. Detection asks every importer about the
    same head, so the last few scans are remembered (the result is immutable).
    """
    text = _prefix_text(head)
    stripped = text.lstrip(_JSON_SPACE) if text is not None else ""
    if not stripped or stripped[0] not in "{[":
        return Shape("other", {})
    scanner = _Scanner(stripped)
    scanner.run()
    members = {path: tuple(names) for path, names in scanner.members.items()}
    return Shape("object" if stripped[0] == "{" else "array", members, scanner.complete)


def first_object(head: bytes) -> dict[str, Any] | None:
    """Return the first line of ``head`` as a JSON object (``None`` unless complete and valid)."""
    end = head.find(b"\n")
    if end < 0:
        return None
    try:
        value = EVALUATOR_DECODER.decode(head[:end].decode("utf-8"))
    except (CanonicalError, ValueError, RecursionError):
        return None
    return value if type(value) is dict else None


_ZIP_LOCAL: Final = b"PK\x03\x04"


def zip_first_member(head: bytes) -> str | None:
    """Return a ZIP file's first member name, from its local header (``None`` if not a ZIP)."""
    if len(head) < 30 or not head.startswith(_ZIP_LOCAL):
        return None
    name_length = struct.unpack_from("<H", head, 26)[0]
    raw = head[30 : 30 + name_length]
    if len(raw) != name_length:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


# ---------------------------------------------------------------------------
# Record conventions


def identifier(value: object, field: str) -> str:
    """Return a native id: a string as is, an integer (not boolean) as its decimal string."""
    kind = type(value)
    if kind is str:
        return value  # type: ignore[return-value]
    if kind is int:
        return str(value)
    if value is None:
        raise refuse("missing_id", field)
    raise refuse("invalid_id", field)


def task_error(value: object, field: str) -> str | None:
    """Apply the reference's ``task_error``: a non-empty string or object is an upstream error.

    ``null``/absent is ``None``; anything else is refused. The native message
    stays in ``context.upstream_record``.
    """
    if value is None:
        return None
    if (type(value) is str or type(value) is dict) and value:
        return UPSTREAM_ERROR
    raise refuse("invalid_field", field)


def error_text(message: object) -> str:
    """Return a native error message as a record error (cut to 4096 code points; empty: fixed)."""
    if type(message) is str and message:
        return message[:MAX_ERROR_LENGTH]
    return UPSTREAM_ERROR


def tags(metadata: object, *, prefix: str = "") -> dict[str, str]:
    """Slice tags from a native metadata object: its string members.

    Keys starting with ``invarlock_`` are skipped, as are values over 4096
    code points (both stay in ``context``); a non-object gives no tags.
    """
    if type(metadata) is not dict:
        return {}
    return {
        prefix + key: value
        for key, value in metadata.items()
        if type(value) is str
        and len(value) <= MAX_ERROR_LENGTH
        and not key.startswith(INTERNAL_PREFIX)
    }


def number(
    value: object, field: str, options: ImportOptions, *, booleans: bool = False
) -> int | float | None:
    """Return a native score value as a record score, or ``None`` when there is none.

    ints and floats pass with their JSON type; booleans become ``1.0``/``0.0``
    where the format uses them as pass/fail results (``booleans``), else they
    are not scores; a bare ``NaN`` is a missing score when
    ``options.nan_as_missing_score`` (the default), else ``non_finite_number``.
    Any other value is not a score.
    """
    if value is NAN:
        if options.nan_as_missing_score:
            return None
        raise refuse("non_finite_number", field)
    kind = type(value)
    if kind is bool:
        return (1.0 if value else 0.0) if booleans else None
    if kind is int or kind is float:
        return value  # type: ignore[return-value]
    return None


def as_float(value: int | float | None, field: str) -> float | None:
    """Return ``value`` as a float (``None`` stays); an int beyond binary64 is ``invalid_field``."""
    if value is None:
        return None
    try:
        return float(value)
    except OverflowError:
        raise refuse("invalid_field", field) from None


class Scores:
    """The scores of one record, refusing a second value under one name."""

    __slots__ = ("_field", "values")

    def __init__(self, field: str) -> None:
        """Start an empty score set whose refusals name ``field``."""
        self._field = field
        self.values: dict[str, int | float] = {}

    def add(self, name: object, value: int | float | None) -> None:
        """Add ``name`` → ``value`` (``None`` adds nothing); a repeated name is refused."""
        if value is None:
            return
        if type(name) is not str or not name:
            raise refuse("invalid_field", self._field)
        if name in self.values:
            raise refuse("score_name_collision", self._field)
        self.values[name] = value


class Ids:
    """The record ids seen so far (``duplicate_id`` on a repeat)."""

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        """Start with no ids."""
        self._seen: set[str] = set()

    def __contains__(self, record_id: object) -> bool:
        """Whether ``record_id`` was seen."""
        return record_id in self._seen

    def add(self, record_id: str, field: str) -> str:
        """Remember ``record_id``; return it."""
        if record_id in self._seen:
            raise refuse("duplicate_id", field)
        self._seen.add(record_id)
        return record_id


def record_row(
    *,
    record_id: str,
    input_value: Any,
    expected: Any,
    output: Any,
    scores: Mapping[str, int | float] | None = None,
    metadata: Mapping[str, str] | None = None,
    error: str | None = None,
    context: Any = None,
) -> dict[str, Any]:
    """Return one record as a plain mapping, validated where the run is built.

    For high-volume formats: ``load_run`` and the run writer validate the
    mapping once while encoding it (the fast path), instead of building a
    frozen :class:`~sealeval.captured.run.Record` first; a value the run
    rules refuse is a :class:`~sealeval.captured.CapturedRunError` naming
    ``records[<position>]``.
    """
    return {
        "id": record_id,
        "input": input_value,
        "expected": expected,
        "output": output,
        "scores": dict(scores) if scores is not None else {},
        "metadata": dict(metadata) if metadata is not None else {},
        "error": error,
        "context": context if context is not None else {},
    }


def build_record(
    where: str,
    *,
    record_id: str,
    input_value: Any,
    expected: Any,
    output: Any,
    scores: Mapping[str, int | float] | None = None,
    metadata: Mapping[str, str] | None = None,
    error: str | None = None,
    context: Any = None,
) -> Record:
    """Build and validate one record; a validation failure is ``invalid_id``/``invalid_field``.

    The refusal names ``<where>.<member>``, never a value.
    """
    try:
        return Record(
            id=record_id,
            input=input_value,
            expected=expected,
            output=output,
            scores=scores if scores is not None else {},
            metadata=metadata if metadata is not None else {},
            error=error,
            context=context if context is not None else {},
        )
    except CapturedRunError as failure:
        member = (failure.field or "").removeprefix("record.").split(".")[0]
        code = "invalid_id" if member == "id" else "invalid_field"
        field = f"{where}.{member}" if member else where
        raise refuse(code, field if len(field) <= 128 else where) from None


def check_complete(
    stated: int | None, present: int, options: ImportOptions, *, partial: bool = False
) -> dict[str, int]:
    """Refuse (``incomplete_export``) fewer records than a file states, unless allowed.

    ``stated`` is the file's own total (Inspect ``results``, lm-eval
    ``n-samples``, promptfoo ``stats``), ``None`` when it states none.
    ``partial``: the file says itself that its run stopped early (an Inspect
    log ``cancelled``, read only with ``allow_partial``): the counts are
    recorded whatever they are (``stated_samples`` only when stated).

    Returns the facts an allowed partial import records in each record's
    context (``stated_samples``, ``present_samples``), else nothing.
    """
    if partial:
        counts = {"present_samples": present}
        return counts if stated is None else {"stated_samples": stated, **counts}
    if stated is None or present >= stated or present == 0:
        return {}  # nothing present is ``no_records``
    if not options.allow_partial:
        raise ImportRefusalError("incomplete_export", "file", remedy="allow_partial")
    return {"stated_samples": stated, "present_samples": present}
