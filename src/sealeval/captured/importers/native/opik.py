"""``opik-evaluation-result``: an Opik ``EvaluationResult`` dumped as JSON.

Opik writes no result file; this is ``dataclasses.asdict`` of the
``EvaluationResult`` that ``opik.evaluate`` returns: ``{experiment_id,
experiment_name, dataset_id, trial_count, test_results: [{test_case,
score_results, trial_id, ...}], experiment_scores}``.

* ``id``: ``test_case.dataset_item_id`` (the dataset item, stable across
  experiments); with several trials (``trial_count > 1`` or trial ids other
  than 0), ``<dataset_item_id>#<trial_id>`` for every record.
* ``input``: ``dataset_item_content.input`` when the item has an ``input``
  member, else the whole ``dataset_item_content`` (what the task received).
* ``expected``: ``dataset_item_content.expected_output``, else
  ``mapped_scoring_inputs.reference``, else ``null``.
* ``output``: ``task_output.output`` when present, else ``task_output``.
* ``scores``: ``score_results[]`` by ``name`` (numbers; booleans 1/0). A
  metric with ``scoring_failed: true`` gives no score (its value is a
  placeholder): the record is missing for that metric only.
* ``metadata``: the other string members of ``dataset_item_content``.
* ``error``: ``null``: a task that raised stops ``opik.evaluate`` (no
  partial result is returned), so the result has no failed items to record.
* ``context``: ``upstream_record`` (the test result) and ``opik``
  (``experiment_id``, ``experiment_name``, ``dataset_id``).

``NaN`` scores are missing (default) or ``non_finite_number``. Memory: the
document is held in memory (at most ``max_line_bytes``).
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

__all__ = ["OpikEvaluationResultImporter"]

_RESULT_KEYS: Final = frozenset({"test_case", "score_results"})
_ROLE_KEYS: Final = frozenset({"input", "expected_output"})


class OpikEvaluationResultImporter(NativeImporter):
    """Opik ``EvaluationResult`` dumps (``test_results`` of test cases and score results)."""

    name = "opik-evaluation-result"

    def detect(self, head: bytes, path: Path) -> bool:
        """Recognise an object whose ``test_results`` hold ``test_case`` and ``score_results``."""
        del path
        shape = scan(head)
        return (
            shape.kind == "object"
            and "test_results" in shape.names()
            and shape.names("test_results", 0) >= _RESULT_KEYS
        )

    def records(self, path: Path, options: ImportOptions) -> RecordSource:
        """Yield one record per test result, in file order."""
        document, nan = read_document(path, options)
        results = document.get("test_results")
        if type(results) is not list:
            raise refuse("missing_field", "test_results")
        if not results:
            raise refuse("no_records", "test_results")
        for position, result in enumerate(results):
            if type(result) is not dict or type(result.get("test_case")) is not dict:
                raise refuse("invalid_document", f"test_results[{position}]")
        trials = {result.get("trial_id", 0) for result in results}
        trial_count = document.get("trial_count")
        several = (type(trial_count) is int and trial_count > 1) or trials - {0, None} != set()
        facts = {
            key: document[key]
            for key in ("experiment_id", "experiment_name", "dataset_id")
            if type(document.get(key)) is str
        }
        ids = Ids()
        for position, result in enumerate(results):
            where = f"test_results[{position}]"
            clean = without_nan(result) if nan else result
            case = clean["test_case"]
            item_id = identifier(case.get("dataset_item_id"), f"{where}.dataset_item_id")
            if several:
                item_id = f"{item_id}#{identifier(result.get('trial_id'), f'{where}.trial_id')}"
            content = case.get("dataset_item_content")
            content = content if type(content) is dict else {}
            mapped = case.get("mapped_scoring_inputs")
            mapped = mapped if type(mapped) is dict else {}
            task_output = case.get("task_output")
            if "expected_output" in content:
                expected = content["expected_output"]
            else:
                expected = mapped.get("reference")
            metadata = tags({k: v for k, v in content.items() if k not in _ROLE_KEYS})
            yield build_record(
                where,
                record_id=ids.add(item_id, f"{where}.dataset_item_id"),
                input_value=content.get("input", content),
                expected=expected,
                output=task_output["output"]
                if type(task_output) is dict and "output" in task_output
                else task_output,
                scores=_scores(result.get("score_results"), f"{where}.scores", options),
                metadata=metadata,
                context={"upstream_record": clean, "opik": facts},
            )


def _scores(results: Any, field: str, options: ImportOptions) -> dict[str, int | float]:
    scores = Scores(field)
    if results is None:
        return scores.values
    if type(results) is not list:
        raise refuse("invalid_field", field)
    for result in results:
        if type(result) is not dict:
            raise refuse("invalid_field", field)
        if result.get("scoring_failed") is True:
            continue
        scores.add(result.get("name"), number(result.get("value"), field, options, booleans=True))
    return scores.values
