"""Comparison policy: vectors, contract, every refusal, runtime Unicode check, digest properties."""

from __future__ import annotations

import copy
import json
import logging
import re
import unicodedata
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from sealeval.canonical import digest_invarlock
from sealeval.captured import policy as policy_module
from sealeval.captured.policy import (
    OVERALL,
    POLICY_FORMAT,
    ComparisonPolicy,
    ComparisonPolicyError,
    check_runtime,
    comparison_policy_digest,
    load_comparison_policy,
    parse_comparison_policy,
)
from sealeval.captured.scorers import NormalizedNll, RecordedScore, Scorer, ScorerError
from sealeval.errors import CanonicalError
from support.refusals import CANARY
from support.vectors import PROJECT_ROOT, cases, load

DIGEST_A = "sha256:" + "a" * 64
DIGEST_B = "sha256:" + "b" * 64
DIGEST_C = "sha256:" + "c" * 64
SCHEMA_PATH = PROJECT_ROOT / "contracts" / "invarlock.comparison-policy-v1.schema.json"
INTERPRETER_UNICODE = unicodedata.unidata_version


def _metric(family: str = "exact_match", **changes: Any) -> dict[str, Any]:
    metric: dict[str, Any] = {
        "name": family,
        "kind": family,
        "configuration": {},
        "direction": "higher",
        "unit": "score",
        "aggregation": "mean",
        "minimum_count": 10,
        "maximum_regression": 0.05,
        "maximum_interval_width": 0.3,
    }
    if family in ("normalized_match", "token_f1"):
        metric["configuration"] = {"unicode_version": "15.0.0"}
    elif family == "json_fields":
        metric["configuration"] = {"fields": ["/a"]}
    elif family == "recorded":
        metric["score_key"] = "quality"
        metric["accepted_provenance"] = {
            "kind": "measurement",
            "source": "meter",
            "version": "1",
            "unit": "score",
            "rubric_digest": None,
        }
    elif family == "normalized_nll_per_utf8_byte":
        del metric["maximum_regression"]
        metric.update(
            configuration={
                "configuration_digest": DIGEST_A,
                "baseline_tokenizer_digest": DIGEST_B,
                "subject_tokenizer_digest": DIGEST_C,
            },
            direction="lower",
            unit="nats_per_utf8_byte",
            ratio_max=1.1,
        )
    for key, value in changes.items():
        if value is _DELETE:
            del metric[key]
        else:
            metric[key] = value
    return metric


_DELETE: Any = object()


def _policy(*metrics: dict[str, Any], **changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "format": POLICY_FORMAT,
        "metrics": list(metrics) or [_metric()],
        "slices": [],
    }
    for key, value in changes.items():
        if value is _DELETE:
            del document[key]
        else:
            document[key] = value
    return document


# ---------------------------------------------------------------------------
# Golden vectors

