"""JSON source reports -> release evidence: openmed's three kinds (vectors) and sealeval's two."""

from __future__ import annotations

import copy
import json
import logging
import math
import random
import re
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from sealeval.canonical import decode, digest_bytes, digest_openmed, encode_openmed
from sealeval.errors import CanonicalError
from sealeval.gates import GateError, MetricEvidence, evaluate_agent_release_gates
from sealeval.gates.adapters.counting import count_evidence
from sealeval.gates.adapters.errors import ADAPTER_CODES, AgentReleaseAdapterError
from sealeval.gates.adapters.json_source import (
    AGREEMENT_METHOD,
    GATE_SOURCE_KINDS,
    GATE_SOURCE_SCHEMA,
    JSON_SOURCE_KINDS,
    JSON_SOURCE_SCHEMA,
    LATENCY_MIN_OBSERVATIONS,
    MAX_JSON_DEPTH,
    SOURCE_KINDS,
    SOURCE_METRICS,
    SOURCE_SLICES,
    _parse_json,
    json_release_evidence,
    json_release_evidence_with_source_digest,
    latency_p95_ranks,
    release_evidence_from_source,
    release_evidence_from_source_with_source_digest,
)
from support.refusals import CANARY
from support.vectors import PROJECT_ROOT, cases, decode_input, load

VECTORS = "openmed/adapters_json_source.json"
CONTRACTS = PROJECT_ROOT / "contracts"
DOCS = PROJECT_ROOT / "docs" / "gate-sources.md"

# The reference accepts NaN / Infinity tokens while parsing and refuses them by
# the later range/type check. This vector shows that the order is observable
# (an interval with both Infinity and an extra key is invalid_fields, not
# invalid_interval), so sealeval keeps the lax parse for the openmed kinds and
# passes it; it tightens only its own kinds (strict JSON). No vector of this
# file is an expected deviation.
LAX_ORDER_VECTOR = "error_invalid_fields_interval_extra_key_after_infinity"
EXPECTED_DEVIATIONS: dict[str, str] = {}

# The codes the JSON source adapters can raise (21-adapters.md §5, JSON column,
# plus sealeval's two for its own kinds).
JSON_CODES = frozenset(
    {
        "duplicate_case",
        "duplicate_field",
        "failed_run",
        "incomplete_run",
        "invalid_case_digest",
        "invalid_cases",
        "invalid_fields",
        "invalid_interval",
        "invalid_json",
        "invalid_kind",
        "invalid_outcome",
        "invalid_provenance",
        "invalid_slice",
        "invalid_statistical_method",
        "missing_inventory",
        "unexpected_statistics",
        "unsupported_source",
        "invalid_latency",
        "insufficient_sample",
    }
)


# ---------------------------------------------------------------------------
# Builders


def _digest(tag: str) -> str:
    return digest_bytes(tag.encode("ascii"))


def _interval(value: float, low: float, high: float) -> dict[str, Any]:
    return {"value": value, "ci_lower": low, "ci_upper": high}


def report(kind: str, size: int | None = None) -> dict[str, Any]:
    """A valid report of ``kind`` (slices cycle through the kind's set)."""
    schema = GATE_SOURCE_SCHEMA if kind in GATE_SOURCE_KINDS else JSON_SOURCE_SCHEMA
    slices = SOURCE_SLICES[kind]
    if size is None:
        size = 80 if kind == "workflow_latency" else 4
    rows: list[dict[str, Any]] = []
    for index in range(size):
        row: dict[str, Any] = {"case_digest": _digest(f"{kind}-case-{index}")}
        row["slice"] = slices[0] if kind == "workflow_latency" else slices[index % len(slices)]
        if kind in ("replay", "reference_server"):
            row["success"] = index != 1
        elif kind == "evidence_completeness":
            row["complete"] = True
        elif kind == "workflow_latency":
            row["latency_ms"] = 100.0 + 7.5 * index
        rows.append(row)
    document: dict[str, Any] = {
        "schema_version": schema,
        "kind": kind,
        "status": "completed",
        "synthetic": True,
        "corpus": "default",
        "cases": rows,
    }
    if schema == JSON_SOURCE_SCHEMA:
        document["statistics"] = None
    if kind == "clinician_agreement":
        present = sorted({row["slice"] for row in rows})
        document["statistics"] = {
            "method": AGREEMENT_METHOD,
            "overall": _interval(0.84, 0.81, 0.88),
            "slices": {name: _interval(0.85, 0.8, 0.9) for name in present},
        }
    return document


def inventory(document: dict[str, Any]) -> list[str]:
    return [row["case_digest"] for row in document["cases"]]


def derive(serialized: object, kind: object, digests: object) -> tuple[MetricEvidence, ...]:
    return release_evidence_from_source(
        serialized, expected_kind=kind, expected_case_digests=digests
    )


def refusal(serialized: object, kind: object, digests: object) -> str:
    with pytest.raises(AgentReleaseAdapterError) as caught:
        derive(serialized, kind, digests)
    error = caught.value
    assert error.code in ADAPTER_CODES
    assert str(error) == error.code
    assert error.__cause__ is None
    assert error.__context__ is None or error.__suppress_context__
    return error.code


# ---------------------------------------------------------------------------
# Golden vectors


def _check_vector(case: dict[str, Any], arrays_as_tuples: bool) -> None:
    data = decode_input(case["input"], arrays_as_tuples=arrays_as_tuples)
    expected = case["expected"]
    if set(data) != {"serialized", "expected_kind", "expected_case_digests"}:
        pytest.fail("vector case shape not understood")
    arguments = {
        "expected_kind": data["expected_kind"],
        "expected_case_digests": data["expected_case_digests"],
    }
    if set(expected) == {"error_code"}:
        for function in (json_release_evidence, release_evidence_from_source):
            with pytest.raises(AgentReleaseAdapterError) as caught:
                function(data["serialized"], **arguments)
            assert str(caught.value) == expected["error_code"]
            assert caught.value.args == (expected["error_code"],)
        return
    if set(expected) != {"evidence", "evidence_canonical", "source_canonical", "evidence_digest"}:
        pytest.fail("vector case shape not understood")
    for function in (json_release_evidence, release_evidence_from_source):
        evidence = function(data["serialized"], **arguments)
        assert [item.to_json() for item in evidence] == expected["evidence_canonical"]
        assert [item.to_dict() for item in evidence] == expected["evidence"]
        assert [MetricEvidence.from_dict(decode(item.to_json())) for item in evidence] == list(
            evidence
        )
    if not expected["evidence"]:
        assert data["serialized"] is None
        assert expected["source_canonical"] is None
        assert expected["evidence_digest"] is None
        return
    source = decode(data["serialized"], lax=True)
    assert encode_openmed(source) == expected["source_canonical"]
    assert digest_bytes(expected["source_canonical"].encode("ascii")) == expected["evidence_digest"]
    assert evidence[0].evidence_digest == expected["evidence_digest"]


@pytest.mark.parametrize("case", cases(VECTORS))
def test_json_source_vector(case: dict[str, Any]) -> None:
    assert case["name"] not in EXPECTED_DEVIATIONS
    _check_vector(case, arrays_as_tuples=True)


@pytest.mark.parametrize("case", cases(VECTORS))
def test_json_source_vector_with_list_inputs(case: dict[str, Any]) -> None:
    _check_vector(case, arrays_as_tuples=False)


