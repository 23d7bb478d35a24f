"""``promptfoo-results``: promptfoo's ``-o results.json`` document (and its JSONL rows).

``promptfoo eval -o results.json`` writes ``{evalId, results: {version,
timestamp, prompts, results: [EvaluateResult, ...], stats}, config,
metadata, ...}``; ``-o results.jsonl`` writes the same ``EvaluateResult``
objects one per line. This importer reads both with one row mapping, so the
two files of one run give identical records. Auto-detection claims only the
JSON document: JSONL rows belong to the specified ``promptfoo-jsonl`` adapter,
whose rules (spec 11 §5) this mapping follows exactly, adding three kinds of
scores.

Per row (one per test x prompt x provider, in file order):

* ``id``: ``testCase.metadata.invarlock_id`` when present, else
  ``<testIdx>:<promptIdx>`` (``promptIdx`` indexes ``results.prompts``: one
  entry per prompt x provider).
* ``input``: ``testCase.vars``; ``context.prompt`` is the rendered prompt.
* ``expected``: ``testCase.metadata.invarlock_expected``, else ``null``:
  promptfoo records assertions (checks such as ``contains``/``equals``, kept in
  ``context.upstream_record.testCase.assert``), not a reference answer, and
  none is inferred from them.
* ``output``: ``response.output``; ``null`` when the provider failed (no
  ``response.output``).
* ``scores``: ``score``, ``latencyMs``, ``cost`` as floats (the reference's
  three), plus ``success`` (1/0) and ``namedScores.<metric>`` for every
  numeric named score.
* ``metadata``: the string members of ``testCase.metadata``, plus
  ``provider`` (the provider label, else its id) unless already set.
* ``error``: promptfoo's ``failureReason`` keeps assertion failures apart
  from upstream errors, and both fill ``error``: ``2`` (provider or runtime
  error) gives ``"upstream_error"``; ``1`` (an assertion failed: a wrong
  answer, which is kept and scored) gives ``null`` and must be consistent
  (``success`` false, ``gradingResult.pass`` false, an output, equal scores,
  ``gradingResult.reason`` equal to ``error``); ``0`` (pass) gives ``null``
  and must have no error. A contradiction is ``inconsistent_failure``,
  another value ``unsupported_failure_reason``. Rows without
  ``failureReason`` (older promptfoo) are errored when they carry an error.
* ``context``: ``prompt`` and ``upstream_record`` (the row).

Completeness: a JSON document whose ``results.stats`` (``successes +
failures + errors``) states more rows than ``results.results`` holds is
refused (``incomplete_export``) unless ``allow_partial``, which adds
``context.promptfoo`` = ``{stated_samples, present_samples}``.

``NaN``: promptfoo is JavaScript and its JSON writer never emits the token,
so a bare ``NaN`` is refused (``non_finite_number``) whatever
``nan_as_missing_score`` says. Memory: the JSON document is held in memory
(at most ``max_line_bytes``); JSONL is read one line at a time.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Final

from sealeval.captured.importers.base import ImportOptions, RecordSource
from sealeval.captured.importers.native._common import (
    UPSTREAM_ERROR,
    Ids,
    Scores,
    as_float,
    build_record,
    check_complete,
    contains_nan,
    identifier,
    iter_jsonl,
    number,
    open_regular,
    refuse,
    scan,
    tags,
)
from sealeval.captured.importers.native._skeleton import (
    NativeImporter,
    Stated,
    read_head,
    read_value,
)
from sealeval.captured.run import Record

__all__ = ["PromptfooResultsImporter"]

_DOCUMENT_KEYS: Final = frozenset({"evalId", "results"})
_VERSIONS: Final = frozenset({2, 3})
_REFERENCE_SCORES: Final = ("score", "latencyMs", "cost")


class PromptfooResultsImporter(NativeImporter):
    """promptfoo ``results.json`` (auto-detected) and ``results.jsonl`` (by name)."""

    name = "promptfoo-results"

    def detect(self, head: bytes, path: Path) -> bool:
        """Recognise an object with promptfoo's ``evalId`` and ``results`` members."""
        del path
        shape = scan(head)
        return shape.kind == "object" and shape.names() >= _DOCUMENT_KEYS

    def stated(self, path: Path, options: ImportOptions) -> Stated:
        """Return ``evalId`` and ``metadata.promptfooVersion`` of a ``results.json``."""
        shape = scan(read_head(path))
        if not (shape.kind == "object" and shape.names() >= _DOCUMENT_KEYS):
            return Stated()
        document, _ = read_value(path, options)
        if type(document) is not dict:
            return Stated()
        metadata = document.get("metadata")
        version = metadata.get("promptfooVersion") if type(metadata) is dict else None
        run_id = document.get("evalId")
        return Stated(
            source_name="promptfoo",
            source_version=version if type(version) is str and version else None,
            run_id=run_id if type(run_id) is str and run_id else None,
        )

    def records(self, path: Path, options: ImportOptions) -> RecordSource:
        """Yield one record per result row, in file order."""
        shape = scan(read_head(path))
        partial: dict[str, int] = {}
        rows: Iterable[tuple[str, dict[str, Any]]]
        if shape.kind == "object" and shape.names() >= _DOCUMENT_KEYS:
            listed, stated = _document_rows(path, options)
            partial = check_complete(stated, len(listed), options)
            rows = listed
        else:
            rows = _line_rows(path, options)
        ids = Ids()
        count = 0
        for where, row in rows:
            record = _record(row, where, options, partial)
            ids.add(record.id, f"{where}.id")
            count += 1
            yield record
        if count == 0:
            raise refuse("no_records", "file")