# Each distinct reference message (informational) maps to our closed code. The
# jsonschema messages quote values, so they are matched by pattern.
_MESSAGE_CODES: tuple[tuple[str, str], ...] = (
    (r"metric and slice names must be unique; overall is reserved", "duplicate_name"),
    (r"invalid policy slices\.0\.where: \{\} should be non-empty", "empty_where"),
    (r"invalid policy metrics: \[.*\] is too long", "too_many_metrics"),
    (r"invalid policy slices: \[.*\] is too long", "too_many_slices"),
    (r"invalid policy metrics: \[\] should be non-empty", "no_metrics"),
    (r"deterministic scorers require higher-is-better score units", "higher_score_required"),
    (r"invalid policy metrics\.0: '(maximum_regression|ratio_max)' is a required property",
     "missing_field"),
    (r"invalid policy metrics\.0\.\w+: -?[0-9.]+ is less than (or equal to )?the minimum of 0",
     "out_of_range"),
    (r"invalid policy metrics\.0\.minimum_count: \d+ is (less|greater) than the (min|max)imum "
     r"of \d+", "out_of_range"),
    (r"invalid policy metrics\.0\.\w+: '\w+' was expected", "invalid_constant"),
    (r"subject minimum exceeds maximum", "reversed_bounds"),
    (r"invalid policy metrics\.0\.configuration: '\w+' is a required property", "missing_field"),
    (r"invalid policy metrics\.0\.configuration\.unicode_version: .* does not match .*",
     "invalid_unicode_version"),
    (r"unsupported configuration for 'exact_match'", "unsupported_configuration"),
    (r"(absolute|relative) tolerance must be a finite nonnegative number", "invalid_tolerance"),
    (r"json_fields requires 1\u2013100 JSON pointer fields", "invalid_fields"),
    (r"invalid JSON pointer escape", "invalid_pointer_escape"),
    (r"recomputed metrics cannot accept recorded provenance", "provenance_forbidden"),
    (r"recorded metric requires provenance and score_key, without configuration",
     "invalid_recorded_metric"),
    (r"recorded metric provenance is inconsistent", "provenance_inconsistent"),
    (r"invalid policy metrics\.0: False schema does not allow [0-9.]+", "forbidden_field"),
    (r"invalid policy metrics\.0\.kind: '\w+' is not one of \[.*\]", "unknown_kind"),
    (r"invalid policy : Additional properties are not allowed \('\w+' was unexpected\)",
     "unknown_field"),
    (r"invalid policy expected_case_set_digest: .* does not match .*", "invalid_digest"),
    (r"invalid policy (slices\.0\.where\.a|metrics\.0\.maximum_regression): \S+ is not of type "
     r"'(string|number)'", "invalid_type"),
    (r"normalized_match requires Unicode '[0-9.]+'; this runtime provides 15\.0\.0\. Use a "
     r"runtime with the policy's Unicode version\.", "unsupported_unicode_version"),
)  # fmt: skip
# Lax reference behaviour sealeval refuses (docs/decisions/compat.md): an integral
# float where the schema says integer is accepted and hashed as 10.0 by invarlock.
_EXPECTED_DEVIATIONS = {"integer-valued-float-count": "not_exact_integer"}


def _code_for(message: str) -> str:
    codes = [code for pattern, code in _MESSAGE_CODES if re.fullmatch(pattern, message, re.S)]
    assert len(codes) == 1, "vector error message not understood"
    return codes[0]


def _assert_refused(document: Any, code: str) -> None:
    with pytest.raises(ComparisonPolicyError) as caught:
        parse_comparison_policy(document)
    assert caught.value.code == code


@pytest.mark.parametrize("case", cases("invarlock/policies.json"))
def test_policy_vector(case: dict[str, Any]) -> None:
    if set(case["input"]) != {"policy"}:
        pytest.fail("vector case shape not understood")
    document = case["input"]["policy"]
    expected = case["expected"]
    if case["name"] in _EXPECTED_DEVIATIONS:
        assert "policy_digest" in expected
        _assert_refused(document, _EXPECTED_DEVIATIONS[case["name"]])
    elif set(expected) == {"policy_digest", "policy_canonical", "runtime_check"}:
        policy = parse_comparison_policy(document)
        assert policy.canonical_bytes == expected["policy_canonical"].encode("utf-8")
        assert policy.digest == expected["policy_digest"]
        assert comparison_policy_digest(document) == expected["policy_digest"]
        assert load_comparison_policy(json.dumps(document)).digest == expected["policy_digest"]
        runtime = expected["runtime_check"]
        if runtime is True:
            assert len(check_runtime(policy)) == len(policy.metrics)
        elif set(runtime) == {"error"}:
            with pytest.raises(ComparisonPolicyError) as caught:
                check_runtime(policy)
            assert caught.value.code == _code_for(runtime["error"]["message"])
        else:
            pytest.fail("vector case shape not understood")
    elif set(expected) == {"error"}:
        _assert_refused(document, _code_for(expected["error"]["message"]))
    else:
        pytest.fail("vector case shape not understood")


# ---------------------------------------------------------------------------
# Contract


@pytest.fixture(scope="module")
def validator() -> Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


# Vector refusals the JSON Schema cannot express (uniqueness across items,
# cross-member rules); every other refused vector policy violates the schema.
_NOT_IN_SCHEMA = {
    "reject-duplicate-metric",
    "reject-duplicate-slice",
    "reject-subject-min-gt-max",
    "reject-recorded-unit-mismatch",
}


