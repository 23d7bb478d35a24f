"""``inspect-json``: an Inspect AI ``EvalLog`` exported as JSON (spec 11 §4).

The log must be version 1 or 2 with ``status: "success"``; ``samples`` is a
non-empty array of sample objects, one record each:

* ``id`` = the sample id (string or integer), ``epoch`` must be 1 (several
  epochs need an explicit paired-trial mapping);
* ``input = sample.input``, ``expected = target`` (a one-element list is
  unwrapped; several targets are refused), ``output`` = the single choice's
  text (text parts concatenated; any other part is refused), ``null`` for a
  sample without a choice when it has an error or likelihood facts;
* ``scores``: ``{value}`` objects, ``"C"`` → 1.0, ``"I"`` → 0.0, numbers →
  float; a non-numeric grade is refused here (``non_numeric_score``) and
  skipped by the ``inspect-ai`` evaluator profile;
* ``metadata`` = string members of ``sample.metadata`` without ``invarlock_``
  keys, ``error = "upstream_error"`` for a sample error, ``context =
  {upstream_record: <the sample>}``.

Memory: the whole log is decoded at once (logs are single JSON documents,
at most 128 MiB); records are then produced one at a time. ``NaN`` is
refused: Inspect writes logs through pydantic, which writes ``null`` for NaN.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from sealeval.captured.importers.base import ImportOptions, RecordSource
from sealeval.captured.importers.jsonl import (
    DocumentImporter,
    capture_facts,
    identifier,
    metadata_of,
    native_score,
    refuse,
    sniff,
    tags,
    task_error,
)

__all__ = ["InspectJsonImporter", "inspect_records"]

_STATUSES: Final = ("success", "error", "cancelled")


def _check_log(log: object) -> list[Any]:
    if type(log) is not dict:
        raise refuse("invalid_document", "file")
    version = log.get("version")
    if type(version) is not int or version not in (1, 2):
        raise refuse("unsupported_version", "version")
    status = log.get("status")
    if type(status) is not str or status not in _STATUSES:
        raise refuse("unknown_status", "status")
    if status != "success":
        raise refuse("incomplete_run", "status")
    samples = log.get("samples")
    if type(samples) is not list:
        raise refuse("invalid_field", "samples")
    if not samples:
        raise refuse("no_records", "samples")
    return samples


def _text(choices: list[Any], where: str) -> Any:
    choice = choices[0]
    if type(choice) is not dict or type(choice.get("message")) is not dict:
        raise refuse("invalid_field", f"{where}.output.choices")
    message = choice["message"]
    if "content" not in message:
        raise refuse("missing_field", f"{where}.output.choices")
    content = message["content"]
    if type(content) is list:
        parts: list[str] = []
        for part in content:
            if type(part) is not dict or part.get("type") != "text":
                raise refuse("non_text_output", f"{where}.output.choices")
            text = part.get("text")
            if type(text) is not str:
                raise refuse("non_text_output", f"{where}.output.choices")
            parts.append(text)
        return "".join(parts)
    return content


def _sample_record(sample: object, where: str, *, strict_scores: bool) -> dict[str, Any]:
    if type(sample) is not dict:
        raise refuse("not_object", where)
    output = sample.get("output")
    if output is not None and type(output) is not dict:
        raise refuse("invalid_field", f"{where}.output")
    choices = output.get("choices", []) if output is not None else []
    if type(choices) is not list:
        raise refuse("invalid_field", f"{where}.output.choices")
    error = task_error(sample.get("error"), f"{where}.error")
    metadata = metadata_of(sample, where)
    if len(choices) > 1 or (
        not choices and error is None and "invarlock_likelihood" not in metadata
    ):
        raise refuse("ambiguous_output", f"{where}.output.choices")
    text = _text(choices, where) if choices else None
    target = sample.get("target")
    if type(target) is list:
        if len(target) != 1:
            raise refuse("ambiguous_expected", f"{where}.target")
        target = target[0]
    record_id = identifier(sample.get("id"), f"{where}.id")
    epoch = sample.get("epoch", 1)
    if type(epoch) is not int or epoch != 1:
        raise refuse("multiple_epochs", f"{where}.epoch")
    native = sample.get("scores") or {}
    if type(native) is not dict:
        raise refuse("invalid_field", f"{where}.scores")
    scores: dict[str, Any] = {}
    for name, value in native.items():
        if not name:
            raise refuse("invalid_field", f"{where}.scores")
        score = native_score(value, f"{where}.scores", strict=strict_scores)
        if score is not None:
            scores[name] = score
    record: dict[str, Any] = {
        "id": record_id,
        "input": sample.get("input"),
        "expected": target,
        "output": text,
        "scores": scores,
        "metadata": tags(metadata),
        "error": error,
        "context": {},
    }
    return capture_facts(record, metadata, where, upstream=sample)


def inspect_records(log: object, *, strict_scores: bool = True) -> Iterator[dict[str, Any]]:
    """Map an EvalLog to record mappings (``strict_scores=False``: the inspect-ai profile)."""
    samples = _check_log(log)
    for position, sample in enumerate(samples):
        yield _sample_record(sample, f"samples[{position}]", strict_scores=strict_scores)


class InspectJsonImporter(DocumentImporter):
    """The ``inspect-json`` adapter (see the module docstring)."""

    name = "inspect-json"

    def detect(self, head: bytes, path: Path) -> bool:
        """Detect a top-level object with an integer ``version`` and ``status`` or ``eval``."""
        del path
        found = sniff(head)
        keys = found.keys()
        return (
            found.kind == "object"
            and type(found.members.get("version")) is int
            and bool(keys & {"status", "eval"})
            and "format" not in keys
        )

    def parse(self, data: bytes, options: ImportOptions) -> Any:
        """Decode the log and check its version, status and samples."""
        log = super().parse(data, options)
        _check_log(log)
        return log

    def rows(self, prepared: Any, options: ImportOptions) -> RecordSource:
        """One record per sample, in log order."""
        del options
        return inspect_records(prepared)
