"""DeepEval result files: ``deepeval-test-run`` and ``deepeval-evaluation-result``.

* ``deepeval-test-run`` reads DeepEval's camelCase ``TestRun``: the
  ``test_run_<YYYYMMDD_HHMMSS>.json`` files written to
  ``DEEPEVAL_RESULTS_FOLDER``, the identical ``.deepeval/.latest_run_full.json``,
  and ``.deepeval/.latest_test_run.json`` (the same object wrapped as
  ``{"testRunData": ...}``). Cases are ``testCases[]``.
* ``deepeval-evaluation-result`` reads ``EvaluationResult.model_dump()`` (the
  object ``evaluate()`` returns, snake_case). Cases are ``test_results[]``.

Per case, in file order:

* ``id``: ``name`` (DeepEval names unnamed cases ``test_case_<n>``); a
  repeated name is ``duplicate_id``.
* ``input`` / ``expected`` / ``output``: ``input`` /
  ``expectedOutput`` (``expected_output``, ``null`` when absent) /
  ``actualOutput`` (``actual_output``).
* ``scores``: ``metricsData[].score`` (``metrics_data``) by metric ``name``.
  A metric that raised has no score and an ``error``: its score is absent,
  so the record is missing for that metric only (the message stays in
  ``context``); the other metrics of the case still count. A repeated
  metric name is ``score_name_collision``.
* ``metadata``: the string members of the case's ``metadata``.
* ``error``: always ``null``: DeepEval has no case-level error (a failing
  test case aborts ``evaluate()`` unless errors are ignored, and then only
  metrics carry them).
* ``context``: ``upstream_record`` (the case object, with ``context`` /
  ``retrievalContext``, ``success``, ``tags``, ``runDuration``, ``order``).

Conversational cases (``conversationalTestCases[]``, or
``conversational: true``) have turns instead of one input and output and are
refused (``unsupported_case_kind``). ``NaN`` scores (Python's ``json.dump``)
are missing scores (default) or ``non_finite_number``. Memory: the document
is held in memory (at most ``max_line_bytes``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from sealeval.captured.importers.base import ImportOptions, RecordSource
from sealeval.captured.importers.native._common import (
    Ids,
    Scores,
    build_record,
    identifier,
    number,
    refuse,
    scan,
    tags,
    without_nan,
)
from sealeval.captured.importers.native._skeleton import (
    NativeImporter,
    read_document,
)

__all__ = ["DeepEvalEvaluationResultImporter", "DeepEvalTestRunImporter", "uploaded_only"]

_CAMEL: Final = {
    "cases": "testCases",
    "expected": "expectedOutput",
    "output": "actualOutput",
    "metrics": "metricsData",
}
_SNAKE: Final = {
    "cases": "test_results",
    "expected": "expected_output",
    "output": "actual_output",
    "metrics": "metrics_data",
}
_CASE_HINTS_CAMEL: Final = frozenset({"metricsData", "actualOutput"})
_CASE_HINTS_SNAKE: Final = frozenset({"metrics_data", "actual_output"})


def uploaded_only(head: bytes) -> bool:
    """Whether ``head`` is a ``.latest_test_run.json`` of a run uploaded to Confident AI.

    DeepEval then keeps only ``{"testRunLink": ...}`` there: an object with
    that member and no ``testRunData`` or ``testCases`` (the link is never read).
    """
    shape = scan(head)
    if shape.kind != "object":
        return False
    names = shape.names()
    return "testRunLink" in names and not names & {"testRunData", "testCases"}


class DeepEvalTestRunImporter(NativeImporter):
    """DeepEval ``TestRun`` files (``test_run_*.json``, ``.deepeval/.latest_*.json``)."""

    name = "deepeval-test-run"

    def detect(self, head: bytes, path: Path) -> bool:
        """Recognise a ``TestRun`` (``testCases`` with metric data), maybe under ``testRunData``."""
        del path
        shape = scan(head)
        if shape.kind != "object":
            return False
        root: tuple[str, ...] = ("testRunData",) if "testRunData" in shape.names() else ()
        top = shape.names(*root)
        if "testCases" not in top:
            return False
        return (
            bool(_CASE_HINTS_CAMEL & shape.names(*root, "testCases", 0)) or "metricsScores" in top
        )

    def records(self, path: Path, options: ImportOptions) -> RecordSource:
        """Yield one record per test case, in file order."""
        document, nan = read_document(path, options)
        if "testRunData" in document:
            document = document["testRunData"]
            if type(document) is not dict:
                raise refuse("invalid_document", "testRunData")
        if document.get("conversationalTestCases"):
            raise refuse("unsupported_case_kind", "conversationalTestCases")
        yield from _cases(document, _CAMEL, options, nan)


class DeepEvalEvaluationResultImporter(NativeImporter):
    """DeepEval ``EvaluationResult.model_dump()`` (snake_case ``test_results``)."""

    name = "deepeval-evaluation-result"

    def detect(self, head: bytes, path: Path) -> bool:
        """Recognise an object whose ``test_results`` hold DeepEval metric data."""
        del path
        shape = scan(head)
        return (
            shape.kind == "object"
            and "test_results" in shape.names()
            and bool(_CASE_HINTS_SNAKE & shape.names("test_results", 0))
        )

    def records(self, path: Path, options: ImportOptions) -> RecordSource:
        """Yield one record per test result, in file order."""
        document, nan = read_document(path, options)
        yield from _cases(document, _SNAKE, options, nan)


def _cases(
    document: dict[str, Any], names: dict[str, str], options: ImportOptions, nan: bool
) -> RecordSource:
    container = names["cases"]
    cases = document.get(container)
    if type(cases) is not list:
        raise refuse("missing_field", container)
    if not cases:
        raise refuse("no_records", container)
    ids = Ids()
    for position, case in enumerate(cases):
        where = f"{container}[{position}]"
        if type(case) is not dict:
            raise refuse("invalid_document", where)
        if case.get("conversational") is True:
            raise refuse("unsupported_case_kind", where)
        record_id = ids.add(identifier(case.get("name"), f"{where}.name"), f"{where}.name")
        scores = Scores(f"{where}.scores")
        metrics = case.get(names["metrics"])
        if metrics is None:
            metrics = []
        if type(metrics) is not list:
            raise refuse("invalid_field", f"{where}.scores")
        seen: set[str] = set()
        for metric in metrics:
            if type(metric) is not dict or type(metric.get("name")) is not str:
                raise refuse("invalid_field", f"{where}.scores")
            if metric["name"] in seen:
                raise refuse("score_name_collision", f"{where}.scores")
            seen.add(metric["name"])
            scores.add(metric["name"], number(metric.get("score"), f"{where}.scores", options))
        clean = without_nan(case) if nan else case
        yield build_record(
            where,
            record_id=record_id,
            input_value=clean.get("input"),
            expected=clean.get(names["expected"]),
            output=clean.get(names["output"]),
            scores=scores.values,
            metadata=tags(clean.get("metadata")),
            context={"upstream_record": clean},
        )
