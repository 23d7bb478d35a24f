"""compare_runs: every comparisons.json vector byte for byte, the contract, every refusal, rules."""

from __future__ import annotations

import copy
import json
import math
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from jsonschema import Draft202012Validator

from sealeval.canonical import digest_bytes, encode_invarlock
from sealeval.captured import CapturedRunError, Run, make_run, read_run, run_from_document
from sealeval.captured import comparison as comparison_module
from sealeval.captured.comparison import (
    DECISION_ORDERS,
    LIMITATIONS,
    REPORT_FORMAT,
    WIDTH_FIRST_RULE,
    ComparisonError,
    ComparisonReport,
    compare_runs,
)
from sealeval.captured.comparison import engine as comparison_engine
from sealeval.captured.comparison import pairing as comparison_pairing
from sealeval.captured.comparison import parallel as comparison_parallel
from sealeval.captured.intervals import seed_row, shake256_bootstrap_interval
from sealeval.captured.policy import ComparisonPolicyError, parse_comparison_policy
from sealeval.errors import SealevalError
from support.captured_comparison import _runtime_deviation, map_reference_error, vector_run
from support.digests import ARTIFACT, SUBJECT_ARTIFACT
from support.refusals import CANARY
from support.vectors import PROJECT_ROOT, cases, load, vectors_dir

VECTORS = "invarlock/comparisons.json"
SCHEMA_PATH = PROJECT_ROOT / "contracts" / "invarlock.multi-metric-comparison-v1.schema.json"
SCHEMA = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
VALIDATOR = Draft202012Validator(SCHEMA)
DEFAULT_DRAWS = 102_400_000

# Each reference message SHAPE -> (our error class, our code, our field template). The
# reference's wording is informational and carries record ids, metric names, run names and
# draw counts of the case at hand: they are placeholders here, and the field we expect is
# computed from the case (the metric's index in the policy, the record's index in the run),
# so a file regenerated with other ids, seeds and sizes maps alike. An unknown shape fails.


# Cases where the reference is lax and sealeval refuses (none in the public set; a
# listed case must then raise the named class and code instead of matching bytes).
REFUSED_BY_US: dict[str, tuple[str, str]] = {}


def _vector_case(name: str) -> dict[str, Any]:
    for case in load(VECTORS)["cases"]:
        if case["name"] == name:
            return case  # type: ignore[no-any-return]
    raise AssertionError(name)


def _budget_arguments(case_input: dict[str, Any]) -> dict[str, Any]:
    if "max_bootstrap_draws" in case_input:
        return {"max_bootstrap_draws": case_input["max_bootstrap_draws"]}
    return {}


def _compare_case(case_input: dict[str, Any], **options: Any) -> ComparisonReport:
    baseline = vector_run(case_input["baseline"])
    subject = vector_run(case_input["subject"])
    return compare_runs(
        baseline=baseline,
        subject=subject,
        policy=case_input["policy"],
        **_budget_arguments(case_input),
        **options,
    )


def validate_report(document: dict[str, Any]) -> None:
    errors = sorted(VALIDATOR.iter_errors(document), key=str)
    assert not errors, errors[0].message


# ---------------------------------------------------------------------------
# Vectors


@pytest.mark.parametrize("case", cases(VECTORS))
def test_comparison_vector(case: dict[str, Any]) -> None:
    case_input = case["input"]
    expected = case["expected"]
    if (
        not {"baseline", "subject", "policy"}
        <= set(case_input)
        <= {
            "baseline",
            "subject",
            "policy",
            "max_bootstrap_draws",
        }
    ):
        pytest.fail("vector case shape not understood")
    if set(expected) == {"decision", "report", "report_canonical", "report_digest"}:
        _check_report_case(case["name"], case_input, expected)
    elif set(expected) == {"error"}:
        _check_error_case(case["name"], case_input, expected["error"])
    else:
        pytest.fail("vector case shape not understood")


