"""Feedback budget: policy, banding, pure core, in-memory ledger, persistence documents."""

from __future__ import annotations

import bisect
import json
import logging
import sys
import threading
from collections.abc import Callable
from dataclasses import FrozenInstanceError
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from sealeval.canonical import decode, digest_openmed, encode_openmed
from sealeval.errors import SealevalError, error_classes
from sealeval.session.budget import (
    APPROVAL_SCHEMA,
    DECISION_SCHEMA,
    LEDGER_USAGE_SCHEMA,
    MAX_LIMIT,
    POLICY_SCHEMA,
    SNAPSHOT_SCHEMA,
    USAGE_SCHEMA,
    FailureApproval,
    FeedbackBudgetDecision,
    FeedbackBudgetError,
    FeedbackBudgetLedger,
    FeedbackBudgetPolicy,
    FeedbackBudgetSnapshot,
    LedgerUsage,
    SubmissionUsage,
    attempt_limit,
    budget_snapshot,
    coarse_band,
    decide_failure_approval,
    decide_official_attempt,
)
from support.refusals import CANARY, assert_refused
from support.vectors import PROJECT_ROOT, cases, decode_input, load

VECTORS = "openmed/feedback_budget.json"
CONTRACTS = PROJECT_ROOT / "contracts"


def _digest(n: int) -> str:
    return f"sha256:{n:064x}"


EPOCH = _digest(0xE0)
EPOCH2 = _digest(0xE1)
SUB = _digest(0x5A)
SUB2 = _digest(0x5B)
FAIL = _digest(0xFA)
FAIL2 = _digest(0xFB)
APPROVAL = _digest(0xA0)
APPROVAL2 = _digest(0xA1)


def _policy(**overrides: Any) -> FeedbackBudgetPolicy:
    fields: dict[str, Any] = {
        "epoch_digest": EPOCH,
        "detailed_feedback_limit": 1,
        "rerun_limit": 2,
        "coarse_score_boundaries": (0.5, 0.8),
    }
    fields.update(overrides)
    return FeedbackBudgetPolicy(**fields)


def _error(action: Callable[[], object]) -> FeedbackBudgetError:
    with pytest.raises(FeedbackBudgetError) as caught:
        action()
    assert caught.value.__cause__ is None
    return caught.value


def _refused(action: Callable[[], object], message: str) -> None:
    """Assert a ``FeedbackBudgetError`` reading ``<field>: <code>`` (no canary, no cause)."""
    field, _, code = message.rpartition(": ")
    error = assert_refused(_error(action), code, field or None)
    assert str(error) == message


# ---------------------------------------------------------------------------
# Golden vectors


def _ledger_call(ledger: FeedbackBudgetLedger, call: dict[str, Any]) -> dict[str, Any]:
    """Run one vector call on the ledger; return its document or ``{"error_code"}``."""
    try:
        op = call["op"]
        if op == "record":
            document = ledger.record_official_attempt(
                call["epoch"],
                call["submission"],
                score=call.get("score"),
                infrastructure_failure_digest=call.get("failure"),
            ).to_dict()
        elif op == "approve":
            document = ledger.approve_infrastructure_failure(
                call["epoch"], call["submission"], call["failure"], call["approval"]
            ).to_dict()
        elif op == "snapshot":
            document = ledger.snapshot(call["epoch"], call["submission"]).to_dict()
        elif op == "policy":
            document = ledger.policy_for(call["epoch"]).to_dict()
        else:
            pytest.fail("vector case shape not understood")
    except FeedbackBudgetError as error:
        return {"error_code": str(error)}
    return document


class PureModel:
    """The same call sequence driven through the pure core with a plain dict state."""

    def __init__(self, policies: list[FeedbackBudgetPolicy]) -> None:
        self.policies = {policy.epoch_digest: policy for policy in policies}
        self.usage: dict[tuple[str, str], SubmissionUsage] = {}
        self.approvals: set[str] = set()

    def call(self, call: dict[str, Any]) -> dict[str, Any]:
        # The key checks are the ledger's; replicate them with the public lookup rules.
        ledger = FeedbackBudgetLedger(list(self.policies.values()))
        try:
            if call["op"] == "policy":
                return ledger.policy_for(call["epoch"]).to_dict()
            policy = ledger.policy_for(call["epoch"])
            ledger.snapshot(policy.epoch_digest, call["submission"])  # submission check
            key = (policy.epoch_digest, call["submission"])
            usage = self.usage.get(key, SubmissionUsage())
            if call["op"] == "snapshot":
                return budget_snapshot(policy, usage).to_dict()
            if call["op"] == "record":
                decision, new_usage = decide_official_attempt(
                    policy,
                    usage,
                    score=call.get("score"),
                    infrastructure_failure_digest=call.get("failure"),
                )
                self.usage[key] = new_usage
                return decision.to_dict()
            approval, new_usage = decide_failure_approval(
                policy,
                usage,
                failure_digest=call["failure"],
                operator_approval_digest=call["approval"],
                used_approval_digests=frozenset(self.approvals),
            )
            self.usage[key] = new_usage
            self.approvals.add(call["approval"])
            return approval.to_dict()
        except FeedbackBudgetError as error:
            return {"error_code": str(error)}


def _check_error(expected: dict[str, Any], action: Callable[[], object]) -> None:
    error = _error(action)
    assert str(error) == expected["error_code"]
    assert error.code in FeedbackBudgetError.codes


@pytest.mark.parametrize("case", cases(VECTORS))
def test_vector(case: dict[str, Any]) -> None:
    given_input = decode_input(case["input"])
    expected = case["expected"]
    op = given_input.get("op")
    if op == "policy":
        fields = given_input["fields"]
        if "error_code" in expected:
            _check_error(expected, lambda: FeedbackBudgetPolicy(**fields))
            return
        policy = FeedbackBudgetPolicy(**fields)
        assert policy.to_json() == expected["canonical"]
        assert policy.to_dict() == expected["parsed"]
        assert policy.digest() == digest_openmed(expected["parsed"])
        assert FeedbackBudgetPolicy.from_dict(expected["parsed"]) == policy
        assert FeedbackBudgetPolicy.from_json(expected["canonical"]) == policy
    elif op == "band":
        assert set(expected) == {"coarse_band"}
        band = coarse_band(given_input["boundaries"], given_input["score"])
        assert band == expected["coarse_band"]
        policy = _policy(coarse_score_boundaries=given_input["boundaries"])
        assert policy.coarse_band(given_input["score"]) == expected["coarse_band"]
    elif op == "ledger":
        policies = [FeedbackBudgetPolicy(**fields) for fields in given_input["policies"]]
        if "error_code" in expected:
            _check_error(expected, lambda: FeedbackBudgetLedger(policies))
            return
        ledger = FeedbackBudgetLedger(policies)
        model = PureModel(policies)
        calls = given_input["calls"]
        assert len(calls) == len(expected["results"])
        for call, want in zip(calls, expected["results"], strict=True):
            got = _ledger_call(ledger, call)
            # Canonical text comparison keeps int/float and -0.0 distinct.
            assert encode_openmed(got) == encode_openmed(want), call["op"]
            assert encode_openmed(model.call(call)) == encode_openmed(want), call["op"]
        assert ledger.export_usage() == LedgerUsage(entries=model.usage)
    else:
        pytest.fail("vector case shape not understood")


