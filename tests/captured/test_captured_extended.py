"""The opt-in extended comparison and its policy extension (sealeval.captured.extended)."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from sealeval.canonical import encode_invarlock
from sealeval.captured.comparison import compare_runs
from sealeval.captured.extended import (
    EXTENSION_FORMAT,
    REASON_UNCONFIRMED,
    ExtensionError,
    PolicyExtension,
    extend_comparison,
    load_policy_extension,
    parse_policy_extension,
)
from sealeval.captured.inference import adjust_p_values, mcnemar_p_value
from sealeval.captured.intervals import PairedCounts
from sealeval.captured.policy import parse_comparison_policy
from support.captured_extended import _policy, _runs
from support.refusals import CANARY
from support.vectors import PROJECT_ROOT


def _schema(name: str) -> dict[str, Any]:
    return json.loads(
        (PROJECT_ROOT / "contracts" / f"{name}.schema.json").read_text(encoding="utf-8")
    )


def _extension(policy: dict[str, Any], **members: Any) -> PolicyExtension:
    document = {
        "format": EXTENSION_FORMAT,
        "policy_digest": parse_comparison_policy(policy).digest,
        **members,
    }
    return parse_policy_extension(document)


def test_extension_defaults_leave_every_decision_as_the_reference() -> None:
    baseline, subject = _runs()
    policy = _policy()
    report = compare_runs(baseline=baseline, subject=subject, policy=policy)
    document = extend_comparison(
        baseline=baseline, subject=subject, policy=policy, extension=_extension(policy)
    )
    jsonschema.validate(document, _schema("sealeval.extended-comparison-v1"))
    assert document["comparison_digest"] == report.digest
    assert CANARY not in json.dumps(document)
    assert document["decision"] == report.decision == document["reference_decision"]
    for row, entry in zip(document["entries"], report.metrics, strict=True):
        assert (row["metric"], row["slice"]) == (entry.name, entry.slice)
        assert row["decision"] == entry.decision
        assert row["reasons"] == list(entry.reasons)
        assert row["adjusted_p_value"] == row["p_value"]
        assert row["interval"] is None


def test_flips_and_p_values_agree_with_a_direct_count() -> None:
    baseline, subject = _runs()
    policy = _policy()
    document = extend_comparison(
        baseline=baseline, subject=subject, policy=policy, extension=_extension(policy, flip_ids=3)
    )
    left = {r.id: r.output == "yes" for r in baseline.records}
    right = {r.id: r.output == "yes" for r in subject.records}
    worse = sorted(i for i in left if left[i] and not right[i])
    better = sorted(i for i in left if right[i] and not left[i])
    overall = document["entries"][0]
    flips = overall["flips"]
    assert flips["right_to_wrong"] == len(worse)
    assert flips["wrong_to_right"] == len(better)
    assert flips["right_to_wrong_ids"] == worse[:3]
    assert flips["wrong_to_right_ids"] == better[:3]
    both = sum(left[i] and right[i] for i in left)
    counts = PairedCounts(
        both, len(worse), len(better), len(left) - both - len(worse) - len(better)
    )
    assert overall["p_value"] == mcnemar_p_value(counts)
    hard = document["entries"][1]
    hard_ids = {f"case-{i:04d}" for i in range(0, len(left), 3)}
    assert set(hard["flips"]["right_to_wrong_ids"]) <= hard_ids
    assert hard["flips"]["right_to_wrong"] == len([i for i in worse if i in hard_ids])


def test_holm_turns_an_unconfirmed_regression_into_insufficient_evidence() -> None:
    # A balanced change (as many fixed as broken) with a tight allowed regression:
    # the reference calls it a regression (lower bound beyond -0.01) though no
    # difference is detected at all.
    baseline, subject = _runs(pairs=60, seed=9)
    policy = _policy(maximum_regression=0.01, width=0.5)
    reference = compare_runs(baseline=baseline, subject=subject, policy=policy)
    assert {entry.decision for entry in reference.metrics} == {"regression"}
    none = extend_comparison(
        baseline=baseline, subject=subject, policy=policy, extension=_extension(policy)
    )
    holm = extend_comparison(
        baseline=baseline,
        subject=subject,
        policy=policy,
        extension=_extension(policy, multiplicity="holm", alpha=0.05),
    )
    assert none["decision"] == "regression"
    raw = [row["p_value"] for row in holm["entries"]]
    assert [row["adjusted_p_value"] for row in holm["entries"]] == list(
        adjust_p_values(raw, "holm")
    )
    assert holm["multiplicity"] == {"method": "holm", "alpha": 0.05, "family_size": 2}
    for row in holm["entries"]:
        assert row["adjusted_p_value"] > 0.05
        assert row["decision"] == "insufficient_evidence"
        assert row["reasons"] == [REASON_UNCONFIRMED]
        assert row["reference_decision"] == "regression"
        # the interval already meets the width target: more pairs are not the remedy named
        assert row["more_pairs"] is None
    assert holm["decision"] == "insufficient_evidence"
    jsonschema.validate(holm, _schema("sealeval.extended-comparison-v1"))


def test_method10_interval_is_reported_and_decides() -> None:
    baseline, subject = _runs()
    policy = _policy()
    document = extend_comparison(
        baseline=baseline,
        subject=subject,
        policy=policy,
        extension=_extension(policy, binary_interval="newcombe_1998_method10"),
    )
    for row in document["entries"]:
        interval = row["interval"]
        assert interval["method"] == "newcombe_1998_method10"
        assert interval["lower"] <= interval["upper"]
        too_wide = interval["upper"] - interval["lower"] > 0.3
        regression = interval["lower"] < -0.05
        expected = "regression" if regression else ("insufficient_evidence" if too_wide else "pass")
        assert row["decision"] == expected


def test_insufficient_entries_say_how_many_more_pairs() -> None:
    baseline, subject = _runs(pairs=60)
    policy = _policy(maximum_regression=0.5, width=0.15)
    document = extend_comparison(
        baseline=baseline, subject=subject, policy=policy, extension=_extension(policy)
    )
    for row in document["entries"]:
        assert row["decision"] == "insufficient_evidence"
        assert row["more_pairs"] > 0
    overall, hard = document["entries"]
    # with the suggested number of extra pairs (same rates), the width target is met
    bigger_base, bigger_subject = _runs(pairs=60 + overall["more_pairs"])
    again = extend_comparison(
        baseline=bigger_base, subject=bigger_subject, policy=policy, extension=_extension(policy)
    )
    assert again["entries"][0]["decision"] == "pass"
    assert again["entries"][0]["more_pairs"] is None
    # the slice is still short, by fewer pairs than before
    assert 0 < again["entries"][1]["more_pairs"] < hard["more_pairs"]


def test_extension_must_name_the_policy() -> None:
    baseline, subject = _runs()
    other = _extension(_policy(maximum_regression=0.2))
    with pytest.raises(ExtensionError) as refused:
        extend_comparison(baseline=baseline, subject=subject, policy=_policy(), extension=other)
    assert (refused.value.code, refused.value.field) == ("policy_mismatch", "policy_digest")


def test_a_report_of_other_runs_is_refused() -> None:
    baseline, subject = _runs()
    policy = _policy()
    other = compare_runs(baseline=subject, subject=baseline, policy=policy)
    with pytest.raises(ExtensionError) as refused:
        extend_comparison(
            baseline=baseline,
            subject=subject,
            policy=policy,
            extension=_extension(policy),
            report=other,
        )
    assert (refused.value.code, refused.value.field) == ("report_mismatch", "report")


def _document(**changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = {"format": EXTENSION_FORMAT, "policy_digest": "sha256:" + "a" * 64}
    document.update(changes)
    return {key: value for key, value in document.items() if value is not _DROP}


_DROP = object()


@pytest.mark.parametrize(
    ("document", "code", "field"),
    [
        pytest.param([], "invalid_document", "extension", id="not-object"),
        pytest.param(_document(extra=CANARY), "unknown_member", "extension", id="unknown"),
        pytest.param(_document(format=_DROP), "missing_member", "format", id="no-format"),
        pytest.param(_document(policy_digest=_DROP), "missing_member", "policy_digest", id="no-pd"),
        pytest.param(_document(format=CANARY), "invalid_value", "format", id="format"),
        pytest.param(_document(policy_digest=CANARY), "invalid_value", "policy_digest", id="pd"),
        pytest.param(_document(multiplicity=CANARY), "invalid_value", "multiplicity", id="mult"),
        pytest.param(_document(alpha=0.5), "invalid_value", "alpha", id="alpha"),
        pytest.param(_document(alpha=True), "invalid_value", "alpha", id="alpha-bool"),
        pytest.param(
            _document(binary_interval="wald"), "invalid_value", "binary_interval", id="bi"
        ),
        pytest.param(
            _document(permutation_resamples=10), "invalid_value", "permutation_resamples", id="r"
        ),
        pytest.param(_document(flip_ids=1001), "invalid_value", "flip_ids", id="flip-ids"),
    ],
)
def test_extension_refusals(document: Any, code: str, field: str) -> None:
    with pytest.raises(ExtensionError) as refused:
        parse_policy_extension(document)
    assert (refused.value.code, refused.value.field) == (code, field)
    assert CANARY not in str(refused.value)
    if isinstance(document, dict):
        schema_ok = jsonschema.Draft202012Validator(
            _schema("sealeval.comparison-policy-extension-v1")
        ).is_valid(document)
        assert not schema_ok


def test_extension_round_trip_and_schema() -> None:
    extension = parse_policy_extension(_document(multiplicity="benjamini_hochberg", alpha=0.1))
    document = extension.to_dict()
    jsonschema.validate(document, _schema("sealeval.comparison-policy-extension-v1"))
    again = load_policy_extension(encode_invarlock(document))
    assert again == extension
    assert again.digest.startswith("sha256:")
    assert parse_policy_extension(_document()).digest != extension.digest
    with pytest.raises(ExtensionError) as refused:
        load_policy_extension(b" " * 70_000)
    assert refused.value.code == "invalid_document"
