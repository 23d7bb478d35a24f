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

import json
import math
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from sealeval.captured.errors import fail, thaw_json
from sealeval.captured.export import BATCH_PROFILES, EVALUATOR_NAMES, EvaluatorExport
from sealeval.captured.importers.inspect_json import inspect_records
from sealeval.captured.importers.jsonl import (
    capture_facts,
    is_number,
    merge_explicit_scores,
    refuse,
    tags,
)
from sealeval.captured.importers.langfuse_json import (
    check_langfuse_envelope,
    check_langfuse_identity,
    langfuse_records,
)
from sealeval.captured.importers.lm_eval_samples import harness_record
from sealeval.captured.importers.promptfoo_jsonl import promptfoo_record
from sealeval.captured.likelihood import Source

__all__ = ["PROFILES", "EvaluatorNativeProfile", "profile_for"]

_MAX_SCALAR_DEPTH: Final = 32
_MAX_BATCH_ID: Final = 4096
_ERROR_KEYS: Final = ("message", "error_message", "msg")
_LIKELIHOOD_KEYS: Final = ("likelihood", "invarlock_likelihood")

Row = dict[str, Any]


# ---------------------------------------------------------------------------
# JSON normalization (export payloads)


def _plain(value: object, where: str) -> Any:
    """Return a plain JSON copy (dicts, lists; key order kept); anything else is refused."""
    kind = type(value)
    if value is None or kind is bool or kind is int or kind is str:
        return value
    if kind is float:
        if not math.isfinite(value):  # type: ignore[arg-type]
            raise refuse("non_finite_number", where)
        return value
    if isinstance(value, Mapping):
        result: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str:
                raise refuse("invalid_field", where)
            result[key] = _plain(item, where)
        return result
    if isinstance(value, list | tuple):
        return [_plain(item, where) for item in value]
    raise refuse("invalid_field", where)


def _depth_within(value: object, limit: int) -> bool:
    """Whether ``value`` nests arrays/objects at most ``limit`` levels (the value is level 1)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if type(item) is dict:
            if depth > limit:
                return False
            stack.extend((child, depth + 1) for child in item.values())
        elif type(item) is list:
            if depth > limit:
                return False
            stack.extend((child, depth + 1) for child in item)
    return True


def _same(left: object, right: object) -> bool:
    """JSON equality that tells ``1`` from ``1.0`` and ``true`` (canonical text)."""
    return json.dumps(left, sort_keys=True) == json.dumps(right, sort_keys=True)


def _table(value: object, where: str) -> list[Row]:
    """Return a table's rows: an array of row objects, or ``{columns, data}`` zipped."""
    if type(value) is list:
        for position, row in enumerate(value):
            if type(row) is not dict:
                raise refuse("not_object", f"{where}[{position}]")
        return value
    if type(value) is dict and set(value) == {"columns", "data"}:
        columns, data = value["columns"], value["data"]
        if (
            type(columns) is not list
            or any(type(name) is not str for name in columns)
            or len(set(columns)) != len(columns)
            or type(data) is not list
        ):
            raise refuse("invalid_field", where)
        rows: list[Row] = []
        for position, cells in enumerate(data):
            if type(cells) is not list or len(cells) != len(columns):
                raise refuse("invalid_field", f"{where}.data[{position}]")
            rows.append(dict(zip(columns, cells, strict=True)))
        return rows
    raise refuse("invalid_field", where)


def _as_rows(value: object) -> object:
    """Export normalization: a ``{columns, data}`` table becomes its row list."""
    if type(value) is dict and set(value) == {"columns", "data"}:
        return _table(value, "result")
    return value


# ---------------------------------------------------------------------------
# The profile base


class EvaluatorNativeProfile:
    """One evaluator's profile: native payload ↔ records (an ``EvaluatorProfile``).

    Subclasses implement :meth:`map_payload` (and, for langfuse,
    :meth:`check_identity`); :meth:`records` is the ``EvaluatorProfile``
    entry point used by :func:`~sealeval.captured.export.run_from_evaluator_export`.
    """

    #: The evaluator name (one of the 19).
    name: str = ""

    def native_payload(self, result: object) -> object:
        """Convert an in-memory result to the plain-JSON export payload (insertion order kept)."""
        return _plain(result, "result")

    def check_identity(self, payload: Any, source: Source, run_id: str) -> None:
        """Check the payload against the run identity (only langfuse has rules)."""
        del payload, source, run_id

    def map_payload(self, payload: Any) -> Iterator[Row]:
        """Map a plain payload to record mappings, in order."""
        raise NotImplementedError  # pragma: no cover - every profile overrides it

    def records(self, export: EvaluatorExport) -> Iterable[Row]:
        """Map an export's payload (identity checked first) to record mappings."""
        payload = thaw_json(export.payload)
        self.check_identity(payload, export.source, export.run_id)
        return self.map_payload(payload)

    def __repr__(self) -> str:
        """Show the evaluator name."""
        return f"EvaluatorNativeProfile({self.name!r})"


