"""The batch evaluator-native profiles (spec 11 §8.2): one report per run.

``pydantic-evals``, ``azure-ai-evaluation``, ``evidently``, ``mlflow``,
``garak``, ``openai-evals`` and ``trulens``. Scores come from the report; the
rest of the report is kept as ``context.upstream_summary``. The registry is
:data:`~sealeval.captured.importers.profiles.PROFILES`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Final

from sealeval.canonical import encode_invarlock
from sealeval.captured.importers.jsonl import (
    is_number,
    merge_explicit_scores,
    refuse,
    tags,
)
from sealeval.captured.importers.profile_base import (
    ERROR_KEYS,
    LIKELIHOOD_KEYS,
    MAX_BATCH_ID,
    EvaluatorNativeProfile,
    Row,
    as_rows,
    plain,
    required,
    same,
    table,
)

__all__ = ["batch_profiles"]


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
        for key in ERROR_KEYS:
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
        if not same(row[name], first):
            raise refuse("invalid_field", f"{where}.{name}")
    return True, first


def _has_likelihood(row: Row, metadata: object) -> bool:
    return any(key in row for key in LIKELIHOOD_KEYS) or (
        type(metadata) is dict and any(key in metadata for key in LIKELIHOOD_KEYS)
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
        if type(record_id) is not str or not record_id or len(record_id) > MAX_BATCH_ID:
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
        copies = [row[key] for key in LIKELIHOOD_KEYS if key in row]
        copies += [metadata[key] for key in LIKELIHOOD_KEYS if key in metadata]
        if copies:
            if any(not same(copy, copies[0]) for copy in copies[1:]):
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
        return plain(result, "result")

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
                raw = required(value, "value", f"{where}.{group}") if type(value) is dict else value
                scores[name] = _batch_score(raw, f"{where}.{group}")
        return scores

    def map_payload(self, payload: Any) -> Iterator[Row]:
        report = _object_payload(payload)
        cases = required(report, "cases", "payload")
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
                record_id=required(case, "name", where),
                input_value=required(case, "inputs", where),
                expected=case.get("expected_output"),
                output=required(case, "output", where),
                error=case.get("error"),
                metadata=case.get("metadata"),
                scores=self._scores(case, where),
                row=case,
            )
        for position, failure in enumerate(failures):
            where = f"payload.failures[{position}]"
            if type(failure) is not dict:
                raise refuse("not_object", where)
            message = required(failure, "error_message", where)
            if type(message) is not str:
                raise refuse("invalid_field", f"{where}.error_message")
            yield builder.build(
                where,
                record_id=required(failure, "name", where),
                input_value=required(failure, "inputs", where),
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
        payload = plain(result, "result")
        if type(payload) is dict and "rows" in payload:
            payload["rows"] = as_rows(payload["rows"])
        return payload

    def map_payload(self, payload: Any) -> Iterator[Row]:
        report = _object_payload(payload)
        rows = _nonempty_rows(
            table(required(report, "rows", "payload"), "payload.rows"), "payload.rows"
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
        payload = plain(result, "result")
        if type(payload) is dict:
            for key in ("dataset", "rows"):
                if key in payload:
                    payload[key] = as_rows(payload[key])
        return payload

    def map_payload(self, payload: Any) -> Iterator[Row]:
        report = _object_payload(payload)
        present, dataset = _alias(report, ("dataset", "rows"), "payload")
        if not present:
            raise refuse("missing_field", "payload.rows")
        rows = _nonempty_rows(table(dataset, "payload.rows"), "payload.rows")
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
        payload = plain(result, "result")
        if type(payload) is dict:
            for key in ("prediction_table", "rows"):
                if key in payload:
                    payload[key] = as_rows(payload[key])
            tables = payload.get("tables")
            if type(tables) is dict and "eval_results_table" in tables:
                tables["eval_results_table"] = as_rows(tables["eval_results_table"])
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
        candidates = [table(value, "payload.rows") for value in sources.values()]
        if any(not same(candidate, candidates[0]) for candidate in candidates[1:]):
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
        payload = plain(result, "result")
        if type(payload) is dict and "records" in payload:
            payload["records"] = as_rows(payload["records"])
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
            record_id = required(result, "record_id", where)
            name = required(result, "name", where)
            required(result, "result", where)
            if type(name) is not str or not name:
                raise refuse("invalid_field", f"{where}.name")
            if record_id not in ids:
                raise refuse("invalid_id", f"{where}.record_id")
            grouped.setdefault(record_id, []).append(result)
        return grouped

    def map_payload(self, payload: Any) -> Iterator[Row]:
        report = _object_payload(payload)
        rows = _nonempty_rows(
            table(required(report, "records", "payload"), "payload.records"), "payload.records"
        )
        columns = required(report, "feedback_columns", "payload")
        if type(columns) is not list or any(type(name) is not str or not name for name in columns):
            raise refuse("invalid_field", "payload.feedback_columns")
        ids = {row.get("record_id") for row in rows if type(row.get("record_id")) is str}
        grouped = self._results(report, ids)  # type: ignore[arg-type]
        builder = _Builder(_summary(report, ("records", "feedback_columns", "feedback_results")))
        for position, native in enumerate(rows):
            where = f"payload.records[{position}]"
            record_id = required(native, "record_id", where)
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
                    or not same(entry.get("prompt"), history[-1].get("prompt"))
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
                required(case, member, where)
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
                if not same(case["input"], input_value) or (
                    "output" in case and not same(case["output"], output)
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
        events = required(report, "events", "payload")
        if type(events) is not list:
            raise refuse("invalid_field", "payload.events")
        return events, _summary(report, ("events",))

    @staticmethod
    def _group(events: list[Any]) -> tuple[dict[str, list[Row]], list[Row]]:
        groups: dict[str, list[Row]] = {}
        log_entries: list[Row] = []
        run_ids: set[bytes] = set()  # canonical bytes: 1, 1.0 and true differ
        event_ids: set[int] = set()
        for position, event in enumerate(events):
            where = f"payload.events[{position}]"
            if type(event) is not dict:
                raise refuse("not_object", where)
            for run_id in (event.get("run_id"), (event.get("spec") or {}).get("run_id")):
                if run_id is not None:
                    run_ids.add(encode_invarlock(run_id))
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
            if any(not same(value, present[0]) for value in present[1:]):
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


def batch_profiles() -> tuple[EvaluatorNativeProfile, ...]:
    """Return one instance of each batch profile, in the reference's order."""
    return (
        _PydanticProfile(),
        _AzureProfile(),
        _EvidentlyProfile(),
        _MlflowProfile(),
        _GarakProfile(),
        _OpenAIEvalsProfile(),
        _TrulensProfile(),
    )