def test_vector_policies_match_the_contract(validator: Draft202012Validator) -> None:
    accepted = rejected = 0
    for case in load("invarlock/policies.json")["cases"]:
        document = case["input"]["policy"]
        if case["name"] in _EXPECTED_DEVIATIONS or case["name"] in _NOT_IN_SCHEMA:
            continue
        if "policy_digest" in case["expected"]:
            validator.validate(document)
            accepted += 1
        else:
            assert not validator.is_valid(document), case["name"]
            rejected += 1
    assert accepted >= 6
    assert rejected >= 30
    for case in load("invarlock/comparisons.json")["cases"]:
        document = case["input"]["policy"]
        parse_comparison_policy(document)
        validator.validate(document)
        accepted += 1
    assert accepted >= 80


def test_contract_agrees_with_the_parser_on_every_kind(validator: Draft202012Validator) -> None:
    for kind in policy_module.KINDS:
        document = _policy(_metric(kind, subject_minimum=0, subject_maximum=1))
        parse_comparison_policy(document)
        validator.validate(document)
    judge = _metric("recorded")
    judge["accepted_provenance"] = {**judge["accepted_provenance"], "kind": "judge"}
    assert not validator.is_valid(_policy(judge))
    _assert_refused(_policy(judge), "provenance_inconsistent")
    judge["accepted_provenance"]["rubric_digest"] = DIGEST_A
    validator.validate(_policy(judge))
    parse_comparison_policy(_policy(judge))
    for text in ("a\n", "", "x" * 129):
        bad = _policy(_metric(name=text))
        assert not validator.is_valid(bad)
        _assert_refused(bad, "invalid_text")
    bad_digest = _policy(expected_case_set_digest=DIGEST_A + "\n")
    assert not validator.is_valid(bad_digest)
    _assert_refused(bad_digest, "invalid_digest")


# ---------------------------------------------------------------------------
# Every refusal, with its code


