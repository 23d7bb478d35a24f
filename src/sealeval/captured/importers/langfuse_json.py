"""``langfuse-json``: invarlock's Langfuse capture envelope (spec 11 §6).

The file is exactly ``{format: "invarlock/langfuse-export-v1", sdk_version,
result}`` where ``result`` is a Langfuse experiment result. Identity rules
(checked before anything else is mapped): the caller's ``source`` must be
``{name: "langfuse", version: sdk_version}`` and its ``run_id`` must be the
result's ``run_name`` (``identity_mismatch``).

Every item result becomes one record: ``id`` from ``item.id`` and/or
``item.metadata.invarlock_id`` (equal when both; required), ``input =
item.input``, ``expected = item.expected_output``, ``output``, ``scores`` from
the evaluations (numeric → float, boolean → 1.0/0.0, categorical skipped)
merged with ``invarlock_scores``, ``error = metadata.invarlock_error``,
``metadata`` = string members without ``invarlock_`` keys, and ``context =
{langfuse: {name, run_name, experiment_id, dataset_run_id, item_result}}``.
Every object is closed; unknown members are refused (``unknown_field``).

Memory: the envelope is decoded at once (≤128 MiB); records are produced one
at a time. ``NaN`` is refused (the envelope is written by invarlock's capture
with strict JSON).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final, cast

from sealeval._validate import check_closed
from sealeval.captured.importers.base import ImportOptions, ImportRefusalError, RecordSource
from sealeval.captured.importers.jsonl import (
    Binding,
    DocumentImporter,
    capture_facts,
    is_number,
    refuse,
    sniff,
    tags,
)
from sealeval.captured.likelihood import Source

__all__ = [
    "LANGFUSE_FORMAT",
    "LangfuseJsonImporter",
    "check_langfuse_envelope",
    "check_langfuse_identity",
    "langfuse_records",
]

LANGFUSE_FORMAT: Final = "invarlock/langfuse-export-v1"
_MAX_TEXT: Final = 4096
_RESULT_REQUIRED: Final = frozenset(
    {"name", "run_name", "experiment_id", "item_results", "run_evaluations"}
)
_RESULT_OPTIONAL: Final = frozenset({"description", "dataset_run_id", "dataset_run_url"})
_ITEM_RESULT_REQUIRED: Final = frozenset({"item", "output", "evaluations"})
_ITEM_RESULT_OPTIONAL: Final = frozenset({"trace_id", "dataset_run_id"})
_HOSTED_TEXT: Final = (
    "source_trace_id",
    "source_observation_id",
    "dataset_id",
    "dataset_name",
    "created_at",
    "updated_at",
)
_HOSTED: Final = frozenset({*_HOSTED_TEXT, "status", "media_references"})
_ITEM_REQUIRED: Final = frozenset({"input"})
_ITEM_ALLOWED: Final = frozenset({"input", "expected_output", "metadata", "id", *_HOSTED})
_EVALUATION_REQUIRED: Final = frozenset({"name", "value"})
_EVALUATION_OPTIONAL: Final = frozenset({"data_type", "comment", "metadata", "config_id"})


def _is_text(value: object) -> bool:
    """Non-empty text of at most 4096 code points without C0 controls or DEL."""
    return (
        type(value) is str
        and 0 < len(value) <= _MAX_TEXT
        and not any(ord(char) < 0x20 or ord(char) == 0x7F for char in value)
    )


def _text(value: object, field: str, code: str = "invalid_field") -> str:
    if not _is_text(value):
        raise refuse(code, field)
    return value  # type: ignore[return-value]


def _closed(
    value: object, field: str, required: frozenset[str], optional: frozenset[str]
) -> dict[str, Any]:
    """Check a closed object (``not_object``, ``unknown_field``, ``missing_field``)."""
    checked = check_closed(
        value, field, required, optional, error=ImportRefusalError, type_code="not_object"
    )
    return cast("dict[str, Any]", checked)  # a decoded JSON object is a dict


def check_langfuse_envelope(envelope: object) -> tuple[str, dict[str, Any]]:
    """Check ``{format, sdk_version, result}``; return the SDK version and the result."""
    document = _closed(
        envelope, "file", frozenset({"format", "sdk_version", "result"}), frozenset()
    )
    if document["format"] != LANGFUSE_FORMAT:
        raise refuse("invalid_document", "format")
    version = _text(document["sdk_version"], "sdk_version")
    result = document["result"]
    if type(result) is not dict:
        raise refuse("not_object", "result")
    return version, result


def check_langfuse_identity(
    sdk_version: str, result: Mapping[str, Any], source: Source | None, run_id: str | None
) -> None:
    """Require the caller's source to be ``langfuse@sdk_version``, its run id the ``run_name``."""
    if source is None:
        raise refuse("identity_mismatch", "source")
    if source.name != "langfuse":
        raise refuse("identity_mismatch", "source.name")
    if source.version != sdk_version:
        raise refuse("identity_mismatch", "source.version")
    if run_id is None or run_id != result.get("run_name"):
        raise refuse("identity_mismatch", "run_id")


