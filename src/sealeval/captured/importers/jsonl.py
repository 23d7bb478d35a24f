"""JSONL reading, the helpers every specified adapter shares, and the ``jsonl`` adapter.

This module holds the machinery of the specified adapters (spec
``11-adapters.md``):

* **Source files** (:func:`open_source`, :func:`read_source`): regular files
  only (no symlinks, FIFOs or devices), refused with
  :class:`~sealeval.captured.importers.base.ImportRefusalError` codes.
* **JSONL reading** (§1.1, :func:`iter_rows`): the bytes are split on LF only,
  one line at a time (memory holds one line, never the file); lines of ASCII
  whitespace are skipped; every other line is strict JSON
  (:func:`sealeval.canonical.decode`) and must be an object. Errors name the
  1-based physical line, e.g. ``line[4]: invalid_jsonl_line``.
* **Shared row helpers** (§1.2, §1.3): :func:`identifier`, :func:`task_error`,
  :func:`metadata_of`, :func:`tags`, :func:`native_score`,
  :func:`capture_facts` (``context.upstream_record``, ``invarlock_scores``,
  ``invarlock_likelihood``).
* **Sniffing** (:func:`sniff`): what the first bytes of a file say about its
  first JSON value, for the adapters' ``detect``.
* **Adapter bases**: :class:`LinesImporter` (JSONL formats, mapped row by
  row) and :class:`DocumentImporter` (one JSON document: parse, bind the
  caller's identities, map). Both implement the
  :class:`~sealeval.captured.importers.base.Importer` protocol; ``load_run``
  uses their richer interface to read each file once and check identities.
* The **``jsonl`` adapter** (§2, :class:`JsonlImporter`): every row is
  already a record (only the nine record member names), used verbatim.
"""

from __future__ import annotations

import functools
import math
import os
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, ClassVar, Final

from sealeval._fs import open_regular, translated
from sealeval.canonical import (
    EVALUATOR_CODES,
    EVALUATOR_DECODER,
    EVALUATOR_NAN,
    DecodeLimits,
    decode,
    scan_raw,
    scan_strict,
)
from sealeval.captured.importers.base import ImportOptions, ImportRefusalError, RecordSource
from sealeval.captured.likelihood import Source
from sealeval.captured.run import RECORD_MEMBERS
from sealeval.errors import CanonicalError

__all__ = [
    "JSON_WHITESPACE",
    "MAX_CONTAINERS",
    "Binding",
    "DocumentImporter",
    "Head",
    "JsonlImporter",
    "LinesImporter",
    "bound_containers",
    "capture_facts",
    "contains_nan",
    "decode_document",
    "decode_line",
    "decode_row",
    "identifier",
    "is_blank",
    "iter_lines",
    "iter_rows",
    "metadata_of",
    "native_score",
    "open_source",
    "plain_row",
    "read_source",
    "refuse",
    "sniff",
    "tags",
    "task_error",
]

#: ASCII whitespace: a JSONL line made only of these bytes is skipped (§1.1).
JSON_WHITESPACE: Final = b" \t\n\x0b\x0c\r"
#: Where a JSON value may be truncated in a sniffed head.
_TRUNCATED: Final = object()
#: ``capture_facts`` without an upstream record (the adapter set its own context).
_NO_UPSTREAM: Final = object()
_INTERNAL_PREFIX: Final = "invarlock_"


def refuse(code: str, field: str | None = None) -> ImportRefusalError:
    """Return (for ``raise``) an importer refusal with a library-chosen field."""
    return ImportRefusalError(code, field)


# ---------------------------------------------------------------------------
# Source files


def open_source(path: str | os.PathLike[str], field: str = "file") -> IO[bytes]:
    """Open a regular file for binary reading (symlinks, FIFOs, devices refused).

    The open is :func:`sealeval._fs.open_regular` (no-follow, non-blocking,
    regular files only); its codes keep their names (``not_found``,
    ``not_regular_file``, ``unreadable``) under ``field``.
    """
    with translated(ImportRefusalError, field):
        fd = open_regular(path)
    return os.fdopen(fd, "rb")