def _schema_validator(schema_version: str) -> Draft202012Validator:
    path = CONTRACTS / f"{schema_version}.schema.json"
    return Draft202012Validator(json.loads(path.read_text(encoding="utf-8")))


def test_vector_documents_match_the_schemas() -> None:
    seen: dict[str, int] = {}
    for case in load(VECTORS)["cases"]:
        expected = case["expected"]
        documents = [expected["parsed"]] if "parsed" in expected else expected.get("results", [])
        for document in documents:
            if "error_code" in document:
                continue
            _schema_validator(document["schema_version"]).validate(document)
            seen[document["schema_version"]] = seen.get(document["schema_version"], 0) + 1
    assert set(seen) == {POLICY_SCHEMA, DECISION_SCHEMA, SNAPSHOT_SCHEMA, APPROVAL_SCHEMA}


def test_schemas_refuse_impossible_documents() -> None:
    ledger = FeedbackBudgetLedger([_policy()])
    decision = ledger.record_official_attempt(EPOCH, SUB, score=0.7).to_dict()
    validator = _schema_validator(DECISION_SCHEMA)
    validator.validate(decision)
    assert not validator.is_valid({**decision, "coarse_band": 1})
    assert not validator.is_valid({**decision, "accepted": False})
    assert not validator.is_valid({**decision, "extra": 1})
    snapshot = ledger.snapshot(EPOCH, SUB).to_dict()
    assert not _schema_validator(SNAPSHOT_SCHEMA).is_valid({**snapshot, "official_attempts": -1})
    policy = _policy().to_dict()
    assert not _schema_validator(POLICY_SCHEMA).is_valid({**policy, "epoch_digest": "x"})
    assert not _schema_validator(POLICY_SCHEMA).is_valid(
        {**policy, "coarse_score_boundaries": [1.0]}
    )


# ---------------------------------------------------------------------------
# Refusals (every code, table-driven)

_GOOD_POLICY: dict[str, Any] = {
    "epoch_digest": EPOCH,
    "detailed_feedback_limit": 1,
    "rerun_limit": 2,
    "coarse_score_boundaries": (0.5, 0.8),
}


class _RaisingSequence(tuple[float, ...]):
    def __iter__(self) -> Any:
        raise RuntimeError(CANARY)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        pytest.param({"schema_version": "v0"}, "schema_version: unsupported_version", id="schema"),
        pytest.param(
            {"schema_version": type("S", (str,), {})(POLICY_SCHEMA)},
            "schema_version: unsupported_version",
            id="schema-subclass",
        ),
        pytest.param(
            {"epoch_digest": "sha256:" + "A" * 64}, "epoch_digest: invalid_digest", id="epoch"
        ),
        pytest.param(
            {"detailed_feedback_limit": -1}, "detailed_feedback_limit: invalid", id="detail-neg"
        ),
        pytest.param(
            {"detailed_feedback_limit": 1.0}, "detailed_feedback_limit: invalid", id="detail-float"
        ),
        pytest.param(
            {"detailed_feedback_limit": True}, "detailed_feedback_limit: invalid", id="detail-bool"
        ),
        pytest.param(
            {"detailed_feedback_limit": MAX_LIMIT + 1},
            "detailed_feedback_limit: invalid",
            id="detail-over-max",
        ),
        pytest.param({"rerun_limit": True}, "rerun_limit: invalid", id="rerun-bool"),
        pytest.param({"rerun_limit": "2"}, "rerun_limit: invalid", id="rerun-str"),
        pytest.param({"rerun_limit": MAX_LIMIT + 1}, "rerun_limit: invalid", id="rerun-over-max"),
        pytest.param(
            {"coarse_score_boundaries": "0.5"},
            "coarse_score_boundaries: invalid_sequence",
            id="bounds-str",
        ),
        pytest.param(
            {"coarse_score_boundaries": b"\x01"},
            "coarse_score_boundaries: invalid_sequence",
            id="bounds-bytes",
        ),
        pytest.param(
            {"coarse_score_boundaries": {0.5}},
            "coarse_score_boundaries: invalid_sequence",
            id="bounds-set",
        ),
        pytest.param(
            {"coarse_score_boundaries": _RaisingSequence((0.5,))},
            "coarse_score_boundaries: invalid_sequence",
            id="bounds-raising",
        ),
        pytest.param(
            {"coarse_score_boundaries": ()}, "coarse_score_boundaries: empty", id="bounds-empty"
        ),
        pytest.param(
            {"coarse_score_boundaries": (0.0,)},
            "coarse_score_boundaries: invalid_boundary",
            id="bound-zero",
        ),
        pytest.param(
            {"coarse_score_boundaries": (1.0,)},
            "coarse_score_boundaries: invalid_boundary",
            id="bound-one",
        ),
        pytest.param(
            {"coarse_score_boundaries": (True,)},
            "coarse_score_boundaries: invalid_boundary",
            id="bound-bool",
        ),
        pytest.param(
            {"coarse_score_boundaries": (1,)},
            "coarse_score_boundaries: invalid_boundary",
            id="bound-int",
        ),
        pytest.param(
            {"coarse_score_boundaries": (10**400,)},
            "coarse_score_boundaries: invalid_boundary",
            id="bound-huge-int",
        ),
        pytest.param(
            {"coarse_score_boundaries": (float("inf"),)},
            "coarse_score_boundaries: invalid_boundary",
            id="bound-inf",
        ),
        pytest.param(
            {"coarse_score_boundaries": ("0.5",)},
            "coarse_score_boundaries: invalid_boundary",
            id="bound-str",
        ),
        pytest.param(
            {"coarse_score_boundaries": (0.8, 0.5, 1.5)},
            "coarse_score_boundaries: invalid_boundary",
            id="bound-values-before-order",
        ),
        pytest.param(
            {"coarse_score_boundaries": (0.5, 0.5)},
            "coarse_score_boundaries: not_strictly_increasing",
            id="bounds-equal",
        ),
    ],
)
def test_policy_refusals(overrides: dict[str, Any], message: str) -> None:
    _refused(lambda: FeedbackBudgetPolicy(**{**_GOOD_POLICY, **overrides}), message)


