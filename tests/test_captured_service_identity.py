"""Hosted service identity: the closed descriptor, its digest, and its run bindings."""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from _vectors import PROJECT_ROOT, cases, load
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

CONTRACTS = PROJECT_ROOT / "contracts"
IDENTITY_SCHEMA = json.loads(
    (CONTRACTS / "invarlock.service-identity.schema.json").read_text(encoding="utf-8")
)
RUN_SCHEMA = json.loads(
    (CONTRACTS / "invarlock.evaluation-run-v1.schema.json").read_text(encoding="utf-8")
)
ARTIFACT = "sha256:2d242308f097c11c0e1d2363d17b07069ac1e3aa2aee55317f76d083f9057fa0"


def valid_identity(**changes: Any) -> dict[str, Any]:
    """Return a fresh copy of the vector set's valid descriptor, with changes applied."""
    case = next(c for c in load("invarlock/service_identity.json")["cases"] if c["name"] == "valid")
    identity: dict[str, Any] = copy.deepcopy(case["input"]["service_identity"])
    for key, value in changes.items():
        if value is _DROP:
            del identity[key]
        else:
            identity[key] = value
    return identity


_DROP = object()


def _with_configuration(configuration: Any) -> dict[str, Any]:
    return valid_identity(
        configuration=configuration, configuration_digest=digest_invarlock(configuration)
    )


def _window(started_at: Any, ended_at: Any = "2025-03-01T11:00:00Z") -> dict[str, Any]:
    return valid_identity(observation_window={"started_at": started_at, "ended_at": ended_at})


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
    matches = [
        code
        for prefix, fragment, code in _MESSAGE_CODES
        if message.startswith(prefix) and fragment in message
    ]
    assert len(matches) == 1, "vector error message not understood"
    return matches[0]


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

