"""``ragas-result-csv``: ragas ``EvaluationResult.to_pandas()`` written with ``to_csv``.

The most common way ragas users keep their results is
``result.to_pandas().to_csv("ragas_results.csv")``: one header row, then one
row per evaluated sample with the sample's fields (``user_input``,
``retrieved_contexts``, ``response``, ``reference``, ...) and one column per
metric. pandas writes ``NaN`` (a metric that failed) as an empty cell, lists
as their Python ``repr`` and quotes cells holding commas, quotes or line
breaks (RFC 4180 quoting, ``""`` for a quote). With ``index=True`` (the
default) the first column is the unnamed row index.

* ``id``: the row index (position among the data rows, from ``0``), as for
  ``ragas-result-rows``.
* ``input``: the ``user_input`` cell (text; a multi-turn sample's messages stay
  their written text).
* ``expected``: the ``reference`` cell; ``null`` when the column is absent or
  the cell is empty.
* ``output``: the ``response`` cell; ``null`` likewise.
* ``scores``: the metric columns, every column outside the sample fields and
  the index. A column becomes a metric at its first non-empty cell when that
  cell is a number (``1``, ``0.75``, ``1e-3``, ``True``/``False`` as 1/0);
  a column whose first non-empty cell is text stays text (kept in context).
  In a metric column an empty cell or ``nan`` is a missing score for that
  metric (``nan`` is ``non_finite_number`` with ``nan_as_missing_score``
  off); ``inf`` is ``non_finite_number``; any other text is
  ``non_numeric_score``.
* ``metadata``: none; ``error``: ``null`` (ragas records no per-sample error).
* ``context``: ``upstream_record`` (every named column's cell as written,
  ``retrieved_contexts`` as its text: Python literals are never evaluated) and
  ``row_index`` (the index cell) when the file has an index column.

Refusals: a header with a repeated name is ``duplicate_key`` (``header``); an
empty name other than the leading index, or more than :data:`MAX_COLUMNS`
columns, is ``invalid_field`` / ``too_large`` (``header``); a header with no
column beyond the sample fields (ragas' input dataset) is ``not_results``; a
row whose cell count differs from the header, or broken quoting, is
``invalid_document`` (``rows[i]``); a row over ``max_line_bytes`` characters
or a cell over :data:`MAX_CELL_CHARS` is ``too_large``; more than
:data:`MAX_ROWS` rows is ``too_large`` (``file``); invalid UTF-8 is
``not_utf8``; a header and no row is ``no_records``.
Rows become plain record mappings, validated once where the run is built
(the fast path of ``record_row``); a value the run rules refuse names
``records[<position>]``. Memory: one row at a time.
"""

from __future__ import annotations

import codecs
import csv
import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Final

from sealeval.captured.importers.base import ImportOptions, RecordSource
from sealeval.captured.importers.native._common import (
    open_regular,
    record_row,
    refuse,
)
from sealeval.captured.importers.native._skeleton import NativeImporter
from sealeval.captured.importers.native.ragas import SAMPLE_FIELDS

__all__ = ["MAX_CELL_CHARS", "MAX_COLUMNS", "MAX_ROWS", "RagasResultCsvImporter"]

#: Most columns a header may name.
MAX_COLUMNS: Final = 1024
#: Most data rows read.
MAX_ROWS: Final = 1 << 24
#: Longest cell, in characters (the ``csv`` module's own default field limit).
MAX_CELL_CHARS: Final = 131_072

