"""Recovery checkpoints, planner, evidence adapter and bundled suite (21-adapters.md §1, §3)."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from sealeval.canonical import decode, digest_openmed, encode_openmed
from sealeval.gates import MetricEvidence, evaluate_agent_release_gates
from sealeval.gates.adapters.errors import AgentReleaseAdapterError
from sealeval.gates.adapters.recovery import (
    RecoveryEvidenceCase,
    recovery_release_evidence,
    recovery_source_envelope,
)
from sealeval.gates.recovery import (
    PHASES,
    CommittedEffect,
    RecoveryCheckpoint,
    RecoveryDecision,
    RecoveryEffect,
    RecoveryError,
    RecoveryObservation,
    derive_idempotency_key,
    is_governance_id,
    plan_recovery,
    recover_from_lineage,
    verify_lineage,
)
from sealeval.gates.recovery_suite import (
    RecoveryScenario,
    recovery_suite,
    recovery_suite_case_digests,
    recovery_suite_evidence,
    run_recovery_suite,
)
from support.refusals import CANARY, assert_refused
from support.vectors import PROJECT_ROOT, cases, decode_input, load

VECTORS = "openmed/adapters_recovery.json"
CANDIDATE = "sha256:" + "c" * 64


# ---------------------------------------------------------------------------
# Vector helpers


def _checkpoint_from_fields(fields: dict[str, Any]) -> RecoveryCheckpoint:
    values = dict(fields)
    values["effects"] = tuple(RecoveryEffect.from_dict(item) for item in values["effects"])
    return RecoveryCheckpoint(**values)


def _decision_from_fields(fields: dict[str, Any]) -> RecoveryDecision:
    values = dict(fields)
    values["committed_effects"] = tuple(
        CommittedEffect.from_dict(item) for item in values["committed_effects"]
    )
    return RecoveryDecision(**values)


def _evidence_cases(raw: Any) -> Any:
    """Case documents become RecoveryEvidenceCase; other values pass through (vector convention)."""
    if raw is None:
        return None
    return tuple(
        RecoveryEvidenceCase.from_dict(item) if isinstance(item, dict) else item for item in raw
    )


def _run_evidence(data: dict[str, Any]) -> tuple[MetricEvidence, ...]:
    return recovery_release_evidence(
        _evidence_cases(data["cases"]),
        expected_case_digests=data["expected_case_digests"],
        completed=data["completed"],
        synthetic=data["synthetic"],
    )


def _check_evidence_vector(data: dict[str, Any], expected: dict[str, Any]) -> None:
    if set(expected) == {"error_code"}:
        with pytest.raises(AgentReleaseAdapterError) as caught:
            _run_evidence(data)
        assert str(caught.value) == expected["error_code"]
        assert caught.value.code == expected["error_code"]
        return
    if set(expected) != {"evidence", "evidence_canonical", "evidence_digest", "source_canonical"}:
        pytest.fail("vector case shape not understood")
    evidence = _run_evidence(data)
    assert [item.to_json() for item in evidence] == list(expected["evidence_canonical"])
    assert [item.to_dict() for item in evidence] == expected["evidence"]
    envelope = recovery_source_envelope(
        _evidence_cases(data["cases"]),
        expected_case_digests=data["expected_case_digests"],
        completed=data["completed"],
        synthetic=data["synthetic"],
    )
    if expected["source_canonical"] is None:
        assert envelope is None
        assert expected["evidence_digest"] is None
        assert evidence == ()
        return
    assert encode_openmed(envelope) == expected["source_canonical"]
    assert digest_openmed(envelope) == expected["evidence_digest"]
    assert evidence[0].evidence_digest == expected["evidence_digest"]
    assert MetricEvidence.from_dict(decode(evidence[0].to_json())) == evidence[0]


@pytest.mark.parametrize("case", cases(VECTORS))
def test_recovery_vector(case: dict[str, Any]) -> None:
    data = decode_input(case["input"])
    expected = case["expected"]
    op = data.get("op")
    if op == "idempotency_key" and set(data) == {
        "op",
        "run_id",
        "action_id",
        "tool_id",
        "kind",
        "operation_digest",
    }:
        assert set(expected) == {"idempotency_key"}
        arguments = {key: value for key, value in data.items() if key != "op"}
        assert derive_idempotency_key(**arguments) == expected["idempotency_key"]
    elif op in ("checkpoint", "decision") and set(data) == {"op", "fields"}:
        if set(expected) != {"canonical", "parsed"}:
            pytest.fail("vector case shape not understood")
        document_type: type[RecoveryCheckpoint] | type[RecoveryDecision]
        if op == "checkpoint":
            built: RecoveryCheckpoint | RecoveryDecision = _checkpoint_from_fields(data["fields"])
            document_type = RecoveryCheckpoint
        else:
            built = _decision_from_fields(data["fields"])
            document_type = RecoveryDecision
        assert built.to_json() == expected["canonical"]
        assert built.to_dict() == expected["parsed"]
        assert document_type.from_dict(decode(expected["canonical"])) == built
    elif op == "recover" and set(data) == {"op", "lineage", "observations", "now"}:
        lineage = [RecoveryCheckpoint.from_dict(item) for item in data["lineage"]]
        observations = [RecoveryObservation.from_dict(item) for item in data["observations"]]
        if set(expected) == {"error_code", "code"}:
            with pytest.raises(RecoveryError) as caught:
                recover_from_lineage(lineage, observations, now=data["now"])
            assert str(caught.value) == expected["error_code"]
            assert caught.value.code == expected["code"]
        elif set(expected) == {"canonical", "parsed"}:
            decision = recover_from_lineage(lineage, observations, now=data["now"])
            assert decision.to_json() == expected["canonical"]
            assert decision.to_dict() == expected["parsed"]
        else:
            pytest.fail("vector case shape not understood")
    elif op == "evidence" and set(data) == {
        "op",
        "cases",
        "expected_case_digests",
        "completed",
        "synthetic",
    }:
        _check_evidence_vector(data, expected)
    else:
        pytest.fail("vector case shape not understood")


# ---------------------------------------------------------------------------
# Contracts


def _validator(name: str) -> Draft202012Validator:
    path = PROJECT_ROOT / "contracts" / f"{name}.schema.json"
    document = json.loads(path.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(document)
    assert document["$id"] == f"https://sealeval.dev/contracts/{name}.schema.json"
    return Draft202012Validator(document)


CHECKPOINT_CONTRACT = "openmed.agent.recovery_checkpoint.v1"
DECISION_CONTRACT = "openmed.agent.recovery_evidence.v1"


def _vector_documents() -> tuple[list[Any], list[Any]]:
    checkpoints: list[Any] = []
    decisions: list[Any] = []
    for case in load(VECTORS)["cases"]:
        data, expected = case["input"], case["expected"]
        if data["op"] == "checkpoint":
            checkpoints.append(expected["parsed"])
        elif data["op"] == "decision":
            decisions.append(expected["parsed"])
        elif data["op"] == "recover":
            checkpoints += data["lineage"]
            if "parsed" in expected:
                decisions.append(expected["parsed"])
        elif data["op"] == "evidence" and isinstance(data["cases"], list):
            for item in data["cases"]:
                if isinstance(item, dict) and isinstance(item["checkpoint"], dict):
                    checkpoints.append(item["checkpoint"])
                    decisions += [item["decision"], item["expected_decision"]]
    return checkpoints, decisions


def test_vector_documents_match_the_contracts() -> None:
    checkpoints, decisions = _vector_documents()
    assert len(checkpoints) > 50
    assert len(decisions) > 50
    checkpoint_validator = _validator(CHECKPOINT_CONTRACT)
    decision_validator = _validator(DECISION_CONTRACT)
    for document in checkpoints:
        checkpoint_validator.validate(document)
    for document in decisions:
        decision_validator.validate(document)


def test_suite_documents_match_the_contracts() -> None:
    checkpoint_validator = _validator(CHECKPOINT_CONTRACT)
    decision_validator = _validator(DECISION_CONTRACT)
    for case in run_recovery_suite():
        checkpoint_validator.validate(case.checkpoint.to_dict())
        decision_validator.validate(case.decision.to_dict())
        decision_validator.validate(case.expected_decision.to_dict())


def test_contracts_are_closed() -> None:
    checkpoint = recovery_suite()[0].checkpoint.to_dict()
    decision = recovery_suite()[0].expected_decision.to_dict()
    assert not _validator(CHECKPOINT_CONTRACT).is_valid({**checkpoint, "extra": 1})
    effect = {**checkpoint["effects"][0], "extra": 1}
    assert not _validator(CHECKPOINT_CONTRACT).is_valid({**checkpoint, "effects": [effect]})
    assert not _validator(DECISION_CONTRACT).is_valid({**decision, "extra": 1})
    assert not _validator(DECISION_CONTRACT).is_valid({**decision, "reason": "safe_to_resume"})


# ---------------------------------------------------------------------------
# Fixtures for the unit tests

RUN = "run_" + "1" * 32
OTHER_RUN = "run_" + "2" * 32
ACTIONS = tuple("act_" + letter * 32 for letter in "abcdef")
OPERATIONS = tuple("sha256:" + digit * 64 for digit in "012345")
EVIDENCE = tuple("sha256:" + letter * 64 for letter in "abcdef")
TOOL = "tool:org.example.fixtures/recovery-tool@1.0.0"
WORKFLOW = "workflow:org.example.fixtures/recovery@1.0.0"
PLAN = "sha256:" + "7" * 64
RECEIPT = "sha256:" + "8" * 64
OTHER_DIGEST = "sha256:" + "9" * 64


def effect(ordinal: int = 0, **changes: Any) -> RecoveryEffect:
    arguments: dict[str, Any] = {
        "run_id": RUN,
        "action_id": ACTIONS[ordinal],
        "tool_id": TOOL,
        "kind": "fhir_write",
        "operation_digest": OPERATIONS[ordinal],
        "ordinal": ordinal,
        "approval_required": True,
        "compensation_limit": "none",
        "state": "pending",
        "commit_evidence_digest": None,
    }
    arguments.update(changes)
    return RecoveryEffect.derive(**arguments)


def raw_effect(index: int = 0, **changes: Any) -> RecoveryEffect:
    """Build an effect field by field (no key derivation), from a valid one."""
    fields = {
        item.name: getattr(effect(index), item.name) for item in dataclasses.fields(RecoveryEffect)
    }
    fields.update(changes)
    return RecoveryEffect(**fields)


def committed(ordinal: int = 0, **changes: Any) -> RecoveryEffect:
    return effect(
        ordinal, **{"state": "committed", "commit_evidence_digest": EVIDENCE[ordinal], **changes}
    )


def checkpoint(**changes: Any) -> RecoveryCheckpoint:
    fields: dict[str, Any] = {
        "run_id": RUN,
        "workflow_id": WORKFLOW,
        "plan_digest": PLAN,
        "phase": "dispatching",
        "sequence": 0,
        "effects": (effect(0), effect(1)),
        "approval_action_digest": PLAN,
        "approval_expires_at": 100,
        "approval_receipt_digest": RECEIPT,
    }
    fields.update(changes)
    return RecoveryCheckpoint(**fields)


UNAPPROVED: dict[str, Any] = {
    "approval_action_digest": None,
    "approval_expires_at": None,
    "approval_receipt_digest": None,
}


def observe(item: RecoveryEffect, state: str = "absent", **changes: Any) -> RecoveryObservation:
    fields: dict[str, Any] = {
        "action_id": item.action_id,
        "operation_digest": item.operation_digest,
        "idempotency_key": item.idempotency_key,
        "state": state,
        "commit_evidence_digest": (
            (item.commit_evidence_digest or EVIDENCE[item.ordinal])
            if state == "committed"
            else None
        ),
    }
    fields.update(changes)
    return RecoveryObservation(**fields)


def decision(**changes: Any) -> RecoveryDecision:
    fields: dict[str, Any] = {
        "source_checkpoint_digest": checkpoint().checkpoint_digest,
        "disposition": "resume",
        "reason": "safe_to_resume",
        "committed_effects": (CommittedEffect(ACTIONS[0], EVIDENCE[0]),),
        "retry_effect_ids": (ACTIONS[1],),
        "retry_idempotency_keys": (effect(1).idempotency_key,),
        "compensation_effect_ids": (),
    }
    fields.update(changes)
    return RecoveryDecision(**fields)


def successor(before: RecoveryCheckpoint, **changes: Any) -> RecoveryCheckpoint:
    fields: dict[str, Any] = {
        "run_id": before.run_id,
        "workflow_id": before.workflow_id,
        "plan_digest": before.plan_digest,
        "phase": before.phase,
        "sequence": before.sequence + 1,
        "effects": before.effects,
        "previous_checkpoint_digest": before.checkpoint_digest,
        "approval_action_digest": before.approval_action_digest,
        "approval_expires_at": before.approval_expires_at,
        "approval_receipt_digest": before.approval_receipt_digest,
    }
    fields.update(changes)
    return RecoveryCheckpoint(**fields)


def plan(
    effects: tuple[RecoveryEffect, ...],
    observations: list[RecoveryObservation],
    *,
    now: int = 50,
    **changes: Any,
) -> RecoveryDecision:
    return plan_recovery(checkpoint(effects=effects, **changes), observations, now=now)


# ---------------------------------------------------------------------------
# The planner's rules (informative in the spec; docs/recovery.md)


def test_terminal_phases_ignore_observations() -> None:
    done = checkpoint(phase="completed", effects=(committed(0),))
    result = plan_recovery(done, [], now=0)
    assert (result.disposition, result.reason) == ("complete", "already_complete")
    assert result.committed_effects == ()
    stopped = checkpoint(
        phase="aborted", effects=(committed(0, compensation_limit="propose_only"),)
    )
    result = plan_recovery(stopped, [], now=0)
    assert (result.disposition, result.reason) == ("review_required", "workflow_aborted")
    assert result.compensation_effect_ids == ()


def test_resume_retries_absent_effects_with_their_keys() -> None:
    effects = (committed(0, compensation_limit="propose_only"), effect(1), effect(2))
    result = plan(
        effects, [observe(effects[0], "committed"), observe(effects[1]), observe(effects[2])]
    )
    assert (result.disposition, result.reason) == ("resume", "safe_to_resume")
    assert result.retry_effect_ids == (ACTIONS[1], ACTIONS[2])
    assert result.retry_idempotency_keys == (effects[1].idempotency_key, effects[2].idempotency_key)
    assert result.committed_effects == (CommittedEffect(ACTIONS[0], EVIDENCE[0]),)
    assert result.compensation_effect_ids == ()  # compensation is only proposed on refusal


def test_priority_mismatch_over_ambiguous_over_approval() -> None:
    effects = (effect(0), effect(1), effect(2))
    observations = [
        observe(effects[0], "ambiguous"),
        observe(effects[1], operation_digest=OTHER_DIGEST),
        observe(effects[2]),
    ]
    assert plan(effects, observations, **UNAPPROVED, phase="reconciling").reason == (
        "effect_mismatch"
    )
    observations[1] = observe(effects[1])
    assert plan(effects, observations, **UNAPPROVED, phase="reconciling").reason == (
        "ambiguous_effect"
    )
    observations[0] = observe(effects[0])
    assert plan(effects, observations, **UNAPPROVED, phase="planned").reason == "approval_missing"
    assert plan(effects, observations, now=100).reason == "approval_expired"
    assert plan(effects, observations, now=99).reason == "safe_to_resume"


def test_key_mismatch_is_an_effect_mismatch() -> None:
    effects = (effect(0),)
    other_key = effect(0, run_id=OTHER_RUN).idempotency_key
    result = plan(effects, [observe(effects[0], idempotency_key=other_key)])
    assert (result.disposition, result.reason) == ("review_required", "effect_mismatch")


def test_committed_effect_must_be_observed_with_the_same_evidence() -> None:
    effects = (committed(0, compensation_limit="propose_only"), effect(1))
    for observation in (
        observe(effects[0], "committed", commit_evidence_digest=OTHER_DIGEST),
        observe(effects[0], "absent"),
    ):
        result = plan(effects, [observation, observe(effects[1])])
        assert (result.reason, result.committed_effects) == ("ambiguous_effect", ())
        assert result.compensation_effect_ids == ()


def test_refusal_proposes_compensation_for_committed_propose_only_effects() -> None:
    effects = (
        committed(0, compensation_limit="propose_only"),
        effect(1, compensation_limit="propose_only"),
        committed(2),
        effect(3),
    )
    observations = [
        observe(effects[0], "committed"),
        observe(effects[1], "committed"),
        observe(effects[2], "committed"),
        observe(effects[3], "ambiguous"),
    ]
    result = plan(effects, observations)
    assert result.reason == "ambiguous_effect"
    assert [item.action_id for item in result.committed_effects] == list(ACTIONS[:3])
    assert result.compensation_effect_ids == (ACTIONS[0], ACTIONS[1])
    assert result.retry_effect_ids == ()


def test_approval_only_matters_for_retried_effects_that_require_it() -> None:
    effects = (committed(0), effect(1, approval_required=False))
    observations = [observe(effects[0], "committed"), observe(effects[1])]
    expired = plan(effects, observations, now=10**6)
    assert (expired.disposition, expired.retry_effect_ids) == ("resume", (ACTIONS[1],))
    unapproved = plan(effects, observations, phase="reconciling", **UNAPPROVED)
    assert unapproved.disposition == "resume"
    # An approval-requiring effect that is already committed needs no approval.
    done = plan((committed(0),), [observe(committed(0), "committed")], now=10**6)
    assert (done.disposition, done.reason) == ("complete", "effects_reconciled")


def test_observation_order_does_not_matter() -> None:
    effects = (committed(0), effect(1), effect(2))
    observations = [observe(effects[0], "committed"), observe(effects[1]), observe(effects[2])]
    forward = plan(effects, observations)
    assert plan(effects, list(reversed(observations))) == forward


def test_lineage_vectors_verify_and_plan_from_the_newest_checkpoint() -> None:
    first = checkpoint(phase="planned", effects=(effect(0), effect(1)), **UNAPPROVED)
    second = successor(
        first,
        phase="approval_recorded",
        approval_action_digest=PLAN,
        approval_expires_at=100,
        approval_receipt_digest=RECEIPT,
    )
    third = successor(second, phase="dispatching", effects=(committed(0), effect(1)))
    assert verify_lineage([first, second, third]) is third
    observations = [observe(third.effects[0], "committed"), observe(third.effects[1])]
    result = recover_from_lineage((first, second, third), observations, now=1)
    assert result.source_checkpoint_digest == third.checkpoint_digest
    assert result.disposition == "resume"


# ---------------------------------------------------------------------------
# Every RecoveryError code, table-driven


def _lineage_pair(**changes: Any) -> list[RecoveryCheckpoint]:
    first = checkpoint(phase="reconciling", effects=(committed(0), effect(1)))
    return [first, successor(first, **changes)]


DOCUMENT = checkpoint().to_dict()
DECISION_DOCUMENT = decision().to_dict()
OBSERVATION_DOCUMENT = observe(effect(0)).to_dict()

RECOVERY_REFUSALS: list[tuple[str, str, Callable[[], object]]] = [
    # idempotency keys
    ("key-run", "run_id: invalid_identifier", lambda: effect(0, run_id="run_" + "A" * 32)),
    ("key-action", "action_id: invalid_identifier", lambda: effect(0, action_id="act_1")),
    ("key-tool", "tool_id: invalid_identifier", lambda: effect(0, tool_id=WORKFLOW)),
    ("key-kind", "kind: invalid_vocabulary", lambda: effect(0, kind="http_post")),
    ("key-operation", "operation_digest: invalid_digest", lambda: effect(0, operation_digest="x")),
    # effects
    ("effect-action", "effect.action_id: invalid_identifier", lambda: raw_effect(action_id=1)),
    ("effect-tool", "effect.tool_id: invalid_identifier", lambda: raw_effect(tool_id="tool:x/y")),
    ("effect-kind", "effect.kind: invalid_vocabulary", lambda: raw_effect(kind="FHIR_WRITE")),
    (
        "effect-op",
        "effect.operation_digest: invalid_digest",
        lambda: raw_effect(operation_digest=""),
    ),
    (
        "effect-key",
        "effect.idempotency_key: invalid_identifier",
        lambda: raw_effect(idempotency_key="idem_" + "G" * 64),
    ),
    ("effect-ordinal", "effect.ordinal: invalid_integer", lambda: raw_effect(ordinal=-1)),
    ("effect-ordinal-bool", "effect.ordinal: invalid_integer", lambda: raw_effect(ordinal=False)),
    ("effect-ordinal-big", "effect.ordinal: invalid_integer", lambda: raw_effect(ordinal=2**63)),
    (
        "effect-approval",
        "effect.approval_required: invalid_boolean",
        lambda: raw_effect(approval_required=1),
    ),
    (
        "effect-limit",
        "effect.compensation_limit: invalid_vocabulary",
        lambda: raw_effect(compensation_limit="execute"),
    ),
    ("effect-state", "effect.state: invalid_vocabulary", lambda: raw_effect(state="absent")),
    (
        "effect-evidence",
        "effect.commit_evidence_digest: invalid_digest",
        lambda: raw_effect(commit_evidence_digest="sha256:"),
    ),
    (
        "effect-committed-without-evidence",
        "effect.commit_evidence_digest: commit_evidence_mismatch",
        lambda: raw_effect(state="committed"),
    ),
    (
        "effect-pending-with-evidence",
        "effect.commit_evidence_digest: commit_evidence_mismatch",
        lambda: raw_effect(commit_evidence_digest=EVIDENCE[0]),
    ),
    # checkpoints
    ("cp-schema", "schema_version: unsupported_version", lambda: checkpoint(schema_version="v1")),
    ("cp-run", "run_id: invalid_identifier", lambda: checkpoint(run_id="run_" + "1" * 31)),
    ("cp-workflow", "workflow_id: invalid_identifier", lambda: checkpoint(workflow_id=TOOL)),
    ("cp-plan", "plan_digest: invalid_digest", lambda: checkpoint(plan_digest=None)),
    ("cp-phase", "phase: invalid_vocabulary", lambda: checkpoint(phase="resumed")),
    ("cp-sequence", "sequence: invalid_integer", lambda: checkpoint(sequence=1.0)),
    (
        "cp-previous",
        "previous_checkpoint_digest: invalid_digest",
        lambda: checkpoint(sequence=1, previous_checkpoint_digest="SHA256:" + "0" * 64),
    ),
    (
        "cp-first-with-previous",
        "previous_checkpoint_digest: sequence_mismatch",
        lambda: checkpoint(previous_checkpoint_digest=OTHER_DIGEST),
    ),
    (
        "cp-later-without-previous",
        "previous_checkpoint_digest: sequence_mismatch",
        lambda: checkpoint(sequence=3),
    ),
    (
        "cp-recovery-evidence",
        "recovery_evidence_digest: invalid_digest",
        lambda: checkpoint(recovery_evidence_digest=""),
    ),
    (
        "cp-approval-action",
        "approval_action_digest: invalid_digest",
        lambda: checkpoint(approval_action_digest="x"),
    ),
    (
        "cp-approval-expiry",
        "approval_expires_at: invalid_integer",
        lambda: checkpoint(approval_expires_at=-1),
    ),
    (
        "cp-approval-receipt",
        "approval_receipt_digest: invalid_digest",
        lambda: checkpoint(approval_receipt_digest=1),
    ),
    (
        "cp-approval-partial",
        "approval: incomplete_approval",
        lambda: checkpoint(phase="planned", approval_receipt_digest=None),
    ),
    (
        "cp-approval-other-plan",
        "approval_action_digest: approval_plan_mismatch",
        lambda: checkpoint(approval_action_digest=OTHER_DIGEST),
    ),
    ("cp-effects-type", "effects: invalid_sequence", lambda: checkpoint(effects=effect(0))),
    (
        "cp-effects-items",
        "effects: invalid_sequence",
        lambda: checkpoint(effects=(effect(0).to_dict(),)),
    ),
    ("cp-effects-empty", "effects: empty", lambda: checkpoint(effects=())),
    ("cp-ordinals", "effects: ordinal_mismatch", lambda: checkpoint(effects=(effect(1),))),
    (
        "cp-ordinals-order",
        "effects: ordinal_mismatch",
        lambda: checkpoint(effects=(effect(1), effect(0))),
    ),
    (
        "cp-duplicate-action",
        "effects: duplicate_action",
        lambda: checkpoint(effects=(effect(0), effect(1, action_id=ACTIONS[0]))),
    ),
    (
        "cp-duplicate-key",
        "effects: duplicate_key",
        lambda: checkpoint(
            effects=(effect(0), raw_effect(1, idempotency_key=effect(0).idempotency_key))
        ),
    ),
    (
        "cp-key-derivation",
        "effects: key_mismatch",
        lambda: checkpoint(effects=(effect(0, run_id=OTHER_RUN),)),
    ),
    (
        "cp-approval-recorded-needs-receipt",
        "approval_receipt_digest: approval_receipt_required",
        lambda: checkpoint(phase="approval_recorded", **UNAPPROVED),
    ),
    (
        "cp-dispatching-needs-receipt",
        "approval_receipt_digest: approval_receipt_required",
        lambda: checkpoint(**UNAPPROVED),
    ),
    (
        "cp-completed-needs-receipt",
        "approval_receipt_digest: approval_receipt_required",
        lambda: checkpoint(phase="completed", effects=(committed(0),), **UNAPPROVED),
    ),
    (
        "cp-completed-needs-commits",
        "effects: effects_not_committed",
        lambda: checkpoint(phase="completed"),
    ),
    # closed parsing
    ("doc-checkpoint", "checkpoint: invalid_document", lambda: RecoveryCheckpoint.from_dict([])),
    (
        "doc-checkpoint-extra",
        "checkpoint: unknown_field",
        lambda: RecoveryCheckpoint.from_dict({**DOCUMENT, "note": None}),
    ),
    (
        "doc-checkpoint-missing",
        "checkpoint: missing_field",
        lambda: RecoveryCheckpoint.from_dict(
            {key: value for key, value in DOCUMENT.items() if key != "sequence"}
        ),
    ),
    (
        "doc-checkpoint-digest",
        "checkpoint_digest: invalid_digest",
        lambda: RecoveryCheckpoint.from_dict({**DOCUMENT, "checkpoint_digest": None}),
    ),
    (
        "doc-checkpoint-tampered",
        "checkpoint_digest: payload_mismatch",
        lambda: RecoveryCheckpoint.from_dict({**DOCUMENT, "checkpoint_digest": OTHER_DIGEST}),
    ),
    (
        "doc-checkpoint-effects",
        "effects: invalid_sequence",
        lambda: RecoveryCheckpoint.from_dict({**DOCUMENT, "effects": {}}),
    ),
    ("doc-effect", "effect: invalid_document", lambda: RecoveryEffect.from_dict("effect")),
    (
        "doc-effect-key-type",
        "effect: unknown_field",
        lambda: RecoveryEffect.from_dict({**effect(0).to_dict(), 1: 1}),
    ),
    ("doc-decision", "decision: invalid_document", lambda: RecoveryDecision.from_dict(None)),
    (
        "doc-decision-tampered",
        "evidence_digest: payload_mismatch",
        lambda: RecoveryDecision.from_dict({**DECISION_DOCUMENT, "evidence_digest": OTHER_DIGEST}),
    ),
    (
        "doc-decision-digest",
        "evidence_digest: invalid_digest",
        lambda: RecoveryDecision.from_dict({**DECISION_DOCUMENT, "evidence_digest": "sha256:0"}),
    ),
    (
        "doc-decision-committed",
        "committed_effects: invalid_sequence",
        lambda: RecoveryDecision.from_dict({**DECISION_DOCUMENT, "committed_effects": None}),
    ),
    (
        "doc-committed-effect",
        "committed_effect: missing_field",
        lambda: CommittedEffect.from_dict({"action_id": ACTIONS[0]}),
    ),
    (
        "doc-observation",
        "observation: unknown_field",
        lambda: RecoveryObservation.from_dict({**OBSERVATION_DOCUMENT, "ordinal": 0}),
    ),
    # decisions
    ("dec-schema", "schema_version: unsupported_version", lambda: decision(schema_version=None)),
    (
        "dec-source",
        "source_checkpoint_digest: invalid_digest",
        lambda: decision(source_checkpoint_digest="checkpoint"),
    ),
    ("dec-disposition", "disposition: invalid_vocabulary", lambda: decision(disposition="retry")),
    ("dec-reason", "reason: invalid_vocabulary", lambda: decision(reason="ok")),
    (
        "dec-committed-type",
        "committed_effects: invalid_sequence",
        lambda: decision(committed_effects=[{"action_id": ACTIONS[0]}]),
    ),
    (
        "dec-retry-type",
        "retry_effect_ids: invalid_sequence",
        lambda: decision(retry_effect_ids="a"),
    ),
    (
        "dec-retry-id",
        "retry_effect_ids: invalid_identifier",
        lambda: decision(retry_effect_ids=("act_",)),
    ),
    (
        "dec-key-type",
        "retry_idempotency_keys: invalid_sequence",
        lambda: decision(retry_idempotency_keys=None),
    ),
    (
        "dec-key",
        "retry_idempotency_keys: invalid_identifier",
        lambda: decision(retry_idempotency_keys=(ACTIONS[1],)),
    ),
    (
        "dec-compensation",
        "compensation_effect_ids: invalid_identifier",
        lambda: decision(compensation_effect_ids=(EVIDENCE[0],)),
    ),
    (
        "dec-reason-pairing",
        "reason: inconsistent_decision",
        lambda: decision(reason="approval_missing"),
    ),
    (
        "dec-committed-duplicate",
        "committed_effects: duplicate_action",
        lambda: decision(
            committed_effects=(
                CommittedEffect(ACTIONS[0], EVIDENCE[0]),
                CommittedEffect(ACTIONS[0], EVIDENCE[1]),
            )
        ),
    ),
    (
        "dec-retry-duplicate",
        "retry_effect_ids: duplicate_action",
        lambda: decision(
            retry_effect_ids=(ACTIONS[1], ACTIONS[1]),
            retry_idempotency_keys=(effect(1).idempotency_key, effect(2).idempotency_key),
        ),
    ),
    (
        "dec-key-duplicate",
        "retry_idempotency_keys: duplicate_key",
        lambda: decision(
            retry_effect_ids=(ACTIONS[1], ACTIONS[2]),
            retry_idempotency_keys=(effect(1).idempotency_key, effect(1).idempotency_key),
        ),
    ),
    (
        "dec-compensation-duplicate",
        "compensation_effect_ids: duplicate_action",
        lambda: decision(compensation_effect_ids=(ACTIONS[0], ACTIONS[0])),
    ),
    (
        "dec-retry-key-count",
        "retry_idempotency_keys: inconsistent_decision",
        lambda: decision(retry_idempotency_keys=()),
    ),
    (
        "dec-resume-without-retries",
        "retry_effect_ids: inconsistent_decision",
        lambda: decision(retry_effect_ids=(), retry_idempotency_keys=()),
    ),
    (
        "dec-retries-without-resume",
        "retry_effect_ids: inconsistent_decision",
        lambda: decision(disposition="complete", reason="effects_reconciled"),
    ),
    (
        "dec-committed-retried",
        "retry_effect_ids: inconsistent_decision",
        lambda: decision(
            retry_effect_ids=(ACTIONS[0],), retry_idempotency_keys=(effect(0).idempotency_key,)
        ),
    ),
    (
        "dec-compensation-not-committed",
        "compensation_effect_ids: inconsistent_decision",
        lambda: decision(
            disposition="review_required",
            reason="ambiguous_effect",
            retry_effect_ids=(),
            retry_idempotency_keys=(),
            compensation_effect_ids=(ACTIONS[1],),
        ),
    ),
    (
        "committed-action",
        "committed_effect.action_id: invalid_identifier",
        lambda: CommittedEffect(RUN, EVIDENCE[0]),
    ),
    (
        "committed-evidence",
        "committed_effect.commit_evidence_digest: invalid_digest",
        lambda: CommittedEffect(ACTIONS[0], None),  # type: ignore[arg-type]
    ),
    # observations
    (
        "obs-action",
        "observation.action_id: invalid_identifier",
        lambda: observe(effect(0), action_id=None),
    ),
    (
        "obs-operation",
        "observation.operation_digest: invalid_digest",
        lambda: observe(effect(0), operation_digest=ACTIONS[0]),
    ),
    (
        "obs-key",
        "observation.idempotency_key: invalid_identifier",
        lambda: observe(effect(0), idempotency_key=OPERATIONS[0]),
    ),
    ("obs-state", "observation.state: invalid_vocabulary", lambda: observe(effect(0), "pending")),
    (
        "obs-evidence",
        "observation.commit_evidence_digest: invalid_digest",
        lambda: observe(effect(0), "committed", commit_evidence_digest="sha256"),
    ),
    (
        "obs-ambiguous-with-evidence",
        "observation.commit_evidence_digest: commit_evidence_mismatch",
        lambda: observe(effect(0), "ambiguous", commit_evidence_digest=EVIDENCE[0]),
    ),
    (
        "obs-committed-without-evidence",
        "observation.commit_evidence_digest: commit_evidence_mismatch",
        lambda: observe(effect(0), "committed", commit_evidence_digest=None),
    ),
    # planner
    (
        "plan-checkpoint",
        "checkpoint: invalid_document",
        lambda: plan_recovery(DOCUMENT, [], now=0),  # type: ignore[arg-type]
    ),
    (
        "plan-observations",
        "observations: invalid_sequence",
        lambda: plan_recovery(checkpoint(), [OBSERVATION_DOCUMENT], now=0),  # type: ignore[list-item]
    ),
    (
        "plan-now",
        "now: invalid_integer",
        lambda: plan_recovery(checkpoint(), [], now=1.5),  # type: ignore[arg-type]
    ),
    (
        "plan-now-negative",
        "now: invalid_integer",
        lambda: plan_recovery(checkpoint(phase="completed", effects=(committed(0),)), [], now=-1),
    ),
    (
        "plan-missing-observation",
        "observations: observation_coverage_mismatch",
        lambda: plan_recovery(checkpoint(), [observe(effect(0))], now=0),
    ),
    (
        "plan-duplicate-observation",
        "observations: observation_coverage_mismatch",
        lambda: plan_recovery(
            checkpoint(), [observe(effect(0)), observe(effect(1)), observe(effect(1))], now=0
        ),
    ),
    (
        "plan-foreign-observation",
        "observations: observation_coverage_mismatch",
        lambda: plan_recovery(
            checkpoint(), [observe(effect(0)), observe(effect(1)), observe(effect(2))], now=0
        ),
    ),
    # lineages
    ("lineage-type", "lineage: invalid_sequence", lambda: verify_lineage(checkpoint())),  # type: ignore[arg-type]
    ("lineage-empty", "lineage: empty", lambda: verify_lineage([])),
    (
        "lineage-start",
        "lineage: lineage_incomplete",
        lambda: verify_lineage(_lineage_pair()[1:]),
    ),
    (
        "lineage-link",
        "lineage: broken_lineage",
        lambda: verify_lineage(_lineage_pair(previous_checkpoint_digest=OTHER_DIGEST)),
    ),
    (
        "lineage-sequence",
        "lineage: broken_lineage",
        lambda: verify_lineage(_lineage_pair(sequence=2)),
    ),
    (
        "lineage-plan",
        "lineage: lineage_mismatch",
        lambda: verify_lineage(
            _lineage_pair(
                plan_digest=OTHER_DIGEST,
                approval_action_digest=OTHER_DIGEST,
            )
        ),
    ),
    (
        "lineage-effects",
        "lineage: lineage_mismatch",
        lambda: verify_lineage(
            _lineage_pair(effects=(committed(0), effect(1, approval_required=False)))
        ),
    ),
    (
        "lineage-uncommitted",
        "lineage: lineage_regressed",
        lambda: verify_lineage(_lineage_pair(effects=(effect(0), effect(1)))),
    ),
    (
        "lineage-evidence-changed",
        "lineage: lineage_regressed",
        lambda: verify_lineage(
            _lineage_pair(effects=(committed(0, commit_evidence_digest=OTHER_DIGEST), effect(1)))
        ),
    ),
    (
        "lineage-approval-dropped",
        "lineage: lineage_regressed",
        lambda: verify_lineage(_lineage_pair(**UNAPPROVED)),
    ),
    (
        "lineage-after-terminal",
        "lineage: after_terminal",
        lambda: verify_lineage(
            [
                first := checkpoint(phase="aborted"),
                successor(first, phase="dispatching"),
            ]
        ),
    ),
]


@pytest.mark.parametrize(
    ("message", "action"),
    [pytest.param(message, action, id=name) for name, message, action in RECOVERY_REFUSALS],
)
def test_recovery_error_codes(message: str, action: Callable[[], object]) -> None:
    field_name, code = message.split(": ")
    error = assert_refused(action, code, field_name)
    assert isinstance(error, RecoveryError)
    assert str(error) == message


def test_every_recovery_error_code_is_exercised() -> None:
    exercised = {message.split(": ")[1] for _, message, _ in RECOVERY_REFUSALS}
    assert exercised == set(RecoveryError.codes)


def test_recovery_error_message_formats() -> None:
    assert str(RecoveryError("empty", "lineage")) == "lineage: empty"
    bare = RecoveryError("observation_coverage_mismatch")
    assert str(bare) == "observation_coverage_mismatch"
    assert (bare.code, bare.field) == ("observation_coverage_mismatch", None)
    assert RecoveryError.module == "sealeval.gates.recovery"


# ---------------------------------------------------------------------------
# The adapter: every refusal, table-driven


@functools.cache
def _suite_cases() -> tuple[RecoveryEvidenceCase, ...]:
    return run_recovery_suite()


def _adapter(cases_value: Any = None, **changes: Any) -> tuple[MetricEvidence, ...]:
    arguments: dict[str, Any] = {
        "expected_case_digests": recovery_suite_case_digests(),
        "completed": True,
        "synthetic": True,
    }
    arguments.update(changes)
    return recovery_release_evidence(
        _suite_cases() if cases_value is None else cases_value, **arguments
    )


def _with_other_case_digest(case: RecoveryEvidenceCase, digest: str) -> RecoveryEvidenceCase:
    return dataclasses.replace(case, case_digest=digest)


def _shared_checkpoint() -> tuple[tuple[RecoveryEvidenceCase, ...], list[str]]:
    """Two different case digests, one execution (the same checkpoint)."""
    suite = list(_suite_cases())
    suite[1] = RecoveryEvidenceCase(
        case_digest=suite[1].case_digest,
        checkpoint=suite[0].checkpoint,
        decision=suite[0].decision,
        expected_decision=suite[0].expected_decision,
    )
    return tuple(suite), [case.case_digest for case in suite]


ADAPTER_REFUSALS: list[tuple[str, str, Callable[[], object]]] = [
    ("not-completed", "failed_run", lambda: _adapter(completed=False)),
    ("completed-int", "failed_run", lambda: _adapter(completed=1)),
    ("completed-text", "failed_run", lambda: _adapter(completed="true")),
    ("completed-none", "failed_run", lambda: _adapter(completed=None)),
    ("synthetic-int", "invalid_provenance", lambda: _adapter(synthetic=0)),
    ("synthetic-none", "invalid_provenance", lambda: _adapter(synthetic=None)),
    ("inventory-empty", "missing_inventory", lambda: _adapter(expected_case_digests=())),
    ("inventory-none", "missing_inventory", lambda: _adapter(expected_case_digests=None)),
    (
        "inventory-set",
        "missing_inventory",
        lambda: _adapter(expected_case_digests=set(recovery_suite_case_digests())),
    ),
    (
        "inventory-item",
        "invalid_case_digest",
        lambda: _adapter(expected_case_digests=(*recovery_suite_case_digests()[1:], "case-1")),
    ),
    (
        "inventory-repeat",
        "duplicate_case",
        lambda: _adapter(
            expected_case_digests=(*recovery_suite_case_digests(), recovery_suite_case_digests()[0])
        ),
    ),
    ("cases-mapping", "invalid_recovery_case", lambda: _adapter({"cases": []})),
    (
        "cases-item",
        "invalid_recovery_case",
        lambda: _adapter((*_suite_cases()[1:], _suite_cases()[0].to_dict())),
    ),
    ("cases-empty", "missing_inventory", lambda: _adapter(())),
    ("cases-missing-one", "incomplete_run", lambda: _adapter(_suite_cases()[1:])),
    (
        "cases-foreign",
        "incomplete_run",
        lambda: _adapter(
            (*_suite_cases()[1:], _with_other_case_digest(_suite_cases()[0], CANDIDATE))
        ),
    ),
    (
        "cases-repeated",
        "duplicate_case",
        lambda: _adapter((*_suite_cases(), _suite_cases()[0])),
    ),
    (
        "executions-repeated",
        "duplicate_run",
        lambda: _adapter(_shared_checkpoint()[0], expected_case_digests=_shared_checkpoint()[1]),
    ),
    (
        "case-digest",
        "invalid_case_digest",
        lambda: _with_other_case_digest(_suite_cases()[0], "sha256:" + "A" * 64),
    ),
    (
        "case-types",
        "invalid_recovery_case",
        lambda: RecoveryEvidenceCase(
            case_digest=CANDIDATE,
            checkpoint=_suite_cases()[0].checkpoint.to_dict(),  # type: ignore[arg-type]
            decision=_suite_cases()[0].decision,
            expected_decision=_suite_cases()[0].expected_decision,
        ),
    ),
    (
        "case-decision-type",
        "invalid_recovery_case",
        lambda: dataclasses.replace(_suite_cases()[0], decision=None),
    ),
    (
        "case-decision-other-checkpoint",
        "checkpoint_mismatch",
        lambda: dataclasses.replace(_suite_cases()[0], decision=_suite_cases()[1].decision),
    ),
    (
        "case-golden-other-checkpoint",
        "checkpoint_mismatch",
        lambda: dataclasses.replace(
            _suite_cases()[0], expected_decision=_suite_cases()[1].expected_decision
        ),
    ),
    (
        "case-document-keys",
        "invalid_recovery_case",
        lambda: RecoveryEvidenceCase.from_dict({**_suite_cases()[0].to_dict(), "note": 1}),
    ),
    (
        "case-document-digest",
        "invalid_case_digest",
        lambda: RecoveryEvidenceCase.from_dict({**_suite_cases()[0].to_dict(), "case_digest": 7}),
    ),
    (
        "case-document-tampered-checkpoint",
        "invalid_recovery_case",
        lambda: RecoveryEvidenceCase.from_dict(
            {
                **_suite_cases()[0].to_dict(),
                "checkpoint": {**_suite_cases()[0].checkpoint.to_dict(), "sequence": 5},
            }
        ),
    ),
]


@pytest.mark.parametrize(
    ("code", "action"),
    [pytest.param(code, action, id=name) for name, code, action in ADAPTER_REFUSALS],
)
def test_adapter_refusals(code: str, action: Callable[[], object]) -> None:
    with pytest.raises(AgentReleaseAdapterError) as caught:
        action()
    assert str(caught.value) == code
    assert caught.value.code == code
    assert caught.value.field is None


def test_every_recovery_adapter_code_is_exercised() -> None:
    assert {code for _, code, _ in ADAPTER_REFUSALS} == {
        "checkpoint_mismatch",
        "duplicate_case",
        "duplicate_run",
        "failed_run",
        "incomplete_run",
        "invalid_case_digest",
        "invalid_provenance",
        "invalid_recovery_case",
        "missing_inventory",
    }


def test_check_order_follows_the_spec() -> None:
    # completed is checked before provenance, provenance before the inventory,
    # the inventory before the cases; absent cases win over everything.
    assert recovery_release_evidence(None, expected_case_digests=None, completed=False) == ()  # type: ignore[arg-type]
    with pytest.raises(AgentReleaseAdapterError, match=r"^failed_run$"):
        _adapter(completed=False, synthetic=None, expected_case_digests=())
    with pytest.raises(AgentReleaseAdapterError, match=r"^invalid_provenance$"):
        _adapter(synthetic="yes", expected_case_digests=())
    with pytest.raises(AgentReleaseAdapterError, match=r"^missing_inventory$"):
        _adapter("not cases", expected_case_digests=[])
    with pytest.raises(AgentReleaseAdapterError, match=r"^invalid_recovery_case$"):
        _adapter((42,))


def test_a_list_of_cases_and_a_list_inventory_are_accepted() -> None:
    as_lists = _adapter(
        list(_suite_cases()), expected_case_digests=list(recovery_suite_case_digests())
    )
    assert as_lists == _adapter()


def test_case_order_never_changes_a_byte() -> None:
    forward = _adapter()
    backward = _adapter(tuple(reversed(_suite_cases())))
    inventory = tuple(sorted(recovery_suite_case_digests(), reverse=True))
    assert [item.to_json() for item in backward] == [item.to_json() for item in forward]
    assert _adapter(expected_case_digests=inventory) == forward


def test_provenance_changes_limitations_and_digest() -> None:
    (synthetic,) = _adapter()
    (host,) = _adapter(synthetic=False)
    assert synthetic.limitations == ("host_supplied_golden", "synthetic_only")
    assert host.limitations == ("host_supplied_golden",)
    assert synthetic.evidence_digest != host.evidence_digest
    envelope = recovery_source_envelope(
        _suite_cases(), expected_case_digests=recovery_suite_case_digests()
    )
    assert envelope is not None
    assert digest_openmed(envelope) == synthetic.evidence_digest
    assert envelope["cases"] == [
        case.to_dict() for case in sorted(_suite_cases(), key=lambda case: case.case_digest)
    ]
    assert envelope["expected_case_digests"] == sorted(recovery_suite_case_digests())


def test_evidence_case_round_trips() -> None:
    for case in _suite_cases():
        assert RecoveryEvidenceCase.from_dict(decode(encode_openmed(case.to_dict()))) == case


# ---------------------------------------------------------------------------
# The bundled suite, end to end


def test_suite_covers_all_six_phases_with_unique_cases() -> None:
    scenarios = recovery_suite()
    assert {scenario.phase for scenario in scenarios} == set(PHASES)
    digests = recovery_suite_case_digests()
    assert len(set(digests)) == len(digests) == len(scenarios)
    assert len({scenario.checkpoint.checkpoint_digest for scenario in scenarios}) == len(scenarios)
    assert len({scenario.checkpoint.run_id for scenario in scenarios}) == len(scenarios)
    for scenario in scenarios:
        assert isinstance(scenario, RecoveryScenario)
        assert verify_lineage(scenario.lineage) is scenario.checkpoint
        assert scenario.checkpoint.phase in repr(scenario)


def test_suite_goldens_span_every_outcome() -> None:
    outcomes = {
        (scenario.expected_decision.disposition, scenario.expected_decision.reason)
        for scenario in recovery_suite()
    }
    assert outcomes == {
        ("resume", "safe_to_resume"),
        ("complete", "effects_reconciled"),
        ("complete", "already_complete"),
        ("review_required", "workflow_aborted"),
        ("review_required", "ambiguous_effect"),
        ("review_required", "effect_mismatch"),
        ("review_required", "approval_missing"),
        ("review_required", "approval_expired"),
    }
    assert any(s.expected_decision.compensation_effect_ids for s in recovery_suite())


def test_suite_is_deterministic() -> None:
    recovery_suite.cache_clear()
    first = [scenario.case_digest for scenario in recovery_suite()]
    recovery_suite.cache_clear()
    assert [scenario.case_digest for scenario in recovery_suite()] == first
    assert recovery_suite_evidence() == recovery_suite_evidence()


def test_bundled_suite_passes_the_recovery_gate_end_to_end() -> None:
    evidence = recovery_suite_evidence()
    (item,) = evidence
    assert item.metric == "recovery_correctness_rate"
    assert (item.value, item.event_count, item.sample_size) == (1.0, 20, 20)
    assert {piece.slice_ref for piece in item.slices} == set(PHASES)
    assert all(piece.value == 1.0 for piece in item.slices)
    assert item.limitations == ("host_supplied_golden", "synthetic_only")
    report = evaluate_agent_release_gates(list(evidence), candidate_digest=CANDIDATE)
    (result,) = [r for r in report.gate_results if r.gate.metric == "recovery_correctness_rate"]
    assert result.passed
    assert result.reason_code == "threshold_satisfied"
    assert result.evaluated_bound == 1.0
    assert dict(result.slice_sizes) == {
        "aborted": 2,
        "approval_recorded": 3,
        "completed": 2,
        "dispatching": 5,
        "planned": 4,
        "reconciling": 4,
    }
    # Only recovery evidence was supplied: every other gate fails closed.
    assert report.decision == "NOT_READY"
    others = [r for r in report.gate_results if r.gate.metric != "recovery_correctness_rate"]
    assert {r.reason_code for r in others} == {"missing_evidence"}


def test_absent_cases_fail_the_gate_closed() -> None:
    evidence = recovery_release_evidence(None, expected_case_digests=recovery_suite_case_digests())
    report = evaluate_agent_release_gates(list(evidence), candidate_digest=CANDIDATE)
    (result,) = [r for r in report.gate_results if r.gate.metric == "recovery_correctness_rate"]
    assert (result.passed, result.reason_code) == (False, "missing_evidence")


def _wrong_on(name: str) -> Callable[..., RecoveryDecision]:
    target = next(s for s in recovery_suite() if s.name == name).checkpoint.checkpoint_digest

    def planner(checkpoint: RecoveryCheckpoint, observations: Any, *, now: int) -> RecoveryDecision:
        right = plan_recovery(checkpoint, observations, now=now)
        if checkpoint.checkpoint_digest != target:
            return right
        # Well-formed, for the right checkpoint, but not the golden decision.
        return RecoveryDecision(
            source_checkpoint_digest=right.source_checkpoint_digest,
            disposition="complete",
            reason="effects_reconciled",
            committed_effects=right.committed_effects,
        )

    return planner


def test_one_wrong_decision_lowers_the_value_and_fails_the_gate() -> None:
    (item,) = recovery_suite_evidence(_wrong_on("dispatching_partial_commit_resume"))
    assert (item.event_count, item.sample_size, item.value) == (19, 20, 19 / 20)
    slices = {piece.slice_ref: (piece.event_count, piece.sample_size) for piece in item.slices}
    assert slices["dispatching"] == (4, 5)
    assert all(slices[phase] == (size, size) for phase, size in [("planned", 4), ("aborted", 2)])
    report = evaluate_agent_release_gates([item], candidate_digest=CANDIDATE)
    (result,) = [r for r in report.gate_results if r.gate.metric == "recovery_correctness_rate"]
    assert (result.passed, result.reason_code) == (False, "threshold_failed")


def test_only_a_golden_refusal_counts_a_refusal_as_correct() -> None:
    def always_refuse(
        checkpoint: RecoveryCheckpoint, observations: Any, *, now: int
    ) -> RecoveryDecision:
        del observations, now
        return RecoveryDecision(
            source_checkpoint_digest=checkpoint.checkpoint_digest,
            disposition="review_required",
            reason="approval_missing",
        )

    (item,) = recovery_suite_evidence(always_refuse)
    goldens = [s.expected_decision for s in recovery_suite()]
    expected = sum(
        1
        for golden in goldens
        if (golden.disposition, golden.reason, golden.committed_effects)
        == ("review_required", "approval_missing", ())
    )
    assert expected == 1
    assert item.event_count == expected


def test_a_decision_for_another_checkpoint_is_refused_not_counted() -> None:
    other = recovery_suite()[0].expected_decision

    def confused(checkpoint: RecoveryCheckpoint, observations: Any, *, now: int) -> Any:
        del checkpoint, observations, now
        return other

    with pytest.raises(AgentReleaseAdapterError, match=r"^checkpoint_mismatch$"):
        run_recovery_suite(confused)


def test_retry_order_is_part_of_decision_equality() -> None:
    scenario = next(s for s in recovery_suite() if s.name == "dispatching_partial_commit_resume")
    golden = scenario.expected_decision
    swapped = dataclasses.replace(
        golden,
        retry_effect_ids=tuple(reversed(golden.retry_effect_ids)),
        retry_idempotency_keys=tuple(reversed(golden.retry_idempotency_keys)),
    )
    case = RecoveryEvidenceCase(
        case_digest=scenario.case_digest,
        checkpoint=scenario.checkpoint,
        decision=swapped,
        expected_decision=golden,
    )
    assert not case.correct


def test_incomplete_suite_run_is_refused() -> None:
    with pytest.raises(AgentReleaseAdapterError, match=r"^failed_run$"):
        recovery_release_evidence(
            run_recovery_suite(),
            expected_case_digests=recovery_suite_case_digests(),
            completed=False,
        )


# ---------------------------------------------------------------------------
# Never echo: canaries never reach errors, reprs or logs


def _texts(error: BaseException) -> list[str]:
    texts = [str(error), repr(error), *map(str, error.args)]
    cause = error.__cause__ or (None if error.__suppress_context__ else error.__context__)
    if cause is not None:
        texts += _texts(cause)
    return texts


def _canary_actions() -> list[Callable[[], object]]:
    actions: list[Callable[[], object]] = []
    for name in ("run_id", "action_id", "tool_id", "kind", "operation_digest"):
        actions.append(lambda name=name: effect(0, **{name: CANARY}))
    for item in dataclasses.fields(RecoveryEffect):
        actions.append(lambda name=item.name: raw_effect(**{name: CANARY}))
    for name in (
        "run_id",
        "workflow_id",
        "plan_digest",
        "phase",
        "sequence",
        "previous_checkpoint_digest",
        "recovery_evidence_digest",
        "approval_action_digest",
        "approval_expires_at",
        "approval_receipt_digest",
        "schema_version",
        "effects",
    ):
        actions.append(lambda name=name: checkpoint(**{name: CANARY}))
    for name in (
        "source_checkpoint_digest",
        "disposition",
        "reason",
        "retry_effect_ids",
        "retry_idempotency_keys",
        "compensation_effect_ids",
        "schema_version",
    ):
        actions.append(lambda name=name: decision(**{name: CANARY}))
        actions.append(lambda name=name: decision(**{name: (CANARY,)}))
    for name in ("action_id", "operation_digest", "idempotency_key", "state"):
        actions.append(lambda name=name: observe(effect(0), **{name: CANARY}))
    actions += [
        lambda: CommittedEffect(CANARY, CANARY),
        lambda: RecoveryCheckpoint.from_dict({**DOCUMENT, CANARY: CANARY}),
        lambda: RecoveryCheckpoint.from_dict({**DOCUMENT, "checkpoint_digest": CANARY}),
        lambda: RecoveryDecision.from_dict({CANARY: CANARY}),
        lambda: RecoveryObservation.from_dict({**OBSERVATION_DOCUMENT, "state": CANARY}),
        lambda: plan_recovery(CANARY, [], now=0),  # type: ignore[arg-type]
        lambda: plan_recovery(checkpoint(), [CANARY], now=0),  # type: ignore[list-item]
        lambda: plan_recovery(checkpoint(), [], now=CANARY),  # type: ignore[arg-type]
        lambda: verify_lineage([CANARY]),  # type: ignore[list-item]
        lambda: _adapter(completed=CANARY),
        lambda: _adapter(synthetic=CANARY),
        lambda: _adapter(expected_case_digests=CANARY),
        lambda: _adapter(expected_case_digests=(CANARY,)),
        lambda: _adapter((CANARY,)),
        lambda: _with_other_case_digest(_suite_cases()[0], CANARY),
        lambda: RecoveryEvidenceCase.from_dict(
            {**_suite_cases()[0].to_dict(), "case_digest": CANARY}
        ),
        lambda: RecoveryEvidenceCase.from_dict(
            {**_suite_cases()[0].to_dict(), "checkpoint": {**DOCUMENT, "run_id": CANARY}}
        ),
        lambda: RecoveryEvidenceCase.from_dict({CANARY: CANARY}),
    ]
    return actions


def test_refusals_never_echo_a_canary(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    actions = _canary_actions()
    assert len(actions) > 50
    for action in actions:
        with pytest.raises((RecoveryError, AgentReleaseAdapterError)) as caught:
            action()
        for text in _texts(caught.value):
            assert CANARY not in text
    assert all(CANARY not in record.getMessage() for record in caplog.records)


def test_reprs_show_no_submitted_identifiers() -> None:
    case = _suite_cases()[7]
    scenario = recovery_suite()[7]
    objects: list[object] = [
        case,
        case.checkpoint,
        case.decision,
        *case.checkpoint.effects,
        *case.decision.committed_effects,
        *scenario.observations,
    ]
    secrets = {case.case_digest, case.checkpoint.run_id, case.checkpoint.plan_digest}
    for item in case.checkpoint.effects:
        secrets |= {item.action_id, item.idempotency_key, item.operation_digest, item.tool_id}
    for item in objects:
        text = repr(item)
        assert all(secret not in text for secret in secrets), text


# ---------------------------------------------------------------------------
# Properties

_HEX32 = st.text("0123456789abcdef", min_size=32, max_size=32)
_HEX64 = st.text("0123456789abcdef", min_size=64, max_size=64)
_RUN_IDS = _HEX32.map(lambda text: "run_" + text)
_ACTION_IDS = _HEX32.map(lambda text: "act_" + text)
_DIGESTS = _HEX64.map(lambda text: "sha256:" + text)
_KINDS = st.sampled_from(["local_tool", "fhir_write", "omop_batch"])
_TOOLS = st.builds(
    lambda namespace, local, version: f"tool:{namespace}/{local}{version}",
    st.sampled_from(["org.example", "dev.sealeval.fixtures", "a.b", "x-1.y-2.z"]),
    st.from_regex(r"[a-z][a-z0-9-]{0,12}", fullmatch=True),
    st.sampled_from(["", "@1.0.0", "@0.10.3", "@12.0.1"]),
)
_KEY_INPUTS = st.fixed_dictionaries(
    {
        "run_id": _RUN_IDS,
        "action_id": _ACTION_IDS,
        "tool_id": _TOOLS,
        "kind": _KINDS,
        "operation_digest": _DIGESTS,
    }
)


def _reference_key(inputs: dict[str, str]) -> str:
    """An independent derivation: sorted-key compact JSON (all ASCII), SHA-256."""
    text = json.dumps(inputs, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return "idem_" + hashlib.sha256(text.encode("ascii")).hexdigest()


_KEY_STRATEGIES: dict[str, st.SearchStrategy[str]] = {
    "run_id": _RUN_IDS,
    "action_id": _ACTION_IDS,
    "tool_id": _TOOLS,
    "kind": _KINDS,
    "operation_digest": _DIGESTS,
}


@settings(max_examples=150, deadline=None)
@given(_KEY_INPUTS, st.sampled_from(sorted(_KEY_STRATEGIES)), st.data())
def test_idempotency_keys_are_deterministic_and_input_sensitive(
    inputs: dict[str, str], changed: str, data: st.DataObject
) -> None:
    assert is_governance_id(inputs["tool_id"], "tool")
    key = derive_idempotency_key(**inputs)
    assert key == derive_idempotency_key(**inputs)
    assert key == _reference_key(inputs)
    replacement = data.draw(_KEY_STRATEGIES[changed].filter(lambda value: value != inputs[changed]))
    assert derive_idempotency_key(**{**inputs, changed: replacement}) != key


_EFFECT_FIELDS = (
    "run_id",
    "action_id",
    "tool_id",
    "kind",
    "operation_digest",
    "approval_required",
    "compensation_limit",
    "state",
    "commit_evidence_digest",
    "ordinal",
)


COMPANION_ACTION = "act_" + "c0" * 16
_MAIN_ACTION_IDS = _ACTION_IDS.filter(lambda value: value != COMPANION_ACTION)


@st.composite
def _effect_inputs(draw: st.DrawFn) -> dict[str, Any]:
    committed_state = draw(st.booleans())
    return {
        "run_id": draw(_RUN_IDS),
        "action_id": draw(_MAIN_ACTION_IDS),
        "tool_id": draw(_TOOLS),
        "kind": draw(_KINDS),
        "operation_digest": draw(_DIGESTS),
        "approval_required": draw(st.booleans()),
        "compensation_limit": draw(st.sampled_from(["none", "propose_only"])),
        "state": "committed" if committed_state else "pending",
        "commit_evidence_digest": draw(_DIGESTS) if committed_state else None,
    }


def _checkpoint_of(inputs: dict[str, Any], *, swap: bool = False) -> RecoveryCheckpoint:
    run_id = inputs["run_id"]
    main = RecoveryEffect.derive(**inputs, ordinal=1 if swap else 0)
    companion = RecoveryEffect.derive(
        run_id=run_id,
        action_id=COMPANION_ACTION,
        tool_id=TOOL,
        kind="local_tool",
        operation_digest=OPERATIONS[5],
        ordinal=0 if swap else 1,
        approval_required=False,
    )
    return RecoveryCheckpoint(
        run_id=run_id,
        workflow_id=WORKFLOW,
        plan_digest=PLAN,
        phase="reconciling",
        sequence=0,
        effects=(companion, main) if swap else (main, companion),
    )


@settings(max_examples=200, deadline=None)
@given(_effect_inputs(), st.sampled_from(_EFFECT_FIELDS), st.data())
def test_changing_any_effect_field_changes_the_checkpoint_digest(
    inputs: dict[str, Any], changed: str, data: st.DataObject
) -> None:
    before = _checkpoint_of(inputs)
    if changed == "ordinal":
        after = _checkpoint_of(inputs, swap=True)
    else:
        other = dict(inputs)
        if changed == "state":
            flipped = inputs["state"] == "pending"
            other["state"] = "committed" if flipped else "pending"
            other["commit_evidence_digest"] = data.draw(_DIGESTS) if flipped else None
        elif changed == "commit_evidence_digest":
            if inputs["state"] == "pending":
                return  # a pending effect has no evidence to change
            other[changed] = data.draw(_DIGESTS.filter(lambda d: d != inputs[changed]))
        elif changed == "approval_required":
            other[changed] = not inputs[changed]
        elif changed == "compensation_limit":
            other[changed] = "none" if inputs[changed] == "propose_only" else "propose_only"
        else:
            strategy = {
                "run_id": _RUN_IDS,
                "action_id": _MAIN_ACTION_IDS,
                "tool_id": _TOOLS,
                "kind": _KINDS,
                "operation_digest": _DIGESTS,
            }[changed]
            other[changed] = data.draw(strategy.filter(lambda value: value != inputs[changed]))
        after = _checkpoint_of(other)
    assert before.to_dict() != after.to_dict()
    assert before.checkpoint_digest != after.checkpoint_digest
    # The digest is exactly the sha256 of the canonical document without it.
    unsigned = {k: v for k, v in after.to_dict().items() if k != "checkpoint_digest"}
    assert after.checkpoint_digest == digest_openmed(unsigned)


_TOP_LEVEL_CHANGES: dict[str, dict[str, Any]] = {
    "workflow_id": {"workflow_id": "workflow:org.example.fixtures/other@1.0.0"},
    "plan_digest": {"plan_digest": OTHER_DIGEST, "approval_action_digest": OTHER_DIGEST},
    "phase": {"phase": "reconciling"},
    "sequence": {"sequence": 4, "previous_checkpoint_digest": OTHER_DIGEST},
    "approval_expires_at": {"approval_expires_at": 101},
    "approval_receipt_digest": {"approval_receipt_digest": OTHER_DIGEST},
    "recovery_evidence_digest": {"recovery_evidence_digest": OTHER_DIGEST},
    "effects": {"effects": (effect(0),)},
}


@pytest.mark.parametrize("name", sorted(_TOP_LEVEL_CHANGES))
def test_changing_any_checkpoint_field_changes_its_digest(name: str) -> None:
    assert (
        checkpoint(**_TOP_LEVEL_CHANGES[name]).checkpoint_digest != checkpoint().checkpoint_digest
    )


@settings(max_examples=100, deadline=None)
@given(st.permutations(range(20)))
def test_evidence_is_independent_of_case_order(order: list[int]) -> None:
    suite = _suite_cases()
    assert _adapter(tuple(suite[index] for index in order)) == _adapter()