def _evaluations(value: object, field: str) -> dict[str, float]:
    if type(value) is not list:
        raise refuse("invalid_field", field)
    scores: dict[str, float] = {}
    names: set[str] = set()
    for position, item in enumerate(value):
        where = f"{field}[{position}]"
        evaluation = _closed(item, where, _EVALUATION_REQUIRED, _EVALUATION_OPTIONAL)
        name = _text(evaluation["name"], f"{where}.name")
        if name in names:
            raise refuse("duplicate_id", f"{where}.name")
        names.add(name)
        if evaluation.get("metadata") is not None and type(evaluation["metadata"]) is not dict:
            raise refuse("invalid_field", f"{where}.metadata")
        for member in ("comment", "config_id"):
            if evaluation.get(member) is not None and type(evaluation[member]) is not str:
                raise refuse("invalid_field", f"{where}.{member}")
        score = _evaluation_score(evaluation.get("data_type"), evaluation["value"], where)
        if score is not None:
            scores[name] = score
    return scores


def _evaluation_score(data_type: object, value: object, where: str) -> float | None:
    if data_type == "CATEGORICAL":
        if type(value) is str:
            return None
    elif data_type == "BOOLEAN":
        if type(value) is bool:
            return 1.0 if value else 0.0
        if is_number(value) and value in (0, 1):
            return float(value)
    elif (data_type is None or data_type == "NUMERIC") and is_number(value):
        try:
            return float(value)  # type: ignore[arg-type]
        except OverflowError:
            raise refuse("invalid_evaluation", f"{where}.value") from None
    raise refuse("invalid_evaluation", f"{where}.value")


def _check_result(result: Mapping[str, Any]) -> list[Any]:
    _closed(result, "result", _RESULT_REQUIRED, _RESULT_OPTIONAL)
    for member in ("name", "run_name", "experiment_id"):
        _text(result[member], f"result.{member}")
    description = result.get("description")
    if description is not None and type(description) is not str:
        raise refuse("invalid_field", "result.description")
    dataset_run_id = result.get("dataset_run_id")
    if dataset_run_id is not None and dataset_run_id != result["experiment_id"]:
        raise refuse("invalid_field", "result.dataset_run_id")
    url = result.get("dataset_run_url")
    if url is not None and type(url) is not str:
        raise refuse("invalid_field", "result.dataset_run_url")
    _evaluations(result["run_evaluations"], "result.run_evaluations")
    items = result["item_results"]
    if type(items) is not list:
        raise refuse("invalid_field", "result.item_results")
    if not items:
        raise refuse("no_records", "result.item_results")
    return items


def _check_hosted(value: Mapping[str, Any], where: str) -> None:
    """Check the hosted dataset-item fields (all optional)."""
    for member in _HOSTED_TEXT:
        if value.get(member) is not None:
            _text(value[member], f"{where}.{member}")
    if "status" in value and value["status"] not in ("ACTIVE", "ARCHIVED"):
        raise refuse("invalid_field", f"{where}.status")
    if "media_references" in value:
        references = value["media_references"]
        if type(references) is not list or any(type(ref) is not dict for ref in references):
            raise refuse("invalid_field", f"{where}.media_references")