def _check_report_case(name: str, case_input: dict[str, Any], expected: dict[str, Any]) -> None:
    if name in REFUSED_BY_US:
        cls, code = REFUSED_BY_US[name]
        with pytest.raises(SealevalError) as refused:
            _compare_case(case_input)
        assert (type(refused.value).__name__, refused.value.code) == (cls, code)
        return
    report = _compare_case(case_input)
    assert report.canonical_bytes == expected["report_canonical"].encode("utf-8")
    assert report.digest == expected["report_digest"]
    assert report.decision == expected["decision"]
    document = report.to_dict()
    assert document == expected["report"]
    assert encode_invarlock(document) == report.canonical_bytes
    validate_report(document)
    assert report.bindings.baseline == vector_run(case_input["baseline"]).digest
    assert report.bindings.subject == vector_run(case_input["subject"]).digest
    assert report.bindings.policy == parse_comparison_policy(case_input["policy"]).digest
    # The missing-ID capacity total (§7.1) is the size of every missing_ids array.
    assert report.missing_id_bytes == sum(
        len(encode_invarlock(entry["missing_ids"])) - 1 for entry in document["metrics"]
    )


def _check_error_case(name: str, case_input: dict[str, Any], error: dict[str, Any]) -> None:
    mapped = map_reference_error(case_input, error["message"])
    if mapped is None:
        pytest.fail(f"unmapped reference message in case {name}")
    cls, code, field, _ = mapped
    if _runtime_deviation(name) is not None:
        report = _compare_case(case_input)  # expected deviation: accepted here
        validate_report(report.to_dict())
        return
    with pytest.raises(SealevalError) as refused:
        _compare_case(case_input)
    assert (type(refused.value).__name__, refused.value.code, refused.value.field) == (
        cls,
        code,
        field,
    )
    # The message is exactly the library-chosen field and the code: no id, name or value.
    assert str(refused.value) == f"{field}: {code}"


def test_every_reference_message_is_understood() -> None:
    errors = [
        (case["input"], case["expected"]["error"]["message"])
        for case in load(VECTORS)["cases"]
        if "error" in case["expected"]
    ]
    assert errors, "the vector file has no refusal cases"
    for case_input, message in errors:
        assert map_reference_error(case_input, message) is not None, message[:80]
    names = {case["name"] for case in load(VECTORS)["cases"]}
    assert set(REFUSED_BY_US) <= names


def test_schema_is_closed_draft_2020_12() -> None:
    Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert SCHEMA["$id"].endswith("/invarlock.multi-metric-comparison-v1.schema.json")
    assert SCHEMA["additionalProperties"] is False


def test_schema_rejects_variations() -> None:
    report = _compare_case(_vector_case("text-20-multi-metric-slices")["input"])
    document = report.to_dict()
    validate_report(document)
    for mutate in (
        lambda d: d.update(extra=1),
        lambda d: d["metrics"][0].update(extra=1),
        lambda d: d["metrics"][0].update(ratio=1.0),
        lambda d: d["metrics"][5].pop("interval_unit"),
        lambda d: d["metrics"][0]["interval"].update(mass=0.9),
        lambda d: d["metrics"][0].update(decision="fail"),
        lambda d: d["metrics"][0].update(reasons=["because"]),
        lambda d: d.update(limitations=d["limitations"][::-1]),
        lambda d: d["bindings"].update(policy="sha256:X"),
        lambda d: d.update(decision_rule="other"),
        lambda d: d.update(format="invarlock/multi-metric-comparison-v2"),
    ):
        changed = copy.deepcopy(document)
        mutate(changed)
        assert list(VALIDATOR.iter_errors(changed)), changed


# ---------------------------------------------------------------------------
# Report object


def test_report_object_and_summaries() -> None:
    case = _vector_case("missing-results-insufficient")
    report = _compare_case(case["input"])
    assert report.format == REPORT_FORMAT
    assert not report.passed
    assert report.decision_order == "reference"
    assert report.limitations[:4] == LIMITATIONS
    assert report.to_canonical() == report.canonical_bytes
    assert report.digest == digest_bytes(report.canonical_bytes)
    assert report == _compare_case(case["input"])
    assert hash(report) == hash(report.digest)
    assert report != object()
    document = json.loads(report.canonical_bytes)
    summaries = report.metric_summaries()
    assert len(summaries) == len(document["metrics"])
    for summary, entry in zip(summaries, document["metrics"], strict=True):
        assert summary.to_dict() == {
            "name": entry["name"],
            "slice": entry["slice"],
            "decision": entry["decision"],
            "usable_count": entry["count"] - len(entry["missing_ids"]),
            "missing_count": len(entry["missing_ids"]),
            "reasons": entry["reasons"],
        }
    # Ids are run content: never in repr().
    shown = repr(report) + repr(report.metrics) + repr(summaries)
    for entry in document["metrics"]:
        for record_id in entry["missing_ids"]:
            assert f"'{record_id}'" not in shown