IDENTITY_REFUSALS: list[tuple[str, Callable[[], object], str]] = [
    ("not-object", lambda: validate_service_identity("hosted"), "invalid_type"),
    (
        "unknown-member",
        lambda: validate_service_identity(valid_identity(region="eu")),
        "unknown_field",
    ),
    (
        "missing-member",
        lambda: validate_service_identity(valid_identity(harness=_DROP)),
        "missing_field",
    ),
    (
        "kind",
        lambda: validate_service_identity(valid_identity(kind="artifact")),
        "invalid_constant",
    ),
    (
        "provider-blank",
        lambda: validate_service_identity(valid_identity(provider="\u00a0 ")),
        "invalid_text",
    ),
    (
        "provider-513",
        lambda: validate_service_identity(valid_identity(provider="p" * 513)),
        "invalid_text",
    ),
    (
        "provider-empty",
        lambda: validate_service_identity(valid_identity(provider="")),
        "invalid_text",
    ),
    (
        "provider-del",
        lambda: validate_service_identity(valid_identity(provider="a\x7f")),
        "invalid_text",
    ),
    (
        "provider-number",
        lambda: validate_service_identity(valid_identity(provider=1)),
        "invalid_type",
    ),
    (
        "observed-model-empty",
        lambda: validate_service_identity(valid_identity(observed_model="")),
        "invalid_text",
    ),
    (
        "configuration-list",
        lambda: validate_service_identity(valid_identity(configuration=[])),
        "invalid_type",
    ),
    (
        "configuration-101",
        lambda: validate_service_identity(_with_configuration({f"k{i}": i for i in range(101)})),
        "too_many_members",
    ),
    (
        "configuration-nan",
        lambda: validate_service_identity(valid_identity(configuration={"t": math.nan})),
        "invalid_json_value",
    ),
    (
        "configuration-digest-uppercase",
        lambda: validate_service_identity(
            valid_identity(configuration_digest=valid_identity()["configuration_digest"].upper())
        ),
        "invalid_digest",
    ),
    (
        "configuration-digest-mismatch",
        lambda: validate_service_identity(valid_identity(configuration={"temperature": 1.0})),
        "configuration_digest_mismatch",
    ),
    ("harness-list", lambda: validate_service_identity(valid_identity(harness=[])), "invalid_type"),
    (
        "harness-extra",
        lambda: validate_service_identity(
            valid_identity(harness={**valid_identity()["harness"], "x": "y"})
        ),
        "unknown_field",
    ),
    (
        "harness-digest",
        lambda: validate_service_identity(
            valid_identity(harness={**valid_identity()["harness"], "source_digest": "sha256:"})
        ),
        "invalid_digest",
    ),
    (
        "window-list",
        lambda: validate_service_identity(valid_identity(observation_window=[])),
        "invalid_type",
    ),
    (
        "window-missing-end",
        lambda: validate_service_identity(
            valid_identity(observation_window={"started_at": "2025-03-01T10:00:00Z"})
        ),
        "missing_field",
    ),
    ("timestamp-number", lambda: validate_service_identity(_window(20250301)), "invalid_type"),
    (
        "timestamp-offset",
        lambda: validate_service_identity(_window("2025-03-01T10:00:00+00:00")),
        "invalid_timestamp",
    ),
    (
        "timestamp-7-digits",
        lambda: validate_service_identity(_window("2025-03-01T10:00:00.1234567Z")),
        "invalid_timestamp",
    ),
    (
        "timestamp-trailing-dot",
        lambda: validate_service_identity(_window("2025-03-01T10:00:00.Z")),
        "invalid_timestamp",
    ),
    (
        "timestamp-feb-30",
        lambda: validate_service_identity(_window("2025-02-30T10:00:00Z")),
        "invalid_timestamp",
    ),
    (
        "timestamp-leap-second",
        lambda: validate_service_identity(_window("2025-06-30T23:59:60Z")),
        "invalid_timestamp",
    ),
    (
        "timestamp-hour-24",
        lambda: validate_service_identity(_window("2025-03-01T24:00:00Z")),
        "invalid_timestamp",
    ),
    (
        "timestamp-year-0",
        lambda: validate_service_identity(_window("0000-01-01T00:00:00Z")),
        "invalid_timestamp",
    ),
    (
        "timestamp-non-ascii-digits",
        lambda: validate_service_identity(_window("\u0662\u0660\u0662\u0665-03-01T10:00:00Z")),
        "invalid_timestamp",
    ),
    (
        "timestamp-newline",
        lambda: validate_service_identity(_window("2025-03-01T10:00:00Z\n")),
        "invalid_timestamp",
    ),
    (
        "window-reversed",
        lambda: validate_service_identity(
            _window("2025-03-01T10:00:00.000001Z", "2025-03-01T10:00:00Z")
        ),
        "reversed_window",
    ),
    (
        "over-1-mib",
        lambda: validate_service_identity(_with_configuration({"blob": "x" * 1_048_576})),
        "too_large",
    ),
    (
        "window-direct-reversed",
        lambda: ObservationWindow("2025-03-02T00:00:00Z", "2025-03-01T00:00:00Z"),
        "reversed_window",
    ),
    (
        "harness-direct",
        lambda: Harness(name=" ", version="1", source_digest=ARTIFACT),
        "invalid_text",
    ),
    (
        "subject-without-either",
        lambda: evaluated_subject_digest(
            type("Bare", (), {"artifact_digest": None, "service_identity": None})()
        ),
        "artifact_digest_required",
    ),
    (
        "create-configuration-list",
        lambda: ServiceIdentity.create(**{**_create_arguments(), "configuration": []}),
        "invalid_type",
    ),
]


def _create_arguments() -> dict[str, Any]:
    identity = valid_identity()
    del identity["kind"], identity["configuration_digest"]
    return identity


@pytest.mark.parametrize(
    ("name", "action", "code"), IDENTITY_REFUSALS, ids=[row[0] for row in IDENTITY_REFUSALS]
)
def test_identity_refusal(name: str, action: Callable[[], object], code: str) -> None:
    with pytest.raises(CapturedRunError) as caught:
        action()
    assert caught.value.code == code, name


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