def _refusals() -> list[tuple[str, Any]]:
    recorded = _metric("recorded")
    deep_provenance = copy.deepcopy(recorded)
    deep_provenance["accepted_provenance"]["kind"] = "oracle"
    return [
        ("invalid_type", "not a policy"),
        ("invalid_type", _policy(metrics={"a": 1})),
        ("invalid_type", _policy(slices=None)),
        ("invalid_type", _policy(_metric(name=7))),
        ("invalid_type", _policy(_metric(configuration=[]))),
        ("invalid_type", _policy(_metric(minimum_count=10.5))),
        ("invalid_type", _policy(_metric(minimum_count="10"))),
        ("invalid_type", _policy(_metric(maximum_interval_width=None))),
        ("invalid_type", _policy(_metric(subject_minimum=False))),
        ("invalid_type", _policy(slices=[{"name": "s", "where": ["a"]}])),
        ("invalid_type", _policy(_metric(accepted_provenance=[]))),
        ("invalid_json_value", _policy(_metric(maximum_regression=float("nan")))),
        ("invalid_json_value", _policy(_metric(name="\ud800"))),
        ("invalid_json_value", _policy(slices=[{"name": "s", "where": {"a": "\udfff"}}])),
        ("invalid_json_value", {1: 2}),
        ("unknown_field", _policy(_metric(note="x"))),
        ("unknown_field", _policy(slices=[{"name": "s", "where": {"a": "b"}, "x": 1}])),
        ("unknown_field", _policy(_metric("recorded", accepted_provenance={
            **recorded["accepted_provenance"], "x": 1}))),
        ("missing_field", _policy(format=_DELETE)),
        ("missing_field", _policy(_metric(unit=_DELETE))),
        ("missing_field", _policy(slices=[{"name": "s"}])),
        ("missing_field", _policy(_metric("normalized_match", configuration={}))),
        ("invalid_constant", _policy(format="invarlock/comparison-policy-v2")),
        ("invalid_constant", _policy(_metric(direction="up"))),
        ("invalid_constant", _policy(_metric("normalized_nll_per_utf8_byte", unit="nats"))),
        ("invalid_constant", _policy(deep_provenance)),
        ("invalid_text", _policy(_metric(unit="\x7f"))),
        ("invalid_text", _policy(slices=[{"name": "s", "where": {"a": "x" * 4097}}])),
        ("invalid_text", _policy(_metric("recorded", score_key=""))),
        ("invalid_digest", _policy(expected_case_set_digest="sha256:" + "A" * 64)),
        ("invalid_digest", _policy(_metric("recorded", accepted_provenance={
            **recorded["accepted_provenance"], "rubric_digest": "x"}))),
        ("invalid_digest", _policy(_metric("normalized_nll_per_utf8_byte", configuration={
            "configuration_digest": "x", "baseline_tokenizer_digest": DIGEST_B,
            "subject_tokenizer_digest": DIGEST_C}))),
        ("too_many_members", _policy(_metric(configuration={str(i): i for i in range(101)}))),
        ("too_many_members", _policy(slices=[{"name": "s", "where": {
            str(i): "v" for i in range(101)}}])),
        ("no_metrics", _policy(metrics=[])),
        ("too_many_metrics", _policy(*[_metric(name=f"m{i}") for i in range(17)])),
        ("too_many_slices", _policy(slices=[
            {"name": f"s{i}", "where": {"k": "v"}} for i in range(17)])),
        ("empty_where", _policy(slices=[{"name": "s", "where": {}}])),
        ("unknown_kind", _policy(_metric(kind="bleu"))),
        ("unknown_kind", _policy(_metric(kind=["exact_match"]))),
        ("not_exact_integer", _policy(_metric(minimum_count=10.0))),
        ("out_of_range", _policy(_metric(minimum_count=0))),
        ("out_of_range", _policy(_metric(maximum_interval_width=-1))),
        ("out_of_range", _policy(_metric(maximum_regression=-1e-9))),
        ("out_of_range", _policy(_metric("normalized_nll_per_utf8_byte", ratio_max=0.0))),
        ("forbidden_field", _policy(_metric(ratio_max=1.1))),
        ("forbidden_field", _policy(_metric("normalized_nll_per_utf8_byte",
                                            maximum_regression=0))),
        ("duplicate_name", _policy(_metric(), _metric())),
        ("duplicate_name", _policy(slices=[{"name": OVERALL, "where": {"a": "b"}}])),
        ("provenance_forbidden", _policy(_metric(accepted_provenance=
                                                 recorded["accepted_provenance"]))),
        ("provenance_forbidden", _policy(_metric("normalized_nll_per_utf8_byte", score_key="k"))),
        ("higher_score_required", _policy(_metric("token_f1", direction="lower"))),
        ("invalid_recorded_metric", _policy(_metric("recorded", score_key=_DELETE))),
        ("invalid_recorded_metric", _policy(_metric("recorded", accepted_provenance=_DELETE))),
        ("provenance_inconsistent", _policy(_metric("recorded", unit="ms"))),
        ("reversed_bounds", _policy(_metric(subject_minimum=1, subject_maximum=0.5))),
        ("unsupported_configuration", _policy(_metric("json_exact", configuration={"x": 1}))),
        ("invalid_unicode_version", _policy(_metric("token_f1", configuration={
            "unicode_version": "15"}))),
        ("invalid_casefold", _policy(_metric("token_f1", configuration={
            "unicode_version": "15.0.0", "casefold": None}))),
        ("invalid_tolerance", _policy(_metric("numeric_tolerance", configuration={
            "absolute": True}))),
        ("invalid_fields", _policy(_metric("json_fields", configuration={"fields": []}))),
        ("invalid_pointer_escape", _policy(_metric("json_fields", configuration={
            "fields": ["/a~2"]}))),
        ("duplicate_field", _policy(_metric("json_fields", configuration={
            "fields": ["/a", "/a"]}))),
    ]  # fmt: skip


@pytest.mark.parametrize(("code", "document"), _refusals())
def test_every_refusal_has_its_code(code: str, document: Any) -> None:
    _assert_refused(document, code)


