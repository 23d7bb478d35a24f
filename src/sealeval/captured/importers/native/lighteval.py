"""``lighteval-details``: LightEval per-sample details (``details_<task>_<date>``).

LightEval saves each task's details with ``datasets`` as Parquet: one row per
document with the columns ``doc`` (the ``Doc``), ``metric`` (name → value)
and ``model_response`` (the ``ModelResponse``). The Parquet file is read
with pyarrow, installed by the optional extra (``pip install
'sealeval[parquet]'``); without it the file is recognised (Parquet magic and
LightEval's ``details_`` name) and refused with ``extra_required`` naming the
extra. The same rows written as JSON records (JSON lines, or one JSON array)
are read without the extra.

* ``id``: ``doc.id`` (``doc.task_name`` is in metadata: one details file is
  one task). When the first row has no ``doc.id`` (older LightEval leaves it
  empty), the row index for every row; a later row without an id while the
  first had one is ``missing_id``.
* ``input``: ``doc.query``.
* ``expected``: the reference lighteval rule (spec 11 §8.1):
  ``doc.choices[doc.gold_index]``; several gold indices give the list of
  choices; the generative shape ``choices == []`` with ``gold_index == 0``
  gives ``null``; other shapes are ``invalid_field``.
* ``output``: ``model_response.text``: the single text, the list when
  ``num_samples > 1``, ``null`` when empty (log-likelihood tasks: the
  log-probabilities stay in context).
* ``scores``: ``metric`` (numbers; booleans as 1/0; ``NaN`` a missing score
  by default, else ``non_finite_number``).
* ``metadata``: ``task_name``; ``error``: ``null`` (LightEval has no
  per-document error); ``context``: ``upstream_record`` (the row).

Memory: JSONL one line at a time; the array layout is held in memory.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from sealeval.captured.importers.base import ImportOptions, ImportRefusalError, RecordSource
from sealeval.captured.importers.native._common import (
    NAN,
    Ids,
    Scores,
    build_record,
    iter_table,
    number,
    open_regular,
    refuse,
    scan,
    without_nan,
)
from sealeval.captured.importers.native._skeleton import (
    NativeImporter,
)

__all__ = ["LightevalDetailsImporter"]

_PARQUET: Final = b"PAR1"
_COLUMNS: Final = frozenset({"doc", "metric", "model_response"})


class LightevalDetailsImporter(NativeImporter):
    """LightEval details: Parquet (with the ``sealeval[parquet]`` extra) or JSON records."""

    name = "lighteval-details"

    def detect(self, head: bytes, path: Path) -> bool:
        """Recognise ``doc``/``metric``/``model_response`` rows, or a ``details_*`` Parquet file."""
        if head.startswith(_PARQUET):
            return path.name.startswith("details_") and path.name.endswith(".parquet")
        shape = scan(head)
        keys = shape.names(0) if shape.kind == "array" else shape.names()
        return keys >= _COLUMNS

    def records(self, path: Path, options: ImportOptions) -> RecordSource:
        """Yield one record per row, in file order."""
        with open_regular(path) as handle:
            parquet = handle.read(len(_PARQUET)) == _PARQUET
        rows = _parquet_rows(path) if parquet else iter_table(path, options)
        ids = Ids()
        by_index = False
        position = -1
        for position, (where, row, nan) in enumerate(rows):
            doc, response = row.get("doc"), row.get("model_response")
            if type(doc) is not dict or type(response) is not dict:
                raise refuse("missing_field", f"{where}.doc")
            native_id = doc.get("id")
            if position == 0:
                by_index = not (type(native_id) is str and native_id)
            if by_index:
                record_id = str(position)
            elif type(native_id) is str and native_id:
                record_id = native_id
            else:
                raise refuse("missing_id", f"{where}.doc.id")
            scores = Scores(f"{where}.scores")
            metric = row.get("metric")
            if type(metric) is dict:
                for name, value in metric.items():
                    scores.add(name, number(value, f"{where}.scores", options, booleans=True))
            clean = without_nan(row) if nan else row
            task = doc.get("task_name")
            yield build_record(
                where,
                record_id=ids.add(record_id, f"{where}.doc.id"),
                input_value=clean["doc"].get("query"),
                expected=_expected(clean["doc"], f"{where}.doc"),
                output=_output(clean["model_response"].get("text"), f"{where}.model_response"),
                scores=scores.values,
                metadata={"task_name": task} if type(task) is str else {},
                context={"upstream_record": clean},
            )
        if position < 0:
            raise refuse("no_records", "file")


def _expected(doc: dict[str, Any], field: str) -> Any:
    choices, gold = doc.get("choices"), doc.get("gold_index")
    if type(choices) is not list or any(type(choice) is not str for choice in choices):
        raise refuse("invalid_field", f"{field}.choices")
    if choices == [] and gold == 0 and type(gold) is int:
        return None
    golds = [gold] if type(gold) is int else gold
    if (
        type(golds) is not list
        or not golds
        or any(type(index) is not int or not 0 <= index < len(choices) for index in golds)
        or len(set(golds)) != len(golds)
    ):
        raise refuse("invalid_field", f"{field}.gold_index")
    return choices[golds[0]] if type(gold) is int else [choices[index] for index in golds]


def _output(text: Any, field: str) -> Any:
    if text is None or text == []:
        return None
    if type(text) is not list:
        raise refuse("invalid_field", field)
    return text[0] if len(text) == 1 else text


#: Rows decoded from Parquet at a time (one batch of rows in memory).
_PARQUET_BATCH: Final = 256


def _parquet_rows(path: Path) -> Iterator[tuple[str, dict[str, Any], bool]]:
    """Yield the rows of a Parquet details file (needs the ``sealeval[parquet]`` extra).

    Without pyarrow the file is refused with ``extra_required`` naming the
    extra; a file pyarrow cannot read is ``invalid_document``. Rows are read
    in batches of :data:`_PARQUET_BATCH`; their values are plain Python
    (lists, dicts, strings, numbers), as in the JSON layout.
    """
    try:
        from pyarrow import parquet  # noqa: PLC0415 - an optional extra
    except ImportError:
        raise refuse("extra_required", "sealeval[parquet]") from None
    try:
        with open_regular(path) as handle:
            reader = parquet.ParquetFile(handle)
            position = 0
            for batch in reader.iter_batches(batch_size=_PARQUET_BATCH):
                for row in batch.to_pylist():
                    yield f"rows[{position}]", _plain(row), True
                    position += 1
    except ImportRefusalError:
        raise
    except Exception:  # noqa: BLE001 - pyarrow's errors may quote the file
        raise refuse("invalid_document", "file") from None


def _plain(value: Any) -> Any:
    """Return a Parquet value as JSON-like Python (tuples become lists, floats stay finite)."""
    if type(value) is dict:
        return {str(key): _plain(item) for key, item in value.items()}
    if type(value) in (list, tuple):
        return [_plain(item) for item in value]
    if type(value) is float and not math.isfinite(value):
        return NAN
    if type(value) in (str, int, float, bool) or value is None:
        return value
    return str(value)