def test_the_reference_budget_is_the_default() -> None:
    assert comparison_module.DEFAULT_MAX_BOOTSTRAP_DRAWS == DEFAULT_DRAWS
    case_input = _vector_case("text-20-token-f1")["input"]
    report = _compare_case(case_input)
    # One metric, no slice: one scope of every record, 2048 replicates.
    assert report.required_bootstrap_draws == len(vector_run(case_input["baseline"])) * 2048


# ---------------------------------------------------------------------------
# Arguments


@pytest.mark.parametrize("value", [-1, True, False, 1.0, "10", 10**3 * 1.0])
def test_invalid_budget(value: Any) -> None:
    case = _vector_case("text-20-exact-loose")["input"]
    with pytest.raises(ComparisonError) as refused:
        _compare_case({**case, "max_bootstrap_draws": value})
    assert (refused.value.code, refused.value.field) == ("invalid_budget", "max_bootstrap_draws")


@pytest.mark.parametrize("value", ["Reference", "width-first", "", None, 1])
def test_invalid_decision_order(value: Any) -> None:
    case = _vector_case("text-20-exact-loose")["input"]
    with pytest.raises(ComparisonError) as refused:
        _compare_case(case, decision_order=value)
    assert refused.value.code == "invalid_decision_order"


@pytest.mark.parametrize("value", [0, -2, True, 1.0, "2"])
def test_invalid_workers(value: Any) -> None:
    case = _vector_case("text-20-exact-loose")["input"]
    with pytest.raises(ComparisonError) as refused:
        _compare_case(case, workers=value)
    assert (refused.value.code, refused.value.field) == ("invalid_workers", "workers")


def test_documents_are_validated_and_give_the_same_report() -> None:
    case = _vector_case("text-20-multi-metric-slices")["input"]
    expected = _compare_case(case)
    baseline = vector_run(case["baseline"]).to_dict()
    subject = vector_run(case["subject"]).to_dict()
    report = compare_runs(baseline=baseline, subject=subject, policy=case["policy"])
    assert report.canonical_bytes == expected.canonical_bytes
    parsed = parse_comparison_policy(case["policy"])
    assert (
        compare_runs(baseline=baseline, subject=subject, policy=parsed).canonical_bytes
        == expected.canonical_bytes
    )
    broken = copy.deepcopy(subject)
    broken["records"][3]["id"] = broken["records"][4]["id"]
    with pytest.raises(CapturedRunError) as refused:
        compare_runs(baseline=baseline, subject=broken, policy=case["policy"])
    assert (refused.value.code, refused.value.field) == ("duplicate_id", "subject.records[4].id")
    with pytest.raises(ComparisonPolicyError):
        compare_runs(baseline=baseline, subject=subject, policy={"format": "x"})


@pytest.mark.parametrize("side", ["baseline", "subject", "policy"])
def test_invalid_types(side: str) -> None:
    case = _vector_case("text-20-exact-loose")["input"]
    arguments: dict[str, Any] = {
        "baseline": vector_run(case["baseline"]),
        "subject": vector_run(case["subject"]),
        "policy": case["policy"],
    }
    arguments[side] = [CANARY]
    with pytest.raises(ComparisonError) as refused:
        compare_runs(**arguments)
    assert (refused.value.code, refused.value.field) == ("invalid_type", side)
    assert CANARY not in str(refused.value)


# ---------------------------------------------------------------------------
# Synthetic runs


def _record(
    record_id: str, output: Any, expected: Any = "alpha beta", **members: Any
) -> dict[str, Any]:
    record = {"id": record_id, "input": f"question {record_id}", "expected": expected}
    record["output"] = output
    record.update(members)
    return record