def test_refusal_table_covers_every_code() -> None:
    # invalid_yaml and not_found (policy files and YAML text): tests/test_public_api.py
    codes = {code for code, _ in _refusals()} | {
        "too_large",
        "unsupported_unicode_version",
        "invalid_yaml",
        "not_found",
    }
    assert codes == ComparisonPolicyError.codes


def test_too_large_policy_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(policy_module, "MAX_CANONICAL_BYTES", 200)
    _assert_refused(_policy(), "too_large")


@pytest.mark.parametrize(
    ("version", "code"),
    [("13.0.0", "unsupported_unicode_version"), ("16.0.0", "unsupported_unicode_version")],
)
def test_runtime_refuses_unavailable_unicode(version: str, code: str) -> None:
    metric = _metric("token_f1", configuration={"unicode_version": version})
    policy = parse_comparison_policy(_policy(_metric(), metric))  # portable level passes
    with pytest.raises(ComparisonPolicyError) as caught:
        check_runtime(policy)
    assert caught.value.code == code
    assert caught.value.field == "metrics[1].configuration.unicode_version"


def test_runtime_selects_the_pinned_tables() -> None:
    pinned = [
        _metric("normalized_match", name="n15"),
        _metric("token_f1", name="t14", configuration={"unicode_version": "14.0.0"}),
    ]
    scorers: Any = check_runtime(parse_comparison_policy(_policy(*pinned)))
    for scorer, version in zip(scorers, ("15.0.0", "14.0.0"), strict=True):
        expected = "unicodedata" if version == INTERPRETER_UNICODE else "sealeval"
        assert (scorer.tables.version, scorer.tables.provider) == (version, expected)


def test_runtime_builds_one_scorer_per_metric() -> None:
    kinds = policy_module.KINDS
    policy = parse_comparison_policy(_policy(*[_metric(kind) for kind in kinds]))
    scorers = check_runtime(policy)
    assert [scorer.kind for scorer in scorers] == list(kinds)
    assert isinstance(scorers[kinds.index("recorded")], RecordedScore)
    assert isinstance(scorers[kinds.index("normalized_nll_per_utf8_byte")], NormalizedNll)
    assert all(
        isinstance(scorer, Scorer)
        for scorer, kind in zip(scorers, kinds, strict=True)
        if kind not in ("recorded", "normalized_nll_per_utf8_byte")
    )
    with pytest.raises(ComparisonPolicyError) as caught:
        check_runtime(_policy())  # type: ignore[arg-type]
    assert caught.value.code == "invalid_type"