def read_source(path: str | os.PathLike[str], max_bytes: int, field: str = "file") -> bytes:
    """Read a whole regular file of at most ``max_bytes`` bytes, once."""
    with open_source(path, field) as handle:
        try:
            data = handle.read(max_bytes + 1)
        except OSError:  # pragma: no cover - a read error after a successful open
            raise refuse("unreadable", field) from None
    if len(data) > max_bytes:
        raise refuse("too_large", field)
    return data


#: Most arrays and objects one decoded JSON document or line may hold: a valid
#: document of empty containers (``[[],[],...]``, three bytes each) would otherwise
#: cost some 60 bytes of memory per input byte before any other check could refuse it.
MAX_CONTAINERS: Final = 2_000_000
_JSON_STRING: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')


def bound_containers(data: bytes, field: str, limit: int = MAX_CONTAINERS) -> None:
    """Refuse (``too_large``) JSON text holding more than ``limit`` arrays and objects.

    Runs before decoding, in memory bounded by the text's size: each
    container takes at least two bytes, so text shorter than ``2 * limit``
    bytes passes at once; longer text passes when its bracket bytes are few
    enough, and is otherwise counted again without its strings (brackets
    inside strings do not count).
    """
    if len(data) < 2 * limit or data.count(b"[") + data.count(b"{") <= limit:
        return
    # Without an escaped quote, every quote opens or closes a string, so the text
    # outside strings is at the even places of a split; otherwise the grammar decides.
    escaped = b'\\"' in data
    outside = [_JSON_STRING.sub(b"", data)] if escaped else data.split(b'"')[::2]
    if sum(part.count(b"[") + part.count(b"{") for part in outside) > limit:
        raise refuse("too_large", field)


def decode_document(data: bytes, field: str = "file") -> Any:
    """Strictly decode one JSON document (00-conventions §2); refusals name ``field``."""
    bound_containers(data, field)
    try:
        return decode(data, limits=_UNBOUNDED_DECODE)
    except CanonicalError as error:
        raise refuse(EVALUATOR_CODES.get(error.code, "invalid_json"), field) from None


# The byte size of a document is bounded by whoever read it (read_source).
_UNBOUNDED_DECODE: Final = DecodeLimits(max_bytes=1 << 62)


# ---------------------------------------------------------------------------
# JSONL reading (§1.1)


def contains_nan(value: object) -> bool:
    """Whether :data:`~sealeval.canonical.EVALUATOR_NAN` occurs anywhere in ``value``."""
    stack = [value]
    while stack:
        item = stack.pop()
        if item is EVALUATOR_NAN:
            return True
        if type(item) is dict:
            stack.extend(item.values())
        elif type(item) is list:
            stack.extend(item)
    return False


def _decode_tolerating_nan(
    line: bytes, where: str, nan_members: Callable[[str], bool]
) -> dict[str, Any]:
    """Decode a line whose bare ``NaN`` tokens are allowed as some top-level members.

    Such members become ``null``; a ``NaN`` anywhere else is refused. Duplicate
    keys, infinities and the JSON grammar are refused as by the strict
    decoder (a line it cannot read is handed to the strict decoder, which
    names the fault); depth and surrogates are checked when the record is built.
    """
    bound_containers(line, where)
    try:
        value = EVALUATOR_DECODER.decode(line.decode("utf-8"))
    except (CanonicalError, ValueError, RecursionError):
        return _strict_row(line, where)  # the strict decoder names the fault
    if type(value) is not dict:
        raise refuse("not_object", where)
    for key, item in value.items():
        if item is EVALUATOR_NAN:
            if not nan_members(key):
                raise refuse("non_finite_number", where)
            value[key] = None
        elif contains_nan(item):
            raise refuse("non_finite_number", where)
    return value


_MAX_DEPTH: Final = _UNBOUNDED_DECODE.max_depth
_MAX_STRING: Final = _UNBOUNDED_DECODE.max_string_length
_SURROGATE_ESCAPE: Final = re.compile(rb"\\u[dD][89a-fA-F]")
_JSON_SPACE: Final = " \t\n\r"