def test_vector_file_covers_every_reference_json_code() -> None:
    codes = {
        case["expected"]["error_code"]
        for case in load(VECTORS)["cases"]
        if "error_code" in case["expected"]
    }
    assert codes == JSON_CODES - {"invalid_latency", "insufficient_sample"}
    assert JSON_CODES <= ADAPTER_CODES
    assert len(load(VECTORS)["cases"]) == 66


def test_lax_constant_order_is_kept_for_openmed_kinds() -> None:
    """The reference parses Infinity and refuses it later: key-set errors win."""
    (case,) = [item for item in load(VECTORS)["cases"] if item["name"] == LAX_ORDER_VECTOR]
    text = case["input"]["serialized"]
    digests = case["input"]["expected_case_digests"]
    assert refusal(text, "clinician_agreement", digests) == "invalid_fields"
    # Without the extra key, the same Infinity is refused by the interval check.
    assert refusal(text.replace('"x": 0.497, ', ""), "clinician_agreement", digests) == (
        "invalid_interval"
    )


# ---------------------------------------------------------------------------
# Raw-bytes digest


@pytest.mark.parametrize("kind", SOURCE_KINDS)
def test_source_digest_is_the_sha256_of_the_exact_text(kind: str) -> None:
    document = report(kind)
    compact = json.dumps(document, separators=(",", ":"))
    pretty = json.dumps(document, indent=3)
    arguments = {"expected_kind": kind, "expected_case_digests": inventory(document)}
    first, first_raw = release_evidence_from_source_with_source_digest(compact, **arguments)
    second, second_raw = release_evidence_from_source_with_source_digest(pretty, **arguments)
    assert first == second
    assert first[0].evidence_digest == digest_openmed(document)
    assert first_raw == digest_bytes(compact.encode("utf-8"))
    assert second_raw == digest_bytes(pretty.encode("utf-8"))
    assert first_raw != second_raw
    assert first_raw not in first[0].to_json()
    if kind in JSON_SOURCE_KINDS:
        assert json_release_evidence_with_source_digest(compact, **arguments) == (
            first,
            first_raw,
        )


def test_absent_source_has_no_evidence_and_no_digest() -> None:
    for function in (
        json_release_evidence_with_source_digest,
        release_evidence_from_source_with_source_digest,
    ):
        assert function(None, expected_kind="replay", expected_case_digests=()) == ((), None)
    # Absence is decided first, before the kind and the inventory are looked at.
    assert derive(None, CANARY, CANARY) == ()


def test_refused_source_has_no_digest() -> None:
    with pytest.raises(AgentReleaseAdapterError):
        release_evidence_from_source_with_source_digest(
            "{", expected_kind="replay", expected_case_digests=[_digest("a")]
        )


# ---------------------------------------------------------------------------
# Refusals, every kind, table-driven

Mutation = Callable[[dict[str, Any], list[Any]], tuple[object, object, object] | None]


def _set(path: tuple[Any, ...], value: Any) -> Mutation:
    def mutate(document: dict[str, Any], digests: list[Any]) -> None:
        target: Any = document
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value

    return mutate


def _delete(path: tuple[Any, ...]) -> Mutation:
    def mutate(document: dict[str, Any], digests: list[Any]) -> None:
        target: Any = document
        for step in path[:-1]:
            target = target[step]
        del target[path[-1]]

    return mutate


def _text(transform: Callable[[str], str]) -> Mutation:
    def mutate(document: dict[str, Any], digests: list[Any]) -> tuple[object, object, object]:
        return transform(json.dumps(document)), document["kind"], digests

    return mutate


def _other_kind(document: dict[str, Any], digests: list[Any]) -> None:
    family = GATE_SOURCE_KINDS if document["kind"] in GATE_SOURCE_KINDS else JSON_SOURCE_KINDS
    document["kind"] = next(kind for kind in family if kind != document["kind"])


def _other_schema(document: dict[str, Any], digests: list[Any]) -> None:
    swap = {JSON_SOURCE_SCHEMA: GATE_SOURCE_SCHEMA, GATE_SOURCE_SCHEMA: JSON_SOURCE_SCHEMA}
    document["schema_version"] = swap[document["schema_version"]]


def _arguments(serialized: object = None, kind: object = None, digests: object = None) -> Mutation:
    def mutate(document: dict[str, Any], original: list[Any]) -> tuple[object, object, object]:
        return (
            json.dumps(document) if serialized is None else serialized,
            document["kind"] if kind is None else kind,
            original if digests is None else digests,
        )

    return mutate


def _inventory_edit(edit: Callable[[list[Any]], Any]) -> Mutation:
    def mutate(document: dict[str, Any], digests: list[Any]) -> tuple[object, object, object]:
        return json.dumps(document), document["kind"], edit(list(digests))

    return mutate


def _duplicate_case(document: dict[str, Any], digests: list[Any]) -> None:
    document["cases"][1]["case_digest"] = document["cases"][0]["case_digest"]


def _drop_case(document: dict[str, Any], digests: list[Any]) -> None:
    document["cases"].pop()


def _case_extra(document: dict[str, Any], digests: list[Any]) -> None:
    document["cases"][0]["extra"] = True


GENERIC_RULES = [
    pytest.param(_arguments(kind="latency"), "invalid_kind", id="invalid_kind-unknown"),
    pytest.param(_arguments(kind=3), "invalid_kind", id="invalid_kind-not_string"),
    pytest.param(_arguments(serialized=b"{}"), "invalid_json", id="invalid_json-bytes"),
    pytest.param(_arguments(serialized=7), "invalid_json", id="invalid_json-not_string"),
    pytest.param(_text(lambda text: text[:-1]), "invalid_json", id="invalid_json-truncated"),
    pytest.param(_text(lambda text: text + " x"), "invalid_json", id="invalid_json-trailing"),
    pytest.param(_text(lambda text: ""), "invalid_json", id="invalid_json-empty"),
    pytest.param(_text(lambda text: "\ufeff" + text), "invalid_json", id="invalid_json-bom"),
    pytest.param(
        _text(lambda text: "[" * 200 + "]" * 200), "invalid_json", id="invalid_json-too_deep"
    ),
    pytest.param(
        _text(lambda text: text.replace('"status": ', '"status": "x", "status": ', 1)),
        "duplicate_field",
        id="duplicate_field-top_level",
    ),
    pytest.param(
        _text(lambda text: text.replace('"slice": ', '"slice": 1, "slice": ', 1)),
        "duplicate_field",
        id="duplicate_field-nested",
    ),
    pytest.param(_text(lambda text: f"[{text}]"), "invalid_fields", id="invalid_fields-array"),
    pytest.param(_delete(("corpus",)), "invalid_fields", id="invalid_fields-missing_key"),
    pytest.param(_set(("extra",), None), "invalid_fields", id="invalid_fields-extra_key"),
    pytest.param(_other_schema, "unsupported_source", id="unsupported_source-schema"),
    pytest.param(_other_kind, "unsupported_source", id="unsupported_source-kind"),
    pytest.param(_set(("status",), "failed"), "failed_run", id="failed_run-failed"),
    pytest.param(_set(("status",), None), "failed_run", id="failed_run-null"),
    pytest.param(_set(("synthetic",), 1), "invalid_provenance", id="invalid_provenance-int"),
    pytest.param(_set(("corpus",), "other"), "invalid_provenance", id="invalid_provenance-corpus"),
    pytest.param(
        _set(("corpus",), ["default"]), "invalid_provenance", id="invalid_provenance-list"
    ),
    pytest.param(_arguments(digests=[]), "missing_inventory", id="missing_inventory-empty"),
    pytest.param(
        _arguments(digests=_digest("x")), "missing_inventory", id="missing_inventory-string"
    ),
    pytest.param(
        _arguments(digests={_digest("x")}), "missing_inventory", id="missing_inventory-set"
    ),
    pytest.param(
        _inventory_edit(lambda digests: [*digests, "SHA256:" + "0" * 64]),
        "invalid_case_digest",
        id="invalid_case_digest-inventory",
    ),
    pytest.param(
        _inventory_edit(lambda digests: [*digests, digests[0]]),
        "duplicate_case",
        id="duplicate_case-inventory",
    ),
    pytest.param(_set(("cases",), {}), "invalid_cases", id="invalid_cases-object"),
    pytest.param(_set(("cases",), None), "invalid_cases", id="invalid_cases-null"),
    pytest.param(_case_extra, "invalid_fields", id="invalid_fields-case_extra"),
    pytest.param(
        _delete(("cases", 0, "slice")), "invalid_fields", id="invalid_fields-case_missing"
    ),
    pytest.param(_set(("cases", 0), "x"), "invalid_fields", id="invalid_fields-case_not_object"),
    pytest.param(_set(("cases",), []), "missing_inventory", id="missing_inventory-no_cases"),
    pytest.param(
        _set(("cases", 0, "case_digest"), "x"),
        "invalid_case_digest",
        id="invalid_case_digest-case",
    ),
    pytest.param(_duplicate_case, "duplicate_case", id="duplicate_case-cases"),
    pytest.param(_drop_case, "incomplete_run", id="incomplete_run-missing_case"),
    pytest.param(
        _inventory_edit(lambda digests: digests[1:]),
        "incomplete_run",
        id="incomplete_run-unexpected_case",
    ),
    pytest.param(
        _inventory_edit(lambda digests: [*digests, _digest("never-run")]),
        "incomplete_run",
        id="incomplete_run-case_not_run",
    ),
    pytest.param(_set(("cases", 0, "slice"), "other"), "invalid_slice", id="invalid_slice-unknown"),
    pytest.param(_set(("cases", 0, "slice"), 1), "invalid_slice", id="invalid_slice-not_string"),
    pytest.param(
        _set(("cases", 0, "slice"), "clean_replay "), "invalid_slice", id="invalid_slice-spacing"
    ),
]