def _run(records: list[dict[str, Any]], artifact: str = ARTIFACT, **header: Any) -> Run:
    return make_run(
        records,
        source={"name": "unit", "version": "1"},
        run_id="run",
        artifact_digest=artifact,
        **header,
    )


def _metric(kind: str = "exact_match", name: str | None = None, **changes: Any) -> dict[str, Any]:
    metric: dict[str, Any] = {
        "name": name or kind,
        "kind": kind,
        "configuration": {},
        "direction": "higher",
        "unit": "score",
        "aggregation": "mean",
        "minimum_count": 1,
        "maximum_regression": 1,
        "maximum_interval_width": 2,
    }
    if kind in ("normalized_match", "token_f1"):
        metric["configuration"] = {"unicode_version": "15.0.0"}
    if kind == "json_fields":
        metric["configuration"] = {"fields": ["/a"]}
    metric.update(changes)
    return metric


def _policy(*metrics: dict[str, Any], slices: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "format": "invarlock/comparison-policy-v1",
        "metrics": list(metrics),
        "slices": slices or [],
    }


def test_pairing_uses_canonical_equality() -> None:
    baseline = _run([_record("a", "x", expected=1), _record("b", "y", expected="2")])
    for changed in (1.0, True, "1"):
        subject = _run(
            [_record("a", "x", expected=changed), _record("b", "y", expected="2")],
            SUBJECT_ARTIFACT,
        )
        with pytest.raises(ComparisonError) as refused:
            compare_runs(
                baseline=baseline, subject=subject, policy=_policy(_metric("numeric_tolerance"))
            )
        assert (refused.value.code, refused.value.field) == (
            "expected_changed",
            "subject.records[0].expected",
        )
    negative_zero = _run([_record("a", "x", input={"v": -0.0})])
    positive_zero = _run([_record("a", "x", input={"v": 0.0})], SUBJECT_ARTIFACT)
    with pytest.raises(ComparisonError) as refused:
        compare_runs(baseline=negative_zero, subject=positive_zero, policy=_policy(_metric()))
    assert refused.value.code == "input_changed"
    same = _run([_record("a", "y", input={"v": [1, {"w": "x"}]})], SUBJECT_ARTIFACT)
    assert (
        compare_runs(
            baseline=_run([_record("a", "x", input={"v": [1, {"w": "x"}]})]),
            subject=same,
            policy=_policy(_metric()),
        )
        .metrics[0]
        .count
        == 1
    )


def test_pairing_order_and_ids() -> None:
    ids = ["b", "a", "é", "Z", "\U0001f600", "\ue000", "a0"]
    baseline = _run([_record(record_id, "alpha beta") for record_id in ids])
    subject = _run([_record(record_id, None) for record_id in reversed(ids)], SUBJECT_ARTIFACT)
    report = compare_runs(baseline=baseline, subject=subject, policy=_policy(_metric()))
    # Missing ids are listed in code-point order of the id, not run order.
    assert report.metrics[0].missing_ids == tuple(sorted(ids))
    assert report.metrics[0].missing_ids.index("\ue000") < report.metrics[0].missing_ids.index(
        "\U0001f600"
    )
    fewer = _run([_record(record_id, "x") for record_id in ids[:-1]], SUBJECT_ARTIFACT)
    with pytest.raises(ComparisonError) as refused:
        compare_runs(baseline=baseline, subject=fewer, policy=_policy(_metric()))
    assert refused.value.code == "record_ids_differ"
    other = _run([_record(record_id, "x") for record_id in [*ids[:-1], "zz"]], SUBJECT_ARTIFACT)
    with pytest.raises(ComparisonError) as refused:
        compare_runs(baseline=baseline, subject=other, policy=_policy(_metric()))
    assert refused.value.code == "record_ids_differ"


def test_projection_pairing_rule() -> None:
    case = _vector_case("input-projection-pair")["input"]
    baseline = vector_run(case["baseline"])
    subject_document = vector_run(case["subject"]).to_dict()
    record = subject_document["records"][0]
    binding = record["context"].pop("input_projection")
    record["context"] = binding["source"]["context"]
    unprojected = run_from_document(subject_document)
    with pytest.raises(ComparisonError) as refused:
        compare_runs(baseline=baseline, subject=unprojected, policy=case["policy"])
    assert (refused.value.code, refused.value.field) == (
        "projection_mismatch",
        "subject.records[0].context.input_projection",
    )


