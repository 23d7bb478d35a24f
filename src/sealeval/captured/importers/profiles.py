"""The 19 evaluator-native profiles (spec 11 §8), selected by evaluator name.

A profile maps one evaluator's native result (the ``payload`` of an
``invarlock/evaluator-export-v1`` envelope, or the evaluator's raw JSON file
for ``evaluator-native-json``) to records, and converts an in-memory result
to that payload for :func:`~sealeval.captured.export.export_evaluator_result`.
Every profile implements :class:`~sealeval.captured.export.EvaluatorProfile`
(``native_payload``, ``records``); :data:`PROFILES` maps the 19 names to
them, ready for ``export_evaluator_result(..., profiles=PROFILES)`` and
``run_from_evaluator_export(..., profiles=PROFILES)``.

Kinds:

* **Delegating** — ``lm-evaluation-harness`` (§3 rows, ``metadata.invarlock_id``
  replaces the id), ``inspect-ai`` (§4, non-numeric grades skipped),
  ``promptfoo`` (§5 rows), ``langfuse`` (§6 envelope, identity checked
  against the export's source and run id).
* **Scalar** (§8.1, one payload entry per case) — ``deepeval``, ``ragas``,
  ``lighteval``, ``hugging-face-evaluate``, ``autoevals``, ``openevals``,
  ``arize-phoenix-evals``, ``opik``. Each entry carries a caller-owned ``id``;
  upstream metric values stay in ``context.upstream_record`` and are never
  scores (only ``metadata.invarlock_scores`` are).
* **Batch** (§8.2, one report per run) — ``pydantic-evals``,
  ``azure-ai-evaluation``, ``evidently``, ``mlflow``, ``garak``,
  ``openai-evals``, ``trulens``. Scores come from the report; the rest of the
  report is kept as ``context.upstream_summary``.

Refusals are :class:`~sealeval.captured.importers.base.ImportRefusalError`
with fields rooted at ``payload`` (``payload[3].id``, ``payload.rows[2]``).
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from sealeval.captured.errors import CapturedRunError
from sealeval.captured.export import BATCH_PROFILES, EVALUATOR_NAMES
from sealeval.captured.importers.batch_profiles import batch_profiles
from sealeval.captured.importers.inspect_json import inspect_records
from sealeval.captured.importers.jsonl import capture_facts, is_number, refuse, tags
from sealeval.captured.importers.langfuse_json import (
    check_langfuse_envelope,
    check_langfuse_identity,
    langfuse_records,
)
from sealeval.captured.importers.lm_eval_samples import harness_record
from sealeval.captured.importers.profile_base import (
    MAX_SCALAR_DEPTH,
    EvaluatorNativeProfile,
    Row,
    container,
    depth_within,
    entries,
    plain,
    required,
    single,
)
from sealeval.captured.importers.promptfoo_jsonl import promptfoo_record
from sealeval.captured.likelihood import Source

__all__ = ["PROFILES", "EvaluatorNativeProfile", "profile_for"]


class _HarnessProfile(EvaluatorNativeProfile):
    name = "lm-evaluation-harness"

    def map_payload(self, payload: Any) -> Iterator[Row]:
        for position, row in enumerate(entries(payload)):
            yield harness_record(row, f"payload[{position}]", honour_invarlock_id=True)


class _InspectProfile(EvaluatorNativeProfile):
    name = "inspect-ai"

    def map_payload(self, payload: Any) -> Iterator[Row]:
        return inspect_records(payload, strict_scores=False)


class _PromptfooProfile(EvaluatorNativeProfile):
    name = "promptfoo"

    def map_payload(self, payload: Any) -> Iterator[Row]:
        for position, row in enumerate(entries(payload)):
            yield promptfoo_record(row, f"payload[{position}]")


class _LangfuseProfile(EvaluatorNativeProfile):
    """Payload: the capture envelope ``{format, sdk_version, result}``."""

    name = "langfuse"

    def check_identity(self, payload: Any, source: Source, run_id: str) -> None:
        version, result = check_langfuse_envelope(payload)
        check_langfuse_identity(version, result, source, run_id)

    def map_payload(self, payload: Any) -> Iterator[Row]:
        return langfuse_records(check_langfuse_envelope(payload)[1])


# ---------------------------------------------------------------------------
# Scalar profiles (§8.1)

Getter = Callable[[Row, str], tuple[Any, Any, Any]]


def _fields(holder: str | None, input_key: str, expected_key: str, output_key: str) -> Getter:
    def get(entry: Row, where: str) -> tuple[Any, Any, Any]:
        case = entry if holder is None else container(entry, holder, where)
        base = where if holder is None else f"{where}.{holder}"
        return (
            required(case, input_key, base),
            case.get(expected_key),
            required(case, output_key, base),
        )

    return get


def _ragas(entry: Row, where: str) -> tuple[Any, Any, Any]:
    sample = container(entry, "sample", where)
    if sample.get("multi_responses"):
        raise refuse("ambiguous_output", f"{where}.sample.multi_responses")
    return _fields("sample", "user_input", "reference", "response")(entry, where)


def _lighteval_expected(doc: Row, where: str) -> Any:
    choices = required(doc, "choices", where)
    gold = required(doc, "gold_index", where)
    if type(choices) is list and not choices and type(gold) is int and gold == 0:
        return None
    indices = [gold] if type(gold) is int else gold
    if (
        type(indices) is not list
        or not indices
        or any(type(index) is not int for index in indices)
        or type(choices) is not list
        or not choices
        or any(type(choice) is not str for choice in choices)
        or len(set(indices)) != len(indices)
        or any(not 0 <= index < len(choices) for index in indices)
    ):
        raise refuse("invalid_field", f"{where}.gold_index")
    if len(indices) == 1:
        return choices[indices[0]]
    return [choices[index] for index in indices]


def _lighteval(entry: Row, where: str) -> tuple[Any, Any, Any]:
    doc = container(entry, "doc", where)
    response = container(entry, "model_response", where)
    text = required(response, "text", f"{where}.model_response")
    return (
        required(doc, "query", f"{where}.doc"),
        _lighteval_expected(doc, f"{where}.doc"),
        single(text, f"{where}.model_response.text"),
    )


def _hugging_face(entry: Row, where: str) -> tuple[Any, Any, Any]:
    expected = None
    if "references" in entry:
        expected = single(entry["references"], f"{where}.references")
    return (
        required(entry, "input", where),
        expected,
        single(required(entry, "predictions", where), f"{where}.predictions"),
    )


@dataclass(frozen=True, slots=True)
class _MetricRule:
    """What ``metric_result`` may be (retained in context only, never a score)."""

    score_field: str = "score"
    name_field: str | None = None
    number: bool = False
    any_object: bool = False
    result_list: bool = False

    def check(self, value: object, where: str) -> None:
        if value is None:
            return
        if self.number and is_number(value):
            return
        if self.any_object:
            if type(value) is not dict or not value:
                raise refuse("invalid_field", where)
            return
        if self.result_list and type(value) is list:
            if not value:
                raise refuse("invalid_field", where)
            for item in value:
                self._check_object(item, where)
            return
        self._check_object(value, where)

    def _check_object(self, value: object, where: str) -> None:
        if type(value) is not dict or self.score_field not in value:
            raise refuse("invalid_field", where)
        if self.name_field is not None:
            name = value.get(self.name_field)
            if type(name) is not str or not name:
                raise refuse("invalid_field", where)


class _ScalarProfile(EvaluatorNativeProfile):
    def __init__(self, name: str, fields: Getter, metric: _MetricRule) -> None:
        self.name = name
        self._fields = fields
        self._metric = metric

    def native_payload(self, result: object) -> object:
        """Return the list of normalized entries."""
        payload = plain(result, "result")
        if type(payload) is not list:
            raise refuse("invalid_document", "result")
        return payload

    def map_payload(self, payload: Any) -> Iterator[Row]:
        seen: set[str] = set()
        for position, entry in enumerate(entries(payload)):
            yield self._entry(entry, f"payload[{position}]", seen)

    def _entry(self, entry: object, where: str, seen: set[str]) -> Row:
        if type(entry) is not dict:
            raise refuse("not_object", where)
        if not depth_within(entry, MAX_SCALAR_DEPTH):
            raise refuse("too_deep", where)
        record_id = entry.get("id")
        if type(record_id) is not str or not record_id.strip():
            raise refuse("invalid_id", f"{where}.id")
        if record_id in seen:
            raise refuse("duplicate_id", f"{where}.id")
        seen.add(record_id)
        metadata = entry.get("metadata", {})
        if type(metadata) is not dict:
            raise refuse("invalid_field", f"{where}.metadata")
        error = entry.get("error")
        if error is not None and (type(error) is not str or not error):
            raise refuse("invalid_field", f"{where}.error")
        self._metric.check(entry.get("metric_result"), f"{where}.metric_result")
        input_value, expected, output = self._fields(entry, where)
        if input_value is None:
            raise refuse("invalid_field", f"{where}.input")
        if output is None and error is None and "invarlock_likelihood" not in metadata:
            raise refuse("output_required", f"{where}.output")
        record: Row = {
            "id": record_id,
            "input": input_value,
            "expected": expected,
            "output": output,
            "scores": {},
            "metadata": tags(metadata),
            "error": error,
            "context": {"upstream_record": entry},
        }
        return capture_facts(record, metadata, where)


# ---------------------------------------------------------------------------
# Batch profiles (§8.2)


# ---------------------------------------------------------------------------
# The registry

_SCALARS: Final = (
    _ScalarProfile(
        "deepeval",
        _fields("test_case", "input", "expected_output", "actual_output"),
        _MetricRule(),
    ),
    _ScalarProfile("ragas", _ragas, _MetricRule(score_field="value")),
    _ScalarProfile("lighteval", _lighteval, _MetricRule(number=True, any_object=True)),
    _ScalarProfile("hugging-face-evaluate", _hugging_face, _MetricRule(any_object=True)),
    _ScalarProfile(
        "autoevals", _fields(None, "input", "expected", "output"), _MetricRule(name_field="name")
    ),
    _ScalarProfile(
        "openevals",
        _fields(None, "inputs", "reference_outputs", "outputs"),
        _MetricRule(name_field="key", result_list=True),
    ),
    _ScalarProfile(
        "arize-phoenix-evals",
        _fields("record", "input", "expected", "output"),
        _MetricRule(result_list=True),
    ),
    _ScalarProfile(
        "opik",
        _fields("dataset_item", "input", "reference", "output"),
        _MetricRule(score_field="value", name_field="name", result_list=True),
    ),
)


def _registry() -> dict[str, EvaluatorNativeProfile]:
    profiles: list[EvaluatorNativeProfile] = [
        _HarnessProfile(),
        _InspectProfile(),
        _PromptfooProfile(),
        _LangfuseProfile(),
        *_SCALARS,
        *batch_profiles(),
    ]
    by_name = {profile.name: profile for profile in profiles}
    assert sorted(by_name) == sorted(EVALUATOR_NAMES)
    assert all(name in by_name for name in BATCH_PROFILES)
    return {name: by_name[name] for name in EVALUATOR_NAMES}


#: The 19 profiles by evaluator name (in the reference's order).
PROFILES: Final[Mapping[str, EvaluatorNativeProfile]] = types.MappingProxyType(_registry())


def profile_for(name: str) -> EvaluatorNativeProfile:
    """Return the profile of an evaluator name (``unsupported_evaluator`` otherwise)."""
    profile = PROFILES.get(name) if type(name) is str else None
    if profile is None:
        raise CapturedRunError("unsupported_evaluator", "evaluator")
    return profile