def _apply(kind: str, mutate: Mutation) -> tuple[object, object, object]:
    document = report(kind)
    digests = inventory(document)
    arguments = mutate(document, digests)
    if arguments is None:
        return json.dumps(document), kind, digests
    return arguments


@pytest.mark.parametrize("kind", SOURCE_KINDS)
@pytest.mark.parametrize(("mutate", "code"), GENERIC_RULES)
def test_refusal_every_kind(kind: str, mutate: Mutation, code: str) -> None:
    assert refusal(*_apply(kind, mutate)) == code


KIND_RULES = [
    # replay / reference_server
    pytest.param("replay", _set(("cases", 2, "success"), "yes"), "invalid_outcome", id="outcome"),
    pytest.param("replay", _set(("cases", 2, "success"), 1), "invalid_outcome", id="outcome-int"),
    pytest.param(
        "reference_server",
        _set(("cases", 0, "success"), None),
        "invalid_outcome",
        id="outcome-null",
    ),
    pytest.param("replay", _set(("statistics",), {}), "unexpected_statistics", id="statistics"),
    pytest.param(
        "reference_server", _set(("statistics",), False), "unexpected_statistics", id="statistics-f"
    ),
    pytest.param(
        "replay",
        _delete(("cases", 0, "success")),
        "invalid_fields",
        id="count-case_outcome_missing",
    ),
    # clinician_agreement
    pytest.param(
        "clinician_agreement",
        _set(("cases", 0, "success"), True),
        "invalid_fields",
        id="agreement-case_with_success",
    ),
    pytest.param(
        "clinician_agreement", _set(("statistics",), None), "invalid_fields", id="agreement-null"
    ),
    pytest.param(
        "clinician_agreement",
        _set(("statistics", "extra"), 1),
        "invalid_fields",
        id="agreement-statistics_extra",
    ),
    pytest.param(
        "clinician_agreement",
        _set(("statistics", "method"), "cohen_kappa"),
        "invalid_statistical_method",
        id="agreement-method",
    ),
    pytest.param(
        "clinician_agreement",
        _set(("statistics", "method"), None),
        "invalid_statistical_method",
        id="agreement-method_null",
    ),
    pytest.param(
        "clinician_agreement",
        _set(("statistics", "slices"), []),
        "invalid_fields",
        id="agreement-slices_not_object",
    ),
    pytest.param(
        "clinician_agreement",
        _delete(("statistics", "slices", "workflow_safety")),
        "invalid_fields",
        id="agreement-slice_missing",
    ),
    pytest.param(
        "clinician_agreement",
        _set(("statistics", "slices", "clean_replay"), _interval(0.5, 0.4, 0.6)),
        "invalid_fields",
        id="agreement-slice_extra",
    ),
    pytest.param(
        "clinician_agreement",
        _set(("statistics", "overall", "x"), 0.5),
        "invalid_fields",
        id="agreement-interval_extra",
    ),
    pytest.param(
        "clinician_agreement",
        _delete(("statistics", "slices", "workflow_safety", "ci_upper")),
        "invalid_fields",
        id="agreement-interval_missing",
    ),
    pytest.param(
        "clinician_agreement",
        _set(("statistics", "overall"), [0.5, 0.4, 0.6]),
        "invalid_fields",
        id="agreement-interval_not_object",
    ),
    pytest.param(
        "clinician_agreement",
        _set(("statistics", "overall"), _interval(0.5, 0.6, 0.9)),
        "invalid_interval",
        id="agreement-excludes_value",
    ),
    pytest.param(
        "clinician_agreement",
        _set(("statistics", "overall"), _interval(0.5, 0.4, 1.5)),
        "invalid_interval",
        id="agreement-out_of_range",
    ),
    pytest.param(
        "clinician_agreement",
        _set(("statistics", "overall", "value"), True),
        "invalid_interval",
        id="agreement-bool",
    ),
    pytest.param(
        "clinician_agreement",
        _set(("statistics", "overall", "ci_lower"), "0.4"),
        "invalid_interval",
        id="agreement-string",
    ),
    pytest.param(
        "clinician_agreement",
        _set(("statistics", "slices", "workflow_safety"), _interval(0.9, 0.95, 1.0)),
        "invalid_interval",
        id="agreement-slice_interval",
    ),
    # evidence_completeness
    pytest.param(
        "evidence_completeness",
        _set(("cases", 1, "complete"), "true"),
        "invalid_outcome",
        id="completeness-outcome_string",
    ),
    pytest.param(
        "evidence_completeness",
        _set(("cases", 1, "complete"), 1),
        "invalid_outcome",
        id="completeness-outcome_int",
    ),
    pytest.param(
        "evidence_completeness",
        _set(("statistics",), None),
        "invalid_fields",
        id="completeness-statistics_key",
    ),
    pytest.param(
        "evidence_completeness",
        _set(("cases", 0, "success"), True),
        "invalid_fields",
        id="completeness-success_key",
    ),
    # workflow_latency
    pytest.param(
        "workflow_latency", _set(("cases", 3, "latency_ms"), -1), "invalid_latency", id="negative"
    ),
    pytest.param(
        "workflow_latency",
        _set(("cases", 3, "latency_ms"), -0.5),
        "invalid_latency",
        id="negative-float",
    ),
    pytest.param(
        "workflow_latency", _set(("cases", 3, "latency_ms"), True), "invalid_latency", id="bool"
    ),
    pytest.param(
        "workflow_latency", _set(("cases", 3, "latency_ms"), "12"), "invalid_latency", id="string"
    ),
    pytest.param(
        "workflow_latency", _set(("cases", 3, "latency_ms"), None), "invalid_latency", id="null"
    ),
    pytest.param(
        "workflow_latency",
        _set(("cases", 3, "latency_ms"), 10**400),
        "invalid_latency",
        id="int_beyond_binary64",
    ),
    pytest.param(
        "workflow_latency",
        _set(("cases", 3, "latency_ms"), [1.0]),
        "invalid_latency",
        id="array",
    ),
    pytest.param(
        "workflow_latency",
        _set(("cases", 3, "slice"), "nope"),
        "invalid_slice",
        id="latency-slice_before_outcome_of_later_case",
    ),
    pytest.param(
        "workflow_latency",
        _set(("cases", 0, "complete"), True),
        "invalid_fields",
        id="latency-complete_key",
    ),
]