_PROVENANCE = {
    "kind": "measurement",
    "source": "meter",
    "version": "1",
    "unit": "score",
    "rubric_digest": None,
}


def test_missing_rule_per_kind() -> None:
    def pair(rows: list[tuple[dict[str, Any], dict[str, Any]]]) -> tuple[Run, Run]:
        header = {"score_provenance": {"q": _PROVENANCE}}
        return (
            _run([left for left, _ in rows], **header),
            _run([right for _, right in rows], SUBJECT_ARTIFACT, **header),
        )

    baseline, subject = pair(
        [
            (_record("a", "alpha", scores={"q": 1}), _record("a", "alpha", scores={"q": 1})),
            (
                _record("b", "alpha", error="", scores={"q": 1}),
                _record("b", "alpha", scores={"q": 1}),
            ),
            (_record("c", None, scores={"q": 1}), _record("c", "alpha", scores={"q": 1})),
            (_record("d", "alpha", scores={}), _record("d", "alpha", scores={"q": 1})),
            (_record("e", "alpha", scores={"q": 0.5}), _record("e", 7, scores={"q": 0.5})),
        ]
    )
    recorded = _metric("recorded", score_key="q", accepted_provenance=_PROVENANCE)
    report = compare_runs(
        baseline=baseline, subject=subject, policy=_policy(_metric("token_f1"), recorded)
    )
    text, score = report.metrics
    # errored ("" counts) or unavailable (not a string) on either side
    assert text.missing_ids == ("b", "c", "e")
    assert text.reasons == ("missing results",)
    assert (text.baseline_mean, text.delta, text.interval) == (None, None, None)
    assert text.count == 5
    assert text.usable_count == 2
    # recorded: errored or score key absent on either side
    assert score.missing_ids == ("b", "d")
    assert score.scoring_assurance == "recorded"

    baseline, subject = pair(
        [
            (_record("a", 7, expected="7"), _record("a", "", expected="7")),
            (_record("b", None, expected="7"), _record("b", "7.0", expected="7")),
            (_record("c", False, expected="7"), _record("c", [7], expected="7")),
        ]
    )
    numeric = compare_runs(
        baseline=baseline, subject=subject, policy=_policy(_metric("numeric_tolerance"))
    ).metrics[0]
    # numeric_tolerance: only null is unavailable; "", booleans and arrays are (wrong) answers
    assert numeric.missing_ids == ("b",)

    baseline, subject = pair(
        [
            (_record("a", None, expected="null"), _record("a", "null", expected="null")),
            (_record("b", 1, expected="1"), _record("b", "1.0", expected="1")),
        ]
    )
    exact_json = compare_runs(
        baseline=baseline, subject=subject, policy=_policy(_metric("json_exact"))
    ).metrics[0]
    # json_exact: every output is available (null is a JSON answer); 1 and 1.0 differ
    assert exact_json.missing_ids == ()
    assert (exact_json.baseline_mean, exact_json.subject_mean) == (1.0, 0.5)


def test_scorer_errors_abort_even_when_the_entry_has_missing_pairs() -> None:
    baseline = _run(
        [_record("a", "x", expected="prose", error=""), _record("b", "x", expected="prose")]
    )
    subject = _run(
        [_record("a", "x", expected="prose"), _record("b", "x", expected="prose")],
        SUBJECT_ARTIFACT,
    )
    with pytest.raises(ComparisonError) as refused:
        compare_runs(baseline=baseline, subject=subject, policy=_policy(_metric("json_exact")))
    assert (refused.value.code, refused.value.field) == (
        "reference_not_json",
        "metrics[0].baseline.records[1].expected",
    )