def _entries(payload: Any) -> list[Any]:
    if type(payload) is not list:
        raise refuse("invalid_document", "payload")
    if not payload:
        raise refuse("no_records", "payload")
    return payload


# ---------------------------------------------------------------------------
# Delegating profiles


class _HarnessProfile(EvaluatorNativeProfile):
    name = "lm-evaluation-harness"

    def map_payload(self, payload: Any) -> Iterator[Row]:
        for position, row in enumerate(_entries(payload)):
            yield harness_record(row, f"payload[{position}]", honour_invarlock_id=True)


class _InspectProfile(EvaluatorNativeProfile):
    name = "inspect-ai"

    def map_payload(self, payload: Any) -> Iterator[Row]:
        return inspect_records(payload, strict_scores=False)


class _PromptfooProfile(EvaluatorNativeProfile):
    name = "promptfoo"

    def map_payload(self, payload: Any) -> Iterator[Row]:
        for position, row in enumerate(_entries(payload)):
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


def _container(entry: Row, name: str, where: str) -> Row:
    value = entry.get(name)
    if name not in entry:
        raise refuse("missing_field", f"{where}.{name}")
    if type(value) is not dict:
        raise refuse("invalid_field", f"{where}.{name}")
    return value


def _required(obj: Row, name: str, where: str) -> Any:
    if name not in obj:
        raise refuse("missing_field", f"{where}.{name}")
    return obj[name]


def _single(value: object, where: str) -> Any:
    if type(value) is not list or len(value) != 1:
        raise refuse("ambiguous_output", where)
    return value[0]


def _fields(container: str | None, input_key: str, expected_key: str, output_key: str) -> Getter:
    def get(entry: Row, where: str) -> tuple[Any, Any, Any]:
        case = entry if container is None else _container(entry, container, where)
        base = where if container is None else f"{where}.{container}"
        return (
            _required(case, input_key, base),
            case.get(expected_key),
            _required(case, output_key, base),
        )

    return get


def _ragas(entry: Row, where: str) -> tuple[Any, Any, Any]:
    sample = _container(entry, "sample", where)
    if sample.get("multi_responses"):
        raise refuse("ambiguous_output", f"{where}.sample.multi_responses")
    return _fields("sample", "user_input", "reference", "response")(entry, where)


def _lighteval_expected(doc: Row, where: str) -> Any:
    choices = _required(doc, "choices", where)
    gold = _required(doc, "gold_index", where)
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
    doc = _container(entry, "doc", where)
    response = _container(entry, "model_response", where)
    text = _required(response, "text", f"{where}.model_response")
    return (
        _required(doc, "query", f"{where}.doc"),
        _lighteval_expected(doc, f"{where}.doc"),
        _single(text, f"{where}.model_response.text"),
    )


