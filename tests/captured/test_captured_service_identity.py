"""Hosted service identity: the closed descriptor, its digest, and its run bindings."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from sealeval.canonical import digest_invarlock
from sealeval.captured import (
    CapturedRunError,
    Harness,
    ObservationWindow,
    ServiceIdentity,
    evaluated_subject_digest,
    make_run,
    validate_service_identity,
)
from sealeval.captured.service_identity import parse_utc_timestamp
from support.captured_service_identity import (
    IDENTITY_REFUSALS,
    _create_arguments,
    _window,
    _with_configuration,
    valid_identity,
)
from support.digests import ARTIFACT
from support.refusals import assert_refused
from support.vectors import PROJECT_ROOT, cases, load, reference_code

CONTRACTS = PROJECT_ROOT / "contracts"
IDENTITY_SCHEMA = json.loads(
    (CONTRACTS / "invarlock.service-identity.schema.json").read_text(encoding="utf-8")
)
RUN_SCHEMA = json.loads(
    (CONTRACTS / "invarlock.evaluation-run-v1.schema.json").read_text(encoding="utf-8")
)


def _recipe_identity(recipe: str) -> dict[str, Any]:
    """Build the identity a vector's recipe describes (only the recipes this file knows)."""
    if recipe == (
        "valid identity with configuration {'blob': 'x'*1048576} and its matching "
        "configuration_digest"
    ):
        return _with_configuration({"blob": "x" * 1_048_576})
    pytest.fail("vector recipe not understood")


# The reference's messages quote values (sealeval never does); each message shape maps
# to the closed code sealeval raises. An unknown message fails the test.
_MESSAGE_CODES: tuple[tuple[str, str, str], ...] = (
    ("service_identity configuration digest differs", "", "configuration_digest_mismatch"),
    ("service_identity observation window is reversed", "", "reversed_window"),
    ("service_identity requires valid UTC timestamps", "", "invalid_timestamp"),
    ("service_identity exceeds the 1 MiB byte limit", "", "too_large"),
    ("service_identity must be an object", "", "invalid_type"),
    ("invalid service_identity: ", "{4}-", "invalid_timestamp"),
    ("invalid service_identity: ", "does not match '^(?!", "invalid_text"),
    ("invalid service_identity: ", "does not match '^sha256:", "invalid_digest"),
    ("invalid service_identity: ", "is too long", "invalid_text"),
    ("invalid service_identity: ", "Additional properties are not allowed", "unknown_field"),
    ("invalid service_identity: ", "is a required property", "missing_field"),
    ("invalid service_identity: ", "was expected", "invalid_constant"),
    ("invalid service_identity: ", "has too many properties", "too_many_members"),
    ("invalid run artifact_digest: ", "is not of type 'null'", "artifact_digest_forbidden"),
    ("invalid run artifact_digest: ", "None is not of type 'string'", "artifact_digest_required"),
    (
        "invalid run records.",
        ".likelihood.artifact_digest: ",
        "artifact_digest_forbidden",
    ),
    (
        "record ",
        "likelihood service_identity_digest binding differs",
        "likelihood_binding_mismatch",
    ),
    ("record ", "likelihood service configuration binding differs", "likelihood_binding_mismatch"),
)


def message_code(message: str) -> str:
    return reference_code(message, _MESSAGE_CODES)


def _make(case_input: dict[str, Any]) -> Any:
    return make_run(
        case_input["records"],
        source=case_input["source"],
        run_id=case_input["run_id"],
        artifact_digest=case_input["artifact_digest"],
        service_identity=case_input.get("service_identity"),
    )


@pytest.mark.parametrize("case", cases("invarlock/service_identity.json"))
def test_service_identity_vector(case: dict[str, Any]) -> None:
    case_input, expected = case["input"], case["expected"]
    if set(case_input) == {"service_identity"}:
        value = case_input["service_identity"]
        if isinstance(value, dict) and set(value) == {"recipe"}:
            value = _recipe_identity(value["recipe"])
        action: Callable[[], Any] = lambda: validate_service_identity(value)  # noqa: E731
    elif (
        {"records", "source", "run_id", "artifact_digest"}
        <= set(case_input)
        <= {
            "records",
            "source",
            "run_id",
            "artifact_digest",
            "service_identity",
        }
    ):
        action = lambda: _make(case_input)  # noqa: E731
    else:
        pytest.fail("vector case shape not understood")
    if set(expected) == {"error"}:
        code = message_code(expected["error"]["message"])
        assert expected["error"]["exit_code"] is None
        with pytest.raises(CapturedRunError) as caught:
            action()
        assert caught.value.code == code
        return
    result = action()
    if set(expected) == {"valid", "evaluated_subject_digest"}:
        assert expected["valid"] is True
        assert isinstance(result, ServiceIdentity)
        assert result.digest == expected["evaluated_subject_digest"]
        assert result.to_dict() == case_input["service_identity"]
        assert (
            result.to_canonical()
            == json.dumps(
                case_input["service_identity"],
                sort_keys=True,
                separators=(",", ":"),
                ensure_ascii=False,
            ).encode()
            + b"\n"
        )
        Draft202012Validator(IDENTITY_SCHEMA).validate(case_input["service_identity"])
        return
    if set(expected) in (
        {"run_canonical", "run_digest", "evaluated_subject_digest"},
        {"run_canonical", "run_digest"},
    ):
        assert result.to_canonical() == expected["run_canonical"].encode("utf-8")
        assert result.digest == expected["run_digest"]
        if "evaluated_subject_digest" in expected:
            assert evaluated_subject_digest(result) == expected["evaluated_subject_digest"]
            assert result.evaluated_subject_digest == expected["evaluated_subject_digest"]
        Draft202012Validator(RUN_SCHEMA).validate(json.loads(expected["run_canonical"]))
        return
    pytest.fail("vector case shape not understood")