def test_held_back_errors_follow_the_reference_order() -> None:
    rows = [_record(f"r{index}", "alpha", expected="prose") for index in range(3)]
    baseline = _run(rows)
    subject = _run(rows, SUBJECT_ARTIFACT)
    # metric 0 is fine, metric 1 has an invalid reference: reported at metric 1's turn
    policy = _policy(_metric("exact_match"), _metric("json_exact"))
    with pytest.raises(ComparisonError) as refused:
        compare_runs(baseline=baseline, subject=subject, policy=policy)
    assert refused.value.field == "metrics[1].baseline.records[0].expected"
    # two failing metrics: the first in policy order wins, whatever the record order
    policy = _policy(_metric("json_fields"), _metric("json_exact"))
    with pytest.raises(ComparisonError) as refused:
        compare_runs(baseline=baseline, subject=subject, policy=policy)
    assert (refused.value.code, refused.value.field) == (
        "reference_missing_field",
        "metrics[0].baseline.records[0].expected",
    )


def test_capacity_is_checked_before_scoring_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    baseline = _run(
        [_record("a", "x", expected="prose", error=""), _record("b", "x", expected="prose")]
    )
    subject = _run(
        [_record("a", "x", expected="prose"), _record("b", "x", expected="prose")],
        SUBJECT_ARTIFACT,
    )
    monkeypatch.setattr(comparison_engine, "MAX_MISSING_ID_BYTES", 4)
    with pytest.raises(ComparisonError) as refused:
        compare_runs(baseline=baseline, subject=subject, policy=_policy(_metric("json_exact")))
    assert (refused.value.code, refused.value.field) == (
        "missing_id_capacity_exceeded",
        "missing_ids",
    )


def test_missing_id_capacity_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    case = _vector_case("missing-results-insufficient")["input"]
    total = _compare_case(case).missing_id_bytes
    monkeypatch.setattr(comparison_engine, "MAX_MISSING_ID_BYTES", total)
    assert _compare_case(case).missing_id_bytes == total  # equality is allowed
    monkeypatch.setattr(comparison_engine, "MAX_MISSING_ID_BYTES", total - 1)
    with pytest.raises(ComparisonError) as refused:
        _compare_case(case)
    assert refused.value.code == "missing_id_capacity_exceeded"


def test_report_size_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    case = _vector_case("text-20-exact-loose")["input"]
    size = len(_compare_case(case).canonical_bytes)
    monkeypatch.setattr(comparison_engine, "MAX_REPORT_BYTES", size - 1)
    with pytest.raises(ComparisonError) as refused:
        _compare_case(case)
    assert (refused.value.code, refused.value.field) == ("report_too_large", "report")


def test_budget_counts_overlapping_slices_and_missing_pairs() -> None:
    rows = [
        _record(f"r{index}", None if index == 0 else "alpha", metadata={"k": "v", "j": "w"})
        for index in range(5)
    ]
    baseline = _run(rows)
    subject = _run(rows, SUBJECT_ARTIFACT)
    slices = [{"name": "k", "where": {"k": "v"}}, {"name": "both", "where": {"k": "v", "j": "w"}}]
    policy = _policy(_metric("exact_match"), _metric("token_f1"), slices=slices)
    required = (5 + 5 + 5) * 1 * 2048
    report = compare_runs(
        baseline=baseline, subject=subject, policy=policy, max_bootstrap_draws=required
    )
    assert report.required_bootstrap_draws == required
    assert [entry.slice for entry in report.metrics] == ["overall"] * 2 + ["k"] * 2 + ["both"] * 2
    with pytest.raises(ComparisonError):
        compare_runs(
            baseline=baseline, subject=subject, policy=policy, max_bootstrap_draws=required - 1
        )
    binary_only = _policy(_metric("exact_match"), slices=slices)
    assert (
        compare_runs(
            baseline=baseline, subject=subject, policy=binary_only, max_bootstrap_draws=0
        ).required_bootstrap_draws
        == 0
    )


def test_slices_select_on_baseline_metadata_strings() -> None:
    rows = [
        _record("a", "alpha beta", metadata={"topic": "geo"}),
        _record("b", "alpha beta", metadata={"topic": "geography"}),
        _record("c", "alpha beta", metadata={}),
    ]
    baseline = _run(rows)
    subject = _run(rows, SUBJECT_ARTIFACT)
    slices = [{"name": "geo", "where": {"topic": "geo"}}]
    report = compare_runs(
        baseline=baseline, subject=subject, policy=_policy(_metric(), slices=slices)
    )
    assert [entry.count for entry in report.metrics] == [3, 1]