def test_policy_accepts_lists_and_normalises_to_float_tuples() -> None:
    policy = _policy(coarse_score_boundaries=[0.25, 0.75])
    assert policy.coarse_score_boundaries == (0.25, 0.75)
    assert all(type(bound) is float for bound in policy.coarse_score_boundaries)
    assert policy.to_dict()["coarse_score_boundaries"] == [0.25, 0.75]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        pytest.param([], "policy: invalid_document", id="not-mapping"),
        pytest.param(
            {**_GOOD_POLICY, "schema_version": POLICY_SCHEMA, "x": 1},
            "policy: unknown_field",
            id="unknown",
        ),
        pytest.param(dict(_GOOD_POLICY), "policy.schema_version: missing_field", id="missing"),
    ],
)
def test_policy_document_refusals(document: object, message: str) -> None:
    _refused(lambda: FeedbackBudgetPolicy.from_dict(document), message)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param('{"a":1,"a":2}', id="duplicate-key"),
        pytest.param('{"detailed_feedback_limit":NaN}', id="nan"),
        pytest.param("{", id="truncated"),
    ],
)
def test_policy_json_refusals(text: str) -> None:
    _refused(lambda: FeedbackBudgetPolicy.from_json(text), "policy: invalid_document")


@pytest.mark.parametrize(
    ("boundaries", "score", "message"),
    [
        pytest.param((0.5,), 1.5, "score: invalid", id="above-one"),
        pytest.param((0.5,), -0.1, "score: invalid", id="negative"),
        pytest.param((0.5,), 2, "score: invalid", id="int-two"),
        pytest.param((0.5,), 10**400, "score: invalid", id="huge-int"),
        pytest.param((0.5,), False, "score: invalid", id="bool"),
        pytest.param((0.5,), float("nan"), "score: invalid", id="nan"),
        pytest.param((0.5,), None, "score: invalid", id="none"),
        pytest.param((), 0.5, "coarse_score_boundaries: empty", id="bounds-empty"),
        pytest.param(
            (0.6, 0.5), 0.5, "coarse_score_boundaries: not_strictly_increasing", id="bounds-order"
        ),
    ],
)
def test_band_refusals(boundaries: object, score: object, message: str) -> None:
    _refused(lambda: coarse_band(boundaries, score), message)


@pytest.mark.parametrize(
    ("policies", "message"),
    [
        pytest.param("policies", "policies: invalid_sequence", id="string"),
        pytest.param(None, "policies: invalid_sequence", id="none"),
        pytest.param(iter([]), "policies: invalid_sequence", id="iterator"),
        pytest.param([dict(_GOOD_POLICY)], "policies: invalid_policy", id="mapping-item"),
        pytest.param([_policy(), _policy()], "policies: duplicate_epoch", id="duplicate"),
        pytest.param((), "policies: empty", id="empty"),
    ],
)
def test_ledger_construction_refusals(policies: object, message: str) -> None:
    _refused(lambda: FeedbackBudgetLedger(policies), message)


def _recorded_ledger() -> FeedbackBudgetLedger:
    ledger = FeedbackBudgetLedger([_policy()])
    ledger.record_official_attempt(EPOCH, SUB, infrastructure_failure_digest=FAIL)
    return ledger


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"epoch": 7}, "epoch_digest: invalid_digest", id="epoch-type"),
        pytest.param({"epoch": EPOCH2}, "epoch_digest: unknown", id="epoch-unknown"),
        pytest.param(
            {"epoch": EPOCH2, "submission": "bad"}, "epoch_digest: unknown", id="epoch-before-sub"
        ),
        pytest.param({"submission": SUB.upper()}, "submission_digest: invalid_digest", id="sub"),
        pytest.param(
            {"submission": "bad", "score": None},
            "submission_digest: invalid_digest",
            id="sub-before-outcome",
        ),
        pytest.param({"score": None}, "attempt_outcome: require_exactly_one", id="neither"),
        pytest.param({"failure": FAIL2}, "attempt_outcome: require_exactly_one", id="both"),
        pytest.param({"score": "0.5"}, "score: invalid", id="score-str"),
        pytest.param({"score": 1.0000001}, "score: invalid", id="score-above"),
        pytest.param({"score": float("-inf")}, "score: invalid", id="score-inf"),
        pytest.param(
            {"score": None, "failure": "x"},
            "infrastructure_failure_digest: invalid_digest",
            id="fail-digest",
        ),
        pytest.param(
            {"score": None, "failure": FAIL},
            "infrastructure_failure_digest: already_recorded",
            id="fail-repeat",
        ),
    ],
)
def test_record_refusals(kwargs: dict[str, Any], message: str) -> None:
    ledger = _recorded_ledger()
    before = ledger.export_usage()
    args = {"epoch": EPOCH, "submission": SUB, "score": 0.5, "failure": None, **kwargs}
    error = _error(
        lambda: ledger.record_official_attempt(
            args["epoch"],
            args["submission"],
            score=args["score"],
            infrastructure_failure_digest=args["failure"],
        )
    )
    assert str(error) == message
    assert ledger.export_usage() == before


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"epoch": "x"}, "epoch_digest: invalid_digest", id="epoch"),
        pytest.param({"epoch": EPOCH2}, "epoch_digest: unknown", id="epoch-unknown"),
        pytest.param({"submission": None}, "submission_digest: invalid_digest", id="sub"),
        pytest.param({"failure": "x"}, "failure_digest: invalid_digest", id="failure"),
        pytest.param({"approval": b"x"}, "operator_approval_digest: invalid_digest", id="approval"),
        pytest.param({"failure": FAIL2}, "failure_digest: not_recorded", id="not-recorded"),
        pytest.param({"submission": SUB2}, "failure_digest: not_recorded", id="other-submission"),
        pytest.param({"approval": APPROVAL}, "failure_digest: already_approved", id="approved"),
    ],
)
def test_approve_refusals(kwargs: dict[str, Any], message: str) -> None:
    ledger = _recorded_ledger()
    ledger.approve_infrastructure_failure(EPOCH, SUB, FAIL, APPROVAL)
    before = ledger.export_usage()
    args = {"epoch": EPOCH, "submission": SUB, "failure": FAIL, "approval": APPROVAL2, **kwargs}
    error = _error(
        lambda: ledger.approve_infrastructure_failure(
            args["epoch"], args["submission"], args["failure"], args["approval"]
        )
    )
    assert str(error) == message
    assert ledger.export_usage() == before


def test_approval_digest_is_single_use_across_the_ledger() -> None:
    ledger = FeedbackBudgetLedger([_policy(), _policy(epoch_digest=EPOCH2)])
    ledger.record_official_attempt(EPOCH, SUB, infrastructure_failure_digest=FAIL)
    ledger.record_official_attempt(EPOCH2, SUB2, infrastructure_failure_digest=FAIL)
    ledger.approve_infrastructure_failure(EPOCH, SUB, FAIL, APPROVAL)
    error = _error(lambda: ledger.approve_infrastructure_failure(EPOCH2, SUB2, FAIL, APPROVAL))
    assert str(error) == "operator_approval_digest: already_used"
    ledger.approve_infrastructure_failure(EPOCH2, SUB2, FAIL, APPROVAL2)
    assert ledger.export_usage().used_approval_digests() == {APPROVAL, APPROVAL2}


