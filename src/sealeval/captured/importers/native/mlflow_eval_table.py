"""``mlflow-eval-table``: the classic ``eval_results_table.json`` of ``mlflow.evaluate`` 2.x.

``mlflow.evaluate()`` (MLflow 2.x) logs the per-row table as the artifact
``eval_results_table.json``, pandas ``to_json(orient="split")`` without the
index: ``{"columns": [...], "data": [[...], ...]}``. Each row of ``data``
holds one value per column.

* ``id``: the row index (the table has no id column).
* ``input``: the ``inputs`` column, else the first of ``question``,
  ``input``, ``prompt``, ``query``; without any, an object of the columns that
  are neither output, target nor metric.
* ``expected``: the first of ``ground_truth``, ``targets``, ``expected``,
  ``expected_output``, ``expected_response``, ``reference``; else ``null``.
* ``output``: the ``outputs`` column (else ``output``, ``prediction``,
  ``response``); else ``null``.
* ``scores``: the numeric values of metric columns, named
  ``<metric>/v<version>[/<field>]`` by MLflow (``toxicity/v1/score``,
  ``exact_match/v1``); booleans are 1/0. ``token_count``, ``latency`` and
  other plain numeric columns are kept in context, not scored.
* ``metadata``: none; ``error``: none (a failed prediction aborts
  ``mlflow.evaluate``).
* ``context``: ``upstream_record`` (the row as an object).

A table without rows is ``no_records``; a row whose length differs from the
columns is ``invalid_field``. Memory: the document is held in memory (at most
``max_line_bytes``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Final

from sealeval.captured.importers.base import ImportOptions, RecordSource
from sealeval.captured.importers.native._common import (
    Scores,
    build_record,
    number,
    refuse,
    scan,
    without_nan,
)
from sealeval.captured.importers.native._skeleton import NativeImporter, read_document

__all__ = ["MlflowEvalTableImporter"]

_INPUTS: Final = ("inputs", "question", "input", "prompt", "query")
_TARGETS: Final = (
    "ground_truth",
    "targets",
    "expected",
    "expected_output",
    "expected_response",
    "reference",
)
_OUTPUTS: Final = ("outputs", "output", "prediction", "response")
_METRIC: Final = re.compile(r".+/v[0-9]+(?:/.+)?")


def _first(columns: list[str], names: tuple[str, ...]) -> str | None:
    return next((name for name in names if name in columns), None)


class MlflowEvalTableImporter(NativeImporter):
    """MLflow 2.x ``eval_results_table.json`` (``{columns, data}``)."""

    name = "mlflow-eval-table"

    def detect(self, head: bytes, path: Path) -> bool:
        """Recognise an object of exactly ``columns`` and ``data`` with a metric column."""
        del path
        shape = scan(head)
        if shape.kind != "object" or shape.names() != frozenset({"columns", "data"}):
            return False
        start = head.find(b'"columns"')
        window = head[start : start + 16384].decode("utf-8", "replace")
        # pandas writes "/" as "\/" in names: ``"toxicity\/v1\/score"``
        return re.search(r'"[^"]+\\?/v[0-9]+(?:\\?/[^"]*)?"', window) is not None

    def records(self, path: Path, options: ImportOptions) -> RecordSource:
        """Yield one record per row of ``data``, in order."""
        table, nan = read_document(path, options)
        if set(table) != {"columns", "data"}:
            raise refuse("invalid_document", "file")
        columns, data = table["columns"], table["data"]
        if (
            type(columns) is not list
            or any(type(name) is not str for name in columns)
            or len(set(columns)) != len(columns)
        ):
            raise refuse("invalid_field", "columns")
        if type(data) is not list:
            raise refuse("invalid_field", "data")
        if not data:
            raise refuse("no_records", "data")
        metrics = [name for name in columns if _METRIC.fullmatch(name) is not None]
        if not metrics:
            raise refuse("not_results", "columns")
        input_column = _first(columns, _INPUTS)
        target = _first(columns, _TARGETS)
        output = _first(columns, _OUTPUTS)
        roles = {input_column, target, output, *metrics}
        for position, cells in enumerate(data):
            where = f"data[{position}]"
            if type(cells) is not list or len(cells) != len(columns):
                raise refuse("invalid_field", where)
            row: dict[str, Any] = dict(zip(columns, cells, strict=True))
            scores = Scores(f"{where}.scores")
            for name in metrics:
                scores.add(name, number(row[name], f"{where}.scores", options, booleans=True))
            clean = without_nan(row) if nan else row
            if input_column is not None:
                input_value = clean[input_column]
            else:
                input_value = {key: value for key, value in clean.items() if key not in roles}
            yield build_record(
                where,
                record_id=str(position),
                input_value=input_value,
                expected=None if target is None else clean[target],
                output=None if output is None else clean[output],
                scores=scores.values,
                context={"upstream_record": clean},
            )