# ---------------------------------------------------------------------------
# Seeds and the parallel bootstrap


def test_seed_rows_match_the_primitive() -> None:
    records = []
    for path in sorted((vectors_dir() / "invarlock" / "runs").glob("*.json")):
        try:
            records.extend(read_run(path).records)
        except SealevalError:
            continue
    odd = _run(
        [
            _record(
                'a\u2028"\\\u0085', "x", metadata={"z": "\x01\u00e9", "a": "\ud7ff", "\u0000": ""}
            ),
            _record("b", "x", input={"k": [1, 2.5, None, True]}, expected=["x", {"y": -0.0}]),
            _record("c", "x", input="\u007f\u0085", expected=12, metadata={"m": "\U0001f600"}),
        ]
    )
    records.extend(odd.records)
    assert len(records) > 100
    for record in records:
        assert comparison_pairing.record_seed_row(record) == seed_row(record)


def _synthetic_scores(size: int, seed: int, distinct: int) -> tuple[Run, Run]:
    rng = random.Random(seed)
    words = [f"w{index}" for index in range(distinct)]
    baseline_rows = []
    subject_rows = []
    for index in range(size):
        expected = " ".join(rng.choice(words) for _ in range(rng.randint(1, 4)))
        baseline_rows.append(
            _record(f"{index:06d}", " ".join(rng.choice(words) for _ in range(2)), expected)
        )
        subject_rows.append(
            _record(f"{index:06d}", expected if rng.random() < 0.5 else "w0", expected)
        )
    return _run(baseline_rows), _run(subject_rows, SUBJECT_ARTIFACT)