@pytest.mark.parametrize(("kind", "mutate", "code"), KIND_RULES)
def test_refusal_kind_specific(kind: str, mutate: Mutation, code: str) -> None:
    assert refusal(*_apply(kind, mutate)) == code


def test_first_bad_case_decides() -> None:
    document = report("workflow_latency")
    document["cases"][2]["latency_ms"] = -1
    document["cases"][5]["slice"] = "nope"
    assert refusal(json.dumps(document), "workflow_latency", inventory(document)) == (
        "invalid_latency"
    )
    document["cases"][1]["slice"] = 7
    assert refusal(json.dumps(document), "workflow_latency", inventory(document)) == (
        "invalid_slice"
    )


@pytest.mark.parametrize(
    ("size", "per_slice", "code"),
    [
        pytest.param(71, None, "insufficient_sample", id="total_71"),
        pytest.param(1, None, "insufficient_sample", id="total_1"),
        pytest.param(150, 71, "insufficient_sample", id="slice_71_of_150"),
        pytest.param(144, 72, None, id="two_slices_of_72"),
        pytest.param(72, None, None, id="total_72"),
    ],
)
def test_latency_needs_72_observations_overall_and_per_slice(
    size: int, per_slice: int | None, code: str | None
) -> None:
    document = report("workflow_latency", size)
    if per_slice is not None:
        for row in document["cases"][per_slice:]:
            row["slice"] = "write_workflows"
    arguments = (json.dumps(document), "workflow_latency", inventory(document))
    if code is None:
        (evidence,) = derive(*arguments)
        assert evidence.sample_size == size
    else:
        assert refusal(*arguments) == code


def test_json_adapter_does_not_know_sealeval_kinds() -> None:
    for kind in GATE_SOURCE_KINDS:
        document = report(kind)
        with pytest.raises(AgentReleaseAdapterError, match=r"^invalid_kind$"):
            json_release_evidence(
                json.dumps(document), expected_kind=kind, expected_case_digests=inventory(document)
            )


def test_shapes_of_the_two_schema_strings_do_not_mix() -> None:
    # openmed envelope (with statistics) under a sealeval kind: key set differs.
    document = report("evidence_completeness")
    document["statistics"] = None
    document["schema_version"] = JSON_SOURCE_SCHEMA
    assert refusal(json.dumps(document), "evidence_completeness", inventory(document)) == (
        "invalid_fields"
    )
    # sealeval kind name inside an openmed envelope, expected as a sealeval kind.
    document = report("replay")
    document["kind"] = "evidence_completeness"
    assert refusal(json.dumps(document), "replay", inventory(document)) == "unsupported_source"


# ---------------------------------------------------------------------------
# Non-standard tokens

_TOKEN = "__TOKEN__"


def _with_token(kind: str, path: tuple[Any, ...], token: str) -> str:
    document = report(kind)
    if path:
        _set(path, _TOKEN)(document, [])
        return json.dumps(document).replace(f'"{_TOKEN}"', token, 1)
    return token


@pytest.mark.parametrize(
    ("kind", "path", "token", "code"),
    [
        pytest.param("replay", (), "NaN", "invalid_fields", id="top_level"),
        pytest.param("replay", ("schema_version",), "-Infinity", "unsupported_source", id="schema"),
        pytest.param("replay", ("status",), "Infinity", "failed_run", id="status"),
        pytest.param("replay", ("synthetic",), "NaN", "invalid_provenance", id="synthetic"),
        pytest.param("replay", ("corpus",), "NaN", "invalid_provenance", id="corpus"),
        pytest.param("replay", ("cases",), "NaN", "invalid_cases", id="cases"),
        pytest.param(
            "replay", ("cases", 0, "case_digest"), "NaN", "invalid_case_digest", id="case_digest"
        ),
        pytest.param("replay", ("cases", 0, "slice"), "Infinity", "invalid_slice", id="slice"),
        pytest.param("replay", ("cases", 0, "success"), "NaN", "invalid_outcome", id="success"),
        pytest.param("replay", ("statistics",), "NaN", "unexpected_statistics", id="statistics"),
        pytest.param(
            "reference_server", ("statistics",), "1e999", "unexpected_statistics", id="overflow"
        ),
        pytest.param(
            "clinician_agreement",
            ("statistics", "method"),
            "NaN",
            "invalid_statistical_method",
            id="method",
        ),
        pytest.param(
            "clinician_agreement", ("statistics", "slices"), "NaN", "invalid_fields", id="slices"
        ),
        pytest.param(
            "clinician_agreement",
            ("statistics", "overall", "ci_upper"),
            "NaN",
            "invalid_interval",
            id="interval-nan",
        ),
        pytest.param(
            "clinician_agreement",
            ("statistics", "slices", "workflow_safety", "ci_lower"),
            "-Infinity",
            "invalid_interval",
            id="interval-minus_infinity",
        ),
        pytest.param(
            "clinician_agreement",
            ("statistics", "overall", "value"),
            "-1e999",
            "invalid_interval",
            id="interval-overflow",
        ),
    ],
)
def test_openmed_kinds_refuse_non_standard_tokens_where_they_occur(
    kind: str, path: tuple[Any, ...], token: str, code: str
) -> None:
    """Lax parse, as the reference: the later check of the position refuses the token."""
    document = report(kind)
    assert refusal(_with_token(kind, path, token), kind, inventory(document)) == code


@pytest.mark.parametrize("kind", GATE_SOURCE_KINDS)
@pytest.mark.parametrize(
    ("path", "token"),
    [
        pytest.param(("synthetic",), "NaN", id="synthetic-nan"),
        pytest.param(("status",), "Infinity", id="status-infinity"),
        pytest.param(("cases", 0, "slice"), "-Infinity", id="slice-minus_infinity"),
        pytest.param(("cases", 0, "slice"), '"\\ud800"', id="slice-lone_surrogate"),
        pytest.param(("cases", 0, "case_digest"), '"\\udfff"', id="digest-lone_surrogate"),
        pytest.param(("corpus",), "1e999", id="corpus-overflow"),
        pytest.param((), "NaN", id="top_level"),
    ],
)
def test_sealeval_kinds_refuse_non_standard_json_while_parsing(
    kind: str, path: tuple[Any, ...], token: str
) -> None:
    document = report(kind)
    assert refusal(_with_token(kind, path, token), kind, inventory(document)) == "invalid_json"


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity", "1e999", "-1e400"])
def test_latency_refuses_non_finite_tokens_as_invalid_json(token: str) -> None:
    document = report("workflow_latency")
    text = _with_token("workflow_latency", ("cases", 4, "latency_ms"), token)
    assert refusal(text, "workflow_latency", inventory(document)) == "invalid_json"


