r"""``mlflow-result-table``: the per-row table of ``mlflow.genai.evaluate()``.

``EvaluationResult.result_df`` has one row per evaluated trace. MLflow writes
no file of its own; this importer reads the table as pandas writes it with
``to_json(orient="records", lines=True)`` (JSONL, auto-detected) or
``orient="records"`` (one JSON array). pandas escapes ``/`` as ``\/`` in
column names, which JSON decoding undoes. Columns: ``trace_id``,
``request``, ``response``, ``state``, ``trace`` (the trace as a JSON
string), ``assessments``, ``tags``, ``trace_metadata``, and per assessment
``<name>/value`` (plus ``/rationale``, ``/error_message``, ``/error_code``).

Expectations and scorer results are both ``<name>/value`` columns; which is
which is recorded only in the assessments (``expectation`` or ``feedback``),
read from the ``assessments`` column when it holds objects, else from the
``trace`` column's ``info.assessments``. A row whose ``/value`` columns
cannot be told apart that way is refused (``expected_unavailable``) instead
of guessing.

* ``id``: ``trace_id``.
* ``input`` / ``output``: ``request`` (the inputs object) / ``response``.
* ``expected``: the expectation's value; with several expectations an
  object ``{name: value}``; ``null`` without one.
* ``scores``: each feedback ``<name>/value``: numbers as is, booleans and
  MLflow's ``"yes"``/``"no"`` ratings as 1/0; other strings are not scores. A
  scorer that raised has a null value and an ``/error_message``: its score
  is absent (missing for that metric only).
* ``metadata``: the string ``tags`` not starting with ``mlflow.``.
* ``error``: ``"upstream_error"`` when ``state`` is ``ERROR`` (the prediction
  failed).
* ``context``: ``upstream_record`` (the row) and ``mlflow``: ``run_id`` (the
  rows' ``mlflow.sourceRun``) and, when a ``*.meta.json`` beside the table
  holds the same ``run_id`` (``{mlflow_version, run_id, metrics}``, as the
  evaluation's aggregate metrics are usually saved), ``mlflow_version`` and
  ``meta_digest`` (SHA-256 of that file, binding it into the run digest).

``NaN`` (pandas writes ``null``, but ``json.dump`` writes ``NaN``) is a
missing score (default) or ``non_finite_number``; elsewhere ``null``.
Memory: JSONL one line at a time; the array layout is held in memory (at
most ``max_line_bytes``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from sealeval.canonical import decode
from sealeval.captured.importers.base import ImportOptions, ImportRefusalError, RecordSource
from sealeval.captured.importers.native._common import (
    UPSTREAM_ERROR,
    Ids,
    Scores,
    build_record,
    iter_table,
    number,
    read_companion,
    refuse,
    scan,
    tags,
    without_nan,
)
from sealeval.captured.importers.native._skeleton import (
    NativeImporter,
)
from sealeval.captured.run import Record
from sealeval.errors import CanonicalError

__all__ = ["MlflowResultTableImporter"]

_VALUE: Final = "/value"
_RATINGS: Final = {"yes": 1.0, "no": 0.0}
_ROW_HINTS: Final = frozenset({"request", "response", "trace", "assessments", "state"})
_MAX_META_CANDIDATES: Final = 16


def _looks_like_row(keys: frozenset[str]) -> bool:
    return (
        "trace_id" in keys
        and len(_ROW_HINTS & keys) >= 2
        and any(key.endswith(_VALUE) for key in keys)
    )


class MlflowResultTableImporter(NativeImporter):
    """``mlflow.genai.evaluate`` result tables (records JSONL or JSON array)."""

    name = "mlflow-result-table"

    def detect(self, head: bytes, path: Path) -> bool:
        """Recognise rows with ``trace_id``, request/response/trace and ``<name>/value`` columns."""
        del path
        shape = scan(head)
        if shape.kind == "array":
            return _looks_like_row(shape.names(0))
        return shape.kind == "object" and _looks_like_row(shape.names())

    def records(self, path: Path, options: ImportOptions) -> RecordSource:
        """Yield one record per table row, in file order."""
        facts: dict[str, Any] | None = None
        ids = Ids()
        count = 0
        for where, row, nan in iter_table(path, options):
            if facts is None:
                facts = _facts(path, row)
            record = _record(row, where, facts, options, nan)
            ids.add(record.id, f"{where}.trace_id")
            count += 1
            yield record
        if count == 0:
            raise refuse("no_records", "file")


def _source_run(row: dict[str, Any]) -> str | None:
    trace_metadata = row.get("trace_metadata")
    if type(trace_metadata) is dict and type(trace_metadata.get("mlflow.sourceRun")) is str:
        return str(trace_metadata["mlflow.sourceRun"])
    return None


def _facts(path: Path, row: dict[str, Any]) -> dict[str, Any]:
    run_id = _source_run(row)
    if run_id is None:
        return {}
    facts: dict[str, Any] = {"run_id": run_id}
    try:
        candidates = sorted(path.parent.glob("*.meta.json"))[:_MAX_META_CANDIDATES]
    except OSError:
        return facts
    for candidate in candidates:
        if candidate.is_symlink() or not candidate.is_file():
            continue
        try:
            meta = read_companion(candidate, "meta")
        except ImportRefusalError:
            continue
        if type(meta.value) is dict and meta.value.get("run_id") == run_id:
            if type(meta.value.get("mlflow_version")) is str:
                facts["mlflow_version"] = meta.value["mlflow_version"]
            facts["meta_digest"] = meta.digest
            break
    return facts


def _assessment_kinds(row: dict[str, Any]) -> dict[str, str] | None:
    """Assessment name → ``expectation``/``feedback``, from the assessments or the trace.

    A trace given as JSON text is decoded by :func:`sealeval.canonical.decode`
    (``lax``: a ``NaN`` in a span's attributes is no fault here; every limit and
    duplicate keys still are): a trace it refuses leaves the kinds unknown.
    """
    assessments = row.get("assessments")
    if not (type(assessments) is list and all(type(item) is dict for item in assessments)):
        trace = row.get("trace")
        try:
            decoded = decode(trace, lax=True) if type(trace) is str else trace
        except CanonicalError:
            return None
        info = decoded.get("info") if type(decoded) is dict else None
        assessments = info.get("assessments") if type(info) is dict else None
        if type(assessments) is not list:
            return None
    kinds: dict[str, str] = {}
    for item in assessments:
        if type(item) is not dict or type(item.get("assessment_name")) is not str:
            return None
        kind = (
            "expectation" if "expectation" in item else "feedback" if "feedback" in item else None
        )
        if kind is None:
            return None
        kinds[item["assessment_name"]] = kind
    return kinds


def _record(
    row: dict[str, Any], where: str, facts: dict[str, Any], options: ImportOptions, nan: bool
) -> Record:
    trace_id = row.get("trace_id")
    if type(trace_id) is not str or not trace_id:
        raise refuse("missing_id", f"{where}.trace_id")
    columns = [key[: -len(_VALUE)] for key in row if key.endswith(_VALUE)]
    kinds = _assessment_kinds(row) if columns else {}
    if kinds is None or any(name not in kinds for name in columns):
        raise refuse("expected_unavailable", f"{where}.assessments")
    clean = without_nan(row) if nan else row
    expectations = {name: clean[name + _VALUE] for name in columns if kinds[name] == "expectation"}
    expected: Any = None
    if len(expectations) == 1:
        expected = next(iter(expectations.values()))
    elif expectations:
        expected = expectations
    scores = Scores(f"{where}.scores")
    for name in columns:
        if kinds[name] == "feedback":
            value = row[name + _VALUE]
            rating = _RATINGS.get(value) if type(value) is str else None
            found = (
                rating
                if rating is not None
                else number(value, f"{where}.scores", options, booleans=True)
            )
            scores.add(name, found)
    user_tags = {
        key: value
        for key, value in tags(clean.get("tags")).items()
        if not key.startswith("mlflow.")
    }
    source_run = _source_run(row)
    run_facts = facts if source_run == facts.get("run_id") else {"run_id": source_run}
    return build_record(
        where,
        record_id=trace_id,
        input_value=clean.get("request"),
        expected=expected,
        output=clean.get("response"),
        scores=scores.values,
        metadata=user_tags,
        error=UPSTREAM_ERROR if clean.get("state") == "ERROR" else None,
        context={"upstream_record": clean, "mlflow": run_facts},
    )
