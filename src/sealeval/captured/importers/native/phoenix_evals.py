"""``phoenix-evals-rows``: Arize Phoenix evals result frames written as JSON records.

Two frames exist, both read as pandas writes them with
``to_json(orient="records", lines=True)`` (JSONL) or ``orient="records"``:

* ``evaluate_dataframe`` output: the caller's columns (``input``,
  ``output``, ``reference``/``expected``, ...) plus, per evaluator ``<name>``,
  ``<name>_score`` (a Score object ``{name, score, label, explanation,
  metadata, kind, direction}`` whose ``None`` members are omitted, or ``null``)
  and ``<name>_execution_details`` (``{status, exceptions,
  execution_seconds}``).
* the legacy ``llm_classify`` output: ``label``, ``score``, ``explanation``,
  ``exceptions``, ``execution_status`` per row, and no input or output.

Records (one per row, ``id`` = the row index: the frames carry no id):

* ``evaluate_dataframe``: ``input`` / ``expected`` / ``output`` =
  ``input`` / ``reference`` (else ``expected``; else ``null``) / ``output``;
  ``scores``: ``<name>`` = ``<name>_score.score`` (numbers; booleans 1/0). An
  evaluator whose status is ``FAILED`` gives no score for that row (the
  exceptions stay in context): the record is missing for that metric only,
  and ``error`` is ``null`` (the row's input and output are the caller's
  data, not a failed task). ``metadata``: the other string columns.
* legacy: ``input``/``expected``/``output`` are ``null`` (the frame holds
  only the judgement); ``scores``: ``score``; ``metadata``: ``label``;
  ``error``: ``execution_status == "FAILED"`` gives the exceptions joined
  with ``"; "`` (they are ``repr`` strings), else ``"upstream_error"``.
* ``context``: ``upstream_record`` (the row).

``NaN`` scores are missing (default) or ``non_finite_number``.
Memory: JSONL one line at a time; the array layout is held in memory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from sealeval.captured.importers.base import ImportOptions, RecordSource
from sealeval.captured.importers.native._common import (
    MAX_ERROR_LENGTH,
    Scores,
    build_record,
    error_text,
    iter_table,
    number,
    refuse,
    scan,
    without_nan,
)
from sealeval.captured.importers.native._skeleton import (
    NativeImporter,
)

__all__ = ["PhoenixEvalsRowsImporter"]

_SCORE: Final = "_score"
_DETAILS: Final = "_execution_details"
_LEGACY: Final = frozenset({"label", "score", "explanation", "exceptions", "execution_status"})
_ROLES: Final = frozenset({"input", "output", "reference", "expected"})


def _evaluators(keys: frozenset[str] | set[str]) -> list[str]:
    return [key[: -len(_DETAILS)] for key in keys if key.endswith(_DETAILS)]


class PhoenixEvalsRowsImporter(NativeImporter):
    """Phoenix ``evaluate_dataframe`` and legacy ``llm_classify`` frames."""

    name = "phoenix-evals-rows"

    def detect(self, head: bytes, path: Path) -> bool:
        """Recognise ``<name>_score``/``<name>_execution_details`` pairs, or the legacy columns."""
        del path
        shape = scan(head)
        keys = shape.names(0) if shape.kind == "array" else shape.names()
        if keys >= _LEGACY:
            return True
        return any(name + _SCORE in keys for name in _evaluators(keys))

    def records(self, path: Path, options: ImportOptions) -> RecordSource:
        """Yield one record per row, in file order."""
        position = -1
        for position, (where, row, nan) in enumerate(iter_table(path, options)):
            clean = without_nan(row) if nan else row
            if "execution_status" in row and not _evaluators(set(row)):
                yield _legacy(row, clean, where, str(position), options)
            else:
                yield _frame(row, clean, where, str(position), options)
        if position < 0:
            raise refuse("no_records", "file")


def _frame(
    row: dict[str, Any], clean: dict[str, Any], where: str, record_id: str, options: ImportOptions
) -> Any:
    evaluators = _evaluators(set(row))
    if not evaluators:
        raise refuse("missing_field", f"{where}.execution_details")
    scores = Scores(f"{where}.scores")
    for name in evaluators:
        details = row[name + _DETAILS]
        if type(details) is not dict:
            raise refuse("invalid_field", f"{where}.execution_details")
        score = row.get(name + _SCORE)
        if details.get("status") == "FAILED" or type(score) is not dict:
            continue
        scores.add(name, number(score.get("score"), f"{where}.scores", options, booleans=True))
    generated = {f"{name}{suffix}" for name in evaluators for suffix in (_SCORE, _DETAILS)}
    metadata = {
        key: value
        for key, value in clean.items()
        if key not in _ROLES
        and key not in generated
        and type(value) is str
        and len(value) <= MAX_ERROR_LENGTH
    }
    return build_record(
        where,
        record_id=record_id,
        input_value=clean.get("input"),
        expected=clean["reference"] if "reference" in clean else clean.get("expected"),
        output=clean.get("output"),
        scores=scores.values,
        metadata=metadata,
        context={"upstream_record": clean},
    )


def _legacy(
    row: dict[str, Any], clean: dict[str, Any], where: str, record_id: str, options: ImportOptions
) -> Any:
    scores = Scores(f"{where}.scores")
    scores.add("score", number(row.get("score"), f"{where}.scores", options, booleans=True))
    error = None
    if clean.get("execution_status") == "FAILED":
        exceptions = clean.get("exceptions")
        texts = (
            [item for item in exceptions if type(item) is str] if type(exceptions) is list else []
        )
        error = error_text("; ".join(texts))
    label = clean.get("label")
    return build_record(
        where,
        record_id=record_id,
        input_value=None,
        expected=None,
        output=None,
        scores=scores.values,
        metadata={"label": label} if type(label) is str else {},
        error=error,
        context={"upstream_record": clean},
    )
