"""``pydantic-evals-report``: a Pydantic Evals ``EvaluationReport`` dumped as JSON.

The file is ``EvaluationReportAdapter.dump_python(report, mode="json")``
written with ``json.dump``: ``{name, cases: [...], failures: [...], analyses,
report_evaluator_failures, experiment_metadata, dataset_name, ...}``. Cases
whose task ran are in ``cases``; cases whose task raised are in ``failures``.
Records come in file order: every case, then every failure. The mapping
follows the reference ``pydantic-evals`` profile (spec 11 §8.2):

* ``id``: ``name`` (with ``repeat > 1`` Pydantic Evals names runs
  ``<name> [i/n]``; ``source_case_name`` holds the base name).
* ``input`` / ``expected`` / ``output``: ``inputs`` / ``expected_output``
  (``null`` when absent) / ``output`` (``null`` for failures).
* ``scores``: the ``scores`` (numbers) and ``assertions`` (booleans as 1/0)
  groups, each ``{name, value, reason, source}``; a name in both groups is
  ``score_name_collision``. ``labels`` (strings) are not scores (they stay
  in context). An evaluator that raised (``evaluator_failures[]``) leaves its
  score absent: the record is missing for that metric only.
* ``metadata``: the string members of the case's ``metadata``.
* ``error``: for a failure, its ``error_message`` (cut to 4096 code points);
  ``null`` for cases.
* ``context``: ``upstream_record`` (the case or failure) and
  ``pydantic_evals`` (the report's ``name`` and ``dataset_name``).

A report without a ``failures`` member (older Pydantic Evals releases) cannot
say whether a case failed and was dropped, and is refused
(``failed_items_unavailable``). ``NaN`` scores are missing scores (default)
or ``non_finite_number``. Memory: the document is held in memory (at most
``max_line_bytes``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from sealeval.captured.importers.base import ImportOptions, RecordSource
from sealeval.captured.importers.native._common import (
    Ids,
    Scores,
    as_float,
    build_record,
    error_text,
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

__all__ = ["PydanticEvalsReportImporter"]

_CASE_HINTS: Final = frozenset({"inputs", "assertions", "scores", "labels", "evaluator_failures"})
_GROUPS: Final = ("scores", "assertions")


class PydanticEvalsReportImporter(NativeImporter):
    """Pydantic Evals ``EvaluationReport`` JSON (cases and failures)."""

    name = "pydantic-evals-report"

    def detect(self, head: bytes, path: Path) -> bool:
        """Recognise an object whose ``cases`` (or ``failures``) look like report cases."""
        del path
        shape = scan(head)
        if shape.kind != "object" or "cases" not in shape.names():
            return False
        case = shape.names("cases", 0) or shape.names("failures", 0)
        return len(_CASE_HINTS & case) >= 2 or (
            "failures" in shape.names() and "report_evaluator_failures" in shape.names()
        )

    def records(self, path: Path, options: ImportOptions) -> RecordSource:
        """Yield the cases, then the failures, in file order."""
        report, nan = read_document(path, options)
        cases = report.get("cases")
        if type(cases) is not list:
            raise refuse("missing_field", "cases")
        if "failures" not in report:
            raise refuse("failed_items_unavailable", "failures")
        failures = report["failures"]
        if type(failures) is not list:
            raise refuse("invalid_field", "failures")
        if not cases and not failures:
            raise refuse("no_records", "cases")
        facts = {
            key: report[key] for key in ("name", "dataset_name") if type(report.get(key)) is str
        }
        ids = Ids()
        for group, items in (("cases", cases), ("failures", failures)):
            for position, item in enumerate(items):
                where = f"{group}[{position}]"
                if type(item) is not dict:
                    raise refuse("invalid_document", where)
                record_id = ids.add(identifier(item.get("name"), f"{where}.name"), f"{where}.name")
                clean = without_nan(item) if nan else item
                if group == "cases":
                    scores = _scores(item, f"{where}.scores", options)
                    output = clean.get("output")
                    error = error_text(clean["error"]) if clean.get("error") else None
                else:
                    message = clean.get("error_message")
                    if type(message) is not str:
                        raise refuse("missing_field", f"{where}.error_message")
                    scores, output, error = {}, None, error_text(message)
                yield build_record(
                    where,
                    record_id=record_id,
                    input_value=clean.get("inputs"),
                    expected=clean.get("expected_output"),
                    output=output,
                    scores=scores,
                    metadata=tags(clean.get("metadata")),
                    error=error,
                    context={"upstream_record": clean, "pydantic_evals": facts},
                )


def _scores(case: dict[str, Any], field: str, options: ImportOptions) -> dict[str, int | float]:
    scores = Scores(field)
    for group in _GROUPS:
        results = case.get(group)
        if results is None:
            continue
        if type(results) is not dict:
            raise refuse("invalid_field", field)
        for name, result in results.items():
            value = result.get("value") if type(result) is dict else result
            scores.add(name, as_float(number(value, field, options, booleans=True), field))
    return scores.values
