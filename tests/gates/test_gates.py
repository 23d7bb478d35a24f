"""Release gates: registry, evidence, evaluation and reports against the golden vectors."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sealeval.canonical import decode, encode_openmed
from sealeval.gates import (
    GATES,
    AgentReleaseReport,
    GateError,
    MetricEvidence,
    SliceEvidence,
    evaluate_agent_release_gates,
    gate_policy_digest,
)
from sealeval.gates.fixtures import load_fixture
from support.vectors import cases, decode_input, load

# Vector cases that encode the reference's lax parsing; sealeval refuses them
# (docs/decisions/compat.md).
EXPECTED_DEVIATIONS = {"ok_extra_keys_ignored": "metric: unknown_field"}


def _evidence_list(raw: Any) -> Any:
    """Objects become MetricEvidence; other values pass through (vector convention)."""
    if isinstance(raw, tuple):
        return [MetricEvidence.from_dict(item) if isinstance(item, dict) else item for item in raw]
    return raw


def test_registry_vector() -> None:
    (case,) = load("openmed/gates_registry.json")["cases"]
    expected = case["expected"]
    assert [gate.to_dict() for gate in GATES] == expected["gates"]
    assert gate_policy_digest() == expected["gate_policy_digest"]
    assert encode_openmed([gate.to_dict() for gate in GATES]) == expected["gates_canonical"]


@pytest.mark.parametrize("case", cases("openmed/gates_reports.json"))
def test_gate_report_vector(case: dict[str, Any]) -> None:
    data = decode_input(case["input"])
    if set(data) != {"candidate_digest", "evidence"} or set(case["expected"]) != {
        "canonical",
        "parsed",
    }:
        pytest.fail("vector case shape not understood")
    report = evaluate_agent_release_gates(
        _evidence_list(data["evidence"]), candidate_digest=data["candidate_digest"]
    )
    assert report.to_json() == case["expected"]["canonical"]
    assert report.to_dict() == case["expected"]["parsed"]
    # A stored report re-loads and re-verifies its digest.
    assert AgentReleaseReport.from_dict(decode(report.to_json())) == report


@pytest.mark.parametrize("case", cases("openmed/gates_errors.json"))
def test_gate_errors_vector(case: dict[str, Any]) -> None:
    data = decode_input(case["input"])
    expected = case["expected"]
    if data.get("op") == "metric_from_dict" and set(data) == {"op", "value"}:
        action = lambda: MetricEvidence.from_dict(data["value"])  # noqa: E731
    elif data.get("op") == "evaluate" and set(data) == {"op", "candidate_digest", "evidence"}:
        action = lambda: evaluate_agent_release_gates(  # noqa: E731
            _evidence_list(data["evidence"]), candidate_digest=data["candidate_digest"]
        )
    else:
        pytest.fail("vector case shape not understood")
    if case["name"] in EXPECTED_DEVIATIONS:
        assert set(expected) == {"ok"}
        with pytest.raises(GateError) as caught:
            action()
        assert str(caught.value) == EXPECTED_DEVIATIONS[case["name"]]
        return
    if set(expected) == {"error_code"}:
        with pytest.raises(GateError) as caught:
            action()
        assert str(caught.value) == expected["error_code"]
    elif set(expected) == {"ok"} and set(expected["ok"]) == {"canonical", "parsed"}:
        evidence = action()
        assert isinstance(evidence, MetricEvidence)
        assert evidence.to_json() == expected["ok"]["canonical"]
        assert evidence.to_dict() == expected["ok"]["parsed"]
        assert MetricEvidence.from_dict(decode(evidence.to_json())) == evidence
    else:
        pytest.fail("vector case shape not understood")


def _baseline() -> list[MetricEvidence]:
    case = next(
        c for c in load("openmed/gates_reports.json")["cases"] if c["name"] == "all_pass_baseline"
    )
    return [MetricEvidence.from_dict(item) for item in decode_input(case["input"]["evidence"])]


CANDIDATE = "sha256:" + "c" * 64


def test_every_permutation_of_evidence_gives_identical_bytes() -> None:
    evidence = _baseline()[:5]
    texts = {
        evaluate_agent_release_gates(list(order), candidate_digest=CANDIDATE).to_json()
        for order in itertools.permutations(evidence)
    }
    assert len(texts) == 1


@settings(max_examples=50, deadline=None)
@given(st.permutations(list(range(9))), st.sets(st.integers(0, 8)))
def test_missing_metrics_fail_closed_whatever_the_order(
    order: list[int], dropped: set[int]
) -> None:
    evidence = _baseline()
    kept = [evidence[i] for i in order if i not in dropped]
    report = evaluate_agent_release_gates(kept, candidate_digest=CANDIDATE)
    assert report.ready == (not dropped)
    for index, result in enumerate(report.gate_results):
        assert (result.reason_code == "missing_evidence") == (index in dropped)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        pytest.param(
            lambda d: d.update(schema_version="x"),
            "schema_version: unsupported_version",
            id="schema",
        ),
        pytest.param(
            lambda d: d.update(decision="MAYBE"), "decision: invalid", id="decision-unknown"
        ),
        pytest.param(
            lambda d: d.update(decision="NOT_READY"),
            "decision: inconsistent_gate_results",
            id="decision-inconsistent",
        ),
        pytest.param(
            lambda d: d.update(candidate_digest="x"),
            "candidate_digest: invalid_digest",
            id="candidate",
        ),
        pytest.param(
            lambda d: d.update(gate_results=[]),
            "gate_results: invalid_sequence",
            id="empty-results",
        ),
        pytest.param(
            lambda d: d.update(gate_results=d["gate_results"][::-1]),
            "gate_results: invalid_gate_set",
            id="order",
        ),
        pytest.param(
            lambda d: d["gate_results"][0].update(threshold=0.5),
            "gate_results: gate_contract_mismatch",
            id="threshold",
        ),
        pytest.param(
            lambda d: d["gate_results"][0].update(threshold=0),
            "gate_results: gate_contract_mismatch",
            id="threshold-int",
        ),
        pytest.param(
            lambda d: d["gate_results"][0].update(critical=1),
            "gate_results: gate_contract_mismatch",
            id="critical-int",
        ),
        pytest.param(
            lambda d: d["gate_results"][0].update(critical=False),
            "gate_results: gate_contract_mismatch",
            id="critical",
        ),
        pytest.param(
            lambda d: d["gate_results"][0].update(sample_size=7),
            "report_digest: payload_mismatch",
            id="tampered-size",
        ),
        pytest.param(
            lambda d: d["gate_results"][0].update(passed=False),
            "gate_results: invalid_result",
            id="passed-vs-reason",
        ),
        pytest.param(
            lambda d: d["gate_results"][0].pop("passed"),
            "gate_results: invalid_result",
            id="result-key-missing",
        ),
        pytest.param(
            lambda d: d.update(extra=1), "report: invalid_document", id="report-extra-key"
        ),
        pytest.param(
            lambda d: d.update(report_digest="sha256:x"),
            "report_digest: invalid_digest",
            id="report-digest-malformed",
        ),
    ],
)
def test_stored_report_refusals(mutate: Any, message: str) -> None:
    document = decode(
        evaluate_agent_release_gates(_baseline(), candidate_digest=CANDIDATE).to_json()
    )
    mutate(document)
    with pytest.raises(GateError) as caught:
        AgentReleaseReport.from_dict(document)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("document", "message"),
    [
        pytest.param([], "metric: invalid_document", id="not-mapping"),
        pytest.param(
            {"slices": [{"slice_ref": "a", "extra": 1}], "limitations": []},
            "slice: unknown_field",
            id="slice-extra",
        ),
    ],
)
def test_metric_parse_refusals(document: object, message: str) -> None:
    with pytest.raises(GateError) as caught:
        MetricEvidence.from_dict(document)
    assert str(caught.value) == message


def test_constructor_refuses_non_slice_items_and_keeps_bound_types() -> None:
    good = _baseline()[8]
    with pytest.raises(GateError, match="slices: invalid_sequence"):
        MetricEvidence(
            metric=good.metric, value=good.value, sample_size=good.sample_size,
            evidence_digest=good.evidence_digest, slices=({"slice_ref": "a"},),  # type: ignore[arg-type]
            limitations=good.limitations, ci_lower=good.ci_lower, ci_upper=good.ci_upper,
        )  # fmt: skip
    item = SliceEvidence(slice_ref="a", value=1, sample_size=3, ci_lower=1, ci_upper=1)
    assert type(item.value) is float
    assert type(item.ci_lower) is int


def test_field_coverage_every_evidence_field_changes_the_report() -> None:
    base = _baseline()
    reference = evaluate_agent_release_gates(base, candidate_digest=CANDIDATE).report_digest
    document = base[3].to_dict()
    variants = [
        {**document, "evidence_digest": "sha256:" + "e" * 64},
        {**document, "limitations": ["other"]},
        {**document, "slices": [{**document["slices"][0], "slice_ref": "resumed_replay"}]},
        {**document, "value": 0.996, "event_count": 498},
    ]
    for variant in variants:
        changed = [*base[:3], MetricEvidence.from_dict(variant), *base[4:]]
        assert (
            evaluate_agent_release_gates(changed, candidate_digest=CANDIDATE).report_digest
            != reference
        )
    other = evaluate_agent_release_gates(base, candidate_digest="sha256:" + "d" * 64)
    assert other.report_digest != reference


def test_bundled_fixtures_are_one_pass_and_one_critical_failure() -> None:
    passing = evaluate_agent_release_gates(
        load_fixture("baseline_pass"), candidate_digest=CANDIDATE
    )
    failing = evaluate_agent_release_gates(
        load_fixture("critical_failure"), candidate_digest=CANDIDATE
    )
    assert passing.ready
    assert not failing.ready
    failed = [r for r in failing.gate_results if not r.passed]
    assert [r.gate.metric for r in failed] == ["unauthorized_action_escape_rate"]
    assert failed[0].gate.critical
    assert failed[0].reason_code == "threshold_failed"
    for evidence in load_fixture("baseline_pass"):
        assert {"synthetic_only", "smoke_fixture"} <= set(evidence.limitations)
    with pytest.raises(ValueError, match="unknown fixture"):
        load_fixture("nope")  # type: ignore[arg-type]