#: Sample fields of ragas >= 0.2 (the JSON reader's) and the ragas 0.1 dataset
#: columns: never metrics.
_SAMPLE_FIELDS: Final = SAMPLE_FIELDS | {
    "question",
    "answer",
    "contexts",
    "ground_truth",
    "ground_truths",
}
#: pandas' name for an index column read back and written again (``Unnamed: 0``).
_UNNAMED: Final = re.compile(r"Unnamed: [0-9]+")
_NUMBER: Final = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_NAN: Final = frozenset({"nan", "NaN", "NAN", "-nan", "-NaN"})
_INFINITE: Final = frozenset({"inf", "-inf", "+inf", "Infinity", "-Infinity", "+Infinity"})
_BOOLEANS: Final = {"True": 1.0, "False": 0.0}
_INFINITIES: Final = (float("inf"), float("-inf"))
#: Python's default limit on decimal digits of an int (``sys.get_int_max_str_digits``).
_MAX_INTEGER_DIGITS: Final = 4300
_BOM: Final = "\ufeff"


class _Dialect(csv.Dialect):
    """pandas ``to_csv`` defaults, strictly: a quote inside an unquoted cell is refused."""

    delimiter = ","
    quotechar = '"'
    doublequote = True
    skipinitialspace = False
    lineterminator = "\n"
    quoting = csv.QUOTE_MINIMAL
    strict = True


def _header(line: str) -> list[str] | None:
    """Return the names of a header line, or ``None`` when it does not parse."""
    try:
        return next(csv.reader([line], _Dialect), None)
    except csv.Error:
        return None


def _is_index(position: int, name: str) -> bool:
    return (position == 0 and name == "") or _UNNAMED.fullmatch(name) is not None


class _Lines:
    """The lines of a text stream for ``csv.reader``, bounding the characters of one row."""

    __slots__ = ("_limit", "_text", "pending", "where")

    def __init__(self, text: IO[str], limit: int) -> None:
        self._text = text
        self._limit = limit
        self.pending = 0
        self.where = "header"

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        try:
            line = self._text.readline(self._limit + 1)
        except UnicodeDecodeError:  # decoded ahead, in blocks: the row is not known
            raise refuse("not_utf8", "file") from None
        except OSError:  # pragma: no cover - a read error after a successful open
            raise refuse("unreadable", "file") from None
        if not line:
            raise StopIteration
        self.pending += len(line)
        if self.pending > self._limit:
            raise refuse("too_large", self.where)
        return line


def _rows(handle: IO[bytes], options: ImportOptions) -> Iterator[tuple[str, list[str]]]:
    """Yield ``(where, cells)`` for the header (``header``) and each non-blank data row."""
    text = io.TextIOWrapper(handle, encoding="utf-8", errors="strict", newline="")
    lines = _Lines(text, options.max_line_bytes)
    reader = csv.reader(lines, _Dialect)
    position = -1
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            code = "too_large" if str(error).startswith("field larger") else "invalid_document"
            raise refuse(code, lines.where) from None
        lines.pending = 0
        if not cells:
            continue  # a blank line
        if max(map(len, cells)) > MAX_CELL_CHARS:
            raise refuse("too_large", lines.where)
        if position >= MAX_ROWS:  # the header is position -1
            raise refuse("too_large", "file")
        yield lines.where, cells
        position += 1
        lines.where = f"rows[{position}]"


def _number(cell: str, where: str, options: ImportOptions) -> int | float | None:
    """Return a metric cell's score (``None``: missing); refusals name ``<where>.scores``."""
    if _NUMBER.fullmatch(cell) is not None:
        if "." in cell or "e" in cell or "E" in cell:
            value = float(cell)
            if value in _INFINITIES:
                raise refuse("non_finite_number", f"{where}.scores")
            return value
        if len(cell.lstrip("+-")) > _MAX_INTEGER_DIGITS:
            raise refuse("integer_too_long", f"{where}.scores")
        return int(cell)
    if cell in _NAN:
        if options.nan_as_missing_score:
            return None
        raise refuse("non_finite_number", f"{where}.scores")
    if cell in _BOOLEANS:
        return _BOOLEANS[cell]
    if cell in _INFINITE:
        raise refuse("non_finite_number", f"{where}.scores")
    raise refuse("non_numeric_score", f"{where}.scores")