def _item(value: object, where: str, dataset_run_id: object) -> tuple[dict[str, Any], str]:
    value = _closed(value, where, _ITEM_REQUIRED, _ITEM_ALLOWED)
    _check_hosted(value, where)
    metadata = value.get("metadata")
    if metadata is not None and type(metadata) is not dict:
        raise refuse("invalid_field", f"{where}.metadata")
    item_id = value.get("id")
    if item_id is not None:
        _text(item_id, f"{where}.id", "invalid_id")
    stable = (metadata or {}).get("invarlock_id")
    if stable is not None:
        _text(stable, f"{where}.metadata.invarlock_id", "invalid_id")
    if item_id is None and (_HOSTED & set(value) or dataset_run_id is not None):
        raise refuse("missing_id", f"{where}.id")
    if item_id is not None and stable is not None and item_id != stable:
        raise refuse("invalid_id", f"{where}.id")
    record_id = item_id if item_id is not None else stable
    if record_id is None:
        raise refuse("missing_id", f"{where}.metadata.invarlock_id")
    return value, record_id


def langfuse_records(result: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Map a Langfuse experiment result to record mappings, in item order."""
    items = _check_result(result)
    dataset_run_id = result.get("dataset_run_id")
    for position, value in enumerate(items):
        where = f"result.item_results[{position}]"
        item_result = _closed(value, where, _ITEM_RESULT_REQUIRED, _ITEM_RESULT_OPTIONAL)
        if item_result.get("trace_id") is not None:
            _text(item_result["trace_id"], f"{where}.trace_id")
        if "dataset_run_id" in item_result and item_result["dataset_run_id"] != dataset_run_id:
            raise refuse("invalid_field", f"{where}.dataset_run_id")
        item, record_id = _item(item_result["item"], f"{where}.item", dataset_run_id)
        metadata = item.get("metadata") or {}
        error = metadata.get("invarlock_error")
        if error is not None:
            _text(error, f"{where}.item.metadata.invarlock_error")
        record: dict[str, Any] = {
            "id": record_id,
            "input": item["input"],
            "expected": item.get("expected_output"),
            "output": item_result["output"],
            "scores": _evaluations(item_result["evaluations"], f"{where}.evaluations"),
            "metadata": tags(metadata),
            "error": error,
            "context": {
                "langfuse": {
                    "name": result["name"],
                    "run_name": result["run_name"],
                    "experiment_id": result["experiment_id"],
                    "dataset_run_id": dataset_run_id,
                    "item_result": item_result,
                }
            },
        }
        yield capture_facts(record, metadata, f"{where}.item")


class LangfuseJsonImporter(DocumentImporter):
    """The ``langfuse-json`` adapter (see the module docstring)."""

    name = "langfuse-json"

    def detect(self, head: bytes, path: Path) -> bool:
        """Detect a top-level object whose ``format`` is the Langfuse capture envelope's."""
        del path
        found = sniff(head)
        return found.kind == "object" and found.text("format") == LANGFUSE_FORMAT

    def parse(self, data: bytes, options: ImportOptions) -> Any:
        """Decode and check the envelope."""
        envelope = super().parse(data, options)
        check_langfuse_envelope(envelope)
        return envelope

    def bind(self, document: Any, binding: Binding, options: ImportOptions) -> Any:
        """Check the identity rules; the result is what is mapped."""
        del options
        version, result = check_langfuse_envelope(document)
        check_langfuse_identity(version, result, binding.source, binding.run_id)
        return result

    def unbound(self, document: Any, options: ImportOptions) -> Any:
        """Return the result, without identity checks (the Importer protocol path)."""
        del options
        return check_langfuse_envelope(document)[1]

    def rows(self, prepared: Any, options: ImportOptions) -> RecordSource:
        """One record per item result."""
        del options
        return langfuse_records(prepared)