def test_parallel_bootstrap_is_bit_identical(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(comparison_parallel, "PARALLEL_MIN_PAIRS", 50)
    baseline, subject = _synthetic_scores(300, 5, 6)
    policy = _policy(_metric("token_f1"), slices=[{"name": "s", "where": {"missing": "never"}}])
    serial = compare_runs(baseline=baseline, subject=subject, policy=policy, workers=1)
    parallel = compare_runs(baseline=baseline, subject=subject, policy=policy, workers=3)
    assert parallel.canonical_bytes == serial.canonical_bytes
    rng = np.random.default_rng(17)
    for size in (50, 257, 1000):
        for values in (7, 300):
            left = rng.integers(0, values, size) / (values - 1)
            right = np.clip(left + rng.integers(-3, 4, size) / (values - 1), 0.0, 1.0)
            seed = f"sha256:{int(rng.integers(0, 2**62)):064x}"
            expected = shake256_bootstrap_interval(left, right, seed)
            assert comparison_parallel.shake_interval(left, right, seed, 2) == expected
            grouped = comparison_parallel._grouped(right - left)
            assert grouped is not None
            # the worker path itself (no silent fallback)
            assert comparison_parallel._parallel_shake(right - left, seed, grouped, 2) == expected
    # continuous values exceed the grouping limit and use the primitive itself
    left = rng.random(400)
    right = rng.random(400)
    seed = "sha256:" + "f" * 64
    assert comparison_parallel.shake_interval(left, right, seed, 2) == shake256_bootstrap_interval(
        left, right, seed
    )


def test_parallel_bootstrap_falls_back_when_workers_cannot_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(comparison_parallel, "PARALLEL_MIN_PAIRS", 50)

    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise OSError("no processes here")

    monkeypatch.setattr(comparison_parallel, "ProcessPoolExecutor", refuse)
    left = np.arange(100) / 99.0
    right = left[::-1].copy()
    seed = "sha256:" + "e" * 64
    assert comparison_parallel.shake_interval(left, right, seed, 2) == shake256_bootstrap_interval(
        left, right, seed
    )


# ---------------------------------------------------------------------------
# Decision order


@pytest.mark.parametrize(
    ("name", "reference", "width_first"),
    [
        ("perfect-tie-n10", "regression", "insufficient_evidence"),
        ("perfect-tie-n20", "regression", "insufficient_evidence"),
        # width 0.175 is within the 0.3 limit, so the bound still decides: lower -0.088 < -0.05
        ("perfect-tie-n40", "regression", "regression"),
        ("perfect-tie-n2000", "pass", "pass"),
    ],
)
def test_decision_orders_on_perfect_ties(name: str, reference: str, width_first: str) -> None:
    case = _vector_case(name)
    default = _compare_case(case["input"])
    assert default.canonical_bytes == case["expected"]["report_canonical"].encode("utf-8")
    assert default.decision == reference
    explicit = _compare_case(case["input"], decision_order="reference")
    assert explicit.canonical_bytes == default.canonical_bytes
    report = _compare_case(case["input"], decision_order="width_first")
    assert report.decision == width_first
    assert report.decision_order == "width_first"
    document = report.to_dict()
    validate_report(document)
    assert document["decision_rule"] == WIDTH_FIRST_RULE
    entry = report.metrics[0]
    assert entry.delta == 0.0
    assert entry.interval == default.metrics[0].interval
    if width_first == "insufficient_evidence":
        assert entry.reasons == ("interval is too wide",)
    # apart from the rule marker, decisions and reasons, the documents are equal
    reference_document = default.to_dict()
    for doc in (document, reference_document):
        doc.pop("decision_rule", None)
        doc.pop("decision")
        for item in doc["metrics"]:
            item.pop("decision")
            item.pop("reasons")
    assert document == reference_document


def test_width_first_keeps_bounds_when_the_interval_is_narrow() -> None:
    for name in (
        "text-200-exact-strict",
        "text-2000-exact-strict",
        "regression-and-bounds-reasons",
    ):
        case = _vector_case(name)
        default = _compare_case(case["input"])
        width_first = _compare_case(case["input"], decision_order="width_first")
        for left, right in zip(default.metrics, width_first.metrics, strict=True):
            interval = left.interval
            if interval is None:
                assert right == left
                continue
            metric = next(m for m in case["input"]["policy"]["metrics"] if m["name"] == left.name)
            if interval.upper - interval.lower > metric["maximum_interval_width"]:
                assert right.decision == "insufficient_evidence"
            else:
                assert (right.decision, right.reasons) == (left.decision, left.reasons)
    assert DECISION_ORDERS == ("reference", "width_first")


# ---------------------------------------------------------------------------
# Never echo


def test_errors_never_echo_run_content() -> None:
    rows = [_record(CANARY + "-id", CANARY, expected=CANARY, metadata={"k": CANARY})]
    baseline = _run(rows)
    changed = [dict(rows[0], expected=CANARY + "!")]
    subject = _run(changed, SUBJECT_ARTIFACT)
    failures: list[SealevalError] = []
    for policy, right in (
        (_policy(_metric("exact_match")), subject),
        (_policy(_metric("json_exact")), _run(rows, SUBJECT_ARTIFACT)),
        (_policy(_metric("numeric_tolerance")), _run(rows, SUBJECT_ARTIFACT)),
    ):
        with pytest.raises(SealevalError) as refused:
            compare_runs(baseline=baseline, subject=right, policy=policy)
        failures.append(refused.value)
    for error in failures:
        assert CANARY not in str(error) + repr(error)
    report = compare_runs(
        baseline=baseline,
        subject=_run([dict(rows[0], output=CANARY + "?")], SUBJECT_ARTIFACT),
        policy=_policy(_metric()),
    )
    assert CANARY not in repr(report) + repr(report.metrics) + repr(report.metric_summaries())


def test_error_classes_are_closed() -> None:
    assert ComparisonError.module == "sealeval.captured.comparison"
    assert ComparisonError.field_in_message
    assert issubclass(ComparisonError, SealevalError)
    with pytest.raises(RuntimeError):
        ComparisonError("no_such_code")
    error = ComparisonError("invalid_budget", "max_bootstrap_draws")
    assert str(error) == "max_bootstrap_draws: invalid_budget"


def test_report_numbers_are_floats_and_counts_ints() -> None:
    report = _compare_case(_vector_case("text-20-multi-metric-slices")["input"])
    for entry in report.metrics:
        assert type(entry.count) is int
        for value in (entry.baseline_mean, entry.subject_mean, entry.delta, entry.ratio):
            assert value is None or type(value) is float
            assert value is None or math.isfinite(value)


def test_vector_runs_are_available() -> None:
    assert Path(vectors_dir() / "invarlock" / "runs").is_dir()