def _is_number(cell: str) -> bool:
    return (
        cell in _NAN
        or cell in _BOOLEANS
        or cell in _INFINITE
        or _NUMBER.fullmatch(cell) is not None
    )


class RagasResultCsvImporter(NativeImporter):
    """ragas result tables written by pandas ``to_csv``."""

    name = "ragas-result-csv"

    def detect(self, head: bytes, path: Path) -> bool:
        """Recognise a CSV header with ``user_input``, a response or reference, and a metric."""
        del path
        first = head.split(b"\n", 1)[0].removesuffix(b"\r")
        if first.startswith(codecs.BOM_UTF8):
            first = first[len(codecs.BOM_UTF8) :]
        if not first or first[:1] in (b"{", b"[") or b"user_input" not in first:
            return False
        try:
            names = _header(first.decode("utf-8"))
        except UnicodeDecodeError:
            return False
        if names is None:
            return False
        named = {name for position, name in enumerate(names) if not _is_index(position, name)}
        return (
            "user_input" in named
            and bool({"response", "reference"} & named)
            and bool(named - _SAMPLE_FIELDS)
        )

    def records(self, path: Path, options: ImportOptions) -> RecordSource:
        """Yield one record per data row, in file order."""
        with open_regular(path) as handle:
            rows = _rows(handle, options)
            header = next(rows, None)
            if header is None:
                raise refuse("no_records", "file")
            table = _Table(_columns(header[1]), options)
            position = -1
            for position, (where, cells) in enumerate(rows):
                yield table.record(where, position, cells)
            if position < 0:
                raise refuse("no_records", "file")


def _columns(names: list[str]) -> list[str]:
    if len(names) > MAX_COLUMNS:
        raise refuse("too_large", "header")
    if names and names[0].startswith(_BOM):
        names = [names[0].removeprefix(_BOM), *names[1:]]
    if len(set(names)) != len(names):
        raise refuse("duplicate_key", "header")
    if any(name == "" and position != 0 for position, name in enumerate(names)):
        raise refuse("invalid_field", "header")
    return names


class _Table:
    """The columns of one file and what each turned out to be, row after row."""

    __slots__ = ("_index", "_metric", "_named", "_names", "_options")

    def __init__(self, names: list[str], options: ImportOptions) -> None:
        self._names = names
        self._options = options
        self._index = next((i for i, name in enumerate(names) if _is_index(i, name)), None)
        self._named = [i for i, name in enumerate(names) if not _is_index(i, name)]
        candidates = [i for i in self._named if names[i] not in _SAMPLE_FIELDS]
        if not candidates:
            raise refuse("not_results", "header")
        if "user_input" not in names:
            raise refuse("missing_field", "header")
        #: None: not known yet (only empty cells so far); True: a metric; False: text.
        self._metric: dict[int, bool | None] = dict.fromkeys(candidates)

    def record(self, where: str, position: int, cells: list[str]) -> dict[str, Any]:
        """Return the record of one data row, as a mapping validated where the run is built."""
        names = self._names
        if len(cells) != len(names):
            raise refuse("invalid_document", where)
        # header names are unique and non-empty: no score name repeats
        scores: dict[str, int | float] = {}
        for column, known in self._metric.items():
            cell = cells[column]
            if known is False or not cell:
                continue
            if known is None:
                self._metric[column] = is_metric = _is_number(cell)
                if not is_metric:
                    continue
            value = _number(cell, where, self._options)
            if value is not None:
                scores[names[column]] = value
        row = {names[i]: cells[i] for i in self._named}
        context: dict[str, Any] = {"upstream_record": row}
        if self._index is not None:
            context["row_index"] = cells[self._index]
        return record_row(
            record_id=str(position),
            input_value=row["user_input"],
            expected=row.get("reference") or None,
            output=row.get("response") or None,
            scores=scores,
            context=context,
        )