def _plain_row(line: bytes) -> tuple[dict[str, Any], int] | None:
    """Decode an object line the fast way, or return ``None`` for :func:`_strict_row`.

    Accepts only what :func:`sealeval.canonical.decode` accepts, with the same
    value: a line that starts with ``{`` and cannot need the decoder's
    post-decoding walk (few enough brackets for the depth limit, no
    surrogate escape, shorter than the string limit) is scanned by the
    decoder's own C scanner (:data:`sealeval.canonical.scan_strict`). Any
    doubt or failure returns ``None`` and the strict decoder names the
    refusal. Returns the object and the line's bracket count, which bounds
    its nesting.
    """
    if not line.startswith(b"{") or len(line) > _MAX_STRING:
        return None
    brackets = line.count(b"[") + line.count(b"{")
    if brackets > _MAX_DEPTH or (b"\\u" in line and _SURROGATE_ESCAPE.search(line) is not None):
        return None
    try:
        text = line.decode("utf-8")
        value, end = scan_strict(text, 0)
    except (ValueError, StopIteration, RecursionError):  # CanonicalError is a ValueError
        return None
    if end != len(text) and text[end:].strip(_JSON_SPACE):
        return None
    return value, brackets


def plain_row(line: bytes) -> tuple[dict[str, Any], int] | None:
    """Decode an object line the fast way: ``(row, bracket count)``, or ``None`` when in doubt.

    The strict decoder's C scanner and hooks, on a line that starts with
    ``{``, has at most 128 brackets and no surrogate escape; ``None`` for
    anything else (including any fault), which the caller then decodes its
    own way to name the refusal. The row has exact JSON types and ``str``
    keys, nested at most the bracket count deep.
    """
    return _plain_row(line)


def decode_line(
    line: bytes, where: str, tolerate: Callable[[str], bool] | None = None
) -> tuple[dict[str, Any], int | None]:
    """Decode a line as :func:`decode_row` does; also return a nesting bound when known.

    The bound (the line's bracket count, at most 128) is given for an object
    the strict decoder's own scanner produced: exact ``dict``/``list``/``str``/
    ``int``/``float``/``bool``/``None`` values, ``str`` keys, nested at most
    that deep. ``None`` for the other paths (the NaN-tolerant decoder checks
    no depth).
    """
    if tolerate is not None and b"NaN" in line:
        return _decode_tolerating_nan(line, where, tolerate), None
    decoded = _plain_row(line)
    return (_strict_row(line, where), None) if decoded is None else decoded


def decode_row(
    line: bytes, where: str, tolerate: Callable[[str], bool] | None = None
) -> dict[str, Any]:
    """Decode one non-blank JSONL line into an object, as :func:`iter_rows` does.

    ``tolerate`` is :func:`iter_rows`'s NaN rule (``nan_members`` when
    ``nan_as_missing_score``), or ``None``.
    """
    return decode_line(line, where, tolerate)[0]


def _strict_row(line: bytes, where: str) -> dict[str, Any]:
    bound_containers(line, where)
    try:
        value = decode(line, limits=_UNBOUNDED_DECODE)
    except CanonicalError as error:
        code = "invalid_jsonl_line" if error.code == "invalid_json" else None
        raise refuse(code or EVALUATOR_CODES.get(error.code, "invalid_jsonl_line"), where) from None
    if type(value) is not dict:
        raise refuse("not_object", where)
    return value


