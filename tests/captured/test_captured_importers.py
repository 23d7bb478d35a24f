"""load_run and its adapters: every adapters.json vector, the profiles, refusals, auto, scale."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import logging
import os
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sealeval.canonical import digest_bytes, digest_invarlock
from sealeval.captured import (
    EVALUATOR_NAMES,
    INVARLOCK_LIMITS,
    CapturedRunError,
    Limits,
    export_evaluator_result,
    make_run,
    read_run,
)
from sealeval.captured.importers import (
    AUTO,
    PROFILES,
    SPECIFIED_ADAPTERS,
    Importer,
    ImportOptions,
    ImportRefusalError,
    adapter_names,
    detect_adapter,
    get_importer,
    import_run_streaming,
    importers,
    load_run,
)
from sealeval.captured.importers.profile_base import same
from sealeval.errors import OutputError, SealevalError
from support.captured_importers import (
    _CASE_CODES,
    _MESSAGE_CODES,
    CANARY,
    message_code,
)
from support.digests import ARTIFACT, CONFIG, TOKENIZER
from support.vectors import cases, decode_input, load

SOURCE = {"name": "acme-harness", "version": "3.1.4"}
IDENTITY = {"source": SOURCE, "run_id": "run-1", "artifact_digest": ARTIFACT}

# ---------------------------------------------------------------------------
# The reference's error messages (informational; they quote values, we never do)
# mapped to our closed codes. Every message of the vectors must match exactly one
# prefix; an unknown message fails the test.

# The reference reuses one message for faults we tell apart (empty file vs a row that
# is not an object): the case decides.


_INPUT_MEMBERS = {
    "adapter",
    "file_text",
    "file_b64",
    "source",
    "run_id",
    "artifact_digest",
    "service_identity",
    "score_provenance",
    "input_projection",
}
_RUN_EXPECTED = {"run", "run_canonical", "run_digest", "source_digest", "record_count"}


def _write_case(case_input: dict[str, Any], path: Path) -> dict[str, Any]:
    if not set(case_input) <= _INPUT_MEMBERS or ("file_text" in case_input) == (
        "file_b64" in case_input
    ):
        pytest.fail("vector case shape not understood")
    arguments = decode_input(case_input, arrays_as_tuples=False)
    if "file_text" in arguments:
        path.write_bytes(arguments.pop("file_text").encode("utf-8"))
    else:
        path.write_bytes(base64.b64decode(arguments.pop("file_b64")))
    return arguments


@pytest.mark.parametrize("case", cases("invarlock/adapters.json"))
def test_adapter_vector(case: dict[str, Any], tmp_path: Path) -> None:
    source = tmp_path / "source"
    arguments = _write_case(case["input"], source)
    adapter = arguments.pop("adapter")
    expected = case["expected"]
    destination = tmp_path / "run.json"
    if "error" in expected:
        if set(expected) != {"error"}:
            pytest.fail("vector case shape not understood")
        code = message_code(case["name"], expected["error"]["message"])
        with pytest.raises(SealevalError) as caught:
            load_run(source, adapter, **arguments)
        assert caught.value.code == code
        with pytest.raises(SealevalError) as streamed:
            import_run_streaming(source, destination, adapter=adapter, **arguments)
        assert streamed.value.code == code
        assert not destination.exists()
        assert sorted(path.name for path in tmp_path.iterdir()) == ["source"]
        return
    if set(expected) != _RUN_EXPECTED:
        pytest.fail("vector case shape not understood")
    run = load_run(source, adapter, **arguments)
    canonical = expected["run_canonical"].encode("utf-8")
    assert run.to_canonical() == canonical
    assert run.digest == expected["run_digest"]
    assert run.source_digest == expected["source_digest"]
    assert len(run) == expected["record_count"]
    assert run.to_dict() == expected["run"]
    if adapter != "invarlock":
        assert run.source_digest == digest_bytes(source.read_bytes())
    summary = import_run_streaming(source, destination, adapter=adapter, **arguments)
    assert destination.read_bytes() == canonical
    assert summary.run_digest == expected["run_digest"]
    assert summary.record_count == expected["record_count"]
    assert summary.source_digest == expected["source_digest"]
    assert destination.stat().st_mode & 0o777 == 0o600
    if adapter != "evaluator-native-json":  # raw evaluator JSON has no marker of its own
        detected = detect_adapter(source)
        native_inspect = case["name"] == "evaluator-native-json-inspect-ai"
        assert detected == ("inspect-json" if native_inspect else adapter)


def test_every_vector_message_is_mapped() -> None:
    # message_code fails unless exactly one prefix matches the message (ids mapped by shape).
    used = {
        message_code(case["name"], case["expected"]["error"]["message"])
        for case in load("invarlock/adapters.json")["cases"]
        if "error" in case["expected"]
    }
    assert used
    assert used <= {code for _, code in _MESSAGE_CODES} | set(_CASE_CODES.values())


# ---------------------------------------------------------------------------
# evaluator_exports.json with the real profiles

_EXPORT_MESSAGES = (
    ("export does not contain exactly the expected case IDs", "export_ids_mismatch"),
    ("unsupported evaluator", "unsupported_evaluator"),
    ("expected_ids must be a bounded nonempty list of unique string IDs", "invalid_expected_ids"),
)


@pytest.mark.parametrize("case", cases("invarlock/evaluator_exports.json"))
def test_evaluator_export_vector_with_real_profiles(case: dict[str, Any], tmp_path: Path) -> None:
    case_input, expected = case["input"], case["expected"]
    if set(case_input) != {
        "evaluator",
        "result",
        "expected_ids",
        "source_version",
        "run_id",
        "artifact_digest",
    }:
        pytest.fail("vector case shape not understood")
    destination = tmp_path / "export.json"
    arguments = {
        "expected_ids": case_input["expected_ids"],
        "source_version": case_input["source_version"],
        "run_id": case_input["run_id"],
        "artifact_digest": case_input["artifact_digest"],
        "profiles": PROFILES,
    }
    result = decode_input(case_input["result"], arrays_as_tuples=False)
    if "error" in expected:
        if set(expected) - {"error", "file_written"}:
            pytest.fail("vector case shape not understood")
        matches = [c for p, c in _EXPORT_MESSAGES if expected["error"]["message"].startswith(p)]
        if len(matches) != 1:
            pytest.fail("vector error message not understood")
        with pytest.raises(CapturedRunError) as caught:
            export_evaluator_result(case_input["evaluator"], result, destination, **arguments)
        assert caught.value.code == matches[0]
        assert list(tmp_path.iterdir()) == []
        return
    if set(expected) != {"export_text", "export_sha256", *_RUN_EXPECTED}:
        pytest.fail("vector case shape not understood")
    run = export_evaluator_result(case_input["evaluator"], result, destination, **arguments)
    data = destination.read_bytes()
    assert data == expected["export_text"].encode("utf-8")
    assert run.to_canonical() == expected["run_canonical"].encode("utf-8")
    assert run.digest == expected["run_digest"]
    again = load_run(
        destination,
        "evaluator-json",
        source={"name": case_input["evaluator"], "version": case_input["source_version"]},
        run_id=case_input["run_id"],
        artifact_digest=case_input["artifact_digest"],
    )
    assert again.digest == expected["run_digest"]
    assert again.source_digest == expected["export_sha256"] == digest_bytes(data)


def test_profiles_cover_the_19_evaluators() -> None:
    assert tuple(PROFILES) == EVALUATOR_NAMES
    assert all(PROFILES[name].name == name for name in EVALUATOR_NAMES)
    assert "ragas" in repr(PROFILES["ragas"])


# ---------------------------------------------------------------------------
# Helpers for hand-made sources


def _vector_case(name: str) -> dict[str, Any]:
    for case in load("invarlock/adapters.json")["cases"]:
        if case["name"] == name:
            return dict(case)
    raise AssertionError(name)


def _vector_text(name: str) -> str:
    return str(_vector_case(name)["input"]["file_text"])


def _vector_identity(name: str) -> dict[str, Any]:
    """The source and run id a vector case declares (they follow the vector, not a literal)."""
    given = _vector_case(name)["input"]
    return {"source": given["source"], "run_id": given["run_id"]}


def _vector_doc(name: str) -> Any:
    return json.loads(_vector_text(name))


def _vector_rows(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in _vector_text(name).splitlines() if line.strip()]


def _jsonl(rows: list[Any]) -> str:
    return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


def _facts(input_value: Any, expected: str, source: dict[str, str] = SOURCE) -> dict[str, Any]:
    return {
        "basis": "reference_continuation",
        "logprob_sum": -1.5,
        "token_count": 2,
        "utf8_byte_count": len(expected.encode("utf-8")),
        "input_digest": digest_invarlock(input_value),
        "reference_digest": digest_invarlock(expected),
        "artifact_digest": ARTIFACT,
        "configuration_digest": CONFIG,
        "tokenizer_digest": TOKENIZER,
        "source": source,
    }


def _load(tmp_path: Path, text: str | bytes, adapter: str, **arguments: Any) -> Any:
    path = tmp_path / "source.data"
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    merged = {**IDENTITY, **arguments}
    return load_run(path, adapter, **merged)


def _code(call: Callable[..., object], *args: Any, **kwargs: Any) -> str:
    with pytest.raises(SealevalError) as caught:
        call(*args, **kwargs)
    return caught.value.code


def _native_doc(profile: str) -> Any:
    return _vector_doc(f"evaluator-native-json-{profile}")


def _native(tmp_path: Path, profile: str, document: Any, **arguments: Any) -> Any:
    identity = {"source": {"name": profile, "version": "1.2.3"}, "run_id": f"{profile}-run"}
    return _load(
        tmp_path, json.dumps(document), "evaluator-native-json", **{**identity, **arguments}
    )


# ---------------------------------------------------------------------------
# Refusals: one per rule


def _lm_row(**changes: Any) -> dict[str, Any]:
    row = _vector_rows("lm-eval-samples-generation")[0]
    row.update(changes)
    return {key: value for key, value in row.items() if value is not _ABSENT}


_ABSENT = object()


def _without(document: Any, *path: Any) -> Any:
    doc = copy.deepcopy(document)
    target = doc
    for step in path[:-1]:
        target = target[step]
    del target[path[-1]]
    return doc


def _with(document: Any, value: Any, *path: Any) -> Any:
    doc = copy.deepcopy(document)
    target = doc
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return doc


def _inspect(**changes: Any) -> dict[str, Any]:
    log = _vector_doc("inspect-json-v2")
    log["samples"] = [log["samples"][0]]
    log["samples"][0].update(changes)
    return log


def _promptfoo(**changes: Any) -> dict[str, Any]:
    row = _vector_rows("promptfoo-jsonl-failure-reasons")[0]
    row.update(changes)
    return {key: value for key, value in row.items() if value is not _ABSENT}


_LANGFUSE = _vector_doc("langfuse-json-basic")
_LANGFUSE_ITEM = ("result", "item_results", 0)

# (rule, adapter, source text, code); identities are IDENTITY unless noted.
_RULES: list[tuple[str, str, Any, str]] = [
    # §1.1 JSONL reading
    ("jsonl-array-row", "jsonl", "[1]\n", "not_object"),
    ("jsonl-bom", "jsonl", b"\xef\xbb\xbf" + _jsonl([{"id": "a"}]).encode(), "byte_order_mark"),
    ("jsonl-not-utf8", "jsonl", b'{"id": "\xff"}\n', "not_utf8"),
    ("jsonl-duplicate-key", "jsonl", '{"id": "a", "id": "b"}\n', "duplicate_key"),
    ("jsonl-infinity", "jsonl", '{"id": "a", "scores": {"s": Infinity}}\n', "non_finite_number"),
    ("jsonl-trailing-comma", "jsonl", '{"id": "a",}\n', "invalid_jsonl_line"),
    ("jsonl-missing-output", "jsonl", '{"id": "a", "input": 1, "expected": 1}\n', "missing_field"),
    # §1.2 identifier / task_error / tags / §1.3 invarlock_scores
    ("identifier-float", "lm-eval-samples", _jsonl([_lm_row(doc_id=1.5)]), "invalid_id"),
    ("identifier-bool", "lm-eval-samples", _jsonl([_lm_row(doc_id=True)]), "invalid_id"),
    ("task-error-empty", "lm-eval-samples", _jsonl([_lm_row(error="")]), "invalid_field"),
    ("task-error-number", "lm-eval-samples", _jsonl([_lm_row(error=3)]), "invalid_field"),
    ("task-error-array", "lm-eval-samples", _jsonl([_lm_row(error=["x"])]), "invalid_field"),
    ("tags-not-object", "lm-eval-samples", _jsonl([_lm_row(metadata=["x"])]), "invalid_field"),
    (
        "explicit-scores-not-object",
        "lm-eval-samples",
        _jsonl([_lm_row(metadata={"invarlock_scores": [1]})]),
        "invalid_field",
    ),
    (
        "explicit-score-bool",
        "lm-eval-samples",
        _jsonl([_lm_row(metadata={"invarlock_scores": {"j": True}})]),
        "invalid_field",
    ),
    (
        "explicit-score-empty-name",
        "lm-eval-samples",
        _jsonl([_lm_row(metadata={"invarlock_scores": {"": 1}})]),
        "invalid_field",
    ),
    (
        "likelihood-null",
        "lm-eval-samples",
        _jsonl([_lm_row(metadata={"invarlock_likelihood": None})]),
        "invalid_type",
    ),
    # §3 lm-eval-samples
    ("lm-missing-doc", "lm-eval-samples", _jsonl([_lm_row(doc=_ABSENT)]), "missing_field"),
    ("lm-missing-target", "lm-eval-samples", _jsonl([_lm_row(target=_ABSENT)]), "missing_field"),
    ("lm-missing-doc-id", "lm-eval-samples", _jsonl([_lm_row(doc_id=_ABSENT)]), "missing_field"),
    (
        "lm-missing-resps",
        "lm-eval-samples",
        _jsonl([_lm_row(filtered_resps=_ABSENT)]),
        "missing_field",
    ),
    ("lm-non-text", "lm-eval-samples", _jsonl([_lm_row(filtered_resps=[1])]), "ambiguous_output"),
    ("lm-no-response", "lm-eval-samples", _jsonl([_lm_row(filtered_resps=[])]), "ambiguous_output"),
    (
        "lm-nan-structural",
        "lm-eval-samples",
        _jsonl([_lm_row()]).replace('"target": "Paris"', '"target": NaN'),
        "non_finite_number",
    ),
    (
        "lm-nan-nested",
        "lm-eval-samples",
        _jsonl([_lm_row(doc={"q": 1})]).replace('"q": 1', '"q": NaN'),
        "non_finite_number",
    ),
    (
        "lm-infinity-metric",
        "lm-eval-samples",
        _jsonl([_lm_row()]).replace('"exact_match": 1.0', '"exact_match": Infinity'),
        "non_finite_number",
    ),
    # §4 inspect-json
    ("inspect-not-object", "inspect-json", "[]", "invalid_document"),
    (
        "inspect-no-samples",
        "inspect-json",
        json.dumps(_with(_inspect(), [], "samples")),
        "no_records",
    ),
    (
        "inspect-samples-not-list",
        "inspect-json",
        json.dumps(_with(_inspect(), {}, "samples")),
        "invalid_field",
    ),
    (
        "inspect-no-choice",
        "inspect-json",
        json.dumps(_inspect(output={"choices": []})),
        "ambiguous_output",
    ),
    ("inspect-empty-target", "inspect-json", json.dumps(_inspect(target=[])), "ambiguous_expected"),
    ("inspect-epoch-true", "inspect-json", json.dumps(_inspect(epoch=True)), "multiple_epochs"),
    ("inspect-scores-list", "inspect-json", json.dumps(_inspect(scores=[1])), "invalid_field"),
    (
        "inspect-score-no-value",
        "inspect-json",
        json.dumps(_inspect(scores={"m": {"x": 1}})),
        "invalid_field",
    ),
    (
        "inspect-score-bool",
        "inspect-json",
        json.dumps(_inspect(scores={"m": {"value": True}})),
        "non_numeric_score",
    ),
    (
        "inspect-missing-id",
        "inspect-json",
        json.dumps(_without(_inspect(), "samples", 0, "id")),
        "invalid_id",
    ),
    (
        "inspect-cancelled",
        "inspect-json",
        json.dumps(_with(_inspect(), "cancelled", "status")),
        "incomplete_run",
    ),
    # §5 promptfoo-jsonl
    ("promptfoo-no-vars", "promptfoo-jsonl", _jsonl([_promptfoo(testCase={})]), "missing_field"),
    (
        "promptfoo-no-prompt",
        "promptfoo-jsonl",
        _jsonl([_promptfoo(prompt=_ABSENT)]),
        "missing_field",
    ),
    (
        "promptfoo-prompt-no-raw",
        "promptfoo-jsonl",
        _jsonl([_promptfoo(prompt={"label": "p"})]),
        "missing_field",
    ),
    ("promptfoo-prompt-number", "promptfoo-jsonl", _jsonl([_promptfoo(prompt=3)]), "invalid_field"),
    (
        "promptfoo-no-test-idx",
        "promptfoo-jsonl",
        _jsonl([_promptfoo(testIdx=_ABSENT)]),
        "invalid_id",
    ),
    (
        "promptfoo-reason-bool",
        "promptfoo-jsonl",
        _jsonl([_promptfoo(failureReason=False)]),
        "unsupported_failure_reason",
    ),
    (
        "promptfoo-score-text",
        "promptfoo-jsonl",
        _jsonl([_promptfoo(score="high")]),
        "non_numeric_score",
    ),
    (
        "promptfoo-metadata-list",
        "promptfoo-jsonl",
        _jsonl([_promptfoo(testCase={"vars": {}, "metadata": []})]),
        "invalid_field",
    ),
    (
        "promptfoo-response-list",
        "promptfoo-jsonl",
        _jsonl([_promptfoo(response=[])]),
        "invalid_field",
    ),
    (
        "promptfoo-pass-with-error",
        "promptfoo-jsonl",
        _jsonl([_promptfoo(error="boom")]),
        "inconsistent_failure",
    ),
    # §6 langfuse-json
    (
        "langfuse-envelope-extra",
        "langfuse-json",
        json.dumps({**_LANGFUSE, "x": 1}),
        "unknown_field",
    ),
    (
        "langfuse-format",
        "langfuse-json",
        json.dumps(_with(_LANGFUSE, "other", "format")),
        "invalid_document",
    ),
    (
        "langfuse-sdk-empty",
        "langfuse-json",
        json.dumps(_with(_LANGFUSE, "", "sdk_version")),
        "invalid_field",
    ),
    (
        "langfuse-result-extra",
        "langfuse-json",
        json.dumps(_with(_LANGFUSE, 1, "result", "x")),
        "unknown_field",
    ),
    (
        "langfuse-result-missing",
        "langfuse-json",
        json.dumps(_without(_LANGFUSE, "result", "run_evaluations")),
        "missing_field",
    ),
    (
        "langfuse-dataset-run",
        "langfuse-json",
        json.dumps(_with(_LANGFUSE, "other", "result", "dataset_run_id")),
        "invalid_field",
    ),
    (
        "langfuse-no-items",
        "langfuse-json",
        json.dumps(_with(_LANGFUSE, [], "result", "item_results")),
        "no_records",
    ),
    (
        "langfuse-hosted-no-id",
        "langfuse-json",
        json.dumps(_with(_LANGFUSE, "d1", *_LANGFUSE_ITEM, "item", "dataset_id")),
        "missing_id",
    ),
    (
        "langfuse-id-differs",
        "langfuse-json",
        json.dumps(_with(_LANGFUSE, "other", *_LANGFUSE_ITEM, "item", "id")),
        "invalid_id",
    ),
    (
        "langfuse-status",
        "langfuse-json",
        json.dumps(
            _with(
                _with(_LANGFUSE, "lf-0", *_LANGFUSE_ITEM, "item", "id"),
                "DRAFT",
                *_LANGFUSE_ITEM,
                "item",
                "status",
            )
        ),
        "invalid_field",
    ),
    (
        "langfuse-item-extra",
        "langfuse-json",
        json.dumps(_with(_LANGFUSE, 1, *_LANGFUSE_ITEM, "item", "x")),
        "unknown_field",
    ),
    (
        "langfuse-no-input",
        "langfuse-json",
        json.dumps(_without(_LANGFUSE, *_LANGFUSE_ITEM, "item", "input")),
        "missing_field",
    ),
    (
        "langfuse-item-run-differs",
        "langfuse-json",
        json.dumps(_with(_LANGFUSE, "r", *_LANGFUSE_ITEM, "dataset_run_id")),
        "invalid_field",
    ),
    (
        "langfuse-duplicate-evaluation",
        "langfuse-json",
        json.dumps(
            _with(
                _LANGFUSE,
                [{"name": "a", "value": 1}, {"name": "a", "value": 2}],
                *_LANGFUSE_ITEM,
                "evaluations",
            )
        ),
        "duplicate_id",
    ),
    (
        "langfuse-categorical-number",
        "langfuse-json",
        json.dumps(
            _with(
                _LANGFUSE,
                [{"name": "a", "value": 1, "data_type": "CATEGORICAL"}],
                *_LANGFUSE_ITEM,
                "evaluations",
            )
        ),
        "invalid_evaluation",
    ),
    (
        "langfuse-numeric-bool",
        "langfuse-json",
        json.dumps(
            _with(_LANGFUSE, [{"name": "a", "value": True}], *_LANGFUSE_ITEM, "evaluations")
        ),
        "invalid_evaluation",
    ),
    (
        "langfuse-unknown-type",
        "langfuse-json",
        json.dumps(
            _with(
                _LANGFUSE,
                [{"name": "a", "value": 1, "data_type": "X"}],
                *_LANGFUSE_ITEM,
                "evaluations",
            )
        ),
        "invalid_evaluation",
    ),
    (
        "langfuse-evaluation-extra",
        "langfuse-json",
        json.dumps(
            _with(_LANGFUSE, [{"name": "a", "value": 1, "x": 1}], *_LANGFUSE_ITEM, "evaluations")
        ),
        "unknown_field",
    ),
    (
        "langfuse-run-evaluation",
        "langfuse-json",
        json.dumps(_with(_LANGFUSE, [{"name": "", "value": 1}], "result", "run_evaluations")),
        "invalid_field",
    ),
    (
        "langfuse-error-not-text",
        "langfuse-json",
        json.dumps(_with(_LANGFUSE, 5, *_LANGFUSE_ITEM, "item", "metadata", "invarlock_error")),
        "invalid_field",
    ),
]
_RULE_IDENTITIES = {
    name: _vector_identity("langfuse-json-basic")
    for name, adapter, _, _ in _RULES
    if adapter == "langfuse-json"
}


@pytest.mark.parametrize(
    ("adapter", "text", "code"),
    [pytest.param(adapter, text, code, id=name) for name, adapter, text, code in _RULES],
)
def test_refusal(adapter: str, text: Any, code: str, tmp_path: Path, request: Any) -> None:
    identity = _RULE_IDENTITIES.get(request.node.callspec.id, {})
    assert _code(lambda: _load(tmp_path, text, adapter, **identity)) == code


_LIGHTEVAL = _native_doc("lighteval")
_GARAK = _native_doc("garak")
_OPENAI = _native_doc("openai-evals")

# (rule, profile, document, code)
_PROFILE_RULES: list[tuple[str, str, Any, str]] = [
    ("payload-object", "deepeval", {"x": 1}, "invalid_document"),
    ("entry-not-object", "autoevals", [1], "not_object"),
    ("id-blank", "autoevals", [{"id": " ", "input": 1, "output": 1}], "invalid_id"),
    ("id-number", "autoevals", [{"id": 3, "input": 1, "output": 1}], "invalid_id"),
    (
        "metadata-list",
        "autoevals",
        [{"id": "a", "input": 1, "output": 1, "metadata": []}],
        "invalid_field",
    ),
    (
        "error-empty",
        "autoevals",
        [{"id": "a", "input": 1, "output": 1, "error": ""}],
        "invalid_field",
    ),
    ("input-null", "autoevals", [{"id": "a", "input": None, "output": 1}], "invalid_field"),
    ("input-missing", "autoevals", [{"id": "a", "output": 1}], "missing_field"),
    ("output-missing", "autoevals", [{"id": "a", "input": 1}], "missing_field"),
    ("container-missing", "deepeval", [{"id": "a"}], "missing_field"),
    ("container-not-object", "deepeval", [{"id": "a", "test_case": []}], "invalid_field"),
    (
        "metric-no-score",
        "deepeval",
        [
            {
                "id": "a",
                "test_case": {"input": 1, "actual_output": 1},
                "metric_result": {"name": "m"},
            }
        ],
        "invalid_field",
    ),
    (
        "metric-no-name",
        "autoevals",
        [{"id": "a", "input": 1, "output": 1, "metric_result": {"score": 1}}],
        "invalid_field",
    ),
    (
        "metric-empty-list",
        "openevals",
        [{"id": "a", "inputs": 1, "outputs": 1, "metric_result": []}],
        "invalid_field",
    ),
    (
        "metric-list-not-allowed",
        "deepeval",
        [
            {
                "id": "a",
                "test_case": {"input": 1, "actual_output": 1},
                "metric_result": [{"score": 1}],
            }
        ],
        "invalid_field",
    ),
    (
        "metric-hf-empty",
        "hugging-face-evaluate",
        [{"id": "a", "input": 1, "predictions": [1], "metric_result": {}}],
        "invalid_field",
    ),
    (
        "hf-two-references",
        "hugging-face-evaluate",
        [{"id": "a", "input": 1, "predictions": [1], "references": [1, 2]}],
        "ambiguous_output",
    ),
    (
        "lighteval-two-texts",
        "lighteval",
        [_with(_LIGHTEVAL[0], ["a", "b"], "model_response", "text")],
        "ambiguous_output",
    ),
    (
        "lighteval-gold-range",
        "lighteval",
        [_with(_LIGHTEVAL[0], 5, "doc", "gold_index")],
        "invalid_field",
    ),
    (
        "lighteval-gold-repeat",
        "lighteval",
        [_with(_LIGHTEVAL[0], [0, 0], "doc", "gold_index")],
        "invalid_field",
    ),
    (
        "lighteval-no-choices",
        "lighteval",
        [_without(_LIGHTEVAL[0], "doc", "choices")],
        "missing_field",
    ),
    (
        "too-deep",
        "autoevals",
        [{"id": "a", "input": json.loads("[" * 40 + "]" * 40), "output": 1}],
        "too_deep",
    ),
    (
        "pydantic-collision",
        "pydantic-evals",
        {
            "cases": [
                {
                    "name": "a",
                    "inputs": 1,
                    "output": 1,
                    "assertions": {"s": True},
                    "scores": {"s": 1},
                }
            ]
        },
        "score_conflict",
    ),
    (
        "pydantic-failure-no-message",
        "pydantic-evals",
        {"cases": [], "failures": [{"name": "a", "inputs": 1}]},
        "missing_field",
    ),
    (
        "pydantic-score-text",
        "pydantic-evals",
        {"cases": [{"name": "a", "inputs": 1, "output": 1, "scores": {"s": "x"}}]},
        "non_numeric_score",
    ),
    ("pydantic-empty", "pydantic-evals", {"cases": []}, "no_records"),
    (
        "azure-no-id",
        "azure-ai-evaluation",
        {"rows": [{"inputs.query": "q", "outputs.response": "r"}]},
        "missing_id",
    ),
    (
        "azure-no-response",
        "azure-ai-evaluation",
        {"rows": [{"inputs.id": "a", "inputs.query": "q"}]},
        "output_required",
    ),
    (
        "azure-alias-differs",
        "azure-ai-evaluation",
        {"rows": [{"inputs.id": "a", "inputs.record_id": "b", "outputs.response": "r"}]},
        "invalid_field",
    ),
    (
        "azure-error-object",
        "azure-ai-evaluation",
        {"rows": [{"inputs.id": "a", "error": {"code": 1}}]},
        "invalid_field",
    ),
    (
        "table-ragged",
        "mlflow",
        {"rows": {"columns": ["record_id"], "data": [["a", "b"]]}},
        "invalid_field",
    ),
    (
        "table-duplicate-columns",
        "mlflow",
        {"rows": {"columns": ["a", "a"], "data": []}},
        "invalid_field",
    ),
    (
        "mlflow-score-text",
        "mlflow",
        {"rows": [{"record_id": "a", "prediction": "p", "x/score": "hi"}]},
        "non_numeric_score",
    ),
    (
        "mlflow-tables-differ",
        "mlflow",
        {
            "rows": [{"record_id": "a", "prediction": "p"}],
            "prediction_table": [{"record_id": "b", "prediction": "p"}],
        },
        "invalid_field",
    ),
    (
        "evidently-bad-role",
        "evidently",
        {"rows": [{"record_id": "a", "output": 1}], "columns": {"label": "x"}},
        "invalid_field",
    ),
    (
        "evidently-roles-collide",
        "evidently",
        {"rows": [{"record_id": "a", "output": 1}], "columns": {"input": "output"}},
        "invalid_field",
    ),
    ("evidently-no-output", "evidently", {"rows": [{"record_id": "a"}]}, "output_required"),
    (
        "evidently-duplicate-id",
        "evidently",
        {"rows": [{"record_id": "a", "output": 1}, {"record_id": "a", "output": 2}]},
        "duplicate_id",
    ),
    (
        "batch-likelihood-copies",
        "evidently",
        {
            "rows": [
                {
                    "record_id": "a",
                    "output": 1,
                    "likelihood": {"a": 1},
                    "metadata": {"invarlock_likelihood": {"a": 2}},
                }
            ]
        },
        "likelihood_mismatch",
    ),
    (
        "garak-entry-type",
        "garak",
        _with(_GARAK, [{"entry_type": "digest"}], "attempts"),
        "invalid_field",
    ),
    (
        "garak-status-order",
        "garak",
        _with(_GARAK, list(reversed(_GARAK["attempts"])), "attempts"),
        "invalid_field",
    ),
    (
        "garak-source-cases",
        "garak",
        _with(_GARAK, _GARAK["source_cases"][:3], "source_cases"),
        "invalid_id",
    ),
    (
        "garak-detector-length",
        "garak",
        _with(_GARAK, {"d": [1.0]}, "attempts", 2, "detector_results"),
        "invalid_field",
    ),
    (
        "openai-two-samplings",
        "openai-evals",
        _with(_OPENAI, [_without(_OPENAI["events"][0], "event_id")] * 2, "events"),
        "ambiguous_output",
    ),
    (
        "openai-no-sample",
        "openai-evals",
        [{"sample_id": "s", "type": "match", "data": {"correct": True}}],
        "output_required",
    ),
    (
        "openai-run-ids",
        "openai-evals",
        [
            {"run_id": "a", "sample_id": "s", "type": "sampling", "data": {"sampled": "x"}},
            {"run_id": "b", "sample_id": "t", "type": "sampling", "data": {"sampled": "x"}},
        ],
        "invalid_field",
    ),
    (
        "openai-run-ids-number-types",
        "openai-evals",
        [
            {"run_id": 1, "sample_id": "s", "type": "sampling", "data": {"sampled": "x"}},
            {"run_id": 1.0, "sample_id": "t", "type": "sampling", "data": {"sampled": "x"}},
        ],
        "invalid_field",
    ),
    (
        "openai-event-ids",
        "openai-evals",
        [
            {"event_id": 1, "sample_id": "s", "type": "sampling", "data": {"sampled": "x"}},
            {"event_id": 1, "sample_id": "t", "type": "sampling", "data": {"sampled": "x"}},
        ],
        "invalid_field",
    ),
    ("openai-orphan-event", "openai-evals", [{"type": "sampling", "data": {}}], "invalid_field"),
    (
        "openai-correct-text",
        "openai-evals",
        [{"sample_id": "s", "type": "match", "data": {"correct": "yes", "sampled": "x"}}],
        "invalid_field",
    ),
    (
        "trulens-unknown-result",
        "trulens",
        {
            "records": [{"record_id": "a", "output": 1}],
            "feedback_columns": [],
            "feedback_results": [{"record_id": "z", "name": "g", "result": 1}],
        },
        "invalid_id",
    ),
    (
        "trulens-no-columns",
        "trulens",
        {"records": [{"record_id": "a", "output": 1}]},
        "missing_field",
    ),
    ("harness-payload-object", "lm-evaluation-harness", {"x": 1}, "invalid_document"),
    ("promptfoo-payload-empty-object", "promptfoo", {"x": 1}, "invalid_document"),
    (
        "langfuse-native-run-name",
        "langfuse",
        _with(_native_doc("langfuse"), "other", "run_name"),
        "identity_mismatch",
    ),
]


@pytest.mark.parametrize(
    ("profile", "document", "code"),
    [pytest.param(p, d, c, id=name) for name, p, d, c in _PROFILE_RULES],
)
def test_profile_refusal(profile: str, document: Any, code: str, tmp_path: Path) -> None:
    assert _code(lambda: _native(tmp_path, profile, document)) == code


def test_profile_json_equality_ignores_member_order_only(tmp_path: Path) -> None:
    """Run ids (and aliases, likelihood copies) agree as JSON values: equal canonical bytes."""
    sampled = {"type": "sampling", "data": {"sampled": "x"}}
    events = [
        {"run_id": {"a": 1, "b": [2.5]}, "sample_id": "s", **sampled},
        {"run_id": {"b": [2.5], "a": 1}, "sample_id": "t", **sampled},
    ]
    run = _native(tmp_path, "openai-evals", events)
    assert [record.id for record in run.records] == ["s", "t"]
    assert same({"a": 1, "b": [2.5, None]}, {"b": [2.5, None], "a": 1})
    for left, right in ((1, 1.0), (1, True), (0, False), (0.0, -0.0), ("1", 1), ([1], (1, 2))):
        assert not same(left, right)


def test_identity_rules(tmp_path: Path) -> None:
    lm = _vector_text("lm-eval-samples-generation")
    # identities are required for every adapter but invarlock ...
    for missing in ("source", "run_id", "artifact_digest"):
        partial = {key: value for key, value in IDENTITY.items() if key != missing}
        path = tmp_path / f"no-{missing}.jsonl"
        path.write_text(lm, encoding="utf-8")
        with pytest.raises(ImportRefusalError) as caught:
            load_run(path, "lm-eval-samples", **partial)
        assert (caught.value.code, caught.value.field) == ("identities_required", missing)
    # ... which refuses every one of them
    canonical = tmp_path / "run.json"
    canonical.write_text(_vector_text("invarlock-canonical"), encoding="utf-8")
    overrides: dict[str, Any] = {
        "source": SOURCE,
        "run_id": "r",
        "artifact_digest": ARTIFACT,
        "service_identity": {},
        "score_provenance": {},
        "input_projection": {"kind": "json-pointer", "pointer": "/input"},
    }
    for name, value in overrides.items():
        for adapter in ("invarlock", AUTO):
            assert _code(load_run, canonical, adapter, **{name: value}) == ("identity_override")
    # evaluator-json: the caller's run id must be the envelope's
    envelope = _vector_text("evaluator-json-ragas")
    declared = json.loads(envelope)
    source = {"name": declared["evaluator"], "version": declared["source_version"]}
    assert _load(tmp_path, envelope, "evaluator-json", source=source, run_id=declared["run_id"])
    assert _code(
        lambda: _load(tmp_path, envelope, "evaluator-json", source=source, run_id="other")
    ) == ("export_identity_mismatch")
    assert _code(
        lambda: _load(tmp_path, envelope, "evaluator-json", source=None, run_id=declared["run_id"])
    ) == ("export_identity_mismatch")
    # evaluator-native-json: source and run id up front, before anything else
    assert _code(lambda: _load(tmp_path, "[]", "evaluator-native-json", source=None)) == (
        "identities_required"
    )
    # langfuse-json without a source is an identity mismatch (checked first)
    assert _code(lambda: _load(tmp_path, json.dumps(_LANGFUSE), "langfuse-json", source=None)) == (
        "identity_mismatch"
    )


def test_file_refusals(tmp_path: Path) -> None:
    missing = tmp_path / "missing.jsonl"
    assert _code(lambda: load_run(missing, "jsonl", **IDENTITY)) == "not_found"
    assert _code(lambda: load_run(tmp_path, "jsonl", **IDENTITY)) == "not_regular_file"
    real = tmp_path / "real.jsonl"
    real.write_text(_vector_text("jsonl-basic"), encoding="utf-8")
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    for adapter in ("jsonl", "evaluator-json", AUTO):
        assert _code(load_run, link, adapter, **IDENTITY) == "not_regular_file"
    assert _code(lambda: load_run(real, "csv", **IDENTITY)) == "unknown_adapter"
    assert _code(lambda: load_run(real, 3, **IDENTITY)) == "unknown_adapter"  # type: ignore[arg-type]
    assert _code(lambda: load_run(real, "jsonl", **IDENTITY, limits="x")) == (  # type: ignore[arg-type]
        "adapter_option_invalid"
    )
    # a line longer than max_line_bytes
    options = ImportOptions(max_line_bytes=16)
    assert _code(lambda: load_run(real, "jsonl", **IDENTITY, options=options)) == "too_large"
    # compatibility mode caps streamed sources at 128 MiB, as the reference does
    sparse = tmp_path / "sparse.jsonl"
    with sparse.open("wb") as handle:
        handle.truncate(INVARLOCK_LIMITS.max_file_bytes + 1)
    with pytest.raises(ImportRefusalError) as caught:
        load_run(sparse, "jsonl", **IDENTITY, limits=INVARLOCK_LIMITS)
    assert caught.value.code == "too_large"


def test_record_cap_is_a_compatibility_limit(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    path.write_text(
        "".join(f'{{"id":"r{i}","input":{i},"expected":0,"output":0}}\n' for i in range(50_001)),
        encoding="utf-8",
    )
    with pytest.raises(CapturedRunError) as caught:
        load_run(path, "jsonl", **IDENTITY, limits=INVARLOCK_LIMITS)
    assert caught.value.code == "too_many_records"
    run = load_run(path, "jsonl", **IDENTITY)
    assert len(run) == 50_001
    assert run.ids[-1] == "r50000"


# ---------------------------------------------------------------------------
# Accepted shapes the vectors do not show


def test_lm_eval_output_rules(tmp_path: Path) -> None:
    facts = _facts({"q": "c"}, " Paris")
    rows = [
        _lm_row(doc_id=1, error="boom", filtered_resps=None),
        _lm_row(doc_id=2, error={"message": "x"}, filtered_resps=[None]),
        _lm_row(
            doc_id=3,
            doc={"q": "c"},
            target=" Paris",
            filtered_resps=[None],
            metadata={"invarlock_likelihood": facts},
        ),
        _lm_row(doc_id="four", filtered_resps=[[["nested"]]], target=7, metadata=None),
        _lm_row(
            doc_id=5,
            doc={"q": "c"},
            target=" Paris",
            arguments=[["Q", " Paris"]],
            filtered_resps=[[-1.5, False]],
            metadata={"invarlock_likelihood": facts, "invarlock_id": "ignored"},
        ),
        _lm_row(doc_id=6, metadata={"invarlock_scores": {"exact_match": 1}, "n": 1}),
    ]
    run = _load(tmp_path, _jsonl(rows), "lm-eval-samples")
    records = run.to_dict()["records"]
    assert [r["id"] for r in records] == ["1", "2", "3", "four", "5", "6"]
    assert [r["output"] for r in records] == [None, None, None, "nested", None, "Paris"]
    assert [r["error"] for r in records] == [
        "upstream_error",
        "upstream_error",
        None,
        None,
        None,
        None,
    ]
    assert records[3]["scores"] == {"exact_match": 1.0, "target": 7}  # a numeric target scores
    assert records[4]["likelihood"]["logprob_sum"] == -1.5
    assert json.dumps(records[5]["scores"]["exact_match"]) == "1"  # explicit value, its type
    assert records[5]["metadata"] == {}


def test_lm_eval_nan_metric_is_a_missing_score(tmp_path: Path) -> None:
    text = _jsonl([_lm_row(doc_id=1), _lm_row(doc_id=2)])
    text = text.replace('"exact_match": 1.0', '"exact_match": NaN', 1)
    run = _load(tmp_path, text, "lm-eval-samples")
    first, second = run.to_dict()["records"]
    assert "exact_match" not in first["scores"]
    assert first["context"]["upstream_record"]["exact_match"] is None
    assert second["scores"]["exact_match"] == 1.0
    assert run.source_digest == digest_bytes(text.encode("utf-8"))
    refused = ImportOptions(nan_as_missing_score=False)
    assert _code(lambda: _load(tmp_path, text, "lm-eval-samples", options=refused)) == (
        "non_finite_number"
    )
    # every other format refuses NaN whatever the option says
    nan_row = '{"id": "a", "input": 1, "expected": 1, "output": 1, "scores": {"s": NaN}}\n'
    assert _code(lambda: _load(tmp_path, nan_row, "jsonl")) == "non_finite_number"


def test_inspect_profile_skips_non_numeric_grades_and_keeps_errors(tmp_path: Path) -> None:
    log = _inspect(scores={"grade": {"value": "B"}, "n": 2})
    run = _native(tmp_path, "inspect-ai", log)
    assert run.to_dict()["records"][0]["scores"] == {"n": 2.0}
    facts = _facts("Name the place", "Paris")
    log = _inspect(output=None, metadata={"invarlock_likelihood": facts})
    record = _load(tmp_path, json.dumps(log), "inspect-json").to_dict()["records"][0]
    assert record["output"] is None
    assert record["likelihood"]["input_digest"] == facts["input_digest"]


def test_garak_incomplete_and_generated_ids(tmp_path: Path) -> None:
    document = {
        "entries": [
            {"entry_type": "start_run", "run": "r"},
            {"entry_type": "attempt", "uuid": "u1", "status": 1, "prompt": "plain", "outputs": []},
            {
                "entry_type": "attempt",
                "uuid": "u2",
                "status": 2,
                "prompt": {"turns": [{"role": "user", "content": {"text": "t"}}]},
                "outputs": [None, {"text": "x", "data_path": "img.png"}],
                "detector_results": {"d": [0, True]},
            },
        ]
    }
    records = _native(tmp_path, "garak", document).to_dict()["records"]
    assert [r["id"] for r in records] == ["u1:0", "u2:0", "u2:1"]
    assert [r["error"] for r in records] == [
        "Garak attempt incomplete",
        "Garak generation returned no output",
        None,
    ]
    assert records[0]["input"] == "plain"
    assert records[1]["input"] == "t"
    assert records[2]["output"] == {"text": "x", "data_path": "img.png"}
    assert records[2]["scores"] == {"d": 1.0}
    assert records[0]["context"]["upstream_summary"]["report_entries"][0]["run"] == "r"


def test_openai_evals_errors_and_metrics(tmp_path: Path) -> None:
    events = [
        {"sample_id": "s", "type": "error", "data": {"message": "a"}},
        {"sample_id": "s", "type": "error", "data": "b"},
        {"sample_id": "t", "type": "sampling", "data": {"prompt": "p", "sampled": "x"}},
        {"sample_id": "t", "type": "metrics", "data": {"f1": 0.5}},
        {"type": "final_report", "data": {}},
    ]
    records = _native(tmp_path, "openai-evals", events).to_dict()["records"]
    assert [(r["id"], r["error"], r["output"]) for r in records] == [
        ("s", "a; b", None),
        ("t", None, "x"),
    ]
    assert records[1]["scores"] == {"f1": 0.5}


def test_pydantic_mlflow_trulens_shapes(tmp_path: Path) -> None:
    pydantic = {"cases": [{"name": "a", "inputs": 1, "output": 2, "error": {"msg": "m"}}]}
    record = _native(tmp_path, "pydantic-evals", pydantic).to_dict()["records"][0]
    assert record["error"] == "m"
    assert "upstream_summary" not in record["context"]
    mlflow = {
        "tables": {"eval_results_table": [{"record_id": "a", "prediction": "p", "s/score": None}]},
        "score_columns": ["q"],
        "metrics": {"m": 1},
        "other": {"keep": True},
    }
    record = _native(tmp_path, "mlflow", mlflow).to_dict()["records"][0]
    assert record["scores"] == {}
    assert record["context"]["upstream_summary"] == {
        "score_columns": ["q"],
        "metrics": {"m": 1},
        "other": {"keep": True},
    }
    trulens = {
        "records": [{"record_id": "a", "main_error": "e", "meta": None}],
        "feedback_columns": ["f"],
    }
    record = _native(tmp_path, "trulens", trulens).to_dict()["records"][0]
    assert (record["error"], record["output"], record["metadata"]) == ("e", None, {})


# ---------------------------------------------------------------------------
# Auto-detection


def test_auto_detects_each_specified_format(tmp_path: Path) -> None:
    samples = {
        "invarlock": _vector_text("invarlock-canonical"),
        "jsonl": _vector_text("jsonl-basic"),
        "lm-eval-samples": _vector_text("lm-eval-samples-generation"),
        "promptfoo-jsonl": _vector_text("promptfoo-jsonl-failure-reasons"),
        "inspect-json": json.dumps(_vector_doc("inspect-json-v2"), indent=2),
        "langfuse-json": json.dumps(_LANGFUSE, indent=2),
        "evaluator-json": _vector_text("evaluator-json-ragas"),
    }
    for adapter, text in samples.items():
        path = tmp_path / f"{adapter}.data"  # the name says nothing
        path.write_text(text, encoding="utf-8")
        assert detect_adapter(path) == adapter
    ragas = _vector_case("evaluator-json-ragas")
    identity = _vector_identity("evaluator-json-ragas")
    run = load_run(tmp_path / "evaluator-json.data", AUTO, **identity, artifact_digest=ARTIFACT)
    assert len(run) == ragas["expected"]["record_count"]
    # a first object longer than the head is still recognised by its leading members
    long_row = _lm_row(doc={"question": "x" * 100_000})
    path = tmp_path / "long.jsonl"
    path.write_text(_jsonl([long_row]), encoding="utf-8")
    assert detect_adapter(path) == "lm-eval-samples"


def test_auto_refuses_unknown_and_ambiguous_formats(tmp_path: Path) -> None:
    unknown = {
        "csv": "id,input\n1,2\n",
        "array": "[1, 2]",
        "empty": "",
        "binary": b"\x00\xff\xfe",
        "other-object": '{"hello": "world"}',
    }
    for name, text in unknown.items():
        path = tmp_path / name
        path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
        assert _code(detect_adapter, path) == "unknown_format"
        assert _code(load_run, path, AUTO, **IDENTITY) == "unknown_format"
    ambiguous = tmp_path / "both.jsonl"
    ambiguous.write_text(_jsonl([{**_lm_row(), "testCase": {"vars": {}}}]), encoding="utf-8")
    assert _code(lambda: detect_adapter(ambiguous)) == "ambiguous_format"
    destination = tmp_path / "run.json"
    assert (
        _code(lambda: import_run_streaming(ambiguous, destination, adapter=AUTO, **IDENTITY))
        == "ambiguous_format"
    )
    assert not destination.exists()


# ---------------------------------------------------------------------------
# The registry and the Importer protocol


def test_registry_and_protocol(tmp_path: Path) -> None:
    names = adapter_names()
    assert names[: len(SPECIFIED_ADAPTERS)] == SPECIFIED_ADAPTERS
    assert AUTO not in names
    assert len(set(names)) == len(names)
    for name in names:
        importer = get_importer(name)
        assert isinstance(importer, Importer)
        assert importer.name == name
    try:
        from sealeval.captured.importers.native import NATIVE_IMPORTERS  # noqa: PLC0415
    except ImportError:  # the native package is not there yet
        NATIVE_IMPORTERS = ()  # noqa: N806
    for native in NATIVE_IMPORTERS:
        assert importers()[native.name] is native
    # the protocol path yields the same records (without caller identities)
    path = tmp_path / "samples.jsonl"
    path.write_text(_vector_text("lm-eval-samples-generation"), encoding="utf-8")
    rows = list(get_importer("lm-eval-samples").records(path, ImportOptions()))
    run = load_run(path, "lm-eval-samples", **IDENTITY)
    assert [row["id"] for row in rows] == list(run.ids)
    envelope = tmp_path / "export.json"
    envelope.write_text(_vector_text("evaluator-json-ragas"), encoding="utf-8")
    assert len(list(get_importer("evaluator-json").records(envelope, ImportOptions()))) == 3
    native = tmp_path / "native.json"
    native.write_text(json.dumps(_native_doc("langfuse")), encoding="utf-8")
    options = ImportOptions(source_name="langfuse")
    assert len(list(get_importer("evaluator-native-json").records(native, options))) == 2
    assert _code(
        lambda: list(get_importer("evaluator-native-json").records(native, ImportOptions()))
    ) == ("identities_required")
    canonical = tmp_path / "run.json"
    canonical.write_text(_vector_text("invarlock-canonical"), encoding="utf-8")
    assert len(list(get_importer("invarlock").records(canonical, ImportOptions()))) == 2


# ---------------------------------------------------------------------------
# Streaming


def test_streaming_refuses_a_source_that_changes(tmp_path: Path) -> None:
    path = tmp_path / "source.jsonl"
    text = _vector_text("jsonl-basic")
    path.write_text(text, encoding="utf-8")
    destination = tmp_path / "run.json"

    def progress(completed: int, total: int) -> None:
        if completed == len(text.encode("utf-8")) and total == 2 * completed:
            path.write_text(text.replace("fox", "cat"), encoding="utf-8")  # same length

    with pytest.raises(ImportRefusalError) as caught:
        import_run_streaming(path, destination, adapter="jsonl", progress=progress, **IDENTITY)
    assert caught.value.code == "source_changed"
    assert not destination.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["source.jsonl"]


def test_streaming_output_is_exclusive(tmp_path: Path) -> None:
    path = tmp_path / "source.jsonl"
    path.write_text(_vector_text("jsonl-basic"), encoding="utf-8")
    destination = tmp_path / "run.json"
    destination.write_bytes(b"keep")
    with pytest.raises(OutputError) as caught:
        import_run_streaming(path, destination, adapter="jsonl", **IDENTITY)
    assert caught.value.code == "output_exists"
    assert destination.read_bytes() == b"keep"
    with pytest.raises(OutputError):
        import_run_streaming(path, tmp_path / "no" / "run.json", adapter="jsonl", **IDENTITY)


def _peak_streaming(tmp_path: Path, count: int) -> int:
    path = tmp_path / f"rows-{count}.jsonl"
    filler = "lorem ipsum " * 700  # ~8 KiB per record
    with path.open("w", encoding="utf-8") as handle:
        for index in range(count):
            handle.write(
                json.dumps({"id": f"r{index}", "input": filler, "expected": "x", "output": "y"})
                + "\n"
            )
    destination = tmp_path / f"run-{count}.json"
    tracemalloc.start()
    try:
        import_run_streaming(path, destination, adapter="jsonl", **IDENTITY)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (
        read_run(destination).digest
        == "sha256:" + hashlib.sha256(destination.read_bytes()).hexdigest()
    )
    return peak


def test_streaming_memory_does_not_grow_with_written_text(tmp_path: Path) -> None:
    small = _peak_streaming(tmp_path, 300)
    large = _peak_streaming(tmp_path, 1_500)  # ~12 MB of record text
    assert large < small + 1_000_000  # only the id set grows (~100 bytes per record)


# ---------------------------------------------------------------------------
# Never echo


def test_refusals_never_echo_canaries(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    folder = tmp_path / CANARY
    folder.mkdir()
    canary_row = {
        "id": CANARY,
        "input": CANARY,
        "expected": CANARY,
        "output": CANARY,
        "metadata": {CANARY: CANARY},
    }
    bad_sources: dict[str, tuple[str, str]] = {
        "unknown-field": ("jsonl", _jsonl([{**canary_row, CANARY: 1}])),
        "duplicate": ("jsonl", _jsonl([canary_row, canary_row])),
        "invalid-line": ("jsonl", f'{{"{CANARY}": \n'),
        "id-too-long": ("jsonl", _jsonl([{**canary_row, "id": CANARY * 10}])),
        "lm-eval": ("lm-eval-samples", _jsonl([_lm_row(filtered_resps=[CANARY, CANARY])])),
        "promptfoo": ("promptfoo-jsonl", _jsonl([_promptfoo(failureReason=CANARY)])),
        "inspect": ("inspect-json", json.dumps(_inspect(scores={CANARY: {"value": CANARY}}))),
        "langfuse": ("langfuse-json", json.dumps({**_LANGFUSE, CANARY: CANARY})),
        "auto": (AUTO, f'{{"{CANARY}": "{CANARY}"}}'),
    }
    for name, (adapter, text) in bad_sources.items():
        path = folder / f"{CANARY}-{name}.jsonl"
        path.write_text(text, encoding="utf-8")
        streamed = folder / f"{CANARY}.json"
        identity = {**IDENTITY, "run_id": CANARY}
        for call, arguments in (
            (load_run, {"adapter": adapter, **identity}),
            (import_run_streaming, {"destination": streamed, "adapter": adapter, **identity}),
        ):
            with pytest.raises(SealevalError) as caught:
                call(path, **arguments)  # type: ignore[operator]
            for shown in (str(caught.value), repr(caught.value), caught.value.field or ""):
                assert CANARY not in shown, name
    good = folder / f"{CANARY}.jsonl"
    good.write_text(_jsonl([canary_row]), encoding="utf-8")
    run = load_run(good, "jsonl", **{**IDENTITY, "run_id": CANARY})
    summary = import_run_streaming(good, folder / "out.json", adapter=AUTO, **IDENTITY)
    for shown in (repr(run), repr(summary), repr(get_importer("jsonl")), repr(PROFILES["garak"])):
        assert CANARY not in shown
    assert CANARY not in caplog.text
    assert not os.path.exists(folder / f"{CANARY}.json")


# ---------------------------------------------------------------------------
# Property: JSONL import equals make_run of the same records

_TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=12)
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)
_RECORD = st.fixed_dictionaries(
    {"input": _JSON, "expected": _JSON, "output": _JSON},
    optional={
        "scores": st.dictionaries(
            _TEXT,
            st.integers(min_value=-(2**53), max_value=2**53)
            | st.floats(allow_nan=False, allow_infinity=False),
            max_size=3,
        ),
        "metadata": st.dictionaries(_TEXT, st.text(max_size=8), max_size=3),
        "error": st.none() | st.text(max_size=8),
        "context": _JSON,
    },
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    records=st.lists(_RECORD, min_size=1, max_size=8),
    ids=st.lists(_TEXT, min_size=8, max_size=8, unique=True),
    ascii_only=st.booleans(),
    blank_every=st.integers(min_value=0, max_value=3),
)
def test_jsonl_import_equals_make_run(
    records: list[dict[str, Any]],
    ids: list[str],
    ascii_only: bool,
    blank_every: int,
    tmp_path: Path,
) -> None:
    rows = [{"id": ids[index], **record} for index, record in enumerate(records)]
    lines: list[str] = []
    for index, row in enumerate(rows):
        if blank_every and index % blank_every == 0:
            lines.append(" \t\r\n")
        lines.append(json.dumps(row, ensure_ascii=ascii_only) + "\n")
    data = "".join(lines).encode("utf-8")
    path = tmp_path / "property.jsonl"
    path.write_bytes(data)
    run = load_run(path, "jsonl", **IDENTITY)
    expected = make_run(json.loads(json.dumps(rows)), **IDENTITY, source_digest=digest_bytes(data))
    assert run.digest == expected.digest
    assert run.ids == tuple(row["id"] for row in rows)
    destination = tmp_path / "property.run.json"
    destination.unlink(missing_ok=True)
    summary = import_run_streaming(path, destination, adapter="jsonl", **IDENTITY)
    assert summary.run_digest == expected.digest
    destination.unlink()


def test_limits_are_arguments(tmp_path: Path) -> None:
    text = _vector_text("jsonl-basic")
    capped = Limits(max_records=2)
    assert _code(lambda: _load(tmp_path, text, "jsonl", limits=capped)) == "too_many_records"
    destination = tmp_path / "run.json"
    path = tmp_path / "source.data"
    assert _code(
        lambda: import_run_streaming(path, destination, adapter="jsonl", limits=capped, **IDENTITY)
    ) == ("too_many_records")
    assert not destination.exists()
    assert _code(lambda: _load(tmp_path, text, "jsonl", limits=Limits(max_canonical_bytes=10))) == (
        "too_large"
    )