def test_openmed_kinds_keep_lone_surrogates_for_the_later_check() -> None:
    document = report("replay")
    text = _with_token("replay", ("cases", 0, "slice"), '"\\ud800"')
    assert refusal(text, "replay", inventory(document)) == "invalid_slice"


# ---------------------------------------------------------------------------
# The parser


class _DuplicateError(Exception):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise _DuplicateError
    return result


def _reference_parse(text: str) -> tuple[str, str]:
    """Python's json with a duplicate-key hook: the reference's parse, as an oracle."""
    try:
        return "ok", json.dumps(json.loads(text, object_pairs_hook=_pairs))
    except _DuplicateError:
        return "error", "duplicate_field"
    except ValueError:
        return "error", "invalid_json"


def _our_parse(text: str, lax: bool = True) -> tuple[str, str]:
    try:
        return "ok", json.dumps(_parse_json(text, lax=lax))
    except AgentReleaseAdapterError as error:
        return "error", str(error)


_SOUP = [
    "{", "}", "[", "]", ",", ":", ' "a"', '"b"', '"\\u00e9"', '"\\ud800"', '"\\x"', '"', "0",
    "-1", "1.5", "2E+3", "-0.0", "01", "1.", "true", "false", "null", "nul", "NaN", "Infinity",
    "-Infinity", "-", " ", "\n\t", "x", "1e999", "\u00e9", "\x01",
]  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(_SOUP), max_size=24))
def test_parser_matches_python_json_on_token_soup(tokens: list[str]) -> None:
    text = "".join(tokens)
    assert _our_parse(text) == _reference_parse(text)


class _Members(list[tuple[str, Any]]):
    """An object written member by member (keys may repeat)."""


_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(10**20), 10**20)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=6)
    | st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -0.0, "\ud800", "a\udc00"])
)
_VALUES = st.recursive(
    _SCALARS,
    lambda children: (
        st.lists(children, max_size=4)
        | st.lists(st.tuples(st.sampled_from(["a", "b", "\u00e9", "a"]), children), max_size=4).map(
            _Members
        )
    ),
    max_leaves=20,
)


def _write(value: Any, spaces: str) -> str:
    if isinstance(value, _Members):
        body = ",".join(f"{spaces}{json.dumps(k)}{spaces}:{_write(v, spaces)}" for k, v in value)
        return "{" + body + spaces + "}"
    if isinstance(value, list):
        return "[" + ",".join(spaces + _write(item, spaces) for item in value) + spaces + "]"
    return json.dumps(value)


@settings(max_examples=120, deadline=None)
@given(_VALUES, st.sampled_from(["", " ", "\n  ", "\t\r\n"]))
def test_parser_matches_python_json_on_documents(value: Any, spaces: str) -> None:
    text = spaces + _write(value, spaces) + spaces
    assert _our_parse(text) == _reference_parse(text)


def _strict_oracle(text: str) -> tuple[str, str]:
    try:
        return "ok", json.dumps(decode(text))
    except CanonicalError:
        return "error", ""


@settings(max_examples=120, deadline=None)
@given(_VALUES, st.sampled_from(["", " ", "\n  "]))
def test_strict_parser_accepts_what_the_strict_decoder_accepts(value: Any, spaces: str) -> None:
    text = _write(value, spaces)
    ours = _our_parse(text, lax=False)
    oracle = _strict_oracle(text)
    assert ours[0] == oracle[0]
    if ours[0] == "ok":
        assert ours == oracle


def test_parser_depth_limit_and_deep_input() -> None:
    assert _parse_json("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH, lax=True) is not None
    too_deep = "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1)
    assert _our_parse(too_deep) == ("error", "invalid_json")
    assert _our_parse('{"a":' * (MAX_JSON_DEPTH + 1) + "1" + "}" * (MAX_JSON_DEPTH + 1)) == (
        "error",
        "invalid_json",
    )
    # Far beyond the interpreter's recursion limit: still a controlled refusal.
    assert _our_parse("[" * 100_000) == ("error", "invalid_json")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param('{"a": 1, "a": 2} x', ("error", "duplicate_field"), id="duplicate_then_junk"),
        pytest.param('{"a": 1, "a": 2', ("error", "invalid_json"), id="duplicate_never_closed"),
        pytest.param('[{"a": 1, "a": 2}, {', ("error", "duplicate_field"), id="closed_first"),
        pytest.param('[{"b": [}, {"a": 1, "a": 2}]', ("error", "invalid_json"), id="junk_first"),
        pytest.param("1" * 5000, ("error", "invalid_json"), id="integer_too_long"),
        pytest.param(' {"a" : [ 1 , 2.5e0 ] } ', ("ok", '{"a": [1, 2.5]}'), id="whitespace"),
        pytest.param("[1,]", ("error", "invalid_json"), id="trailing_comma"),
        pytest.param('{"a" 1}', ("error", "invalid_json"), id="missing_colon"),
        pytest.param("{1: 2}", ("error", "invalid_json"), id="non_string_key"),
        pytest.param('"\x01"', ("error", "invalid_json"), id="control_character"),
    ],
)
def test_parser_cases(text: str, expected: tuple[str, str]) -> None:
    assert _our_parse(text) == expected
    assert _reference_parse(text) == expected


# ---------------------------------------------------------------------------
# The latency interval method

KNOWN_RANKS = {
    72: (69, 64, 72),
    73: (70, 65, 73),
    80: (76, 72, 80),
    100: (95, 90, 100),
    120: (114, 109, 119),
    200: (190, 184, 197),
    500: (475, 465, 485),
    1000: (950, 936, 964),
    10000: (9500, 9457, 9543),
}


@pytest.mark.parametrize(("n", "ranks"), list(KNOWN_RANKS.items()))
def test_latency_ranks_known_values(n: int, ranks: tuple[int, int, int]) -> None:
    assert latency_p95_ranks(n) == ranks


def _binomial_cdf(n: int, j: int) -> Fraction:
    """P(B <= j) for B ~ Binomial(n, 19/20), exactly."""
    p = Fraction(19, 20)
    return sum(
        (Fraction(math.comb(n, i)) * p**i * (1 - p) ** (n - i) for i in range(j + 1)),
        Fraction(0),
    )


