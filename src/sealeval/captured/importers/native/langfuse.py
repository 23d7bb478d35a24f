"""Langfuse experiment files: local ``ExperimentResult`` dumps and public-API item listings.

* ``langfuse-experiment-result``: a JSON dump of the ``ExperimentResult``
  that ``Langfuse.run_experiment`` returns (``{name, run_name, description,
  experiment_id, run_evaluations, item_results: [{item, output, evaluations,
  trace_id, ...}]}``; the SDK writes no file, callers dump the attributes).
  Langfuse **leaves an item whose task raised out of** ``item_results`` (and
  a failing evaluator's scores out of ``evaluations``): the file cannot say
  which or how many items failed, and item positions shift past a dropped
  item. This adapter therefore always refuses (``failed_items_unavailable``);
  export the experiment's items from the Langfuse API instead (below).
* ``unsafe-langfuse-experiment-result`` (never auto-detected): imports such a
  dump anyway, for a caller who knows no item failed. Records are marked
  ``context.langfuse.failed_items_recorded = false``.
* ``langfuse-experiment-items``: the public API's experiment-items listing
  (``{data: [...], meta: {limit, cursor, ...}}``, camelCase), which keeps
  failed items (``level == "ERROR"``). A page whose ``meta.cursor`` is set is
  one page of several and is refused (``incomplete_run``).

Record mapping (local dump / API item):

* ``id``: ``item.id`` when every item has one, else the item's position in
  ``item_results`` (local data has no ids; ``trace_id`` is all zeros without
  tracing) / ``experimentItemId`` (the dataset item, stable across runs)
  when every row has one, else the row ``id``. Mixed → ``missing_id``.
* ``input`` / ``expected`` / ``output``: ``item.input`` /
  ``item.expected_output`` / ``output``; ``input`` / ``expectedOutput`` /
  ``output``.
* ``scores``: ``evaluations[]`` / ``scores[]`` by name, with the reference
  Langfuse rules (spec 11 §6): numeric (``NUMERIC`` or no type) finite
  numbers, ``BOOLEAN`` booleans or 0/1 as 1/0, ``CATEGORICAL`` strings
  skipped, anything else ``invalid_evaluation``; a repeated name is
  ``score_name_collision``.
* ``metadata``: the string members of ``item.metadata`` /
  ``experimentItemMetadata`` (then ``metadata`` for keys not yet set).
* ``error``: ``null`` (local dump: failed items are absent) / for
  ``level == "ERROR"`` the ``statusMessage``, else ``"upstream_error"``.
* ``context``: ``upstream_record`` and ``langfuse`` (experiment name and
  id, run name).

``NaN`` values are missing scores (default) or ``non_finite_number``.
Memory: the document is held in memory (at most ``max_line_bytes``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from sealeval.captured.importers.base import ImportOptions, RecordSource
from sealeval.captured.importers.native._common import (
    NAN,
    Ids,
    Scores,
    as_float,
    build_record,
    error_text,
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

__all__ = [
    "LangfuseExperimentItemsImporter",
    "LangfuseExperimentResultImporter",
    "UnsafeLangfuseExperimentResultImporter",
]

_ITEM_HINTS: Final = frozenset({"item", "evaluations"})
_API_HINTS: Final = frozenset({"experimentId", "experimentItemId", "experimentName"})


class LangfuseExperimentResultImporter(NativeImporter):
    """Local ``ExperimentResult`` dumps: recognised, and refused (failed items are dropped)."""

    name = "langfuse-experiment-result"
    #: Whether to import although failed items cannot be established.
    unsafe_assume_complete = False

    def detect(self, head: bytes, path: Path) -> bool:
        """Recognise an object with ``item_results`` holding ``{item, output, evaluations}``."""
        del path
        if self.unsafe_assume_complete:
            return False
        shape = scan(head)
        if shape.kind != "object" or "item_results" not in shape.names():
            return False
        return "run_name" in shape.names() or shape.names("item_results", 0) >= _ITEM_HINTS

    def records(self, path: Path, options: ImportOptions) -> RecordSource:
        """Refuse (``failed_items_unavailable``), or import under the unsafe adapter."""
        result, nan = read_document(path, options)
        items = result.get("item_results")
        if type(items) is not list:
            raise refuse("missing_field", "item_results")
        if not self.unsafe_assume_complete:
            raise refuse("failed_items_unavailable", "item_results")
        if not items:
            raise refuse("no_records", "item_results")
        for position, item_result in enumerate(items):
            if type(item_result) is not dict or type(item_result.get("item")) is not dict:
                raise refuse("invalid_document", f"item_results[{position}]")
        keyed = [type(entry["item"].get("id")) is str for entry in items]
        if any(keyed) and not all(keyed):
            raise refuse("missing_id", "item_results")
        facts = {
            key: result[key]
            for key in ("name", "run_name", "experiment_id")
            if type(result.get(key)) is str
        }
        facts["failed_items_recorded"] = False
        ids = Ids()
        for position, item_result in enumerate(items):
            where = f"item_results[{position}]"
            clean = without_nan(item_result) if nan else item_result
            item = clean["item"]
            record_id = ids.add(item["id"] if all(keyed) else str(position), f"{where}.id")
            yield build_record(
                where,
                record_id=record_id,
                input_value=item.get("input"),
                expected=item.get("expected_output"),
                output=clean.get("output"),
                scores=_scores(item_result.get("evaluations"), "data_type", where, options),
                metadata=tags(item.get("metadata")),
                context={"upstream_record": clean, "langfuse": facts},
            )


class UnsafeLangfuseExperimentResultImporter(LangfuseExperimentResultImporter):
    """Local ``ExperimentResult`` dumps imported although failed items were dropped."""

    name = "unsafe-langfuse-experiment-result"
    unsafe_assume_complete = True


class LangfuseExperimentItemsImporter(NativeImporter):
    """The Langfuse public API's experiment-items listing (one complete page)."""

    name = "langfuse-experiment-items"

    def detect(self, head: bytes, path: Path) -> bool:
        """Recognise ``{data: [...], meta}`` whose rows carry experiment fields."""
        del path
        shape = scan(head)
        return (
            shape.kind == "object"
            and "data" in shape.names()
            and bool(_API_HINTS & shape.names("data", 0))
        )

    def records(self, path: Path, options: ImportOptions) -> RecordSource:
        """Yield one record per listed item, in file order."""
        listing, nan = read_document(path, options)
        rows = listing.get("data")
        if type(rows) is not list:
            raise refuse("missing_field", "data")
        meta = listing.get("meta")
        if type(meta) is dict and meta.get("cursor") is not None:
            raise refuse("incomplete_run", "meta.cursor")
        if not rows:
            raise refuse("no_records", "data")
        for position, row in enumerate(rows):
            if type(row) is not dict:
                raise refuse("invalid_document", f"data[{position}]")
        key = "experimentItemId"
        if not all(type(row.get(key)) is str for row in rows):
            key = "id"
            if not all(type(row.get(key)) is str for row in rows):
                raise refuse("missing_id", "data")
        ids = Ids()
        for position, row in enumerate(rows):
            where = f"data[{position}]"
            clean = without_nan(row) if nan else row
            metadata = tags(clean.get("experimentItemMetadata"))
            for name, value in tags(clean.get("metadata")).items():
                metadata.setdefault(name, value)
            error = None
            if clean.get("level") == "ERROR":
                error = error_text(clean.get("statusMessage"))
            facts = {
                name: clean[name]
                for name in ("experimentId", "experimentName")
                if type(clean.get(name)) is str
            }
            yield build_record(
                where,
                record_id=ids.add(clean[key], f"{where}.id"),
                input_value=clean.get("input"),
                expected=clean.get("expectedOutput"),
                output=clean.get("output"),
                scores=_scores(row.get("scores"), "dataType", where, options),
                metadata=metadata,
                error=error,
                context={"upstream_record": clean, "langfuse": facts},
            )


def _scores(
    evaluations: Any, type_key: str, where: str, options: ImportOptions
) -> dict[str, int | float]:
    field = f"{where}.scores"
    scores = Scores(field)
    if evaluations is None:
        return scores.values
    if type(evaluations) is not list:
        raise refuse("invalid_evaluation", field)
    for evaluation in evaluations:
        if type(evaluation) is not dict or type(evaluation.get("name")) is not str:
            raise refuse("invalid_evaluation", field)
        value = evaluation.get("value")
        kind = evaluation.get(type_key)
        if kind == "CATEGORICAL" and type(value) is str:
            continue
        if kind == "BOOLEAN" and (
            type(value) is bool or (type(value) in (int, float) and value in (0, 1))
        ):
            scores.add(evaluation["name"], 1.0 if value else 0.0)
            continue
        if kind not in (None, "NUMERIC"):
            raise refuse("invalid_evaluation", field)
        found = number(value, field, options)
        if found is None and value is not None and value is not NAN:
            raise refuse("invalid_evaluation", field)
        scores.add(evaluation["name"], as_float(found, field))
    return scores.values
