"""Evaluator exports, capture with input projection, and input capabilities."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from _vectors import PROJECT_ROOT, cases, load
from sealeval._validate import thaw_json
from sealeval.canonical import digest_bytes
from sealeval.captured import (
    EVALUATOR_NAMES,
    INVARLOCK_LIMITS,
    CapturedRunError,
    EvaluatorExport,
    EvaluatorProfile,
    Limits,
    Record,
    Source,
    capture_evaluator_run,
    evaluator_export_from_document,
    evaluator_input_capabilities,
    export_evaluator_result,
    make_run,
    parse_evaluator_export,
    read_evaluator_export,
    run_from_document,
    run_from_evaluator_export,
)
from sealeval.captured.export import BATCH_PROFILES, DELEGATING_PROFILES, SCALAR_PROFILES
from sealeval.errors import CanonicalError, OutputError

CONTRACTS = PROJECT_ROOT / "contracts"
EXPORT_SCHEMA = Draft202012Validator(
    json.loads((CONTRACTS / "invarlock.evaluator-export-v1.schema.json").read_text("utf-8"))
)
RUN_SCHEMA = Draft202012Validator(
    json.loads((CONTRACTS / "invarlock.evaluation-run-v1.schema.json").read_text("utf-8"))
)
ARTIFACT = "sha256:2d242308f097c11c0e1d2363d17b07069ac1e3aa2aee55317f76d083f9057fa0"
SOURCE = {"name": "acme-harness", "version": "3.1.4"}
CANARY = "PHI-CANARY-7f3a-jane-doe-MRN-0042"

# Batch profiles whose native result holds tables as {columns, data}; their export
# payload holds row lists. The conversion is the profile's (importers' work).
_TABLE_NORMALIZED = frozenset({"mlflow", "trulens"})


class VectorProfile:
    """Stands in for an importer's profile: the payload and records the reference produced.

    The envelope, bytes, identity checks, capture and membership checks under test
    are sealeval's; mapping a native payload to records is the importers' and is
    replayed from the vector's expected run here.
    """

    def __init__(self, complete: dict[str, Any]) -> None:
        self.evaluator = complete["input"]["evaluator"]
        self.payload = json.loads(complete["expected"]["export_text"])["payload"]
        self.mapped = complete["expected"]["run"]["records"]

    def native_payload(self, result: object) -> object:
        if self.evaluator in _TABLE_NORMALIZED:
            assert result != self.payload
            return self.payload
        return result

    def records(self, export: EvaluatorExport) -> Iterable[Mapping[str, Any]]:
        assert export.evaluator == self.evaluator
        assert thaw_json(export.payload) == self.payload
        return self.mapped


def _profiles() -> dict[str, EvaluatorProfile]:
    found: dict[str, EvaluatorProfile] = {}
    for case in load("invarlock/evaluator_exports.json")["cases"]:
        if case["name"].endswith("-complete"):
            found[case["input"]["evaluator"]] = VectorProfile(case)
    return found


PROFILES = _profiles()

_MESSAGE_CODES = (
    ("export does not contain exactly the expected case IDs", "export_ids_mismatch"),
    ("unsupported evaluator", "unsupported_evaluator"),
    ("expected_ids must be a bounded nonempty list of unique string IDs", "invalid_expected_ids"),
)


def message_code(message: str) -> str:
    matches = [code for prefix, code in _MESSAGE_CODES if message.startswith(prefix)]
    assert len(matches) == 1, "vector error message not understood"
    return matches[0]


def _export(case_input: dict[str, Any], destination: Path, **overrides: Any) -> Any:
    arguments = {
        "expected_ids": case_input["expected_ids"],
        "source_version": case_input["source_version"],
        "run_id": case_input["run_id"],
        "artifact_digest": case_input["artifact_digest"],
        "profiles": PROFILES,
    }
    arguments.update(overrides)
    return export_evaluator_result(
        case_input["evaluator"], case_input["result"], destination, **arguments
    )


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


class _Raising:
    def __init__(self, where: str) -> None:
        self.where = where

    def native_payload(self, result: object) -> object:
        if self.where == "payload":
            raise KeyError(CANARY)
        if self.where == "sealeval-payload":
            raise CapturedRunError("invalid_type", "payload")
        return result

    def records(self, export: EvaluatorExport) -> Iterable[Mapping[str, Any]]:
        if self.where == "records":
            raise ValueError(CANARY)
        if self.where == "sealeval":
            raise CapturedRunError("invalid_type", "payload")
        return [{"id": "a", "input": "q", "expected": "e", "output": "o"}]


_AUTOEVALS = next(
    c["input"]
    for c in load("invarlock/evaluator_exports.json")["cases"]
    if c["name"] == "export-autoevals-complete"
)


def _export_with(destination: str = "unused-export.json", **overrides: Any) -> Any:
    return _export(_AUTOEVALS, Path(destination), **overrides)


def _simple_export(**changes: Any) -> EvaluatorExport:
    fields: dict[str, Any] = {
        "evaluator": "autoevals",
        "source_version": "1",
        "run_id": "r",
        "payload": [{"id": "a"}],
    }
    fields.update(changes)
    return EvaluatorExport(**fields)


def _import(profile: Any, **changes: Any) -> Any:
    arguments: dict[str, Any] = {
        "profiles": {"autoevals": profile},
        "source": {"name": "autoevals", "version": "1"},
        "run_id": "r",
        "source_digest": None,
        "artifact_digest": ARTIFACT,
    }
    arguments.update(changes)
    return run_from_evaluator_export(_simple_export(), **arguments)


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


_ENVELOPE = {
    "format": "invarlock/evaluator-export-v1",
    "evaluator": "autoevals",
    "source_version": "1",
    "run_id": "r",
    "payload": [{"id": "a"}],
}

EXPORT_REFUSALS: list[tuple[str, Callable[[], object], str]] = [
    (
        "export-evaluator-not-text",
        lambda: export_evaluator_result(
            1,  # type: ignore[arg-type]
            [],
            "x",
            expected_ids=["a"],
            source_version="1",
            run_id="r",
            profiles=PROFILES,
        ),
        "unsupported_evaluator",
    ),
    ("export-profile-missing", lambda: _export_with(profiles={}), "profile_unavailable"),
    ("export-profile-not-mapping", lambda: _export_with(profiles=[]), "invalid_type"),
    (
        "export-profile-raises",
        lambda: _export_with(profiles={"autoevals": _Raising("payload")}),
        "profile_failed",
    ),
    ("export-ids-empty", lambda: _export_with(expected_ids=[]), "invalid_expected_ids"),
    ("export-ids-string", lambda: _export_with(expected_ids="ae-0"), "invalid_expected_ids"),
    (
        "export-ids-duplicate",
        lambda: _export_with(expected_ids=["ae-0", "ae-0"]),
        "invalid_expected_ids",
    ),
    ("export-ids-number", lambda: _export_with(expected_ids=[0]), "invalid_expected_ids"),
    (
        "export-ids-over-limit",
        lambda: _export_with(expected_ids=list("abcdef"), limits=Limits(max_records=5)),
        "invalid_expected_ids",
    ),
    ("export-ids-subset", lambda: _export_with(expected_ids=["ae-0"]), "export_ids_mismatch"),
    ("export-too-large", lambda: _export_with(limits=Limits(max_file_bytes=64)), "too_large"),
    ("export-blank-version", lambda: _export_with(source_version=" \t"), "invalid_text"),
    (
        "export-payload-over-limit",
        lambda: _export_with(limits=Limits(max_records=2)),
        "too_many_records",
    ),
    (
        "envelope-unknown-evaluator",
        lambda: _simple_export(evaluator="my-evals"),
        "unsupported_evaluator",
    ),
    ("envelope-version-129", lambda: _simple_export(source_version="v" * 129), "invalid_text"),
    ("envelope-run-id-empty", lambda: _simple_export(run_id=""), "invalid_text"),
    ("envelope-payload-empty", lambda: _simple_export(payload=[]), "no_records"),
    ("envelope-payload-text", lambda: _simple_export(payload="x"), "invalid_type"),
    ("envelope-payload-nan", lambda: _simple_export(payload={"x": math.nan}), "invalid_json_value"),
    ("envelope-too-deep", lambda: _simple_export(payload=_nested(64)), "too_deep"),
    (
        "document-extra",
        lambda: evaluator_export_from_document({**_ENVELOPE, "note": 1}),
        "unknown_field",
    ),
    (
        "document-missing",
        lambda: evaluator_export_from_document(
            {k: v for k, v in _ENVELOPE.items() if k != "run_id"}
        ),
        "missing_field",
    ),
    (
        "document-format",
        lambda: evaluator_export_from_document({**_ENVELOPE, "format": "x"}),
        "invalid_constant",
    ),
    ("document-not-object", lambda: evaluator_export_from_document([]), "invalid_type"),
    (
        "document-payload-over-compat",
        lambda: evaluator_export_from_document(
            {**_ENVELOPE, "payload": [{}] * 50_001}, limits=INVARLOCK_LIMITS
        ),
        "too_many_records",
    ),
    (
        "import-not-an-export",
        lambda: run_from_evaluator_export(
            {}, profiles={}, source=SOURCE, run_id="r", source_digest=None
        ),
        "invalid_type",
    ),  # type: ignore[arg-type]
    (
        "import-source-differs",
        lambda: _import(_Raising("none"), source={"name": "autoevals", "version": "2"}),
        "export_identity_mismatch",
    ),
    (
        "import-run-id-differs",
        lambda: _import(_Raising("none"), run_id="other"),
        "export_identity_mismatch",
    ),
    ("import-profile-raises", lambda: _import(_Raising("records")), "profile_failed"),
    ("import-profile-refuses", lambda: _import(_Raising("sealeval")), "invalid_type"),
    (
        "export-profile-refuses",
        lambda: _export_with(profiles={"autoevals": _Raising("sealeval-payload")}),
        "invalid_type",
    ),
    (
        "import-needs-artifact-or-service",
        lambda: _import(_Raising("none"), artifact_digest=None),
        "artifact_digest_required",
    ),
    (
        "import-profile-unavailable",
        lambda: _import(_Raising("none"), profiles={}),
        "profile_unavailable",
    ),
    ("read-missing", lambda: read_evaluator_export(Path("/nonexistent/export.json")), "not_found"),
    ("capabilities-not-a-run", lambda: evaluator_input_capabilities({}), "invalid_type"),  # type: ignore[arg-type]
    (
        "capture-bad-projection",
        lambda: capture_evaluator_run(
            [],
            source=SOURCE,
            run_id="r",
            artifact_digest=ARTIFACT,
            input_projection={"pointer": "/input"},
        ),
        "invalid_projection",
    ),
]


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