def test_pure_core_checks_the_local_approval_set_too() -> None:
    usage = SubmissionUsage(
        official_attempts=2,
        infrastructure_failure_digests=(FAIL, FAIL2),
        approved_failures={FAIL: APPROVAL},
    )
    error = _error(
        lambda: decide_failure_approval(
            _policy(),
            usage,
            failure_digest=FAIL2,
            operator_approval_digest=APPROVAL,
            used_approval_digests=frozenset(),
        )
    )
    assert str(error) == "operator_approval_digest: already_used"


@pytest.mark.parametrize(
    ("policy", "usage", "message"),
    [
        pytest.param({}, SubmissionUsage(), "policy: invalid_policy", id="policy-type"),
        pytest.param(_policy(), {}, "usage: invalid_document", id="usage-type"),
        pytest.param(
            _policy(),
            SubmissionUsage(official_attempts=1, scored_attempts=1),
            "usage: policy_mismatch",
            id="detail-not-spent",
        ),
        pytest.param(
            _policy(detailed_feedback_limit=0),
            SubmissionUsage(official_attempts=1, scored_attempts=1, detailed_feedback_used=1),
            "usage: policy_mismatch",
            id="detail-over-limit",
        ),
        pytest.param(
            _policy(rerun_limit=0),
            SubmissionUsage(official_attempts=2, infrastructure_failure_digests=(FAIL, FAIL2)),
            "usage: policy_mismatch",
            id="attempts-over-limit",
        ),
    ],
)
def test_pure_core_state_refusals(policy: Any, usage: Any, message: str) -> None:
    _refused(lambda: decide_official_attempt(policy, usage, score=0.5), message)
    _refused(lambda: budget_snapshot(policy, usage), message)
    approve = _error(
        lambda: decide_failure_approval(
            policy,
            usage,
            failure_digest=FAIL,
            operator_approval_digest=APPROVAL,
            used_approval_digests=(),
        )
    )
    assert str(approve) == message


_USAGE_DOC: dict[str, Any] = {
    "approved_failures": {FAIL: APPROVAL},
    "detailed_feedback_used": 1,
    "infrastructure_failure_digests": [FAIL],
    "official_attempts": 2,
    "schema_version": USAGE_SCHEMA,
    "scored_attempts": 1,
}


@pytest.mark.parametrize(
    ("document", "message"),
    [
        pytest.param("usage", "usage: invalid_document", id="not-mapping"),
        pytest.param({**_USAGE_DOC, "extra": 1}, "usage: unknown_field", id="unknown"),
        pytest.param(
            {k: v for k, v in _USAGE_DOC.items() if k != "scored_attempts"},
            "usage.scored_attempts: missing_field",
            id="missing",
        ),
        pytest.param(
            {**_USAGE_DOC, "schema_version": "v0"},
            "usage.schema_version: unsupported_version",
            id="schema",
        ),
        pytest.param(
            {**_USAGE_DOC, "official_attempts": -1}, "usage.official_attempts: invalid", id="neg"
        ),
        pytest.param(
            {**_USAGE_DOC, "scored_attempts": 1.0}, "usage.scored_attempts: invalid", id="float"
        ),
        pytest.param(
            {**_USAGE_DOC, "detailed_feedback_used": 2**53},
            "usage.detailed_feedback_used: invalid",
            id="too-big",
        ),
        pytest.param(
            {**_USAGE_DOC, "infrastructure_failure_digests": FAIL},
            "usage.infrastructure_failure_digests: invalid_sequence",
            id="failures-str",
        ),
        pytest.param(
            {**_USAGE_DOC, "infrastructure_failure_digests": ["x"]},
            "usage.infrastructure_failure_digests: invalid_digest",
            id="failure-digest",
        ),
        pytest.param(
            {**_USAGE_DOC, "infrastructure_failure_digests": [FAIL, FAIL], "official_attempts": 3},
            "usage.infrastructure_failure_digests: already_recorded",
            id="failure-repeat",
        ),
        pytest.param(
            {**_USAGE_DOC, "approved_failures": [FAIL]},
            "usage.approved_failures: invalid_mapping",
            id="approvals-list",
        ),
        pytest.param(
            {**_USAGE_DOC, "approved_failures": {FAIL: "x"}},
            "usage.approved_failures: invalid_digest",
            id="approval-digest",
        ),
        pytest.param(
            {**_USAGE_DOC, "approved_failures": {FAIL2: APPROVAL}},
            "usage.approved_failures: not_recorded",
            id="approval-unrecorded",
        ),
        pytest.param(
            {
                **_USAGE_DOC,
                "infrastructure_failure_digests": [FAIL, FAIL2],
                "official_attempts": 3,
                "approved_failures": {FAIL: APPROVAL, FAIL2: APPROVAL},
            },
            "usage.approved_failures: already_used",
            id="approval-reused",
        ),
        pytest.param(
            {**_USAGE_DOC, "official_attempts": 3}, "usage: inconsistent", id="attempt-sum"
        ),
        pytest.param(
            {**_USAGE_DOC, "detailed_feedback_used": 2, "scored_attempts": 1},
            "usage: inconsistent",
            id="detail-over-scored",
        ),
    ],
)
def test_usage_document_refusals(document: object, message: str) -> None:
    _refused(lambda: SubmissionUsage.from_dict(document), message)


class _PairList(dict[str, str]):
    """A mapping whose items() repeats a key (as a hostile mapping could)."""

    def items(self) -> Any:
        return [(FAIL, APPROVAL), (FAIL, APPROVAL2)]


class _RaisingMapping(dict[str, str]):
    def items(self) -> Any:
        raise RuntimeError(CANARY)


@pytest.mark.parametrize(
    ("approved", "message"),
    [
        pytest.param(_PairList(), "usage.approved_failures: already_approved", id="repeat"),
        pytest.param(_RaisingMapping(), "usage.approved_failures: invalid_mapping", id="raising"),
    ],
)
def test_usage_refuses_hostile_mappings(approved: object, message: str) -> None:
    def build() -> SubmissionUsage:
        return SubmissionUsage(
            official_attempts=1,
            infrastructure_failure_digests=(FAIL,),
            approved_failures=approved,  # type: ignore[arg-type]
        )

    _refused(build, message)


def test_usage_json_refusal() -> None:
    _refused(lambda: SubmissionUsage.from_json(b"\xff"), "usage: invalid_document")


def _ledger_usage_doc(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"entries": list(entries), "schema_version": LEDGER_USAGE_SCHEMA}


_ENTRY: dict[str, Any] = {"epoch_digest": EPOCH, "submission_digest": SUB, "usage": _USAGE_DOC}


