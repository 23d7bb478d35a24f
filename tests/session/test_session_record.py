"""The session record (spec 30 section 7): vectors, strict parsing, round trips, the contract."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from sealeval.canonical import digest_openmed, encode_openmed
from sealeval.session.record import (
    MAX_STEPS,
    MAX_VALUE,
    PHASES,
    SESSION_SCHEMA,
    TERMINAL_PHASES,
    EvaluationSessionError,
    SessionRecord,
    SessionStep,
    session_digest,
)
from support.refusals import CANARY, assert_refused
from support.vectors import PROJECT_ROOT, cases, decode_input, load

VECTORS = "openmed/session_record.json"
SCHEMA_PATH = PROJECT_ROOT / "contracts" / "openmed.eval.workflow_session.v1.schema.json"
KEY = "sha256:" + "1" * 64
BINDING = "sha256:" + "2" * 64
STEP_DIGEST = "sha256:" + "3" * 64


def _steps(count: int, *, band: int | None = None, terminal: str = "released") -> list[list[Any]]:
    phases = [*PHASES, terminal][:count]
    return [
        [phase, STEP_DIGEST, index, 1000 + index, band if index == 5 else None]
        for index, phase in enumerate(phases)
    ]


def _document(steps: list[list[Any]]) -> dict[str, Any]:
    return SessionRecord(session_key=KEY, binding_digest=BINDING, steps=steps).to_dict()  # type: ignore[arg-type]


def _error(action: Any) -> EvaluationSessionError:
    with pytest.raises(EvaluationSessionError) as caught:
        action()
    error = caught.value
    assert error.__cause__ is None
    assert error.__context__ is None
    assert str(error) == error.code
    return error


# ---------------------------------------------------------------------------
# Vectors


@pytest.mark.parametrize("case", cases(VECTORS))
def test_session_record_vectors(case: dict[str, Any]) -> None:
    given_input = decode_input(case["input"])
    expected = case["expected"]
    op = given_input.get("op")
    if op == "from_json" and set(given_input) == {"op", "json"}:

        def action() -> SessionRecord:
            return SessionRecord.from_json(given_input["json"])

    elif op == "construct" and set(given_input) == {
        "op",
        "session_key",
        "binding_digest",
        "steps",
    }:

        def action() -> SessionRecord:
            return SessionRecord(
                session_key=given_input["session_key"],
                binding_digest=given_input["binding_digest"],
                steps=given_input["steps"],
            )

    else:
        pytest.fail("vector case shape not understood")
    if set(expected) == {"canonical", "parsed"}:
        record = action()
        assert record.to_json() == expected["canonical"]
        assert encode_openmed(record.to_dict()) == encode_openmed(expected["parsed"])
        assert record.session_digest == expected["parsed"]["session_digest"]
        assert SessionRecord.from_json(expected["canonical"]) == record
        assert (
            session_digest(record.session_key, record.binding_digest, record.steps)
            == record.session_digest
        )
    elif set(expected) <= {"error_code", "code"} and "error_code" in expected:
        error = _error(action)
        assert str(error) == expected["error_code"]
        assert error.code == expected.get("code", expected["error_code"])
    else:
        pytest.fail("vector case shape not understood")


def _vector_records() -> list[dict[str, Any]]:
    documents: list[dict[str, Any]] = []
    for case in load(VECTORS)["cases"]:
        if "parsed" in case["expected"]:
            documents.append(case["expected"]["parsed"])
    for case in load("openmed/session.json")["cases"]:
        for outcome in case["expected"]["ops"]:
            if "record" in outcome:
                documents.append(json.loads(outcome["record"]))
        for _key, text in case["expected"].get("db_sessions", []):
            documents.append(json.loads(text))
    return documents


def test_vector_records_match_the_contract() -> None:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema)
    documents = _vector_records()
    assert len(documents) > 100
    for document in documents:
        validator.validate(document)
        # ... and every one of them is a record sealeval accepts, byte for byte.
        assert SessionRecord.from_dict(document).to_dict() == document


@pytest.mark.parametrize(
    "steps",
    [
        [*_steps(1), ["cases", STEP_DIGEST, 0, 0, None, None]],
        [["released", STEP_DIGEST, 0, 0, None]],
        [*_steps(3)[:2], ["forensics", STEP_DIGEST, 0, 0, 1]],
        [*_steps(6), ["released", STEP_DIGEST, 0, 0, None]],
        [["verified", "x", 0, 0, None]],
        [["verified", STEP_DIGEST, -1, 0, None]],
        [*_steps(5), ["released", STEP_DIGEST, 0, 0, -1]],
    ],
)
def test_contract_refuses_what_the_parser_refuses(steps: list[list[Any]]) -> None:
    validator = Draft202012Validator(json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))
    document = {
        "binding_digest": BINDING,
        "schema_version": SESSION_SCHEMA,
        "session_digest": STEP_DIGEST,
        "session_key": KEY,
        "steps": steps,
    }
    assert list(validator.iter_errors(document))
    _error(lambda: SessionRecord(session_key=KEY, binding_digest=BINDING, steps=steps))  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# Construction


def test_record_members_and_digest() -> None:
    record = SessionRecord(session_key=KEY, binding_digest=BINDING)
    assert record.steps == ()
    assert record.schema_version == SESSION_SCHEMA
    assert record.session_digest == digest_openmed(
        {
            "binding_digest": BINDING,
            "schema_version": SESSION_SCHEMA,
            "session_key": KEY,
            "steps": [],
        }
    )
    full = SessionRecord(session_key=KEY, binding_digest=BINDING, steps=_steps(6, band=2))  # type: ignore[arg-type]
    assert all(type(step) is SessionStep for step in full.steps)
    assert full.steps[5].band == 2
    assert full.steps[0].phase == "verified"
    assert full.steps[0].count == 0
    assert full.to_dict()["steps"][5] == ["released", STEP_DIGEST, 5, 1005, 2]


def test_with_step_validates() -> None:
    record = SessionRecord(session_key=KEY, binding_digest=BINDING)
    advanced = record.with_step(SessionStep("verified", STEP_DIGEST, 2, 0, None))
    assert len(advanced.steps) == 1
    assert advanced.session_digest != record.session_digest
    _error(lambda: record.with_step(SessionStep("cases", STEP_DIGEST, 2, 0, None)))


@pytest.mark.parametrize(
    ("steps", "code"),
    [
        ("not steps", "record_invalid"),
        ({"0": 1}, "record_invalid"),
        (None, "record_invalid"),
        ([["verified", STEP_DIGEST, 1, 1]], "record_invalid"),
        (["abcde"], "record_invalid"),
        ([("verified", STEP_DIGEST, 1, 1, None, None)], "record_invalid"),
        ([["Verified", STEP_DIGEST, 1, 1, None]], "record_invalid"),
        ([[b"verified", STEP_DIGEST, 1, 1, None]], "record_invalid"),
        ([["verified", STEP_DIGEST.upper(), 1, 1, None]], "invalid_digest"),
        ([["verified", CANARY, 1, 1, None]], "invalid_digest"),
        ([["verified", STEP_DIGEST, True, 1, None]], "record_invalid"),
        ([["verified", STEP_DIGEST, 1, False, None]], "record_invalid"),
        ([["verified", STEP_DIGEST, 1.0, 1, None]], "record_invalid"),
        ([["verified", STEP_DIGEST, 1, 1.5, None]], "record_invalid"),
        ([["verified", STEP_DIGEST, "1", 1, None]], "record_invalid"),
        ([["verified", STEP_DIGEST, MAX_VALUE + 1, 1, None]], "record_invalid"),
        ([["verified", STEP_DIGEST, 1, MAX_VALUE + 1, None]], "record_invalid"),
        ([["verified", STEP_DIGEST, 1, 1, 0]], "record_invalid"),
        ([*_steps(5), ["released", STEP_DIGEST, 1, 1, True]], "record_invalid"),
        ([*_steps(5), ["released", STEP_DIGEST, 1, 1, 1.0]], "record_invalid"),
        ([*_steps(5), ["released", STEP_DIGEST, 1, 1, MAX_VALUE + 1]], "record_invalid"),
        ([*_steps(5), ["release_claimed", STEP_DIGEST, 1, 1, None]], "record_invalid"),
        ([*_steps(6), _steps(6)[5]], "record_invalid"),
        ([["verified", "bad", 1, "bad", None]], "invalid_digest"),
        ([["bad", "bad", 1, 1, None]], "record_invalid"),
    ],
)
def test_step_refusals(steps: object, code: str) -> None:
    assert_refused(
        _error(lambda: SessionRecord(session_key=KEY, binding_digest=BINDING, steps=steps)),  # type: ignore[arg-type]
        code,
    )


@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"session_key": "key"}, "invalid_digest"),
        ({"session_key": CANARY}, "invalid_digest"),
        ({"binding_digest": None}, "invalid_digest"),
        ({"binding_digest": BINDING + "\n"}, "invalid_digest"),
        ({"schema_version": "openmed.eval.workflow_session.v2"}, "record_invalid"),
        ({"schema_version": None}, "record_invalid"),
        ({"session_key": "key", "schema_version": "x"}, "invalid_digest"),
    ],
)
def test_member_refusals(fields: dict[str, Any], code: str) -> None:
    arguments: dict[str, Any] = {"session_key": KEY, "binding_digest": BINDING, **fields}
    assert_refused(_error(lambda: SessionRecord(**arguments)), code)


@pytest.mark.parametrize("terminal", TERMINAL_PHASES)
@pytest.mark.parametrize("band", [None, 0, 3])
def test_terminal_phases_and_bands(terminal: str, band: int | None) -> None:
    record = SessionRecord(
        session_key=KEY,
        binding_digest=BINDING,
        steps=_steps(6, band=band, terminal=terminal),  # type: ignore[arg-type]
    )
    assert record.steps[-1].phase == terminal
    assert record.steps[-1].band == band
    assert MAX_STEPS == 6


def test_record_is_immutable() -> None:
    record = SessionRecord(session_key=KEY, binding_digest=BINDING)
    with pytest.raises(AttributeError):
        record.session_key = BINDING  # type: ignore[misc]


def test_session_digest_function() -> None:
    steps = _steps(3)
    assert session_digest(KEY, BINDING, steps) == _document(steps)["session_digest"]
    assert _error(lambda: session_digest(KEY, "x", [])).code == "invalid_digest"


# ---------------------------------------------------------------------------
# Strict parsing of persisted text


def _valid_text(count: int = 4) -> str:
    return SessionRecord(session_key=KEY, binding_digest=BINDING, steps=_steps(count)).to_json()  # type: ignore[arg-type]


def _retext(mutate: Any, count: int = 4) -> str:
    document = json.loads(_valid_text(count))
    mutate(document)
    return json.dumps(document)


def _redigest(document: dict[str, Any]) -> None:
    body = {k: v for k, v in document.items() if k != "session_digest"}
    document["session_digest"] = digest_openmed(body)


# Deviation from openmed (spec 30 "Beyond"): its parser lets a repeated key silently win;
# sealeval refuses any repeated key, even when the last occurrence would be valid.
_PARSE_REFUSALS: dict[str, str | bytes] = {
    "repeated_key": _valid_text()[:-1] + ',"session_key":"' + KEY + '"}',
    "repeated_key_first_wins": '{"session_key":"' + "sha256:" + "9" * 64 + '",' + _valid_text()[1:],
    "nan": _valid_text().replace("1000", "NaN"),
    "infinity": _valid_text().replace("1000", "Infinity"),
    "float_count": _valid_text().replace(",0,1000,", ",0.0,1000,"),
    "exponent_tick": _valid_text().replace(",1000,", ",1e3,"),
    "bom": "\ufeff" + _valid_text(),
    "bom_bytes": b"\xef\xbb\xbf" + _valid_text().encode(),
    "not_utf8": _valid_text().encode().replace(b"verified", b"verified\xff"),
    "trailing_garbage": _valid_text() + "x",
    "two_documents": _valid_text() + _valid_text(),
    "empty": "",
    "null": "null",
    "string": '"record"',
    "missing_steps": _retext(lambda d: d.pop("steps")),
    "missing_digest": _retext(lambda d: d.pop("session_digest")),
    "extra_key": _retext(lambda d: d.update({"extra": 1})),
    "schema_number": _retext(lambda d: d.update({"schema_version": 1})),
    "wrong_session_digest": _retext(lambda d: d.update({"session_digest": STEP_DIGEST})),
    "session_digest_not_digest": _retext(lambda d: d.update({"session_digest": "x"})),
    "bool_count_redigested": _retext(lambda d: (d["steps"][0].__setitem__(2, True), _redigest(d))),
    "steps_object": _retext(lambda d: (d.update({"steps": {}}), _redigest(d))),
    "tampered_count": _retext(lambda d: d["steps"][1].__setitem__(2, 7)),
    "tampered_key": _retext(lambda d: d.update({"session_key": BINDING})),
}


@pytest.mark.parametrize("name", sorted(_PARSE_REFUSALS))
def test_parse_refusals(name: str) -> None:
    error = _error(lambda: SessionRecord.from_json(_PARSE_REFUSALS[name]))
    assert error.code == "record_invalid"


@pytest.mark.parametrize("value", [None, 5, ["list"], object()])
def test_from_json_refuses_non_text(value: object) -> None:
    assert _error(lambda: SessionRecord.from_json(value)).code == "record_invalid"  # type: ignore[arg-type]
    assert _error(lambda: SessionRecord.from_dict(value)).code == "record_invalid"


def test_parse_accepts_any_formatting_and_bytes() -> None:
    text = _valid_text()
    record = SessionRecord.from_json(text)
    pretty = json.dumps(json.loads(text), indent=3, sort_keys=False)
    assert SessionRecord.from_json(pretty) == record
    assert SessionRecord.from_json(text.encode("utf-8")) == record
    assert SessionRecord.from_dict(json.loads(text)) == record


# ---------------------------------------------------------------------------
# Property-based round trips

_digests = st.text("0123456789abcdef", min_size=64, max_size=64).map(lambda h: "sha256:" + h)
_values = st.integers(min_value=0, max_value=MAX_VALUE)


@st.composite
def _records(draw: st.DrawFn) -> SessionRecord:
    count = draw(st.integers(min_value=0, max_value=MAX_STEPS))
    steps = []
    for index in range(count):
        phase = PHASES[index] if index < len(PHASES) else draw(st.sampled_from(TERMINAL_PHASES))
        band = draw(st.none() | _values) if index == 5 else None
        steps.append(SessionStep(phase, draw(_digests), draw(_values), draw(_values), band))
    return SessionRecord(
        session_key=draw(_digests), binding_digest=draw(_digests), steps=tuple(steps)
    )


@settings(max_examples=300, deadline=None)
@given(record=_records())
def test_round_trip(record: SessionRecord) -> None:
    text = record.to_json()
    assert text.isascii()
    parsed = SessionRecord.from_json(text)
    assert parsed == record
    assert parsed.to_json() == text
    assert SessionRecord.from_dict(record.to_dict()) == record
    assert record.session_digest == session_digest(
        record.session_key, record.binding_digest, record.steps
    )
    # Only digests, counts, ticks and bands: no other strings than phases and digests.
    for step in record.to_dict()["steps"]:
        assert step[0] in (*PHASES, *TERMINAL_PHASES)


@settings(max_examples=200, deadline=None)
@given(record=_records(), data=st.data())
def test_any_tampering_is_refused(record: SessionRecord, data: st.DataObject) -> None:
    document = record.to_dict()
    targets = ["session_key", "binding_digest"] + [
        f"step:{i}:{j}" for i in range(len(record.steps)) for j in (1, 2, 3)
    ]
    target = data.draw(st.sampled_from(targets))
    if target.startswith("step:"):
        _, i, j = target.split(":")
        old = document["steps"][int(i)][int(j)]
        document["steps"][int(i)][int(j)] = (
            (STEP_DIGEST if old != STEP_DIGEST else BINDING)
            if int(j) == 1
            else (old + 1 if old < MAX_VALUE else old - 1)
        )
    else:
        document[target] = KEY if document[target] != KEY else BINDING
    error = _error(lambda: SessionRecord.from_json(json.dumps(document)))
    assert error.code == "record_invalid"