def _stated(results: dict[str, Any]) -> int | None:
    """Return the rows ``results.stats`` accounts for (successes + failures + errors) (or None)."""
    stats = results.get("stats")
    if type(stats) is not dict:
        return None
    counts = [stats.get(key) for key in ("successes", "failures", "errors")]
    if not all(type(count) is int and count >= 0 for count in counts):
        return None
    return sum(count for count in counts if type(count) is int)


def _document_rows(
    path: Path, options: ImportOptions
) -> tuple[list[tuple[str, dict[str, Any]]], int | None]:
    """Return the document's result rows (checked to be objects) and the total its stats state."""
    document, nan = read_value(path, options)
    if nan and contains_nan(document):
        raise refuse("non_finite_number", "file")
    if type(document) is not dict:
        raise refuse("invalid_document", "file")
    results = document.get("results")
    if type(results) is not dict:
        raise refuse("missing_field", "results")
    version = results.get("version")
    if type(version) is not int or version not in _VERSIONS:
        raise refuse("unsupported_version", "results.version")
    rows = results.get("results")
    if type(rows) is not list:
        raise refuse("missing_field", "results.results")
    listed: list[tuple[str, dict[str, Any]]] = []
    for position, row in enumerate(rows):
        where = f"results.results[{position}]"
        if type(row) is not dict:
            raise refuse("invalid_document", where)
        listed.append((where, row))
    return listed, _stated(results)


def _line_rows(path: Path, options: ImportOptions) -> Iterator[tuple[str, dict[str, Any]]]:
    with open_regular(path) as handle:
        for where, row, nan in iter_jsonl(handle, options):
            if nan and contains_nan(row):
                raise refuse("non_finite_number", where)
            yield where, row


def _record(
    row: dict[str, Any], where: str, options: ImportOptions, partial: dict[str, int]
) -> Record:
    test_case = row.get("testCase")
    if type(test_case) is not dict or "vars" not in test_case:
        raise refuse("missing_field", f"{where}.testCase")
    if "prompt" not in row:
        raise refuse("missing_field", f"{where}.prompt")
    native_metadata = test_case.get("metadata")
    if native_metadata is None:
        native_metadata = {}
    if type(native_metadata) is not dict:
        raise refuse("invalid_field", f"{where}.testCase.metadata")
    response = row.get("response")
    if response is not None and type(response) is not dict:
        raise refuse("invalid_field", f"{where}.response")
    if "invarlock_id" in native_metadata:
        record_id = native_metadata["invarlock_id"]
        if type(record_id) is not str or not record_id.strip():
            raise refuse("invalid_id", f"{where}.id")
    else:
        record_id = (
            identifier(row.get("testIdx"), f"{where}.testIdx")
            + ":"
            + identifier(row.get("promptIdx"), f"{where}.promptIdx")
        )
    prompt = row["prompt"]
    text = prompt.get("raw") if type(prompt) is dict else prompt
    if type(text) is not str:
        raise refuse("invalid_field", f"{where}.prompt")
    metadata = tags(native_metadata)
    provider = row.get("provider")
    if type(provider) is dict:
        label = provider.get("label") or provider.get("id")
        if type(label) is str and label:
            metadata.setdefault("provider", label)
    return build_record(
        where,
        record_id=record_id,
        input_value=test_case["vars"],
        expected=native_metadata.get("invarlock_expected"),
        output=response.get("output") if response is not None else None,
        scores=_scores(row, where, options),
        metadata=metadata,
        error=_error(row, response or {}, where),
        context={
            "prompt": text,
            "upstream_record": row,
            **({"promptfoo": partial} if partial else {}),
        },
    )


def _scores(row: dict[str, Any], where: str, options: ImportOptions) -> dict[str, int | float]:
    field = f"{where}.scores"
    scores = Scores(field)
    for name in _REFERENCE_SCORES:
        value = row.get(name)
        if value is None:
            continue
        found = number(value, field, options)
        if found is None:
            raise refuse("non_numeric_score", field)
        scores.add(name, as_float(found, field))
    success = row.get("success")
    if type(success) is bool:
        scores.add("success", 1.0 if success else 0.0)
    named = row.get("namedScores")
    if type(named) is dict:
        for metric, value in named.items():
            found = number(value, field, options)
            if found is not None:
                scores.add(f"namedScores.{metric}", as_float(found, field))
    return scores.values


def _error(row: dict[str, Any], response: dict[str, Any], where: str) -> str | None:
    native_error = bool(row.get("error")) or bool(response.get("error"))
    if "failureReason" not in row:
        return UPSTREAM_ERROR if native_error else None
    reason = row["failureReason"]
    if type(reason) is not int or reason not in (0, 1, 2):
        raise refuse("unsupported_failure_reason", f"{where}.failureReason")
    grading = row.get("gradingResult")
    if reason == 2:
        if row.get("success") is not False:
            raise refuse("inconsistent_failure", f"{where}.failureReason")
        return UPSTREAM_ERROR
    if reason == 0:
        failed_grading = type(grading) is dict and grading.get("pass") is False
        if native_error or row.get("success") is False or failed_grading:
            raise refuse("inconsistent_failure", f"{where}.failureReason")
        return None
    score = row.get("score")
    consistent = (
        row.get("success") is False
        and type(grading) is dict
        and grading.get("pass") is False
        and "output" in response
        and not response.get("error")
        and type(score) in (int, float)
        and type(grading.get("score")) in (int, float)
        and score == grading.get("score")
        and type(grading.get("reason")) is str
        and grading.get("reason") == row.get("error")
    )
    if not consistent:
        raise refuse("inconsistent_failure", f"{where}.failureReason")
    return None
