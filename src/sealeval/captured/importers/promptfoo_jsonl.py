"""``promptfoo-jsonl``: promptfoo's JSONL results export (spec 11 §5).

Each row needs ``testCase`` (an object with ``vars``) and ``prompt``:

* ``id`` = ``testCase.metadata.invarlock_id`` (non-blank string) or
  ``"<testIdx>:<promptIdx>"``;
* ``input = testCase.vars``, ``expected = testCase.metadata.invarlock_expected``
  (``null`` when absent: never inferred from assertions),
  ``output = response.output``, ``context = {prompt: <prompt text>,
  upstream_record: <the row>}``;
* ``scores`` = ``score``, ``latencyMs``, ``cost`` (present, non-null) as
  floats, merged with ``testCase.metadata.invarlock_scores``;
* ``error`` from ``failureReason``: 2 (provider failure) → ``"upstream_error"``;
  0 (pass) → ``null``; 1 (assertion failure: a wrong answer, kept for
  scoring) → ``null`` when every failure field agrees; contradictions are
  refused (``inconsistent_failure``), other values too
  (``unsupported_failure_reason``). Rows of older exports without
  ``failureReason`` are errored exactly when a native error is present.

``NaN`` is refused: promptfoo writes JSON with JavaScript's
``JSON.stringify``, which never emits it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from sealeval.captured.importers.base import ImportOptions
from sealeval.captured.importers.jsonl import (
    LinesImporter,
    capture_facts,
    identifier,
    is_number,
    native_score,
    refuse,
    sniff,
    tags,
)

__all__ = ["PromptfooJsonlImporter", "promptfoo_record"]

_SCORE_MEMBERS: Final = ("score", "latencyMs", "cost")


def _error(row: dict[str, Any], response: dict[str, Any] | None, where: str) -> str | None:
    native_error = bool(row.get("error")) or bool(response is not None and response.get("error"))
    if "failureReason" not in row:
        return "upstream_error" if native_error else None
    reason = row["failureReason"]
    if type(reason) is not int or reason not in (0, 1, 2):
        raise refuse("unsupported_failure_reason", f"{where}.failureReason")
    success = row.get("success")
    grading = row.get("gradingResult")
    if reason == 2:
        if success is not False:
            raise refuse("inconsistent_failure", f"{where}.success")
        return "upstream_error"
    if reason == 0:
        failed_grade = type(grading) is dict and grading.get("pass") is False
        if native_error or success is False or failed_grade:
            raise refuse("inconsistent_failure", f"{where}.failureReason")
        return None
    score = row.get("score")
    if not (
        success is False
        and type(grading) is dict
        and grading.get("pass") is False
        and response is not None
        and "output" in response
        and not response.get("error")
        and is_number(score)
        and is_number(grading.get("score"))
        and score == grading.get("score")
        and type(grading.get("reason")) is str
        and grading.get("reason") == row.get("error")
    ):
        raise refuse("inconsistent_failure", f"{where}.gradingResult")
    return None


def _record_id(row: dict[str, Any], metadata: dict[str, Any], where: str) -> str:
    if "invarlock_id" in metadata:
        record_id = metadata["invarlock_id"]
        if type(record_id) is not str or not record_id.strip():
            raise refuse("invalid_id", f"{where}.testCase.metadata.invarlock_id")
        return record_id
    return (
        identifier(row.get("testIdx"), f"{where}.testIdx")
        + ":"
        + identifier(row.get("promptIdx"), f"{where}.promptIdx")
    )


def _prompt(prompt: object, where: str) -> str:
    if type(prompt) is dict:
        if "raw" not in prompt:
            raise refuse("missing_field", f"{where}.prompt")
        prompt = prompt["raw"]
    if type(prompt) is not str:
        raise refuse("invalid_field", f"{where}.prompt")
    return prompt


def promptfoo_record(row: object, where: str) -> dict[str, Any]:
    """Map one promptfoo result row to a record mapping (§5)."""
    if type(row) is not dict:
        raise refuse("not_object", where)
    test_case = row.get("testCase")
    if type(test_case) is not dict or "vars" not in test_case or "prompt" not in row:
        raise refuse("missing_field", where)
    metadata = test_case.get("metadata")
    if metadata is None:
        metadata = {}
    elif type(metadata) is not dict:
        raise refuse("invalid_field", f"{where}.testCase.metadata")
    response = row.get("response")
    if response is not None and type(response) is not dict:
        raise refuse("invalid_field", f"{where}.response")
    record_id = _record_id(row, metadata, where)
    prompt = _prompt(row["prompt"], where)
    scores: dict[str, Any] = {}
    for name in _SCORE_MEMBERS:
        if row.get(name) is not None:
            scores[name] = native_score(row[name], f"{where}.{name}", strict=True)
    record: dict[str, Any] = {
        "id": record_id,
        "input": test_case["vars"],
        "expected": metadata.get("invarlock_expected"),
        "output": response.get("output") if response is not None else None,
        "scores": scores,
        "metadata": tags(metadata),
        "error": _error(row, response, where),
        "context": {"prompt": prompt},
    }
    return capture_facts(record, metadata, f"{where}.testCase", upstream=row)


class PromptfooJsonlImporter(LinesImporter):
    """The ``promptfoo-jsonl`` adapter (see the module docstring)."""

    name = "promptfoo-jsonl"

    def detect(self, head: bytes, path: Path) -> bool:
        """Detect a first row with promptfoo's ``testCase`` / ``testIdx`` / ``promptIdx``."""
        del path
        found = sniff(head)
        keys = found.keys()
        return found.kind == "object" and bool(keys & {"testCase", "testIdx", "promptIdx"})

    def map_row(self, row: dict[str, Any], where: str, options: ImportOptions) -> Any:
        """Map one result row (§5)."""
        del options
        return promptfoo_record(row, where)