def iter_rows(
    handle: IO[bytes],
    options: ImportOptions,
    *,
    sink: Callable[[bytes], object] | None = None,
    nan_members: Callable[[str], bool] | None = None,
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield ``(where, row)`` for every non-blank line of a JSONL stream, in order.

    ``where`` is the line's field name (``line[N]``, 1-based physical line).
    Every line read, blank or not, is passed to ``sink`` first (hashing,
    progress). With ``nan_members`` and ``options.nan_as_missing_score``, a
    bare ``NaN`` as the value of a top-level member accepted by
    ``nan_members`` becomes ``null`` instead of a refusal.

    Raises:
        ImportRefusalError: ``too_large`` (a line over ``max_line_bytes``),
            ``invalid_jsonl_line``, ``not_utf8``, ``byte_order_mark``,
            ``duplicate_key``, ``non_finite_number``, ``too_deep``,
            ``integer_too_long``, ``not_object``.
    """
    tolerate = nan_members if options.nan_as_missing_score else None
    for number, line in iter_lines(handle, options.max_line_bytes, sink):
        if is_blank(line):
            continue
        where = f"line[{number}]"
        yield where, decode_row(line, where, tolerate)


def is_blank(line: bytes) -> bool:
    """Whether a JSONL line holds only ASCII whitespace (skipped, §1.1)."""
    return not line.startswith(b"{") and not line.strip(JSON_WHITESPACE)


def iter_lines(
    handle: IO[bytes], limit: int, sink: Callable[[bytes], object] | None = None
) -> Iterator[tuple[int, bytes]]:
    """Yield ``(number, line)`` for every physical line (1-based), blank ones included.

    Each line goes to ``sink`` first; a line over ``limit`` bytes (its LF not
    counted) is refused with ``too_large`` (field ``line[N]``).
    """
    readline = handle.readline
    number = 0
    while True:
        try:
            line = readline(limit + 1)
        except OSError:  # pragma: no cover - a read error after a successful open
            raise refuse("unreadable", "file") from None
        if not line:
            return
        number += 1
        if sink is not None:
            sink(line)
        if len(line) > limit and not (len(line) == limit + 1 and line.endswith(b"\n")):
            raise refuse("too_large", f"line[{number}]")
        yield number, line


# ---------------------------------------------------------------------------
# Shared row helpers (§1.2, §1.3)


def identifier(value: object, field: str) -> str:
    """Return a native id: a string as is, an integer (not boolean) as its decimal string."""
    kind = type(value)
    if kind is str:
        return value  # type: ignore[return-value]
    if kind is int:
        return str(value)
    raise refuse("invalid_id", field)


def task_error(value: object, field: str) -> str | None:
    """``null`` → ``None``; a non-empty string or object → ``"upstream_error"``; else refused.

    The native message is never copied (it stays in ``context.upstream_record``).
    """
    if value is None:
        return None
    if (type(value) is str or type(value) is dict) and value:
        return "upstream_error"
    raise refuse("invalid_field", field)


def metadata_of(obj: Mapping[str, Any], field: str) -> dict[str, Any]:
    """``obj.metadata``: an object, or ``{}`` when absent or ``null``; anything else refused."""
    metadata = obj.get("metadata")
    if metadata is None:
        return {}
    if type(metadata) is not dict:
        raise refuse("invalid_field", f"{field}.metadata")
    return metadata


def tags(metadata: Mapping[str, Any]) -> dict[str, str]:
    """Return the slice tags: string members whose key does not start with ``invarlock_``.

    Non-string values are dropped here (they stay in ``context``).
    """
    return {
        key: value
        for key, value in metadata.items()
        if type(value) is str and not key.startswith(_INTERNAL_PREFIX)
    }


def is_number(value: object) -> bool:
    """Return whether ``value`` is an int or a float (never a boolean)."""
    kind = type(value)
    return kind is int or kind is float


def native_score(value: object, field: str, *, strict: bool) -> float | None:
    """Map one native score (inspect, promptfoo): ``{value}``, ``"C"``/``"I"``, numbers → float.

    A non-numeric value is refused (``strict``) or skipped (``None``).
    """
    if type(value) is dict:
        if "value" not in value:
            raise refuse("invalid_field", field)
        value = value["value"]
    if value == "C" and type(value) is str:
        return 1.0
    if value == "I" and type(value) is str:
        return 0.0
    if is_number(value):
        try:
            number = float(value)  # type: ignore[arg-type]
        except OverflowError:
            raise refuse("non_numeric_score", field) from None
        if not math.isfinite(number):
            raise refuse("non_finite_number", field)
        return number
    if strict:
        raise refuse("non_numeric_score", field)
    return None


def merge_explicit_scores(
    scores: dict[str, Any], metadata: Mapping[str, Any], field: str
) -> dict[str, Any]:
    """Merge ``metadata.invarlock_scores`` (§1.3) into ``scores``; values keep their JSON type."""
    explicit = metadata.get("invarlock_scores", {})
    if type(explicit) is not dict:
        raise refuse("invalid_field", f"{field}.metadata.invarlock_scores")
    for name, value in explicit.items():
        if not name or not is_number(value):
            raise refuse("invalid_field", f"{field}.metadata.invarlock_scores")
        if name in scores and scores[name] != value:
            raise refuse("score_conflict", f"{field}.metadata.invarlock_scores")
        scores[name] = value
    return scores


def capture_facts(
    record: dict[str, Any],
    metadata: Mapping[str, Any],
    field: str,
    *,
    upstream: object = _NO_UPSTREAM,
) -> dict[str, Any]:
    """Append the capture facts to a mapped record (§1.2) and return it.

    ``context.upstream_record`` = ``upstream`` (when given), merged into the
    context the adapter set; ``metadata.invarlock_scores`` merged into
    ``scores``; ``metadata.invarlock_likelihood`` (when present) becomes the
    record's ``likelihood`` (validated by the run rules).
    """
    if upstream is not _NO_UPSTREAM:
        context = record.setdefault("context", {})
        context["upstream_record"] = upstream
    record["scores"] = merge_explicit_scores(record.get("scores", {}), metadata, field)
    if "invarlock_likelihood" in metadata:
        record["likelihood"] = metadata["invarlock_likelihood"]
    return record


# ---------------------------------------------------------------------------
# Sniffing (for detect)


@dataclass(frozen=True, slots=True)
class Head:
    """What a file's first bytes say about its first JSON value.

    Attributes:
        kind: ``"object"``, ``"array"`` or ``"other"`` (not UTF-8 JSON text).
        members: the top-level members of the first object read so far, in
            order; a value cut off by the end of the head is
            :data:`TRUNCATED`.
        complete: whether the first object ended within the head.
    """

    kind: str
    members: Mapping[str, object] = field(default_factory=dict)
    complete: bool = False

    def __repr__(self) -> str:
        """Show the kind and member count only."""
        return f"Head(kind={self.kind!r}, members={len(self.members)})"

    def keys(self) -> frozenset[str]:
        """Return the top-level member names seen."""
        return frozenset(self.members)

    def text(self, name: str) -> str | None:
        """Return a member's value when it is a (complete) string."""
        value = self.members.get(name)
        return value if type(value) is str else None


#: The marker of a truncated member value in :attr:`Head.members`.
TRUNCATED: Final = _TRUNCATED
_WS: Final = " \t\n\r"


def _head_text(head: bytes) -> str | None:
    try:
        return head.decode("utf-8")
    except UnicodeDecodeError as error:
        if error.start >= len(head) - 3 and error.reason == "unexpected end of data":
            try:
                return head[: error.start].decode("utf-8")
            except UnicodeDecodeError:  # pragma: no cover - defensive
                return None
        return None


def _skip(text: str, index: int) -> int:
    while index < len(text) and text[index] in _WS:
        index += 1
    return index


@functools.lru_cache(maxsize=8)
def sniff(head: bytes) -> Head:
    """Scan the first JSON value of ``head`` (cached: every adapter sniffs the same head)."""
    text = _head_text(head)
    if text is None:
        return Head("other")
    index = _skip(text, 0)
    if index >= len(text):
        return Head("other")
    if text[index] == "[":
        return Head("array")
    if text[index] != "{":
        return Head("other")
    members: dict[str, object] = {}
    index += 1
    complete = False
    try:
        while True:
            index = _skip(text, index)
            if text[index] == "}":
                complete = True
                break
            if text[index] != '"':
                break
            key, index = scan_raw(text, index)
            index = _skip(text, index)
            if text[index] != ":":
                break
            index = _skip(text, index + 1)
            try:
                value, index = scan_raw(text, index)
            except ValueError:
                members[key] = _TRUNCATED
                break
            members[key] = value
            index = _skip(text, index)
            if text[index] == ",":
                index += 1
                continue
            complete = text[index] == "}"
            break
    except (IndexError, ValueError):
        pass
    return Head("object", members, complete)


# ---------------------------------------------------------------------------
# Adapter bases


@dataclass(frozen=True, slots=True)
class Binding:
    """The identities the caller declared (``None`` where not supplied)."""

    source: Source | None
    run_id: str | None

    def __repr__(self) -> str:
        """Never show identities."""
        return "Binding(...)"


class LinesImporter(ABC):
    """A JSONL format whose rows are mapped one at a time (§1.1)."""

    #: The adapter name (``--adapter NAME``).
    name: ClassVar[str]
    #: Whether :meth:`map_row` is a pure function of its arguments (no state kept
    #: across rows, nothing read but the row, the row itself never modified):
    #: ``import_run_streaming`` may then map rows of large files in a second process
    #: too, and trusts the decoded row's values to still be plain JSON when they
    #: reach the record (docs/importers.md, "Memory and scale"). Subclasses that
    #: override :meth:`rows` never are.
    parallel_safe: ClassVar[bool] = False

    @abstractmethod
    def detect(self, head: bytes, path: Path) -> bool:
        """Return whether the file looks like this format (content only)."""

    @abstractmethod
    def map_row(self, row: dict[str, Any], where: str, options: ImportOptions) -> Any:
        """Map one decoded row (``where`` names its line) to a record mapping."""

    def nan_member(self, name: str) -> bool:
        """Whether a bare ``NaN`` may stand for a missing score as top-level member ``name``."""
        del name
        return False

    def rows(
        self,
        handle: IO[bytes],
        options: ImportOptions,
        sink: Callable[[bytes], object] | None = None,
    ) -> RecordSource:
        """Map the rows of an open JSONL stream, in order."""
        tolerant = type(self).nan_member is not LinesImporter.nan_member
        for where, row in iter_rows(
            handle, options, sink=sink, nan_members=self.nan_member if tolerant else None
        ):
            yield self.map_row(row, where, options)

    def records(self, path: Path, options: ImportOptions) -> RecordSource:
        """Yield the file's records in source order (the Importer protocol)."""
        with open_source(path) as handle:
            yield from self.rows(handle, options)

    def __repr__(self) -> str:
        """Show the adapter name."""
        return f"{type(self).__name__}()"


class DocumentImporter(ABC):
    """A format held in one JSON document: parse, bind identities, map.

    Memory: the file bytes (at most the document cap), the decoded document,
    and one mapped record at a time.
    """

    #: The adapter name (``--adapter NAME``).
    name: ClassVar[str]

    @abstractmethod
    def detect(self, head: bytes, path: Path) -> bool:
        """Return whether the file looks like this format (content only)."""

    def parse(self, data: bytes, options: ImportOptions) -> Any:
        """Strictly decode the document (formats may check their envelope here)."""
        del options
        return decode_document(data)

    def bind(self, document: Any, binding: Binding, options: ImportOptions) -> Any:
        """Check the caller's identities against the document (identity-bound formats)."""
        del binding, options
        return document

    def unbound(self, document: Any, options: ImportOptions) -> Any:
        """Prepare the document without caller identities (the Importer protocol path)."""
        del options
        return document

    @abstractmethod
    def rows(self, prepared: Any, options: ImportOptions) -> RecordSource:
        """Map the prepared document to record mappings, in order."""

    def records(self, path: Path, options: ImportOptions) -> RecordSource:
        """Yield the file's records (the Importer protocol; identities are load_run's)."""
        from sealeval.captured.run import COMPAT_MAX_BYTES  # noqa: PLC0415 - cycle-free

        document = self.parse(read_source(path, COMPAT_MAX_BYTES), options)
        yield from self.rows(self.unbound(document, options), options)

    def __repr__(self) -> str:
        """Show the adapter name."""
        return f"{type(self).__name__}()"


# ---------------------------------------------------------------------------
# The ``jsonl`` adapter (§2)

_RECORD_KEYS: Final = frozenset(RECORD_MEMBERS)
_RECORD_NEEDED: Final = frozenset({"id", "input", "expected", "output"})


class JsonlImporter(LinesImporter):
    """``jsonl``: one record per line, used verbatim (make_run defaults apply).

    A row may only have the nine record member names (``unknown_field``
    otherwise); no ``upstream_record`` is added. ``NaN`` is refused: a row is
    already a record, and a record score is a finite number.
    """

    name = "jsonl"
    parallel_safe = True

    def detect(self, head: bytes, path: Path) -> bool:
        """Detect a first object with record member names only."""
        del path
        found = sniff(head)
        keys = found.keys()
        if found.kind != "object" or not keys or not keys <= _RECORD_KEYS:
            return False
        return keys >= _RECORD_NEEDED if found.complete else "id" in keys

    def map_row(self, row: dict[str, Any], where: str, options: ImportOptions) -> Any:
        """Use the row as the record."""
        del where, options
        return row
