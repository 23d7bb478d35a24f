"""``ragas-result-rows``: ragas ``EvaluationResult.to_pandas()`` written as JSON records.

The table has one row per evaluated sample: the sample's fields
(``user_input``, ``response``, ``reference``, ``retrieved_contexts``,
``reference_contexts``, ...) and one column per metric. It is read as
pandas writes it with ``to_json(orient="records", lines=True)`` (JSONL,
auto-detected) or ``orient="records"`` (a JSON array).

* ``id``: the row index (ragas rows carry no id; the index is stable for a
  given dataset order).
* ``input``: ``user_input`` (text, or messages for multi-turn samples).
* ``expected``: ``reference`` (``null`` when absent); ``reference_contexts``
  stays in context.
* ``output``: ``response``.
* ``scores``: every column outside the sample fields whose value is a number.
  A metric that failed is ``null`` (``NaN`` in pandas): a missing score, for
  that metric only. Bare ``NaN`` tokens are missing scores (default) or
  ``non_finite_number``.
* ``metadata``: none (ragas has no per-sample tags); ``error``: ``null``:
  ragas records no per-sample error, a failed metric only shows as a missing
  score.
* ``context``: ``upstream_record`` (the row, with ``retrieved_contexts``).

A file whose first row has no column beyond the sample fields (ragas'
``EvaluationDataset.to_jsonl`` input) is refused (``not_results``).
Memory: JSONL one line at a time; the array layout is held in memory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from sealeval.captured.importers.base import ImportOptions, RecordSource
from sealeval.captured.importers.native._common import (
    Scores,
    build_record,
    iter_table,
    number,
    refuse,
    scan,
    without_nan,
)
from sealeval.captured.importers.native._skeleton import (
    NativeImporter,
)

__all__ = ["SAMPLE_FIELDS", "RagasResultRowsImporter"]

#: Sample fields of ragas' SingleTurnSample / MultiTurnSample (never metrics; the CSV
#: reader adds ragas 0.1's dataset columns).
SAMPLE_FIELDS: Final = frozenset(
    {
        "user_input",
        "retrieved_contexts",
        "reference_contexts",
        "retrieved_context_ids",
        "reference_context_ids",
        "response",
        "multi_responses",
        "reference",
        "rubrics",
        "reference_tool_calls",
        "reference_topics",
        "persona_name",
        "query_style",
        "query_length",
        "synthesizer_name",
    }
)


class RagasResultRowsImporter(NativeImporter):
    """ragas result tables (``to_pandas()`` as records JSONL or JSON array)."""

    name = "ragas-result-rows"

    def detect(self, head: bytes, path: Path) -> bool:
        """Recognise rows with ``user_input``, a response or reference, and a metric column."""
        del path
        shape = scan(head)
        keys = shape.names(0) if shape.kind == "array" else shape.names()
        return (
            "user_input" in keys
            and bool({"response", "reference"} & keys)
            and bool(keys - SAMPLE_FIELDS)
        )

    def records(self, path: Path, options: ImportOptions) -> RecordSource:
        """Yield one record per row, in file order."""
        position = -1
        for position, (where, row, nan) in enumerate(iter_table(path, options)):
            if position == 0 and not row.keys() - SAMPLE_FIELDS:
                raise refuse("not_results", where)
            if "user_input" not in row:
                raise refuse("missing_field", f"{where}.user_input")
            scores = Scores(f"{where}.scores")
            for name, value in row.items():
                if name not in SAMPLE_FIELDS:
                    scores.add(name, number(value, f"{where}.scores", options))
            clean = without_nan(row) if nan else row
            yield build_record(
                where,
                record_id=str(position),
                input_value=clean["user_input"],
                expected=clean.get("reference"),
                output=clean.get("response"),
                scores=scores.values,
                context={"upstream_record": clean},
            )
        if position < 0:
            raise refuse("no_records", "file")