@pytest.mark.parametrize(
    ("document", "message"),
    [
        pytest.param(None, "ledger_usage: invalid_document", id="not-mapping"),
        pytest.param({**_ledger_usage_doc(), "x": 1}, "ledger_usage: unknown_field", id="unknown"),
        pytest.param({"entries": []}, "ledger_usage.schema_version: missing_field", id="missing"),
        pytest.param(
            {"entries": [], "schema_version": USAGE_SCHEMA},
            "ledger_usage.schema_version: unsupported_version",
            id="schema",
        ),
        pytest.param(
            {"entries": {}, "schema_version": LEDGER_USAGE_SCHEMA},
            "ledger_usage.entries: invalid_sequence",
            id="entries-map",
        ),
        pytest.param(
            _ledger_usage_doc({**_ENTRY, "x": 1}),
            "ledger_usage.entries[0]: unknown_field",
            id="entry-unknown",
        ),
        pytest.param(
            _ledger_usage_doc({**_ENTRY, "epoch_digest": "e"}),
            "ledger_usage.entries[0].epoch_digest: invalid_digest",
            id="entry-epoch",
        ),
        pytest.param(
            _ledger_usage_doc({**_ENTRY, "submission_digest": 1}),
            "ledger_usage.entries[0].submission_digest: invalid_digest",
            id="entry-sub",
        ),
        pytest.param(
            _ledger_usage_doc(_ENTRY, _ENTRY),
            "ledger_usage.entries[1]: duplicate_entry",
            id="entry-repeat",
        ),
        pytest.param(
            _ledger_usage_doc(_ENTRY, {**_ENTRY, "submission_digest": SUB2}),
            "ledger_usage.entries: already_used",
            id="approval-reused",
        ),
        pytest.param(
            _ledger_usage_doc({**_ENTRY, "usage": {**_USAGE_DOC, "official_attempts": 9}}),
            "usage: inconsistent",
            id="entry-usage",
        ),
    ],
)
def test_ledger_usage_document_refusals(document: object, message: str) -> None:
    _refused(lambda: LedgerUsage.from_dict(document), message)


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        pytest.param([], "ledger_usage.entries: invalid_mapping", id="not-mapping"),
        pytest.param(
            {EPOCH: SubmissionUsage()}, "ledger_usage.entries: invalid_document", id="key"
        ),
        pytest.param(
            {("e", SUB): SubmissionUsage()},
            "ledger_usage.entries.epoch_digest: invalid_digest",
            id="key-epoch",
        ),
        pytest.param(
            {(EPOCH, "s"): SubmissionUsage()},
            "ledger_usage.entries.submission_digest: invalid_digest",
            id="key-sub",
        ),
        pytest.param({(EPOCH, SUB): {}}, "ledger_usage.entries: invalid_document", id="value"),
        pytest.param(_RaisingMapping(), "ledger_usage.entries: invalid_mapping", id="raising"),
    ],
)
def test_ledger_usage_constructor_refusals(entries: object, message: str) -> None:
    assert str(_error(lambda: LedgerUsage(entries=entries))) == message  # type: ignore[arg-type]


def test_ledger_usage_json_refusal() -> None:
    _refused(lambda: LedgerUsage.from_json("[1,]"), "ledger_usage: invalid_document")


@pytest.mark.parametrize(
    ("usage", "message"),
    [
        pytest.param({}, "usage: invalid_document", id="type"),
        pytest.param(
            LedgerUsage(entries={(EPOCH2, SUB): SubmissionUsage()}),
            "usage: unknown_epoch",
            id="epoch",
        ),
        pytest.param(
            LedgerUsage(
                entries={(EPOCH, SUB): SubmissionUsage(official_attempts=1, scored_attempts=1)}
            ),
            "usage: policy_mismatch",
            id="policy",
        ),
    ],
)
def test_ledger_restore_refusals(usage: Any, message: str) -> None:
    _refused(lambda: FeedbackBudgetLedger([_policy()], usage), message)


_DECISION: dict[str, Any] = {
    "accepted": True,
    "reason_code": "attempt_recorded",
    "feedback_level": "detailed",
    "official_attempt_number": 1,
    "detailed_score": 0.5,
    "coarse_band": None,
    "official_attempts": 1,
    "scored_attempts": 1,
    "attempts_remaining": 2,
    "detailed_feedback_remaining": 0,
}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        pytest.param(
            {"schema_version": SNAPSHOT_SCHEMA},
            "decision.schema_version: unsupported_version",
            id="schema",
        ),
        pytest.param({"accepted": 1}, "decision.accepted: invalid", id="accepted"),
        pytest.param({"reason_code": "ok"}, "decision.reason_code: invalid", id="reason"),
        pytest.param({"feedback_level": "exact"}, "decision.feedback_level: invalid", id="level"),
        pytest.param({"official_attempts": -1}, "decision.official_attempts: invalid", id="count"),
        pytest.param({"coarse_band": 1.0}, "decision.coarse_band: invalid", id="band"),
        pytest.param(
            {"official_attempt_number": True},
            "decision.official_attempt_number: invalid",
            id="number",
        ),
        pytest.param({"detailed_score": 1}, "decision.detailed_score: invalid", id="score-int"),
        pytest.param({"detailed_score": 1.5}, "decision.detailed_score: invalid", id="score-range"),
        pytest.param({"coarse_band": 1}, "decision: inconsistent", id="band-and-score"),
        pytest.param(
            {"official_attempt_number": 2}, "decision: inconsistent", id="number-mismatch"
        ),
        pytest.param({"accepted": False}, "decision: inconsistent", id="denied-with-feedback"),
        pytest.param({"scored_attempts": 2}, "decision: inconsistent", id="scored-over-official"),
        pytest.param(
            {
                "feedback_level": "none",
                "detailed_score": None,
                "reason_code": "rerun_budget_exhausted",
            },
            "decision: inconsistent",
            id="accepted-with-denial-reason",
        ),
    ],
)
def test_decision_refusals(overrides: dict[str, Any], message: str) -> None:
    _refused(lambda: FeedbackBudgetDecision(**{**_DECISION, **overrides}), message)