def test_runtime_maps_late_scorer_refusals(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(kind: object, configuration: object) -> Scorer:
        raise ScorerError("invalid_tolerance", "configuration.absolute")

    policy = parse_comparison_policy(_policy())
    monkeypatch.setattr(policy_module, "deterministic_scorer", refuse)
    with pytest.raises(ComparisonPolicyError) as caught:
        check_runtime(policy)
    assert (caught.value.code, caught.value.field) == (
        "invalid_tolerance",
        "metrics[0].configuration.absolute",
    )


# ---------------------------------------------------------------------------
# The validated policy


def test_policy_accessors() -> None:
    document = _policy(
        _metric("exact_match"),
        _metric("token_f1"),
        _metric("recorded", direction="lower", unit="score"),
        _metric("normalized_nll_per_utf8_byte", subject_maximum=2),
        slices=[{"name": "hard", "where": {"difficulty": "hard", "lang": "en"}}],
        expected_case_set_digest=DIGEST_A,
    )
    policy = parse_comparison_policy(document)
    assert policy.scope_names == ("overall", "hard")
    assert policy.bootstrap_metric_count == 3
    assert policy.has_nll
    assert policy.unicode_versions == frozenset({"15.0.0"})
    assert policy.expected_case_set_digest == DIGEST_A
    assert policy.to_dict() == document
    assert policy.digest == digest_invarlock(document)
    exact, f1, recorded, nll = policy.metrics
    assert (exact.is_binary, f1.is_binary, nll.is_nll) == (True, False, True)
    assert (recorded.scoring_assurance, f1.scoring_assurance) == ("recorded", "recomputed")
    assert (exact.maximum_regression, exact.ratio_max) == (0.05, None)
    assert (nll.maximum_regression, nll.ratio_max, nll.subject_maximum) == (None, 1.1, 2)
    assert (recorded.score_key, f1.unicode_version, exact.unicode_version) == (
        "quality",
        "15.0.0",
        None,
    )
    hard = policy.slices[0]
    assert hard.matches({"difficulty": "hard", "lang": "en", "x": "y"})
    assert not hard.matches({"difficulty": "hard"})
    assert not hard.matches({"difficulty": "hard", "lang": 1})
    assert not hard.matches(None)
    with pytest.raises(TypeError):
        policy.document["format"] = "x"  # type: ignore[index]
    assert ComparisonPolicy(document) == policy
    assert len({policy, ComparisonPolicy(document)}) == 1
    assert policy != parse_comparison_policy(_policy())
    assert policy != document


def test_policy_is_a_deep_copy() -> None:
    document = _policy(_metric("json_fields"))
    policy = parse_comparison_policy(document)
    document["metrics"][0]["configuration"]["fields"].append("/b")
    assert policy.metrics[0].configuration["fields"] == ("/a",)
    assert policy.to_dict()["metrics"][0]["configuration"]["fields"] == ["/a"]


def test_load_refuses_non_json_bytes() -> None:
    with pytest.raises(CanonicalError):
        load_comparison_policy(b'{"format": 1, "format": 2}')
    with pytest.raises(ComparisonPolicyError):
        load_comparison_policy(b"[]")


def _shuffled(value: Any, rng: Any) -> Any:
    if isinstance(value, dict):
        keys = list(value)
        rng.shuffle(keys)
        return {key: _shuffled(value[key], rng) for key in keys}
    if isinstance(value, list):
        return [_shuffled(item, rng) for item in value]
    return value


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from(policy_module.KINDS), min_size=1, max_size=4, unique=True),
    st.randoms(use_true_random=False),
    st.floats(min_value=0, max_value=1, allow_nan=False),
)
def test_digest_ignores_key_order_but_not_number_types(
    kinds: list[str], rng: Any, width: float
) -> None:
    document = _policy(
        *[_metric(kind, maximum_interval_width=width or 0.5) for kind in kinds],
        slices=[{"name": "s", "where": {"b": "1", "a": "2"}}],
    )
    digest = comparison_policy_digest(document)
    assert comparison_policy_digest(_shuffled(document, rng)) == digest
    retyped = copy.deepcopy(document)
    retyped["metrics"][0]["maximum_interval_width"] = 1
    other = copy.deepcopy(document)
    other["metrics"][0]["maximum_interval_width"] = 1.0
    assert comparison_policy_digest(retyped) != comparison_policy_digest(other)


def test_never_echo(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    documents = [
        _policy(_metric(name=CANARY), _metric(name=CANARY)),
        _policy(_metric(CANARY)),
        _policy(_metric(**{CANARY: 1})),
        _policy(_metric("numeric_tolerance", configuration={CANARY: CANARY})),
        _policy(_metric("json_fields", configuration={"fields": ["/" + CANARY + "~"]})),
        _policy(slices=[{"name": CANARY, "where": {CANARY: 1}}]),
        _policy(_metric(unit=CANARY)),
        {CANARY: CANARY},
    ]
    for document in documents:
        with pytest.raises(ComparisonPolicyError) as caught:
            parse_comparison_policy(document)
        error = caught.value
        for text in (str(error), repr(error), *map(str, error.args)):
            assert CANARY not in text
        assert error.__cause__ is None
    valid = parse_comparison_policy(
        _policy(
            _metric(name=CANARY, unit="score"),
            _metric("recorded", score_key=CANARY),
            slices=[{"name": CANARY, "where": {CANARY: CANARY}}],
        )
    )
    assert CANARY not in repr(valid)
    assert all(CANARY not in repr(item) for item in (*valid.metrics, *valid.slices))
    assert all(CANARY not in repr(scorer) for scorer in check_runtime(valid))
    assert CANARY not in caplog.text
