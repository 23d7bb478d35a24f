"""Single-case score files: ``autoevals-scores`` and ``openevals-results``.

Both libraries score one case per call and write no file of their own; these
are the lists their results serialize to for one case. Neither carries the
case's input, reference, output or any error, so each file is imported as
**one record** with id ``"0"`` and ``input``, ``expected`` and ``output``
``null`` (unknown, not empty) and ``error`` ``null``:

* ``autoevals-scores``: a list of ``Score.as_dict()`` (``{name, score,
  metadata}``; a single object is accepted too). ``scores`` = ``{name:
  score}`` (``score`` in 0..1; ``null`` means the scorer skipped the case: no
  score); ``metadata`` = each score's string metadata members as
  ``<name>.<key>`` (LLM classifiers put ``choice`` and ``rationale`` there).
* ``openevals-results``: a list of ``EvaluatorResult`` (``{key, score,
  comment, metadata, source_run_id?}``; a single object is accepted too).
  ``scores`` = ``{key: score}`` (booleans 1/0); ``metadata`` =
  ``<key>.comment`` (the explanation) and each result's string metadata
  members as ``<key>.<name>``.

A repeated name is ``score_name_collision``; ``context.upstream_record`` is
the list. ``NaN`` scores are missing (default) or ``non_finite_number``.
Memory: the document is held in memory (at most ``max_line_bytes``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from sealeval.captured.importers.base import ImportOptions, RecordSource
from sealeval.captured.importers.native._common import (
    MAX_ERROR_LENGTH,
    Scores,
    build_record,
    number,
    refuse,
    scan,
    tags,
    without_nan,
)
from sealeval.captured.importers.native._skeleton import (
    NativeImporter,
    read_value,
)
from sealeval.captured.run import Record

__all__ = ["AutoevalsScoresImporter", "OpenevalsResultsImporter"]

_AUTOEVALS: Final = frozenset({"name", "score", "metadata", "error"})
_OPENEVALS: Final = frozenset({"key", "score", "comment", "metadata", "source_run_id"})


def _entry_keys(head: bytes) -> frozenset[str]:
    shape = scan(head)
    if shape.kind == "array":
        return shape.names(0)
    return shape.names() if shape.kind == "object" else frozenset()


def _entries(path: Path, options: ImportOptions) -> tuple[list[dict[str, Any]], bool]:
    value, nan = read_value(path, options)
    entries = [value] if type(value) is dict else value
    if type(entries) is not list:
        raise refuse("invalid_document", "file")
    if not entries:
        raise refuse("no_records", "file")
    for position, entry in enumerate(entries):
        if type(entry) is not dict:
            raise refuse("invalid_document", f"entries[{position}]")
    return entries, nan


def _one_record(
    entries: list[dict[str, Any]],
    nan: bool,
    scores: dict[str, int | float],
    metadata: dict[str, str],
) -> Record:
    return build_record(
        "entries",
        record_id="0",
        input_value=None,
        expected=None,
        output=None,
        scores=scores,
        metadata=metadata,
        context={"upstream_record": without_nan(entries) if nan else entries},
    )


class AutoevalsScoresImporter(NativeImporter):
    """autoevals ``Score.as_dict()`` lists (one case)."""

    name = "autoevals-scores"

    def detect(self, head: bytes, path: Path) -> bool:
        """Recognise entries with ``name`` and ``score`` and nothing beyond a Score's members."""
        del path
        keys = _entry_keys(head)
        return {"name", "score"} <= keys <= _AUTOEVALS

    def records(self, path: Path, options: ImportOptions) -> RecordSource:
        """Yield the file's one record."""
        entries, nan = _entries(path, options)
        scores = Scores("entries.scores")
        metadata: dict[str, str] = {}
        seen: set[str] = set()
        for position, entry in enumerate(entries):
            name = entry.get("name")
            if type(name) is not str or not name:
                raise refuse("invalid_field", f"entries[{position}].name")
            if name in seen:
                raise refuse("score_name_collision", "entries.scores")
            seen.add(name)
            scores.add(name, number(entry.get("score"), "entries.scores", options))
            metadata.update(tags(without_nan(entry.get("metadata")), prefix=f"{name}."))
        yield _one_record(entries, nan, scores.values, metadata)


class OpenevalsResultsImporter(NativeImporter):
    """openevals ``EvaluatorResult`` lists (one case)."""

    name = "openevals-results"

    def detect(self, head: bytes, path: Path) -> bool:
        """Recognise entries with ``key``, ``score`` and nothing beyond an EvaluatorResult's."""
        del path
        keys = _entry_keys(head)
        return {"key", "score"} <= keys <= _OPENEVALS

    def records(self, path: Path, options: ImportOptions) -> RecordSource:
        """Yield the file's one record."""
        entries, nan = _entries(path, options)
        scores = Scores("entries.scores")
        metadata: dict[str, str] = {}
        seen: set[str] = set()
        for position, entry in enumerate(entries):
            key = entry.get("key")
            if type(key) is not str or not key:
                raise refuse("invalid_field", f"entries[{position}].key")
            if key in seen:
                raise refuse("score_name_collision", "entries.scores")
            seen.add(key)
            scores.add(key, number(entry.get("score"), "entries.scores", options, booleans=True))
            comment = entry.get("comment")
            if type(comment) is str and len(comment) <= MAX_ERROR_LENGTH:
                metadata[f"{key}.comment"] = comment
            for name, value in tags(without_nan(entry.get("metadata")), prefix=f"{key}.").items():
                metadata.setdefault(name, value)
        yield _one_record(entries, nan, scores.values, metadata)