_SNAPSHOT: dict[str, Any] = {
    "official_attempts": 2,
    "scored_attempts": 1,
    "detailed_feedback_used": 1,
    "detailed_feedback_remaining": 0,
    "attempts_remaining": 2,
    "infrastructure_failures": 1,
    "approved_failure_replacements": 1,
}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        pytest.param(
            {"schema_version": "x"}, "snapshot.schema_version: unsupported_version", id="schema"
        ),
        pytest.param(
            {"attempts_remaining": -1}, "snapshot.attempts_remaining: invalid", id="count"
        ),
        pytest.param({"official_attempts": 3}, "snapshot: inconsistent", id="sum"),
        pytest.param(
            {"detailed_feedback_used": 2, "scored_attempts": 1},
            "snapshot: inconsistent",
            id="detail",
        ),
        pytest.param(
            {"approved_failure_replacements": 2}, "snapshot: inconsistent", id="approvals"
        ),
    ],
)
def test_snapshot_refusals(overrides: dict[str, Any], message: str) -> None:
    _refused(lambda: FeedbackBudgetSnapshot(**{**_SNAPSHOT, **overrides}), message)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        pytest.param(
            {"schema_version": "x"}, "approval.schema_version: unsupported_version", id="schema"
        ),
        pytest.param({"approved": 1}, "approval.approved: invalid", id="approved"),
        pytest.param({"reason_code": "ok"}, "approval.reason_code: invalid", id="reason"),
        pytest.param(
            {"approved_failure_replacements": "1"},
            "approval.approved_failure_replacements: invalid",
            id="count",
        ),
        pytest.param(
            {"attempts_remaining": None}, "approval.attempts_remaining: invalid", id="remaining"
        ),
        pytest.param({"approved_failure_replacements": 0}, "approval: inconsistent", id="zero"),
    ],
)
def test_approval_refusals(overrides: dict[str, Any], message: str) -> None:
    fields = {"approved_failure_replacements": 1, "attempts_remaining": 1, **overrides}
    _refused(lambda: FailureApproval(**fields), message)


def test_every_code_is_exercised() -> None:
    """The refusal tables above (plus the vectors) reach every code of the closed set."""
    module = sys.modules[__name__]
    messages: set[str] = set()
    for name in dir(module):
        marks = getattr(getattr(module, name), "pytestmark", [])
        for mark in marks:
            if mark.name != "parametrize":
                continue
            for param in mark.args[1]:
                values = getattr(param, "values", param)
                messages.update(v for v in values if isinstance(v, str) and ": " in v)
    for case in load(VECTORS)["cases"]:
        expected = case["expected"]
        for item in [expected, *expected.get("results", [])]:
            if "error_code" in item:
                messages.add(item["error_code"])
    messages.add("operator_approval_digest: already_used")
    assert {message.rsplit(": ", 1)[1] for message in messages} == set(FeedbackBudgetError.codes)


# ---------------------------------------------------------------------------
# Behaviour


def test_error_class_contract() -> None:
    assert FeedbackBudgetError in error_classes()
    assert FeedbackBudgetError.module == "sealeval.session.budget"
    assert FeedbackBudgetError.field_in_message is True
    assert issubclass(FeedbackBudgetError, SealevalError)
    assert issubclass(FeedbackBudgetError, ValueError)
    error = FeedbackBudgetError("invalid", "score")
    assert (error.code, error.field, str(error)) == ("invalid", "score", "score: invalid")


def test_documents_are_immutable_and_fresh() -> None:
    policy = _policy()
    with pytest.raises(FrozenInstanceError):
        policy.rerun_limit = 9  # type: ignore[misc]
    document = policy.to_dict()
    document["coarse_score_boundaries"].append(0.9)
    assert policy.to_dict()["coarse_score_boundaries"] == [0.5, 0.8]
    usage = SubmissionUsage(
        official_attempts=1,
        infrastructure_failure_digests=[FAIL],
        approved_failures={FAIL: APPROVAL},
    )
    assert usage.infrastructure_failure_digests == (FAIL,)
    with pytest.raises(TypeError):
        usage.approved_failures[FAIL2] = APPROVAL2  # type: ignore[index]
    exported = _recorded_ledger().export_usage()
    with pytest.raises(TypeError):
        exported.entries[(EPOCH, SUB2)] = SubmissionUsage()  # type: ignore[index]


def test_usage_source_mapping_is_copied() -> None:
    source = {FAIL: APPROVAL}
    usage = SubmissionUsage(
        official_attempts=1, infrastructure_failure_digests=(FAIL,), approved_failures=source
    )
    source[FAIL2] = APPROVAL2
    assert dict(usage.approved_failures) == {FAIL: APPROVAL}


def test_denial_returns_the_usage_unchanged_and_denies_before_duplicate_check() -> None:
    policy = _policy(rerun_limit=0)
    _, usage = decide_official_attempt(
        policy, SubmissionUsage(), infrastructure_failure_digest=FAIL
    )
    denial, after = decide_official_attempt(policy, usage, infrastructure_failure_digest=FAIL)
    assert after is usage
    assert denial.reason_code == "rerun_budget_exhausted"
    assert not denial.accepted


def test_scores_are_reported_as_floats() -> None:
    ledger = FeedbackBudgetLedger([_policy(detailed_feedback_limit=2)])
    first = ledger.record_official_attempt(EPOCH, SUB, score=1)
    assert type(first.detailed_score) is float
    assert first.to_json().count('"detailed_score":1.0') == 1
    negative_zero = ledger.record_official_attempt(EPOCH, SUB, score=-0.0)
    assert '"detailed_score":-0.0' in negative_zero.to_json()


def test_float_subclass_scores_are_normalised() -> None:
    class Score(float):
        def __float__(self) -> float:
            return 0.99

    decision, _ = decide_official_attempt(_policy(), SubmissionUsage(), score=Score(0.25))
    assert decision.detailed_score == 0.25
    assert type(decision.detailed_score) is float


def test_numpy_scores_are_accepted_as_plain_floats() -> None:
    numpy = pytest.importorskip("numpy")
    decision, _ = decide_official_attempt(_policy(), SubmissionUsage(), score=numpy.float64(0.5))
    assert type(decision.detailed_score) is float
    assert coarse_band(numpy.array([0.25, 0.75]).tolist(), numpy.float64(0.75)) == 2


def test_usage_round_trip_and_restore() -> None:
    ledger = FeedbackBudgetLedger([_policy(), _policy(epoch_digest=EPOCH2, rerun_limit=0)])
    ledger.record_official_attempt(EPOCH, SUB, score=0.7)
    ledger.record_official_attempt(EPOCH, SUB, infrastructure_failure_digest=FAIL)
    ledger.approve_infrastructure_failure(EPOCH, SUB, FAIL, APPROVAL)
    ledger.record_official_attempt(EPOCH2, SUB2, score=0.1)
    exported = ledger.export_usage()
    text = exported.to_json()
    restored_usage = LedgerUsage.from_json(text)
    assert restored_usage == exported
    assert restored_usage.to_json() == text
    assert decode(text)["schema_version"] == LEDGER_USAGE_SCHEMA
    restored = FeedbackBudgetLedger(ledger.policies, restored_usage)
    for epoch, submission in [(EPOCH, SUB), (EPOCH2, SUB2), (EPOCH, SUB2)]:
        assert restored.snapshot(epoch, submission) == ledger.snapshot(epoch, submission)
    assert (
        str(_error(lambda: restored.approve_infrastructure_failure(EPOCH, SUB, FAIL, APPROVAL2)))
        == "failure_digest: already_approved"
    )
    restored.record_official_attempt(EPOCH2, SUB, infrastructure_failure_digest=FAIL2)
    assert (
        str(_error(lambda: restored.approve_infrastructure_failure(EPOCH2, SUB, FAIL2, APPROVAL)))
        == "operator_approval_digest: already_used"
    )
    snapshot = restored.snapshot(EPOCH, SUB)
    assert snapshot.digest() == digest_openmed(snapshot.to_dict())
    one = restored.usage(EPOCH, SUB)
    assert SubmissionUsage.from_json(one.to_json()) == one
    assert restored.usage(EPOCH, _digest(1)) == SubmissionUsage()
    assert "sha256" not in repr(restored)