@pytest.mark.parametrize("n", [*range(72, 131), 157, 250, 333])
def test_latency_ranks_follow_their_definition(n: int) -> None:
    """Independent check with exact rationals: the max/min definitions and >= 95 % coverage."""
    k, low, high = latency_p95_ranks(n)
    tail = Fraction(1, 40)
    assert k == -(-19 * n // 20)
    assert _binomial_cdf(n, low - 1) <= tail
    assert low == n or _binomial_cdf(n, low) > tail  # l is the largest such rank
    assert 1 - _binomial_cdf(n, high - 1) <= tail
    assert 1 - _binomial_cdf(n, high - 2) > tail  # u is the smallest such rank
    assert low <= k <= high
    assert _binomial_cdf(n, high - 1) - _binomial_cdf(n, low - 1) >= Fraction(95, 100)


def test_upper_rank_exists_exactly_from_72_observations() -> None:
    assert Fraction(19, 20) ** 71 > Fraction(1, 40) >= Fraction(19, 20) ** 72
    assert latency_p95_ranks(72)[1:] == (64, 72)
    for bad in (71, 2, 0, -5, True, 72.0, "72"):
        with pytest.raises(AgentReleaseAdapterError, match=r"^insufficient_sample$"):
            latency_p95_ranks(bad)  # type: ignore[arg-type]
    assert LATENCY_MIN_OBSERVATIONS == 72


def test_point_estimate_lies_in_the_interval_for_many_sizes() -> None:
    for n in range(72, 1500):
        k, low, high = latency_p95_ranks(n)
        assert 1 <= low <= k <= high <= n


def _latency_report(latencies: list[Any], slice_name: str = "read_workflows") -> dict[str, Any]:
    document = report("workflow_latency", len(latencies))
    for row, latency in zip(document["cases"], latencies, strict=True):
        row["latency_ms"] = latency
        row["slice"] = slice_name
    return document


_LATENCY = st.one_of(
    st.floats(min_value=0.0, max_value=1e12, allow_nan=False),
    st.integers(min_value=0, max_value=10**15),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(_LATENCY, min_size=72, max_size=400))
def test_latency_interval_contains_the_point_estimate(latencies: list[Any]) -> None:
    document = _latency_report(latencies)
    (evidence,) = derive(json.dumps(document), "workflow_latency", inventory(document))
    ordered = sorted(float(item) for item in latencies)
    n = len(latencies)
    assert evidence.ci_lower is not None
    assert evidence.ci_upper is not None
    assert evidence.ci_lower <= evidence.value <= evidence.ci_upper
    assert evidence.value == ordered[-(-19 * n // 20) - 1] + 0.0
    assert {evidence.value, evidence.ci_lower, evidence.ci_upper} <= set(ordered)
    assert all(
        type(item) is float for item in (evidence.value, evidence.ci_lower, evidence.ci_upper)
    )
    assert evidence.event_count is None
    assert evidence.sample_size == n
    (only,) = evidence.slices
    assert (only.value, only.ci_lower, only.ci_upper) == (
        evidence.value,
        evidence.ci_lower,
        evidence.ci_upper,
    )


def test_latency_worked_example_from_the_docs() -> None:
    document = _latency_example()
    (evidence,) = derive(json.dumps(document), "workflow_latency", inventory(document))
    assert (evidence.value, evidence.ci_lower, evidence.ci_upper) == (950.0, 900.0, 1000.0)
    # Any order of the same observations gives the same statistics.
    shuffled = copy.deepcopy(document)
    random.Random(7).shuffle(shuffled["cases"])
    (again,) = derive(json.dumps(shuffled), "workflow_latency", inventory(document))
    assert (again.value, again.ci_lower, again.ci_upper) == (950.0, 900.0, 1000.0)
    assert again.evidence_digest == digest_openmed(shuffled) != evidence.evidence_digest


def test_latency_slices_have_their_own_p95() -> None:
    document = _latency_report([float(i) for i in range(1, 101)])
    extra = _latency_report([1000.0 + i for i in range(1, 101)], "write_workflows")
    for row in extra["cases"]:
        row["case_digest"] = _digest(row["case_digest"])
    document["cases"] += extra["cases"]
    (evidence,) = derive(json.dumps(document), "workflow_latency", inventory(document))
    read, write = evidence.slices
    assert (read.slice_ref, read.value, read.ci_lower, read.ci_upper) == (
        "read_workflows",
        95.0,
        90.0,
        100.0,
    )
    assert (write.slice_ref, write.value, write.ci_lower, write.ci_upper) == (
        "write_workflows",
        1095.0,
        1090.0,
        1100.0,
    )
    assert (evidence.value, evidence.ci_lower, evidence.ci_upper) == (1090.0, 1084.0, 1097.0)


def test_latency_normalises_negative_zero_and_mixed_numbers() -> None:
    document = _latency_report([-0.0] * 80)
    (evidence,) = derive(json.dumps(document), "workflow_latency", inventory(document))
    assert evidence.to_json().count("-0.0") == 0
    assert (evidence.value, evidence.ci_lower, evidence.ci_upper) == (0.0, 0.0, 0.0)
    mixed = _latency_report([i if i % 2 else float(i) for i in range(80)])
    (evidence,) = derive(json.dumps(mixed), "workflow_latency", inventory(mixed))
    assert type(evidence.ci_lower) is float
    assert type(evidence.ci_upper) is float


# ---------------------------------------------------------------------------
# Formatting, key order and case order


def _spell(value: Any, rng: random.Random) -> str:
    """Write JSON with random whitespace, key order and float spelling."""
    space = rng.choice(["", " ", "\n", "\n    ", "\t"])
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        body = ",".join(f"{space}{json.dumps(k)}{space}:{space}{_spell(v, rng)}" for k, v in items)
        return "{" + body + space + "}"
    if isinstance(value, list):
        return "[" + ",".join(space + _spell(item, rng) for item in value) + space + "]"
    if type(value) is float and rng.random() < 0.5:
        return format(value, ".17e")
    return json.dumps(value)


@st.composite
def _reports(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(SOURCE_KINDS))
    size = draw(st.integers(72, 120) if kind == "workflow_latency" else st.integers(1, 12))
    document = report(kind, size)
    slices = SOURCE_SLICES[kind]
    for row in document["cases"]:
        if kind != "workflow_latency":
            row["slice"] = draw(st.sampled_from(slices))
        if "success" in row:
            row["success"] = draw(st.booleans())
        if "complete" in row:
            row["complete"] = draw(st.booleans())
        if "latency_ms" in row:
            row["latency_ms"] = draw(_LATENCY)
    document["synthetic"] = draw(st.booleans())
    document["corpus"] = draw(st.sampled_from(["default", "custom"]))
    if kind == "clinician_agreement":
        present = sorted({row["slice"] for row in document["cases"]})
        document["statistics"]["slices"] = {name: _interval(0.5, -0.25, 0.75) for name in present}
    return document


@settings(max_examples=80, deadline=None)
@given(_reports(), st.randoms(use_true_random=False))
def test_evidence_is_independent_of_formatting_and_key_order(
    document: dict[str, Any], rng: random.Random
) -> None:
    kind = document["kind"]
    plain = json.dumps(document)
    spelled = _spell(document, rng)
    first, first_raw = release_evidence_from_source_with_source_digest(
        plain, expected_kind=kind, expected_case_digests=inventory(document)
    )
    second, second_raw = release_evidence_from_source_with_source_digest(
        spelled, expected_kind=kind, expected_case_digests=tuple(reversed(inventory(document)))
    )
    assert [item.to_json() for item in first] == [item.to_json() for item in second]
    assert first[0].evidence_digest == digest_openmed(document)
    assert (first_raw == second_raw) == (plain == spelled)
    assert first[0].metric == SOURCE_METRICS[kind]
    _schema_for(kind).validate(json.loads(plain))


@settings(max_examples=80, deadline=None)
@given(_reports(), st.randoms(use_true_random=False))
def test_case_permutation_changes_only_the_digest(
    document: dict[str, Any], rng: random.Random
) -> None:
    kind = document["kind"]
    permuted = copy.deepcopy(document)
    rng.shuffle(permuted["cases"])
    (first,) = derive(json.dumps(document), kind, inventory(document))
    (second,) = derive(json.dumps(permuted), kind, inventory(document))
    assert second.evidence_digest == digest_openmed(permuted)
    same = first.to_dict()
    other = second.to_dict()
    del same["evidence_digest"], other["evidence_digest"]
    assert encode_openmed(same) == encode_openmed(other)
    if permuted["cases"] != document["cases"]:
        assert first.evidence_digest != second.evidence_digest


@settings(max_examples=40, deadline=None)
@given(_reports())
def test_count_kinds_follow_the_counting_rule(document: dict[str, Any]) -> None:
    kind = document["kind"]
    if kind not in ("replay", "reference_server", "evidence_completeness"):
        return
    outcome = "complete" if kind == "evidence_completeness" else "success"
    (evidence,) = derive(json.dumps(document), kind, inventory(document))
    rows = document["cases"]
    assert evidence.sample_size == len(rows)
    assert evidence.event_count == sum(row[outcome] for row in rows)
    assert [item.slice_ref for item in evidence.slices] == sorted({row["slice"] for row in rows})
    limitations = ["host_supplied_report"]
    limitations += ["synthetic_only"] if document["synthetic"] else []
    limitations += ["default_corpus"] if document["corpus"] == "default" else []
    assert list(evidence.limitations) == limitations


# ---------------------------------------------------------------------------
# The count-evidence rule


def test_count_evidence_rule() -> None:
    envelope = {"b": [1, 2.0], "a": None}
    evidence = count_evidence(
        "replay_equivalence_rate",
        [("z_slice", True), ("a_slice", False), ("z_slice", False), ("a_slice", True)],
        envelope=envelope,
        limitations=("zeta", "alpha"),
    )
    assert evidence.evidence_digest == digest_openmed(envelope)
    assert [(s.slice_ref, s.sample_size, s.event_count, s.value) for s in evidence.slices] == [
        ("a_slice", 2, 1, 0.5),
        ("z_slice", 2, 1, 0.5),
    ]
    assert (evidence.value, evidence.sample_size, evidence.event_count) == (0.5, 4, 2)
    assert evidence.limitations == ("zeta", "alpha")
    assert evidence.ci_lower is None
    assert evidence.ci_upper is None


@pytest.mark.parametrize(
    ("observations", "message"),
    [
        pytest.param([], "sample_size: invalid_count", id="empty"),
        pytest.param([("a", 1)], "observations: invalid_item", id="event_not_bool"),
        pytest.param([("a", True, 1)], "observations: invalid_item", id="triple"),
        pytest.param([["a", True]], "observations: invalid_item", id="list_pair"),
        pytest.param([(1, True)], "observations: invalid_item", id="slice_not_str"),
        pytest.param([("A B", True)], "slice_ref: invalid_reference", id="slice_grammar"),
    ],
)
def test_count_evidence_refusals(observations: Any, message: str) -> None:
    with pytest.raises(GateError) as caught:
        count_evidence("replay_equivalence_rate", observations, envelope={}, limitations=("x",))
    assert str(caught.value) == message


# ---------------------------------------------------------------------------
# Into the gates


def test_all_five_kinds_feed_their_gates() -> None:
    evidence = []
    for kind in SOURCE_KINDS:
        document = report(kind)
        if kind == "replay":
            document["cases"][1]["success"] = True
        if kind == "reference_server":
            document["cases"][1]["success"] = True
        (item,) = derive(json.dumps(document), kind, inventory(document))
        evidence.append(item)
    result = evaluate_agent_release_gates(evidence, candidate_digest=_digest("candidate"))
    reasons = {gate["metric"]: gate["reason_code"] for gate in result.to_dict()["gate_results"]}
    for kind in SOURCE_KINDS:
        assert reasons[SOURCE_METRICS[kind]] == "threshold_satisfied", kind
    assert result.to_dict()["decision"] == "NOT_READY"  # the three safety gates are missing
    latency = next(item for item in evidence if item.metric == "workflow_latency_p95_ms")
    slow = _latency_report([2100.0 + i for i in range(80)])
    (slow_evidence,) = derive(json.dumps(slow), "workflow_latency", inventory(slow))
    failing = evaluate_agent_release_gates([slow_evidence], candidate_digest=_digest("c"))
    (gate,) = [g for g in failing.to_dict()["gate_results"] if g["metric"] == latency.metric]
    assert gate["reason_code"] == "threshold_failed"
    assert gate["evaluated_bound"] == slow_evidence.ci_upper


# ---------------------------------------------------------------------------
# Never echo


def _canary_inputs() -> list[tuple[str, object, object, object]]:
    def mutated(kind: str, mutate: Mutation) -> tuple[object, object, object]:
        return _apply(kind, mutate)

    rows: list[tuple[str, object, object, object]] = []

    def add(name: str, arguments: tuple[object, object, object]) -> None:
        rows.append((name, *arguments))

    for kind in SOURCE_KINDS:
        add(f"{kind}-case_digest", mutated(kind, _set(("cases", 0, "case_digest"), CANARY)))
        add(f"{kind}-slice", mutated(kind, _set(("cases", 0, "slice"), CANARY)))
        add(f"{kind}-unknown_key", mutated(kind, _set((CANARY,), CANARY)))
        add(f"{kind}-case_key", mutated(kind, _set(("cases", 0, CANARY), 1)))
        add(f"{kind}-status", mutated(kind, _set(("status",), CANARY)))
        add(f"{kind}-kind", mutated(kind, _set(("kind",), CANARY)))
        add(f"{kind}-schema", mutated(kind, _set(("schema_version",), CANARY)))
        add(f"{kind}-corpus", mutated(kind, _set(("corpus",), CANARY)))
        add(f"{kind}-expected_kind", mutated(kind, _arguments(kind=CANARY)))
        add(f"{kind}-inventory", mutated(kind, _inventory_edit(lambda d: [*d, CANARY])))
        add(
            f"{kind}-duplicate_key",
            mutated(kind, _text(lambda t: t[:-1] + f', "{CANARY}": 1, "{CANARY}": 2}}')),
        )
        add(f"{kind}-syntax", mutated(kind, _text(lambda t: t + CANARY)))
        add(f"{kind}-truncated", mutated(kind, _text(lambda t: f'{{"{CANARY}": "{CANARY}')))
        add(f"{kind}-surrogate", mutated(kind, _text(lambda t: f'["{CANARY}\\ud800", NaN')))
    add(
        "agreement-method",
        mutated("clinician_agreement", _set(("statistics", "method"), CANARY)),
    )
    add(
        "agreement-statistics_key",
        mutated("clinician_agreement", _set(("statistics", CANARY), 0.5)),
    )
    add(
        "agreement-interval_value",
        mutated("clinician_agreement", _set(("statistics", "overall", "value"), CANARY)),
    )
    add(
        "agreement-slice_statistics",
        mutated("clinician_agreement", _set(("statistics", "slices", CANARY), None)),
    )
    add("count-statistics", mutated("replay", _set(("statistics",), {CANARY: CANARY})))
    add("count-outcome", mutated("replay", _set(("cases", 0, "success"), CANARY)))
    add(
        "completeness-outcome",
        mutated("evidence_completeness", _set(("cases", 0, "complete"), CANARY)),
    )
    add("latency-outcome", mutated("workflow_latency", _set(("cases", 0, "latency_ms"), CANARY)))
    return rows


def _texts(error: BaseException) -> list[str]:
    texts = [str(error), repr(error), *map(str, error.args)]
    cause = error.__cause__ or (None if error.__suppress_context__ else error.__context__)
    if cause is not None:
        texts += _texts(cause)
    return texts


def test_refusals_never_echo_the_report(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    rows = _canary_inputs()
    assert len({row[0] for row in rows}) == len(rows)
    for name, serialized, kind, digests in rows:
        if isinstance(serialized, str):
            assert CANARY in serialized or CANARY in str(kind) or CANARY in str(digests), name
        with pytest.raises(AgentReleaseAdapterError) as caught:
            derive(serialized, kind, digests)
        assert caught.value.code in JSON_CODES, name
        for text in _texts(caught.value):
            assert CANARY not in text, name
    assert CANARY not in caplog.text
    assert caplog.records == []


@pytest.mark.parametrize("kind", SOURCE_KINDS)
def test_evidence_documents_hold_only_closed_vocabulary(kind: str) -> None:
    document = report(kind)
    (evidence,) = derive(json.dumps(document, indent=1), kind, inventory(document))
    strings: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            strings.extend(value)
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif isinstance(value, str):
            strings.append(value)

    walk(evidence.to_dict())
    vocabulary = set(evidence.to_dict()) | set(evidence.slices[0].to_dict())
    vocabulary |= {evidence.schema_version, SOURCE_METRICS[kind], *SOURCE_SLICES[kind]}
    vocabulary |= {"host_supplied_report", "synthetic_only", "default_corpus"}
    vocabulary |= {evidence.evidence_digest}
    assert set(strings) <= vocabulary
    assert not set(inventory(document)) & set(strings)


# ---------------------------------------------------------------------------
# Contracts and docs


def _schema(name: str) -> dict[str, Any]:
    document = json.loads((CONTRACTS / f"{name}.schema.json").read_text(encoding="utf-8"))
    assert isinstance(document, dict)
    return document


OPENMED_SCHEMA = "openmed.eval.agent_release_source.v1.json_source"
SEALEVAL_SCHEMA = "sealeval.gate_source.v1"


def _schema_for(kind: str) -> Any:
    return Draft202012Validator(
        _schema(SEALEVAL_SCHEMA if kind in GATE_SOURCE_KINDS else OPENMED_SCHEMA)
    )


def _open_objects(node: Any, where: str = "#") -> list[str]:
    found: list[str] = []
    if isinstance(node, dict):
        if (node.get("type") == "object" or "properties" in node) and node.get(
            "additionalProperties"
        ) is not False:
            found.append(where)
        for key, child in node.items():
            found += _open_objects(child, f"{where}/{key}")
    elif isinstance(node, list):
        for index, child in enumerate(node):
            found += _open_objects(child, f"{where}/{index}")
    return found


@pytest.mark.parametrize("name", [OPENMED_SCHEMA, SEALEVAL_SCHEMA])
def test_contract_is_valid_and_closed(name: str) -> None:
    document = _schema(name)
    Draft202012Validator.check_schema(document)
    assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert document["$id"] == f"https://sealeval.dev/contracts/{name}.schema.json"
    assert _open_objects(document) == []


def test_valid_vector_reports_match_the_openmed_contract() -> None:
    validator = Draft202012Validator(_schema(OPENMED_SCHEMA))
    checked = 0
    for case in load(VECTORS)["cases"]:
        if case["expected"].get("evidence"):
            validator.validate(json.loads(case["input"]["serialized"]))
            checked += 1
    assert checked == 14


@pytest.mark.parametrize("kind", SOURCE_KINDS)
def test_generated_reports_match_exactly_their_contract(kind: str) -> None:
    document = report(kind)
    _schema_for(kind).validate(document)
    other = SEALEVAL_SCHEMA if kind in JSON_SOURCE_KINDS else OPENMED_SCHEMA
    assert not Draft202012Validator(_schema(other)).is_valid(document)


@pytest.mark.parametrize("kind", SOURCE_KINDS)
@pytest.mark.parametrize(
    "mutate",
    [
        pytest.param(_set(("extra",), None), id="extra_key"),
        pytest.param(_delete(("corpus",)), id="missing_key"),
        pytest.param(_set(("status",), "failed"), id="status"),
        pytest.param(_set(("synthetic",), 1), id="synthetic"),
        pytest.param(_set(("corpus",), "other"), id="corpus"),
        pytest.param(_set(("cases",), []), id="no_cases"),
        pytest.param(_case_extra, id="case_extra"),
        pytest.param(_set(("cases", 0, "slice"), "other"), id="slice"),
        pytest.param(_set(("cases", 0, "case_digest"), "x"), id="case_digest"),
        pytest.param(_other_kind, id="kind"),
    ],
)
def test_contract_refuses_what_the_adapter_refuses(kind: str, mutate: Mutation) -> None:
    document = report(kind)
    mutate(document, [])
    assert not _schema_for(kind).is_valid(document)
    assert release_evidence_refused(document, kind)


def release_evidence_refused(document: dict[str, Any], kind: str) -> bool:
    try:
        derive(json.dumps(document), kind, inventory(report(kind)))
    except AgentReleaseAdapterError:
        return True
    return False


@pytest.mark.parametrize(
    ("kind", "mutate"),
    [
        pytest.param("replay", _set(("cases", 0, "success"), 1), id="replay-success"),
        pytest.param("replay", _set(("statistics",), {}), id="replay-statistics"),
        pytest.param(
            "clinician_agreement", _set(("statistics", "method"), "x"), id="agreement-method"
        ),
        pytest.param(
            "clinician_agreement",
            _set(("statistics", "overall", "value"), 1.5),
            id="agreement-range",
        ),
        pytest.param("evidence_completeness", _set(("cases", 0, "complete"), None), id="complete"),
        pytest.param("workflow_latency", _set(("cases", 0, "latency_ms"), -1), id="latency"),
        pytest.param("workflow_latency", lambda d, _: d["cases"].pop(), id="latency-71"),
    ],
)
def test_contract_refuses_kind_specific_errors(kind: str, mutate: Mutation) -> None:
    document = report(kind, 72 if kind == "workflow_latency" else None)
    mutate(document, [])
    assert not _schema_for(kind).is_valid(document)
    assert release_evidence_refused(document, kind)


def _latency_example() -> dict[str, Any]:
    """The 100-case latency report described in docs/gate-sources.md."""
    return {
        "schema_version": GATE_SOURCE_SCHEMA,
        "kind": "workflow_latency",
        "status": "completed",
        "synthetic": True,
        "corpus": "default",
        "cases": [
            {
                "case_digest": _digest(f"example-latency-case-{i}"),
                "slice": "read_workflows",
                "latency_ms": 10 * i,
            }
            for i in range(1, 101)
        ],
    }


def test_docs_examples_are_valid_and_their_evidence_is_exact() -> None:
    text = DOCS.read_text(encoding="utf-8")
    blocks = [json.loads(block) for block in re.findall(r"```json\n(.*?)```", text, re.DOTALL)]
    last: MetricEvidence | None = None
    sources = evidences = 0
    for block in blocks:
        if "schema_version" in block and "metric" not in block:
            kind = block["kind"]
            _schema_for(kind).validate(block)
            (last,) = derive(json.dumps(block), kind, inventory(block))
            sources += 1
        else:
            if block["metric"] == "workflow_latency_p95_ms":
                latency = _latency_example()
                _schema_for("workflow_latency").validate(latency)
                (expected,) = derive(json.dumps(latency), "workflow_latency", inventory(latency))
            else:
                assert last is not None
                expected = last
            assert encode_openmed(block) == expected.to_json()
            evidences += 1
    assert (sources, evidences) == (3, 4)


def test_docs_list_every_code_and_every_rank_row() -> None:
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("## Refusal codes", 1)[1].split("\n## ", 1)[0]
    assert set(re.findall(r"^\| `(\w+)` \|", section, flags=re.MULTILINE)) == JSON_CODES
    for n, (k, low, high) in KNOWN_RANKS.items():
        if f"| {n} |" in text:
            assert f"| {n} | {k} | {low} | {high} |" in text
    for kind in SOURCE_KINDS:
        assert f"`{kind}`" in text
        for name in SOURCE_SLICES[kind]:
            assert f"`{name}`" in text
