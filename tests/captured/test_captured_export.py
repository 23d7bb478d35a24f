"""Evaluator exports, capture with input projection, and input capabilities."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from sealeval.canonical import digest_bytes
from sealeval.captured import (
    EVALUATOR_NAMES,
    CapturedRunError,
    EvaluatorExport,
    Record,
    Source,
    capture_evaluator_run,
    evaluator_input_capabilities,
    make_run,
    parse_evaluator_export,
    read_evaluator_export,
    run_from_document,
    run_from_evaluator_export,
)
from sealeval.captured.export import BATCH_PROFILES, DELEGATING_PROFILES, SCALAR_PROFILES
from sealeval.errors import CanonicalError, OutputError
from support.captured_export import (
    _AUTOEVALS,
    EXPORT_REFUSALS,
    PROFILES,
    SOURCE,
    _export,
    _export_with,
    _import,
    _Raising,
    _simple_export,
)
from support.digests import ARTIFACT
from support.refusals import CANARY
from support.vectors import PROJECT_ROOT, cases, load, reference_code

CONTRACTS = PROJECT_ROOT / "contracts"
EXPORT_SCHEMA = Draft202012Validator(
    json.loads((CONTRACTS / "invarlock.evaluator-export-v1.schema.json").read_text("utf-8"))
)
RUN_SCHEMA = Draft202012Validator(
    json.loads((CONTRACTS / "invarlock.evaluation-run-v1.schema.json").read_text("utf-8"))
)

# Batch profiles whose native result holds tables as {columns, data}; their export
# payload holds row lists. The conversion is the profile's (importers' work).


_MESSAGE_CODES = (
    ("export does not contain exactly the expected case IDs", "export_ids_mismatch"),
    ("unsupported evaluator", "unsupported_evaluator"),
    ("expected_ids must be a bounded nonempty list of unique string IDs", "invalid_expected_ids"),
)


def message_code(message: str) -> str:
    return reference_code(message, _MESSAGE_CODES)


def test_profiles_cover_all_evaluators() -> None:
    assert set(PROFILES) == set(EVALUATOR_NAMES)
    assert len(EVALUATOR_NAMES) == 19
    assert sorted(DELEGATING_PROFILES + SCALAR_PROFILES + BATCH_PROFILES) == sorted(EVALUATOR_NAMES)


@pytest.mark.parametrize("case", cases("invarlock/evaluator_exports.json"))
def test_evaluator_export_vector(case: dict[str, Any], tmp_path: Path) -> None:
    case_input, expected = case["input"], case["expected"]
    destination = tmp_path / "export.json"
    if "error" in expected:
        if set(expected) - {"error", "file_written"}:
            pytest.fail("vector case shape not understood")
        code = message_code(expected["error"]["message"])
        with pytest.raises(CapturedRunError) as caught:
            _export(case_input, destination)
        assert caught.value.code == code
        assert not destination.exists()
        assert expected.get("file_written", False) is False
        assert list(tmp_path.iterdir()) == []
        return
    if set(expected) != {
        "export_text",
        "export_sha256",
        "run_canonical",
        "run",
        "run_digest",
        "source_digest",
        "record_count",
    }:
        pytest.fail("vector case shape not understood")
    run = _export(case_input, destination)
    data = destination.read_bytes()
    assert data == expected["export_text"].encode("utf-8")
    assert digest_bytes(data) == expected["export_sha256"] == expected["source_digest"]
    assert run.to_canonical() == expected["run_canonical"].encode("utf-8")
    assert run.digest == expected["run_digest"]
    assert run.source_digest == expected["source_digest"]
    assert len(run) == expected["record_count"]
    assert run.to_dict() == expected["run"]
    assert destination.stat().st_mode & 0o777 == 0o600
    EXPORT_SCHEMA.validate(json.loads(expected["export_text"]))
    RUN_SCHEMA.validate(expected["run"])
    # a later import of the file yields the identical run
    export, source_digest = read_evaluator_export(destination)
    assert export.to_bytes() == data
    assert source_digest == expected["source_digest"]
    again = run_from_evaluator_export(
        export,
        profiles=PROFILES,
        source=export.source,
        run_id=case_input["run_id"],
        source_digest=source_digest,
        artifact_digest=case_input["artifact_digest"],
    )
    assert again == run
    # the destination now exists: a second export refuses it before any work
    with pytest.raises(OutputError) as caught:
        _export(case_input, destination)
    assert caught.value.code == "output_exists"
    assert destination.read_bytes() == data


def test_every_message_shape_is_used() -> None:
    messages = [
        c["expected"]["error"]["message"]
        for c in load("invarlock/evaluator_exports.json")["cases"]
        if "error" in c["expected"]
    ]
    assert {message_code(m) for m in messages} == {code for _, code in _MESSAGE_CODES}


@pytest.mark.parametrize("case", cases("invarlock/capabilities.json"))
def test_capabilities_vector(case: dict[str, Any]) -> None:
    if set(case["input"]) != {"run"} or set(case["expected"]) != {
        "exact_match",
        "normalized_nll_per_utf8_byte",
        "judge",
    }:
        pytest.fail("vector case shape not understood")
    RUN_SCHEMA.validate(case["input"]["run"])
    result = evaluator_input_capabilities(run_from_document(case["input"]["run"])).to_dict()
    assert result == case["expected"]
    assert list(result) == list(case["expected"])
    for name, capability in result.items():
        assert list(capability) == list(case["expected"][name])


# ---------------------------------------------------------------------------
# Envelope


def test_envelope_bytes_keep_insertion_order_and_raw_text() -> None:
    export = EvaluatorExport(
        evaluator="autoevals",
        source_version="1",
        run_id="r",
        payload=[{"z": 1.0, "a": "é\n", "m": [1e16, -0.0, 5e-324]}],
    )
    assert (
        export.to_bytes()
        == (
            '{"format": "invarlock/evaluator-export-v1", "evaluator": "autoevals", '
            '"source_version": "1", "run_id": "r", "payload": [{"z": 1.0, "a": "é\\n", '
            '"m": [1e+16, -0.0, 5e-324]}]}'
        ).encode()
    )
    parsed = parse_evaluator_export(export.to_bytes())
    assert parsed.to_bytes() == export.to_bytes()
    assert parsed.entry_count == 1
    assert parsed.source == Source("autoevals", "1")
    assert export.to_dict()["payload"] == [{"z": 1.0, "a": "é\n", "m": [1e16, -0.0, 5e-324]}]
    assert "autoevals" in repr(export)


def test_capture_projects_and_binds() -> None:
    rows = [
        {"id": "a", "input": {"q": "text"}, "expected": "e", "output": "o"},
        {"id": CANARY, "input": {"q": "more"}, "expected": "e", "output": None, "error": ""},
    ]
    run = capture_evaluator_run(
        rows,
        source=SOURCE,
        run_id="r",
        artifact_digest=ARTIFACT,
        source_digest=digest_bytes(b"raw"),
        input_projection={"kind": "json-pointer", "pointer": "/input/q"},
    )
    assert [r.input for r in run.records] == ["text", "more"]
    assert run.records[1].errored
    assert run == make_run(
        rows,
        source=SOURCE,
        run_id="r",
        artifact_digest=ARTIFACT,
        source_digest=digest_bytes(b"raw"),
        input_projection={"kind": "json-pointer", "pointer": "/input/q"},
    )
    capabilities = evaluator_input_capabilities(run)
    assert capabilities.judge.usable_count == 1
    assert capabilities.judge.unavailable_ids == (CANARY,)
    assert CANARY not in repr(capabilities)
    assert CANARY not in repr(capabilities.judge)


@pytest.mark.parametrize(
    ("name", "action", "code"), EXPORT_REFUSALS, ids=[row[0] for row in EXPORT_REFUSALS]
)
def test_export_refusal(
    name: str,
    action: Callable[[], object],
    code: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CapturedRunError) as caught:
        action()
    assert caught.value.code == code, name
    assert list(tmp_path.iterdir()) == []


def test_export_strict_json_and_existing_destination(tmp_path: Path) -> None:
    with pytest.raises(CanonicalError):
        parse_evaluator_export(b'{"format": 1, "format": 2}')
    with pytest.raises(CanonicalError):
        parse_evaluator_export(b"\xff")
    existing = tmp_path / "export.json"
    existing.write_bytes(b"keep")
    calls: list[object] = []

    class Counting:
        def native_payload(self, result: object) -> object:
            calls.append(result)
            return result

        def records(self, export: EvaluatorExport) -> list[Record]:
            return []

    with pytest.raises(OutputError):
        _export(_AUTOEVALS, existing, profiles={"autoevals": Counting()})
    assert existing.read_bytes() == b"keep"


def test_export_refusals_never_echo(tmp_path: Path) -> None:
    actions = [
        lambda: _export_with(
            str(tmp_path / CANARY / "x.json"), profiles={"autoevals": _Raising("payload")}
        ),
        lambda: _import(_Raising("records")),
        lambda: _export_with(expected_ids=[CANARY, CANARY]),
        lambda: _export_with(expected_ids=[CANARY]),
        lambda: _simple_export(evaluator=CANARY),
        lambda: _simple_export(source_version=CANARY + "\n"),
        lambda: _import(_Raising("none"), source={"name": CANARY, "version": "1"}),
    ]
    for action in actions:
        with pytest.raises(CapturedRunError) as caught:
            action()
        error = caught.value
        for text in (str(error), repr(error)):
            assert CANARY not in text
        assert error.__cause__ is None
        assert error.__suppress_context__ or error.__context__ is None
    assert CANARY not in repr(_simple_export(run_id=CANARY, payload={CANARY: CANARY}))