def test_ledger_is_thread_safe() -> None:
    ledger = FeedbackBudgetLedger([_policy(detailed_feedback_limit=1, rerun_limit=9)])
    decisions: list[FeedbackBudgetDecision] = []
    lock = threading.Lock()
    barrier = threading.Barrier(8)

    def worker() -> None:
        barrier.wait()
        for _ in range(5):
            decision = ledger.record_official_attempt(EPOCH, SUB, score=0.6)
            with lock:
                decisions.append(decision)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    accepted = [decision for decision in decisions if decision.accepted]
    assert len(accepted) == 10
    assert sorted(d.official_attempt_number for d in accepted) == list(range(1, 11))  # type: ignore[type-var]
    assert sum(d.feedback_level == "detailed" for d in accepted) == 1
    assert ledger.snapshot(EPOCH, SUB).official_attempts == 10


# ---------------------------------------------------------------------------
# Never echo


def test_refusals_never_echo_submitted_values(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    ledger = _recorded_ledger()
    secret_score = 1.2345678912345
    actions: list[Callable[[], object]] = [
        lambda: FeedbackBudgetPolicy(**{**_GOOD_POLICY, "schema_version": CANARY}),
        lambda: FeedbackBudgetPolicy(**{**_GOOD_POLICY, "epoch_digest": CANARY}),
        lambda: FeedbackBudgetPolicy(**{**_GOOD_POLICY, "rerun_limit": CANARY}),
        lambda: FeedbackBudgetPolicy(**{**_GOOD_POLICY, "coarse_score_boundaries": CANARY}),
        lambda: FeedbackBudgetPolicy(**{**_GOOD_POLICY, "coarse_score_boundaries": (CANARY,)}),
        lambda: FeedbackBudgetPolicy(
            **{**_GOOD_POLICY, "coarse_score_boundaries": _RaisingSequence((0.5,))}
        ),
        lambda: FeedbackBudgetPolicy.from_dict({CANARY: CANARY}),
        lambda: FeedbackBudgetPolicy.from_json(f'{{"{CANARY}":1,"{CANARY}":2}}'),
        lambda: FeedbackBudgetLedger([CANARY]),
        lambda: FeedbackBudgetLedger(CANARY),
        lambda: ledger.snapshot(CANARY, SUB),
        lambda: ledger.snapshot(EPOCH, CANARY),
        lambda: ledger.record_official_attempt(EPOCH, SUB, score=CANARY),
        lambda: ledger.record_official_attempt(EPOCH, SUB, score=secret_score),
        lambda: ledger.record_official_attempt(EPOCH, SUB, infrastructure_failure_digest=CANARY),
        lambda: ledger.record_official_attempt(EPOCH, SUB, infrastructure_failure_digest=FAIL),
        lambda: ledger.approve_infrastructure_failure(EPOCH, SUB, CANARY, APPROVAL),
        lambda: ledger.approve_infrastructure_failure(EPOCH, SUB, FAIL, CANARY),
        lambda: ledger.approve_infrastructure_failure(EPOCH, SUB, FAIL2, APPROVAL),
        lambda: coarse_band((0.5,), CANARY),
        lambda: SubmissionUsage.from_dict({**_USAGE_DOC, CANARY: CANARY}),
        lambda: SubmissionUsage.from_dict({**_USAGE_DOC, "approved_failures": {CANARY: CANARY}}),
        lambda: SubmissionUsage(
            official_attempts=1,
            infrastructure_failure_digests=(FAIL,),
            approved_failures=_RaisingMapping(),
        ),  # type: ignore[arg-type]
        lambda: LedgerUsage.from_dict(_ledger_usage_doc({**_ENTRY, "epoch_digest": CANARY})),
        lambda: LedgerUsage.from_json(CANARY),
        lambda: FeedbackBudgetDecision(**{**_DECISION, "reason_code": CANARY}),
    ]
    for action in actions:
        with pytest.raises(FeedbackBudgetError) as caught:
            action()
        error = caught.value
        texts = [str(error), repr(error), *map(str, error.args)]
        for text in texts:
            assert CANARY not in text
            assert "1.2345678912345" not in text
            for digest in (FAIL, APPROVAL, SUB):
                assert digest not in text
        assert error.__cause__ is None
        assert error.__suppress_context__ or error.__context__ is None
    assert CANARY not in caplog.text


def test_result_documents_never_carry_submitted_digests() -> None:
    ledger = FeedbackBudgetLedger([_policy()])
    documents = [
        ledger.record_official_attempt(EPOCH, SUB, infrastructure_failure_digest=FAIL).to_json(),
        ledger.approve_infrastructure_failure(EPOCH, SUB, FAIL, APPROVAL).to_json(),
        ledger.record_official_attempt(EPOCH, SUB, score=0.75).to_json(),
        ledger.record_official_attempt(EPOCH, SUB, score=0.625).to_json(),
        ledger.snapshot(EPOCH, SUB).to_json(),
        repr(ledger),
    ]
    for text in documents:
        for secret in (SUB, FAIL, APPROVAL, EPOCH):
            assert secret not in text
    # Only the detailed attempt reveals its score; the coarse one never does.
    assert "0.75" in documents[2]
    assert "0.625" not in documents[3]


# ---------------------------------------------------------------------------
# Properties

_BOUNDARIES = st.lists(
    st.floats(min_value=0.01, max_value=0.99, allow_nan=False), min_size=1, max_size=4, unique=True
).map(sorted)
_SCORES = st.one_of(st.floats(min_value=0.0, max_value=1.0), st.sampled_from([0, 1, -0.0]))
_SUBMISSIONS = (SUB, SUB2)
_FAILURES = (FAIL, FAIL2, _digest(0xFC))
_APPROVALS = (APPROVAL, APPROVAL2, _digest(0xA2))
_CALLS = st.lists(
    st.one_of(
        st.tuples(st.just("score"), st.sampled_from(_SUBMISSIONS), _SCORES),
        st.tuples(st.just("failure"), st.sampled_from(_SUBMISSIONS), st.sampled_from(_FAILURES)),
        st.tuples(
            st.just("approve"),
            st.sampled_from(_SUBMISSIONS),
            st.tuples(st.sampled_from(_FAILURES), st.sampled_from(_APPROVALS)),
        ),
    ),
    max_size=25,
)


class SpecModel:
    """An independent, counts-only restatement of the specification's rules."""

    def __init__(self, detail: int, rerun: int, boundaries: list[float]) -> None:
        self.detail, self.rerun, self.boundaries = detail, rerun, boundaries
        self.pairs: dict[str, dict[str, Any]] = {}
        self.approvals: set[str] = set()

    def pair(self, submission: str) -> dict[str, Any]:
        return self.pairs.setdefault(
            submission,
            {"official": 0, "scored": 0, "used": 0, "failures": set(), "approved": set()},
        )

    def remaining(self, pair: dict[str, Any]) -> int:
        return max(0, 1 + self.rerun + len(pair["approved"]) - pair["official"])

    def record(self, submission: str, score: float | None, failure: str | None) -> Any:
        pair = self.pair(submission)
        if self.remaining(pair) == 0:
            return ("denied", pair["official"])
        if failure is not None:
            if failure in pair["failures"]:
                return "infrastructure_failure_digest: already_recorded"
            pair["failures"].add(failure)
            pair["official"] += 1
            return ("none", pair["official"])
        pair["official"] += 1
        pair["scored"] += 1
        if pair["used"] < self.detail:
            pair["used"] += 1
            return ("detailed", pair["official"], float(score))  # type: ignore[arg-type]
        return ("coarse", pair["official"], sum(b <= score for b in self.boundaries))  # type: ignore[operator]

    def approve(self, submission: str, failure: str, approval: str) -> Any:
        pair = self.pair(submission)
        if failure not in pair["failures"]:
            return "failure_digest: not_recorded"
        if failure in pair["approved"]:
            return "failure_digest: already_approved"
        if approval in self.approvals:
            return "operator_approval_digest: already_used"
        pair["approved"].add(failure)
        self.approvals.add(approval)
        return ("approved", len(pair["approved"]), self.remaining(pair))


def _summary(decision: FeedbackBudgetDecision) -> Any:
    if not decision.accepted:
        return ("denied", decision.official_attempts)
    if decision.feedback_level == "detailed":
        return ("detailed", decision.official_attempt_number, decision.detailed_score)
    if decision.feedback_level == "coarse":
        return ("coarse", decision.official_attempt_number, decision.coarse_band)
    return ("none", decision.official_attempt_number)


@settings(max_examples=150, deadline=None)
@given(
    detail=st.integers(0, 3),
    rerun=st.integers(0, 3),
    boundaries=_BOUNDARIES,
    calls=_CALLS,
)
def test_ledger_matches_the_spec_model_and_never_overspends(
    detail: int, rerun: int, boundaries: list[float], calls: list[Any]
) -> None:
    policy = _policy(
        detailed_feedback_limit=detail, rerun_limit=rerun, coarse_score_boundaries=boundaries
    )
    ledger = FeedbackBudgetLedger([policy])
    model = SpecModel(detail, rerun, boundaries)
    pure: dict[str, SubmissionUsage] = {}
    pure_approvals: set[str] = set()
    detailed_released: dict[str, int] = {}
    for kind, submission, value in calls:
        usage = pure.get(submission, SubmissionUsage())
        if kind == "approve":
            failure, approval = value
            want = model.approve(submission, failure, approval)
            try:
                got: Any = ledger.approve_infrastructure_failure(
                    EPOCH, submission, failure, approval
                )
                got = ("approved", got.approved_failure_replacements, got.attempts_remaining)
            except FeedbackBudgetError as error:
                got = str(error)
            try:
                result, pure[submission] = decide_failure_approval(
                    policy,
                    usage,
                    failure_digest=failure,
                    operator_approval_digest=approval,
                    used_approval_digests=pure_approvals,
                )
                pure_approvals.add(approval)
                pure_got: Any = (
                    "approved",
                    result.approved_failure_replacements,
                    result.attempts_remaining,
                )
            except FeedbackBudgetError as error:
                pure_got = str(error)
        else:
            score, failure = (value, None) if kind == "score" else (None, value)
            want = model.record(submission, score, failure)
            try:
                decision = ledger.record_official_attempt(
                    EPOCH, submission, score=score, infrastructure_failure_digest=failure
                )
                got = _summary(decision)
                detailed_released[submission] = detailed_released.get(submission, 0) + (
                    decision.feedback_level == "detailed"
                )
            except FeedbackBudgetError as error:
                got = str(error)
            try:
                pure_decision, pure[submission] = decide_official_attempt(
                    policy, usage, score=score, infrastructure_failure_digest=failure
                )
                pure_got = _summary(pure_decision)
            except FeedbackBudgetError as error:
                pure_got = str(error)
        assert got == want
        assert pure_got == want
        snapshot = ledger.snapshot(EPOCH, submission)
        assert snapshot == budget_snapshot(policy, pure.get(submission, SubmissionUsage()))
        assert detailed_released.get(submission, 0) <= detail
        assert snapshot.detailed_feedback_used <= detail
        assert snapshot.official_attempts <= attempt_limit(policy, ledger.usage(EPOCH, submission))
    exported = ledger.export_usage()
    assert LedgerUsage.from_json(exported.to_json()) == exported
    restored = FeedbackBudgetLedger([policy], LedgerUsage.from_dict(exported.to_dict()))
    for submission in _SUBMISSIONS:
        assert restored.snapshot(EPOCH, submission) == ledger.snapshot(EPOCH, submission)


@settings(max_examples=200, deadline=None)
@given(boundaries=_BOUNDARIES, score=_SCORES)
def test_band_counts_boundaries_at_or_below_the_score(
    boundaries: list[float], score: float
) -> None:
    band = coarse_band(boundaries, score)
    assert band == sum(bound <= score for bound in boundaries)
    assert band == bisect.bisect_right(boundaries, score)
    assert 0 <= band <= len(boundaries)


@settings(max_examples=100, deadline=None)
@given(
    scored=st.integers(0, 5),
    failures=st.lists(st.sampled_from(_FAILURES), unique=True),
    approved=st.integers(0, 3),
    detail=st.integers(0, 5),
)
def test_usage_round_trips(scored: int, failures: list[str], approved: int, detail: int) -> None:
    chosen = failures[:approved]
    usage = SubmissionUsage(
        official_attempts=scored + len(failures),
        scored_attempts=scored,
        detailed_feedback_used=min(scored, detail),
        infrastructure_failure_digests=tuple(failures),
        approved_failures=dict(zip(chosen, _APPROVALS, strict=False)),
    )
    assert SubmissionUsage.from_dict(usage.to_dict()) == usage
    assert SubmissionUsage.from_json(usage.to_json()) == usage
    assert SubmissionUsage.from_json(usage.to_json()).to_json() == usage.to_json()