def test_every_message_shape_is_used() -> None:
    messages = [
        c["expected"]["error"]["message"]
        for c in load("invarlock/service_identity.json")["cases"]
        if "error" in c["expected"]
    ]
    used = {message_code(m) for m in messages}
    assert used == {code for _, _, code in _MESSAGE_CODES}


# ---------------------------------------------------------------------------
# Refusals


@pytest.mark.parametrize(
    ("name", "action", "code"), IDENTITY_REFUSALS, ids=[row[0] for row in IDENTITY_REFUSALS]
)
def test_identity_refusal(name: str, action: Callable[[], object], code: str) -> None:
    assert isinstance(assert_refused(action, code), CapturedRunError), name


def test_fields_name_the_member() -> None:
    with pytest.raises(CapturedRunError) as caught:
        validate_service_identity(_window("2025-02-30T10:00:00Z"))
    assert caught.value.field == "service_identity.observation_window.started_at"
    with pytest.raises(CapturedRunError) as caught:
        validate_service_identity(
            valid_identity(harness={**valid_identity()["harness"], "name": ""})
        )
    assert caught.value.field == "service_identity.harness.name"


def test_create_computes_the_configuration_digest() -> None:
    created = ServiceIdentity.create(**_create_arguments())
    assert created == validate_service_identity(valid_identity())
    assert hash(created) == hash(validate_service_identity(valid_identity()))
    assert created.configuration_digest == valid_identity()["configuration_digest"]
    assert created.canonical_size == len(created.to_canonical())
    assert validate_service_identity(created) is created
    assert created != "x"
    typed = ServiceIdentity.create(
        **{
            **_create_arguments(),
            "harness": Harness(**valid_identity()["harness"]),
            "observation_window": ObservationWindow("2025-03-01T10:00:00Z", "2025-03-01T10:00:00Z"),
        }
    )
    assert typed.observation_window.start == typed.observation_window.end


def test_reprs_show_no_declared_values() -> None:
    identity = validate_service_identity(valid_identity(provider="secret-provider"))
    for value in (identity, identity.harness, identity.observation_window):
        assert "secret" not in repr(value)
        assert "acme" not in repr(value)
    assert identity.digest in repr(identity)


def test_window_compares_instants_not_text() -> None:
    window = ObservationWindow("2025-03-01T10:00:00.5Z", "2025-03-01T10:00:00.500001Z")
    assert window.end > window.start
    assert parse_utc_timestamp("2025-03-01T10:00:00.5Z").microsecond == 500_000
    assert ObservationWindow("2025-03-01T10:00:00.5Z", "2025-03-01T10:00:00.500000Z")


def test_hosted_run_identity_is_the_subject() -> None:
    run = make_run(
        [{"id": "h1", "input": "q", "expected": "a", "output": "a"}],
        source={"name": "acme-harness", "version": "3.1.4"},
        run_id="hosted",
        artifact_digest=None,
        service_identity=valid_identity(),
    )
    identity = validate_service_identity(valid_identity())
    assert run.service_identity == identity
    assert evaluated_subject_digest(run) == identity.digest == digest_invarlock(valid_identity())
    assert evaluated_subject_digest(run.header) == identity.digest
    plain = make_run(
        [{"id": "a1", "input": "q", "expected": "a", "output": "a"}],
        source={"name": "acme-harness", "version": "3.1.4"},
        run_id="artifact",
        artifact_digest=ARTIFACT,
    )
    assert evaluated_subject_digest(plain) == ARTIFACT
    assert run.to_dict()["service_identity"] == valid_identity()


def test_contracts_agree() -> None:
    Draft202012Validator.check_schema(IDENTITY_SCHEMA)
    body = {
        key: value
        for key, value in IDENTITY_SCHEMA.items()
        if key not in ("$schema", "$id", "title", "description", "$defs")
    }
    assert RUN_SCHEMA["$defs"]["service_identity"] == body
    for name, definition in IDENTITY_SCHEMA["$defs"].items():
        assert RUN_SCHEMA["$defs"][name] == definition
    validator = Draft202012Validator(IDENTITY_SCHEMA)
    assert not validator.is_valid(valid_identity(region="eu"))
    assert not validator.is_valid(_window("2025-03-01T10:00:00+00:00"))
    assert not validator.is_valid(valid_identity(provider="   "))