def _hugging_face(entry: Row, where: str) -> tuple[Any, Any, Any]:
    expected = None
    if "references" in entry:
        expected = _single(entry["references"], f"{where}.references")
    return (
        _required(entry, "input", where),
        expected,
        _single(_required(entry, "predictions", where), f"{where}.predictions"),
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
        payload = _plain(result, "result")
        if type(payload) is not list:
            raise refuse("invalid_document", "result")
        return payload

    def map_payload(self, payload: Any) -> Iterator[Row]:
        seen: set[str] = set()
        for position, entry in enumerate(_entries(payload)):
            yield self._entry(entry, f"payload[{position}]", seen)

    def _entry(self, entry: object, where: str, seen: set[str]) -> Row:
        if type(entry) is not dict:
            raise refuse("not_object", where)
        if not _depth_within(entry, _MAX_SCALAR_DEPTH):
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


def _batch_score(value: object, where: str) -> float:
    if type(value) is bool:
        return 1.0 if value else 0.0
    if is_number(value):
        try:
            number = float(value)  # type: ignore[arg-type]
        except OverflowError:
            raise refuse("non_numeric_score", where) from None
        return number
    raise refuse("non_numeric_score", where)


def _batch_error(value: object, where: str) -> str | None:
    if value is None or type(value) is str:
        return value
    if type(value) is dict:
        for key in _ERROR_KEYS:
            if key in value:
                message = value[key]
                if type(message) is not str:
                    raise refuse("invalid_field", where)
                return message
    raise refuse("invalid_field", where)


def _alias(row: Row, names: tuple[str, ...], where: str) -> tuple[bool, Any]:
    """Return the value under equivalent names (present ones must agree)."""
    present = [name for name in names if name in row]
    if not present:
        return False, None
    first = row[present[0]]
    for name in present[1:]:
        if not _same(row[name], first):
            raise refuse("invalid_field", f"{where}.{name}")
    return True, first


def _has_likelihood(row: Row, metadata: object) -> bool:
    return any(key in row for key in _LIKELIHOOD_KEYS) or (
        type(metadata) is dict and any(key in metadata for key in _LIKELIHOOD_KEYS)
    )


def _summary(payload: Row, consumed: Iterable[str]) -> Row:
    skipped = set(consumed)
    return {key: value for key, value in payload.items() if key not in skipped}


class _Builder:
    """The common batch record builder (ids unique, error, metadata, likelihood, context)."""

    def __init__(self, summary: Row) -> None:
        self.summary = summary
        self.ids: set[str] = set()

    def build(
        self,
        where: str,
        *,
        record_id: object,
        input_value: Any,
        expected: Any,
        output: Any,
        error: object,
        metadata: object,
        scores: dict[str, Any],
        row: Row,
        extra_context: Row | None = None,
    ) -> Row:
        if type(record_id) is not str or not record_id or len(record_id) > _MAX_BATCH_ID:
            raise refuse("invalid_id", f"{where}.id")
        if record_id in self.ids:
            raise refuse("duplicate_id", f"{where}.id")
        self.ids.add(record_id)
        if metadata is None:
            metadata = {}
        if type(metadata) is not dict:
            raise refuse("invalid_field", f"{where}.metadata")
        context: Row = dict(extra_context or {})
        context["upstream_record"] = row
        if self.summary:
            context["upstream_summary"] = self.summary
        record: Row = {
            "id": record_id,
            "input": input_value,
            "expected": expected,
            "output": output,
            "scores": merge_explicit_scores(scores, metadata, where),
            "metadata": tags(metadata),
            "error": _batch_error(error, f"{where}.error"),
            "context": context,
        }
        copies = [row[key] for key in _LIKELIHOOD_KEYS if key in row]
        copies += [metadata[key] for key in _LIKELIHOOD_KEYS if key in metadata]
        if copies:
            if any(not _same(copy, copies[0]) for copy in copies[1:]):
                raise refuse("likelihood_mismatch", f"{where}.likelihood")
            record["likelihood"] = copies[0]
        return record


def _object_payload(payload: Any) -> Row:
    if type(payload) is not dict:
        raise refuse("invalid_document", "payload")
    return payload


def _nonempty_rows(rows: list[Row], where: str) -> list[Row]:
    if not rows:
        raise refuse("no_records", where)
    return rows


class _PydanticProfile(EvaluatorNativeProfile):
    """``{cases, failures?, ...summary}``: pydantic-evals' EvaluationReport."""

    name = "pydantic-evals"

    def native_payload(self, result: object) -> object:
        return _plain(result, "result")

    @staticmethod
    def _scores(case: Row, where: str) -> dict[str, float]:
        scores: dict[str, float] = {}
        for group in ("assertions", "scores"):
            values = case.get(group)
            if values is None:
                continue
            if type(values) is not dict:
                raise refuse("invalid_field", f"{where}.{group}")
            for name, value in values.items():
                if name in scores:
                    raise refuse("score_conflict", f"{where}.{group}")
                plain = (
                    _required(value, "value", f"{where}.{group}") if type(value) is dict else value
                )
                scores[name] = _batch_score(plain, f"{where}.{group}")
        return scores

    def map_payload(self, payload: Any) -> Iterator[Row]:
        report = _object_payload(payload)
        cases = _required(report, "cases", "payload")
        failures = report.get("failures", [])
        if type(cases) is not list or type(failures) is not list:
            raise refuse("invalid_field", "payload.cases")
        if not cases and not failures:
            raise refuse("no_records", "payload.cases")
        builder = _Builder(_summary(report, ("cases", "failures")))
        for position, case in enumerate(cases):
            where = f"payload.cases[{position}]"
            if type(case) is not dict:
                raise refuse("not_object", where)
            yield builder.build(
                where,
                record_id=_required(case, "name", where),
                input_value=_required(case, "inputs", where),
                expected=case.get("expected_output"),
                output=_required(case, "output", where),
                error=case.get("error"),
                metadata=case.get("metadata"),
                scores=self._scores(case, where),
                row=case,
            )
        for position, failure in enumerate(failures):
            where = f"payload.failures[{position}]"
            if type(failure) is not dict:
                raise refuse("not_object", where)
            message = _required(failure, "error_message", where)
            if type(message) is not str:
                raise refuse("invalid_field", f"{where}.error_message")
            yield builder.build(
                where,
                record_id=_required(failure, "name", where),
                input_value=_required(failure, "inputs", where),
                expected=failure.get("expected_output"),
                output=None,
                error=message,
                metadata=failure.get("metadata"),
                scores={},
                row=failure,
            )


class _AzureProfile(EvaluatorNativeProfile):
    """``{rows: table, ...summary}``: azure-ai-evaluation's ``evaluate()`` result."""

    name = "azure-ai-evaluation"

    def native_payload(self, result: object) -> object:
        payload = _plain(result, "result")
        if type(payload) is dict and "rows" in payload:
            payload["rows"] = _as_rows(payload["rows"])
        return payload

    def map_payload(self, payload: Any) -> Iterator[Row]:
        report = _object_payload(payload)
        rows = _nonempty_rows(
            _table(_required(report, "rows", "payload"), "payload.rows"), "payload.rows"
        )
        builder = _Builder(_summary(report, ("rows",)))
        for position, native in enumerate(rows):
            where = f"payload.rows[{position}]"
            has_id, record_id = _alias(native, ("inputs.record_id", "inputs.id"), where)
            if not has_id:
                raise refuse("missing_id", f"{where}.id")
            _, input_value = _alias(native, ("inputs.query", "inputs.input"), where)
            has_output, output = _alias(native, ("outputs.response", "inputs.response"), where)
            if not has_output and not native.get("error"):
                raise refuse("output_required", f"{where}.output")
            scores = {
                key[len("outputs.") :]: _batch_score(value, f"{where}.outputs")
                for key, value in native.items()
                if key.startswith("outputs.")
                and key != "outputs.response"
                and (is_number(value) or type(value) is bool)
            }
            row = dict(native)
            if "inputs.metadata" in native:
                row["metadata"] = native["inputs.metadata"]
            yield builder.build(
                where,
                record_id=record_id,
                input_value=input_value,
                expected=native.get("inputs.ground_truth"),
                output=output,
                error=native.get("error"),
                metadata=native.get("inputs.metadata"),
                scores=scores,
                row=row,
            )


_ROLES: Final = ("id", "input", "expected", "output")


def _roles(value: object, defaults: Mapping[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    """``columns``: remap the roles id/input/expected/output to distinct column names."""
    roles = dict(defaults)
    if value is None:
        return roles
    if type(value) is not dict:
        raise refuse("invalid_field", "payload.columns")
    for role, column in value.items():
        if role not in _ROLES or type(column) is not str or not column:
            raise refuse("invalid_field", "payload.columns")
        roles[role] = (column,)
    names = [name for columns in roles.values() for name in columns]
    if len(set(names)) != len(names):
        raise refuse("invalid_field", "payload.columns")
    return roles


def _score_columns(value: object) -> list[str] | None:
    if value is None:
        return None
    if type(value) is not list or any(type(name) is not str or not name for name in value):
        raise refuse("invalid_field", "payload.score_columns")
    return value


def _column_rows(
    rows: list[Row],
    roles: Mapping[str, tuple[str, ...]],
    score_columns: Callable[[Row], list[str]],
    builder: _Builder,
    where_rows: str,
) -> Iterator[Row]:
    """Rows of an evidently / mlflow table mapped through their column roles."""
    for position, row in enumerate(rows):
        where = f"{where_rows}[{position}]"
        has_id, record_id = _alias(row, roles["id"], where)
        if not has_id:
            raise refuse("missing_id", f"{where}.id")
        _, input_value = _alias(row, roles["input"], where)
        _, expected = _alias(row, roles["expected"], where)
        has_output, output = _alias(row, roles["output"], where)
        if not has_output and not row.get("error"):
            raise refuse("output_required", f"{where}.output")
        scores = {
            column: _batch_score(row[column], f"{where}.scores")
            for column in score_columns(row)
            if row.get(column) is not None
        }
        yield builder.build(
            where,
            record_id=record_id,
            input_value=input_value,
            expected=expected,
            output=output,
            error=row.get("error"),
            metadata=row.get("metadata"),
            scores=scores,
            row=row,
        )


class _EvidentlyProfile(EvaluatorNativeProfile):
    """``{dataset≡rows: table, columns?, score_columns?, ...}``."""

    name = "evidently"
    _DEFAULTS: Final = {
        "id": ("record_id",),
        "input": ("input",),
        "expected": ("reference",),
        "output": ("output",),
    }

    def native_payload(self, result: object) -> object:
        payload = _plain(result, "result")
        if type(payload) is dict:
            for key in ("dataset", "rows"):
                if key in payload:
                    payload[key] = _as_rows(payload[key])
        return payload

    def map_payload(self, payload: Any) -> Iterator[Row]:
        report = _object_payload(payload)
        present, table = _alias(report, ("dataset", "rows"), "payload")
        if not present:
            raise refuse("missing_field", "payload.rows")
        rows = _nonempty_rows(_table(table, "payload.rows"), "payload.rows")
        roles = _roles(report.get("columns"), self._DEFAULTS)
        chosen = _score_columns(report.get("score_columns"))
        columns = chosen if chosen is not None else ["exact_match"]
        builder = _Builder(_summary(report, ("dataset", "rows")))
        return _column_rows(rows, roles, lambda _row: columns, builder, "payload.rows")


class _MlflowProfile(EvaluatorNativeProfile):
    """``{prediction_table≡rows≡tables.eval_results_table, columns?, score_columns?, ...}``."""

    name = "mlflow"
    _DEFAULTS: Final = {
        "id": ("record_id",),
        "input": ("input",),
        "expected": ("target", "targets"),
        "output": ("prediction", "predictions"),
    }

    def native_payload(self, result: object) -> object:
        payload = _plain(result, "result")
        if type(payload) is dict:
            for key in ("prediction_table", "rows"):
                if key in payload:
                    payload[key] = _as_rows(payload[key])
            tables = payload.get("tables")
            if type(tables) is dict and "eval_results_table" in tables:
                tables["eval_results_table"] = _as_rows(tables["eval_results_table"])
        return payload

    def map_payload(self, payload: Any) -> Iterator[Row]:
        report = _object_payload(payload)
        sources: dict[str, Any] = {
            key: report[key] for key in ("prediction_table", "rows") if key in report
        }
        tables = report.get("tables")
        if tables is not None and type(tables) is not dict:
            raise refuse("invalid_field", "payload.tables")
        if tables is not None and "eval_results_table" in tables:
            sources["tables.eval_results_table"] = tables["eval_results_table"]
        if not sources:
            raise refuse("missing_field", "payload.rows")
        candidates = [_table(value, "payload.rows") for value in sources.values()]
        if any(not _same(candidate, candidates[0]) for candidate in candidates[1:]):
            raise refuse("invalid_field", "payload.rows")
        rows = _nonempty_rows(candidates[0], "payload.rows")
        roles = _roles(report.get("columns"), self._DEFAULTS)
        chosen = _score_columns(report.get("score_columns"))
        summary = _summary(report, ("prediction_table", "rows"))
        if type(tables) is dict and "eval_results_table" in tables:
            rest = {key: value for key, value in tables.items() if key != "eval_results_table"}
            if rest:
                summary["tables"] = rest
            else:
                del summary["tables"]

        def score_columns(row: Row) -> list[str]:
            if chosen is not None:
                return chosen
            return [column for column in row if column.endswith("/score")]

        return _column_rows(rows, roles, score_columns, _Builder(summary), "payload.rows")


class _TrulensProfile(EvaluatorNativeProfile):
    """``{records: table, feedback_columns, feedback_results?}``."""

    name = "trulens"

    def native_payload(self, result: object) -> object:
        payload = _plain(result, "result")
        if type(payload) is dict and "records" in payload:
            payload["records"] = _as_rows(payload["records"])
        return payload

    @staticmethod
    def _results(report: Row, ids: set[str]) -> dict[str, list[Row]]:
        results = report.get("feedback_results", [])
        if type(results) is not list:
            raise refuse("invalid_field", "payload.feedback_results")
        grouped: dict[str, list[Row]] = {}
        for position, result in enumerate(results):
            where = f"payload.feedback_results[{position}]"
            if type(result) is not dict:
                raise refuse("not_object", where)
            record_id = _required(result, "record_id", where)
            name = _required(result, "name", where)
            _required(result, "result", where)
            if type(name) is not str or not name:
                raise refuse("invalid_field", f"{where}.name")
            if record_id not in ids:
                raise refuse("invalid_id", f"{where}.record_id")
            grouped.setdefault(record_id, []).append(result)
        return grouped

    def map_payload(self, payload: Any) -> Iterator[Row]:
        report = _object_payload(payload)
        rows = _nonempty_rows(
            _table(_required(report, "records", "payload"), "payload.records"), "payload.records"
        )
        columns = _required(report, "feedback_columns", "payload")
        if type(columns) is not list or any(type(name) is not str or not name for name in columns):
            raise refuse("invalid_field", "payload.feedback_columns")
        ids = {row.get("record_id") for row in rows if type(row.get("record_id")) is str}
        grouped = self._results(report, ids)  # type: ignore[arg-type]
        builder = _Builder(_summary(report, ("records", "feedback_columns", "feedback_results")))
        for position, native in enumerate(rows):
            where = f"payload.records[{position}]"
            record_id = _required(native, "record_id", where)
            _, input_value = _alias(native, ("main_input", "input"), where)
            has_output, output = _alias(native, ("main_output", "output"), where)
            _, error = _alias(native, ("main_error", "error"), where)
            if not has_output and not error:
                raise refuse("output_required", f"{where}.output")
            scores = {
                column: _batch_score(native[column], f"{where}.feedback")
                for column in columns
                if native.get(column) is not None
            }
            row = dict(native)
            if "meta" in native:
                row["metadata"] = native["meta"]
            results = grouped.get(record_id, []) if type(record_id) is str else []
            for result in results:
                if result["name"] in scores:
                    raise refuse("score_conflict", f"{where}.feedback")
                if result["result"] is not None:
                    scores[result["name"]] = _batch_score(result["result"], f"{where}.feedback")
            if results:
                row["feedback_results"] = results
            yield builder.build(
                where,
                record_id=record_id,
                input_value=input_value,
                expected=native.get("ground_truth"),
                output=output,
                error=error,
                metadata=native.get("meta"),
                scores=scores,
                row=row,
            )


_GARAK_REPORT_ENTRIES: Final = frozenset({"eval", "init", "start_run", "config", "completion"})
_TEXT_PART_MEMBERS: Final = frozenset({"text", "lang"})


def _plain_text(value: object) -> str | None:
    """Return the text of a plain text part (``{text, lang?}``; other members null)."""
    if type(value) is not dict or type(value.get("text")) is not str:
        return None
    for key, item in value.items():
        if key not in _TEXT_PART_MEMBERS and item is not None:
            return None
    return value["text"]  # type: ignore[no-any-return]


def _garak_input(prompt: object) -> Any:
    """Unwrap a single user turn's text; any other prompt is kept as is."""
    if type(prompt) is dict:
        turns = prompt.get("turns")
        if type(turns) is list and len(turns) == 1 and type(turns[0]) is dict:
            turn = turns[0]
            text = _plain_text(turn.get("content"))
            if turn.get("role") == "user" and text is not None:
                return text
    return prompt


class _GarakProfile(EvaluatorNativeProfile):
    """``{attempts≡entries: [...], source_cases?, ...}``: a garak report."""

    name = "garak"

    @staticmethod
    def _groups(entries: list[Any]) -> tuple[dict[str, list[Row]], list[Row]]:
        groups: dict[str, list[Row]] = {}
        report: list[Row] = []
        for position, entry in enumerate(entries):
            where = f"payload.attempts[{position}]"
            if type(entry) is not dict:
                raise refuse("not_object", where)
            kind = entry.get("entry_type")
            if kind == "attempt":
                uuid = entry.get("uuid")
                if type(uuid) is not str or not uuid:
                    raise refuse("invalid_id", f"{where}.uuid")
                status = entry.get("status")
                if type(status) is not int or status not in (0, 1, 2):
                    raise refuse("invalid_field", f"{where}.status")
                history = groups.setdefault(uuid, [])
                if history and (
                    status <= history[-1]["status"]
                    or not _same(entry.get("prompt"), history[-1].get("prompt"))
                ):
                    raise refuse("invalid_field", f"{where}.status")
                history.append(entry)
            elif kind in _GARAK_REPORT_ENTRIES:
                report.append(entry)
            else:
                raise refuse("invalid_field", f"{where}.entry_type")
        return groups, report

    @staticmethod
    def _source_cases(value: object) -> dict[str, Row] | None:
        if value is None:
            return None
        if type(value) is not list:
            raise refuse("invalid_field", "payload.source_cases")
        cases: dict[str, Row] = {}
        for position, case in enumerate(value):
            where = f"payload.source_cases[{position}]"
            if type(case) is not dict:
                raise refuse("not_object", where)
            for member in ("native_id", "id", "input", "expected"):
                _required(case, member, where)
            native_id = case["native_id"]
            if type(native_id) is not str or native_id in cases:
                raise refuse("invalid_id", f"{where}.native_id")
            cases[native_id] = case
        return cases

    def map_payload(self, payload: Any) -> Iterator[Row]:
        report = _object_payload(payload)
        present, entries = _alias(report, ("attempts", "entries"), "payload")
        if not present or type(entries) is not list:
            raise refuse("missing_field", "payload.attempts")
        groups, report_entries = self._groups(entries)
        if not groups:
            raise refuse("no_records", "payload.attempts")
        cases = self._source_cases(report.get("source_cases"))
        summary = _summary(report, ("attempts", "entries", "source_cases"))
        if report_entries:
            summary["report_entries"] = report_entries
        planned = [
            f"{uuid}:{index}"
            for uuid, history in groups.items()
            for index in range(max(1, len(self._outputs(history[-1]))))
        ]
        if cases is not None and set(cases) != set(planned):
            raise refuse("invalid_id", "payload.source_cases")
        builder = _Builder(summary)
        for uuid, history in groups.items():
            yield from self._records(uuid, history, cases, builder)

    @staticmethod
    def _outputs(last: Row) -> list[Any]:
        outputs = last.get("outputs")
        if outputs is None:
            return []
        if type(outputs) is not list:
            raise refuse("invalid_field", "payload.attempts.outputs")
        return outputs

    def _records(
        self, uuid: str, history: list[Row], cases: dict[str, Row] | None, builder: _Builder
    ) -> Iterator[Row]:
        last = history[-1]
        where = "payload.attempts"
        outputs = self._outputs(last)
        detectors = last.get("detector_results") or {}
        if type(detectors) is not dict:
            raise refuse("invalid_field", f"{where}.detector_results")
        for values in detectors.values():
            if type(values) is not list or len(values) != len(outputs):
                raise refuse("invalid_field", f"{where}.detector_results")
        input_value = _garak_input(last.get("prompt"))
        metadata = last.get("metadata")
        for index in range(max(1, len(outputs))):
            native = outputs[index] if outputs else None
            text = _plain_text(native)
            output = text if text is not None else native
            row = dict(last)
            row["attempt_history"] = history
            row["generation_index"] = index
            error = _batch_error(last.get("error"), f"{where}.error")
            if error is None:
                if last["status"] != 2:
                    error = "Garak attempt incomplete"
                elif output is None and not _has_likelihood(row, metadata):
                    error = "Garak generation returned no output"
            scores = (
                {
                    name: _batch_score(values[index], f"{where}.detector_results")
                    for name, values in detectors.items()
                }
                if outputs
                else {}
            )
            native_id = f"{uuid}:{index}"
            record_id: object = native_id
            expected: Any = None
            extra: Row | None = None
            if cases is not None:
                case = cases[native_id]
                if not _same(case["input"], input_value) or (
                    "output" in case and not _same(case["output"], output)
                ):
                    raise refuse("invalid_field", "payload.source_cases")
                record_id, expected, extra = case["id"], case["expected"], {"source_case": case}
            yield builder.build(
                where,
                record_id=record_id,
                input_value=input_value,
                expected=expected,
                output=output,
                error=error,
                metadata=metadata,
                scores=scores,
                row=row,
                extra_context=extra,
            )


class _OpenAIEvalsProfile(EvaluatorNativeProfile):
    """``{events: [...]}`` or the bare events array of an OpenAI Evals run log."""

    name = "openai-evals"

    @staticmethod
    def _events(payload: Any) -> tuple[list[Any], Row]:
        if type(payload) is list:
            return payload, {}
        report = _object_payload(payload)
        events = _required(report, "events", "payload")
        if type(events) is not list:
            raise refuse("invalid_field", "payload.events")
        return events, _summary(report, ("events",))

    @staticmethod
    def _group(events: list[Any]) -> tuple[dict[str, list[Row]], list[Row]]:
        groups: dict[str, list[Row]] = {}
        log_entries: list[Row] = []
        run_ids: set[str] = set()
        event_ids: set[int] = set()
        for position, event in enumerate(events):
            where = f"payload.events[{position}]"
            if type(event) is not dict:
                raise refuse("not_object", where)
            for run_id in (event.get("run_id"), (event.get("spec") or {}).get("run_id")):
                if run_id is not None:
                    run_ids.add(json.dumps(run_id))
            if len(run_ids) > 1:
                raise refuse("invalid_field", f"{where}.run_id")
            if "event_id" in event:
                event_id = event["event_id"]
                if type(event_id) is not int or event_id < 0 or event_id in event_ids:
                    raise refuse("invalid_field", f"{where}.event_id")
                event_ids.add(event_id)
            sample_id = event.get("sample_id")
            if sample_id is None:
                if (
                    "spec" in event
                    or "final_report" in event
                    or event.get("type") == "final_report"
                ):
                    log_entries.append(event)
                    continue
                raise refuse("invalid_field", f"{where}.sample_id")
            if type(sample_id) is not str or not sample_id:
                raise refuse("invalid_id", f"{where}.sample_id")
            groups.setdefault(sample_id, []).append(event)
        return groups, log_entries

    @staticmethod
    def _data(event: Row, where: str) -> Row:
        data = event.get("data")
        if type(data) is not dict:
            raise refuse("invalid_field", f"{where}.data")
        return data

    @staticmethod
    def _agreed(parts: list[Row]) -> Row:
        """``prompt`` / ``sampled`` of the sampling and match events (equal where both)."""
        values: Row = {}
        for name in ("prompt", "sampled"):
            present = [data[name] for data in parts if name in data]
            if any(not _same(value, present[0]) for value in present[1:]):
                raise refuse("invalid_field", f"payload.events.{name}")
            if present:
                values[name] = present[0]
        return values

    @staticmethod
    def _errors(events: list[Row]) -> list[str]:
        """Return the messages of a sample's error events."""
        errors: list[str] = []
        for event in events:
            data = event.get("data")
            message = data.get("message") if type(data) is dict else data
            if type(message) is not str:
                raise refuse("invalid_field", "payload.events.error")
            errors.append(message)
        return errors

    def _sample(self, sample_id: str, events: list[Row], builder: _Builder) -> Row:
        where = "payload.events"
        by_type: dict[str, list[Row]] = {}
        for event in events:
            by_type.setdefault(str(event.get("type")), []).append(event)
        sampling = by_type.get("sampling", [])
        matches = by_type.get("match", [])
        if len(sampling) > 1 or len(matches) > 1:
            raise refuse("ambiguous_output", where)
        values = self._agreed([self._data(event, where) for event in (*sampling, *matches)])
        errors = self._errors(by_type.get("error", []))
        if "sampled" not in values and not errors:
            raise refuse("output_required", where)
        scores: dict[str, float] = {}
        expected = None
        if matches:
            match = self._data(matches[0], where)
            correct = match.get("correct")
            if type(correct) is not bool:
                raise refuse("invalid_field", f"{where}.correct")
            scores["match"] = 1.0 if correct else 0.0
            expected = match.get("expected")
        for event in by_type.get("metrics", []):
            for name, value in self._data(event, where).items():
                if name in scores:
                    raise refuse("score_conflict", f"{where}.metrics")
                scores[name] = _batch_score(value, f"{where}.metrics")
        return builder.build(
            where,
            record_id=sample_id,
            input_value=values.get("prompt"),
            expected=expected,
            output=values.get("sampled"),
            error="; ".join(errors) if errors else None,
            metadata=None,
            scores=scores,
            row={"sample_id": sample_id, "events": events},
        )

    def map_payload(self, payload: Any) -> Iterator[Row]:
        events, summary = self._events(payload)
        groups, log_entries = self._group(events)
        if not groups:
            raise refuse("no_records", "payload.events")
        if log_entries:
            summary["log_entries"] = log_entries
        builder = _Builder(summary)
        for sample_id, sample_events in groups.items():
            yield self._sample(sample_id, sample_events, builder)


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
        _PydanticProfile(),
        _AzureProfile(),
        _EvidentlyProfile(),
        _MlflowProfile(),
        _GarakProfile(),
        _OpenAIEvalsProfile(),
        _TrulensProfile(),
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
        raise fail("unsupported_evaluator", "evaluator")
    return profile
