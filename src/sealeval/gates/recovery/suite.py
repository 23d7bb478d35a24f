"""The bundled synthetic recovery suite: deterministic crash-recovery scenarios, golden decisions.

Twenty scenarios cover all six checkpoint phases (``planned`` 4,
``approval_recorded`` 3, ``dispatching`` 5, ``reconciling`` 4, ``completed``
2, ``aborted`` 2). Each scenario is a journal *lineage* (checkpoints oldest
first, from sequence 0) built from a small declarative table, the
observations the outside world reports after the crash, the injected time
``now``, and a **golden decision declared by hand** in the table (disposition,
reason and which effects are committed, retried or proposed for
compensation, by ordinal). The golden decision is expanded into a
:class:`~sealeval.gates.recovery.decision.RecoveryDecision` by lookup only (action ids,
keys and evidence digests are copied from the checkpoint and observations);
it is never computed by the planner under test.

Executing the suite (:func:`run_recovery_suite`) verifies each lineage, runs
the planner on the newest checkpoint and yields one
:class:`~sealeval.gates.recovery.evidence.RecoveryEvidenceCase` per scenario;
:func:`recovery_suite_evidence` feeds them to the recovery adapter with the
suite's pre-registered inventory (:func:`recovery_suite_case_digests`).

Everything is synthetic: identifiers and digests are derived from fixed
labels (``sealeval.recovery_suite.v1/...``), no real tool, FHIR server or
OMOP store is involved, and the evidence carries ``synthetic_only``. What a
passing run establishes, and what it does not, is in ``docs/recovery.md``.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from sealeval.canonical import digest_bytes, digest_openmed
from sealeval.gates.evidence import MetricEvidence
from sealeval.gates.recovery.checkpoint import RecoveryCheckpoint, RecoveryEffect
from sealeval.gates.recovery.decision import CommittedEffect, RecoveryDecision
from sealeval.gates.recovery.evidence import RecoveryEvidenceCase, recovery_release_evidence
from sealeval.gates.recovery.planner import (
    RecoveryObservation,
    RecoveryPlanner,
    plan_recovery,
    verify_lineage,
)
from sealeval.gates.recovery.vocabulary import derive_idempotency_key

__all__ = [
    "RECOVERY_SUITE_ID",
    "SUITE_TOOL_ID",
    "SUITE_WORKFLOW_ID",
    "RecoveryScenario",
    "recovery_suite",
    "recovery_suite_case_digests",
    "recovery_suite_evidence",
    "run_recovery_suite",
]

#: Identifier of this suite version; every derived identifier and digest is labelled with it.
RECOVERY_SUITE_ID: Final = "sealeval.recovery_suite.v1"
SUITE_WORKFLOW_ID: Final = "workflow:dev.sealeval.fixtures/recovery-suite@1.0.0"
SUITE_TOOL_ID: Final = "tool:dev.sealeval.fixtures/recovery-tool@1.0.0"
_EXPIRES_AT: Final = 10_000
_NOW: Final = 5_000


def _label_hex(label: str, length: int) -> str:
    return hashlib.sha256(f"{RECOVERY_SUITE_ID}/{label}".encode("ascii")).hexdigest()[:length]


def _label_digest(label: str) -> str:
    return digest_bytes(f"{RECOVERY_SUITE_ID}/{label}".encode("ascii"))


# ---------------------------------------------------------------------------
# The declarative table


@dataclass(frozen=True, slots=True)
class _Effect:
    """One effect of a scenario: its journal state in the newest checkpoint and its observation.

    ``observed`` is one of ``absent``, ``committed`` (with the journalled
    evidence, or fresh evidence for a pending effect), ``committed_other``
    (committed with evidence that differs from the journal), ``ambiguous``,
    ``operation_mismatch`` / ``key_mismatch`` (absent, but reported for a
    different operation digest / idempotency key).
    """

    kind: str
    approval_required: bool
    journal: str
    observed: str
    compensation_limit: str = "none"


@dataclass(frozen=True, slots=True)
class _Golden:
    """A golden decision, declared by hand; effects are named by ordinal."""

    disposition: str
    reason: str
    committed: tuple[int, ...] = ()
    retry: tuple[int, ...] = ()
    compensation: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class _Plan:
    name: str
    path: tuple[str, ...]
    approval: bool
    effects: tuple[_Effect, ...]
    golden: _Golden
    now: int = _NOW


_PLANNED: Final = ("planned",)
_RECORDED: Final = ("planned", "approval_recorded")
_DISPATCHING: Final = (*_RECORDED, "dispatching")
_RECONCILING: Final = (*_DISPATCHING, "reconciling")
_COMPLETED: Final = (*_DISPATCHING, "completed")

_TABLE: Final[tuple[_Plan, ...]] = (
    # -- planned ---------------------------------------------------------------
    _Plan(
        "planned_approval_missing",
        _PLANNED,
        approval=False,
        effects=(
            _Effect("fhir_write", True, "pending", "absent"),
            _Effect("local_tool", False, "pending", "absent"),
        ),
        golden=_Golden("review_required", "approval_missing"),
    ),
    _Plan(
        "planned_no_approval_needed",
        _PLANNED,
        approval=False,
        effects=(
            _Effect("local_tool", False, "pending", "absent"),
            _Effect("omop_batch", False, "pending", "absent"),
        ),
        golden=_Golden("resume", "safe_to_resume", retry=(0, 1)),
    ),
    _Plan(
        "planned_operation_mismatch",
        _PLANNED,
        approval=False,
        effects=(
            _Effect("fhir_write", False, "pending", "operation_mismatch"),
            _Effect("local_tool", False, "pending", "absent"),
        ),
        golden=_Golden("review_required", "effect_mismatch"),
    ),
    _Plan(
        "planned_pending_observed_committed",
        _PLANNED,
        approval=False,
        effects=(
            _Effect("local_tool", False, "pending", "committed"),
            _Effect("fhir_write", False, "pending", "absent"),
        ),
        golden=_Golden("resume", "safe_to_resume", committed=(0,), retry=(1,)),
    ),
    # -- approval_recorded -----------------------------------------------------
    _Plan(
        "approval_recorded_resume",
        _RECORDED,
        approval=True,
        effects=(
            _Effect("fhir_write", True, "pending", "absent"),
            _Effect("omop_batch", True, "pending", "absent"),
        ),
        golden=_Golden("resume", "safe_to_resume", retry=(0, 1)),
    ),
    _Plan(
        "approval_recorded_expired_at_boundary",
        _RECORDED,
        approval=True,
        effects=(_Effect("fhir_write", True, "pending", "absent"),),
        golden=_Golden("review_required", "approval_expired"),
        now=_EXPIRES_AT,
    ),
    _Plan(
        "approval_recorded_ambiguous",
        _RECORDED,
        approval=True,
        effects=(
            _Effect("fhir_write", True, "pending", "ambiguous"),
            _Effect("local_tool", True, "pending", "absent"),
        ),
        golden=_Golden("review_required", "ambiguous_effect"),
    ),
    # -- dispatching -----------------------------------------------------------
    _Plan(
        "dispatching_partial_commit_resume",
        _DISPATCHING,
        approval=True,
        effects=(
            _Effect("local_tool", True, "committed", "committed", "propose_only"),
            _Effect("fhir_write", False, "pending", "absent"),
            _Effect("omop_batch", True, "pending", "absent"),
        ),
        golden=_Golden("resume", "safe_to_resume", committed=(0,), retry=(1, 2)),
    ),
    _Plan(
        "dispatching_ambiguous_with_compensation",
        _DISPATCHING,
        approval=True,
        effects=(
            _Effect("fhir_write", True, "committed", "committed", "propose_only"),
            _Effect("omop_batch", True, "pending", "ambiguous"),
        ),
        golden=_Golden("review_required", "ambiguous_effect", committed=(0,), compensation=(0,)),
    ),
    _Plan(
        "dispatching_key_mismatch",
        _DISPATCHING,
        approval=True,
        effects=(
            _Effect("omop_batch", True, "committed", "committed", "propose_only"),
            _Effect("fhir_write", True, "pending", "key_mismatch"),
        ),
        golden=_Golden("review_required", "effect_mismatch", committed=(0,), compensation=(0,)),
    ),
    _Plan(
        "dispatching_approval_expired",
        _DISPATCHING,
        approval=True,
        effects=(
            _Effect("fhir_write", True, "committed", "committed", "propose_only"),
            _Effect("fhir_write", True, "pending", "absent"),
        ),
        golden=_Golden("review_required", "approval_expired", committed=(0,), compensation=(0,)),
        now=_EXPIRES_AT + 2_000,
    ),
    _Plan(
        "dispatching_all_observed_committed",
        _DISPATCHING,
        approval=True,
        effects=(
            _Effect("local_tool", True, "pending", "committed", "propose_only"),
            _Effect("fhir_write", False, "pending", "committed"),
        ),
        golden=_Golden("complete", "effects_reconciled", committed=(0, 1)),
    ),
    # -- reconciling -----------------------------------------------------------
    _Plan(
        "reconciling_all_committed",
        _RECONCILING,
        approval=True,
        effects=(
            _Effect("fhir_write", True, "committed", "committed"),
            _Effect("omop_batch", True, "committed", "committed", "propose_only"),
        ),
        golden=_Golden("complete", "effects_reconciled", committed=(0, 1)),
    ),
    _Plan(
        "reconciling_commit_evidence_changed",
        _RECONCILING,
        approval=True,
        effects=(
            _Effect("fhir_write", True, "committed", "committed_other", "propose_only"),
            _Effect("local_tool", False, "pending", "absent"),
        ),
        golden=_Golden("review_required", "ambiguous_effect"),
    ),
    _Plan(
        "reconciling_committed_effect_now_absent",
        _RECONCILING,
        approval=True,
        effects=(
            _Effect("omop_batch", True, "committed", "absent"),
            _Effect("fhir_write", True, "pending", "committed", "propose_only"),
        ),
        golden=_Golden("review_required", "ambiguous_effect", committed=(1,), compensation=(1,)),
    ),
    _Plan(
        "reconciling_resume_remaining",
        _RECONCILING,
        approval=True,
        effects=(
            _Effect("fhir_write", True, "committed", "committed", "propose_only"),
            _Effect("omop_batch", True, "pending", "absent"),
        ),
        golden=_Golden("resume", "safe_to_resume", committed=(0,), retry=(1,)),
    ),
    # -- completed -------------------------------------------------------------
    _Plan(
        "completed_single_effect",
        _COMPLETED,
        approval=True,
        effects=(_Effect("fhir_write", True, "committed", "committed"),),
        golden=_Golden("complete", "already_complete"),
    ),
    _Plan(
        "completed_compensable_effects",
        _COMPLETED,
        approval=True,
        effects=(
            _Effect("local_tool", True, "committed", "committed", "propose_only"),
            _Effect("omop_batch", False, "committed", "committed", "propose_only"),
        ),
        golden=_Golden("complete", "already_complete"),
    ),
    # -- aborted ---------------------------------------------------------------
    _Plan(
        "aborted_before_approval",
        ("planned", "aborted"),
        approval=False,
        effects=(_Effect("fhir_write", True, "pending", "absent"),),
        golden=_Golden("review_required", "workflow_aborted"),
    ),
    _Plan(
        "aborted_after_approval",
        (*_RECORDED, "aborted"),
        approval=True,
        effects=(
            _Effect("local_tool", True, "pending", "absent"),
            _Effect("omop_batch", False, "pending", "absent"),
        ),
        golden=_Golden("review_required", "workflow_aborted"),
    ),
)


# ---------------------------------------------------------------------------
# Building scenarios from the table


@dataclass(frozen=True, slots=True, repr=False)
class RecoveryScenario:
    """One pre-registered recovery scenario of the bundled suite."""

    name: str
    lineage: tuple[RecoveryCheckpoint, ...]
    observations: tuple[RecoveryObservation, ...]
    now: int
    expected_decision: RecoveryDecision

    @property
    def checkpoint(self) -> RecoveryCheckpoint:
        """The newest checkpoint (the one recovered from)."""
        return self.lineage[-1]

    @property
    def phase(self) -> str:
        """The phase of the newest checkpoint."""
        return self.checkpoint.phase

    @property
    def case_digest(self) -> str:
        """The pre-registered case digest: sha256 of the scenario's declaration.

        Binds the suite id, the scenario name, every checkpoint digest of the
        lineage, the observations, ``now`` and the golden decision's digest.
        """
        return digest_openmed(
            {
                "expected_evidence_digest": self.expected_decision.evidence_digest,
                "lineage": [checkpoint.checkpoint_digest for checkpoint in self.lineage],
                "now": self.now,
                "observations": [item.to_dict() for item in self.observations],
                "scenario": self.name,
                "suite": RECOVERY_SUITE_ID,
            }
        )

    def __repr__(self) -> str:
        """Show the scenario name and phase (library-defined vocabulary)."""
        return f"RecoveryScenario(name={self.name!r}, phase={self.phase!r})"


def _effects(plan: _Plan, run_id: str, *, final: bool) -> tuple[RecoveryEffect, ...]:
    effects = []
    for ordinal, spec in enumerate(plan.effects):
        state = spec.journal if final else "pending"
        effects.append(
            RecoveryEffect.derive(
                run_id=run_id,
                action_id="act_" + _label_hex(f"{plan.name}/effect/{ordinal}", 32),
                tool_id=SUITE_TOOL_ID,
                kind=spec.kind,
                operation_digest=_label_digest(f"{plan.name}/operation/{ordinal}"),
                ordinal=ordinal,
                approval_required=spec.approval_required,
                compensation_limit=spec.compensation_limit,
                state=state,
                commit_evidence_digest=(
                    _label_digest(f"{plan.name}/commit/{ordinal}") if state == "committed" else None
                ),
            )
        )
    return tuple(effects)


def _lineage(plan: _Plan) -> tuple[RecoveryCheckpoint, ...]:
    run_id = "run_" + _label_hex(f"{plan.name}/run", 32)
    plan_digest = _label_digest(f"{plan.name}/plan")
    lineage: list[RecoveryCheckpoint] = []
    for sequence, phase in enumerate(plan.path):
        approved = plan.approval and phase != "planned"
        lineage.append(
            RecoveryCheckpoint(
                run_id=run_id,
                workflow_id=SUITE_WORKFLOW_ID,
                plan_digest=plan_digest,
                phase=phase,
                sequence=sequence,
                effects=_effects(plan, run_id, final=sequence == len(plan.path) - 1),
                previous_checkpoint_digest=lineage[-1].checkpoint_digest if lineage else None,
                approval_action_digest=plan_digest if approved else None,
                approval_expires_at=_EXPIRES_AT if approved else None,
                approval_receipt_digest=_label_digest(f"{plan.name}/receipt") if approved else None,
            )
        )
    return tuple(lineage)


def _observation(plan: _Plan, effect: RecoveryEffect, spec: _Effect) -> RecoveryObservation:
    fields: dict[str, Any] = {
        "action_id": effect.action_id,
        "operation_digest": effect.operation_digest,
        "idempotency_key": effect.idempotency_key,
        "state": spec.observed,
        "commit_evidence_digest": None,
    }
    label = f"{plan.name}/commit/{effect.ordinal}"
    if spec.observed == "committed":
        fields["commit_evidence_digest"] = effect.commit_evidence_digest or _label_digest(label)
    elif spec.observed == "committed_other":
        fields["state"] = "committed"
        fields["commit_evidence_digest"] = _label_digest(f"{label}/other")
    elif spec.observed == "operation_mismatch":
        fields["state"] = "absent"
        fields["operation_digest"] = _label_digest(f"{plan.name}/other-operation")
    elif spec.observed == "key_mismatch":
        fields["state"] = "absent"
        fields["idempotency_key"] = derive_idempotency_key(
            run_id="run_" + _label_hex(f"{plan.name}/other-run", 32),
            action_id=effect.action_id,
            tool_id=effect.tool_id,
            kind=effect.kind,
            operation_digest=effect.operation_digest,
        )
    return RecoveryObservation(**fields)


def _golden(
    checkpoint: RecoveryCheckpoint,
    observations: Sequence[RecoveryObservation],
    golden: _Golden,
) -> RecoveryDecision:
    """Expand a declared golden decision by lookup (never by running a planner)."""
    effects = checkpoint.effects
    committed = []
    for ordinal in golden.committed:
        evidence = observations[ordinal].commit_evidence_digest
        assert evidence is not None  # declared committed, so observed committed
        committed.append(CommittedEffect(effects[ordinal].action_id, evidence))
    return RecoveryDecision(
        source_checkpoint_digest=checkpoint.checkpoint_digest,
        disposition=golden.disposition,
        reason=golden.reason,
        committed_effects=tuple(committed),
        retry_effect_ids=tuple(effects[ordinal].action_id for ordinal in golden.retry),
        retry_idempotency_keys=tuple(effects[ordinal].idempotency_key for ordinal in golden.retry),
        compensation_effect_ids=tuple(
            effects[ordinal].action_id for ordinal in golden.compensation
        ),
    )


def _scenario(plan: _Plan) -> RecoveryScenario:
    lineage = _lineage(plan)
    checkpoint = lineage[-1]
    observations = tuple(
        _observation(plan, effect, spec)
        for effect, spec in zip(checkpoint.effects, plan.effects, strict=True)
    )
    return RecoveryScenario(
        name=plan.name,
        lineage=lineage,
        observations=observations,
        now=plan.now,
        expected_decision=_golden(checkpoint, observations, plan.golden),
    )


@functools.cache
def recovery_suite() -> tuple[RecoveryScenario, ...]:
    """Return the bundled scenarios, in table order (built once; immutable)."""
    return tuple(_scenario(plan) for plan in _TABLE)


def recovery_suite_case_digests() -> tuple[str, ...]:
    """Return the suite's pre-registered inventory of case digests, in table order."""
    return tuple(scenario.case_digest for scenario in recovery_suite())


def run_recovery_suite(
    planner: RecoveryPlanner = plan_recovery,
    *,
    scenarios: Sequence[RecoveryScenario] | None = None,
) -> tuple[RecoveryEvidenceCase, ...]:
    """Execute ``planner`` on every scenario; return one evidence case per scenario.

    Each lineage is verified (:func:`~sealeval.gates.recovery.verify_lineage`)
    and ``planner(checkpoint, observations, now=now)`` is called on its newest
    checkpoint. A planner that raises aborts the run (the exception
    propagates: an incomplete run yields no evidence); a result that is not a
    decision for that checkpoint is refused when the case is built
    (``invalid_recovery_case`` / ``checkpoint_mismatch``). A *wrong* decision
    is not refused: it becomes an incorrect case.
    """
    chosen = recovery_suite() if scenarios is None else tuple(scenarios)
    cases = []
    for scenario in chosen:
        checkpoint = verify_lineage(scenario.lineage)
        decision = planner(checkpoint, scenario.observations, now=scenario.now)
        cases.append(
            RecoveryEvidenceCase(
                case_digest=scenario.case_digest,
                checkpoint=checkpoint,
                decision=decision,
                expected_decision=scenario.expected_decision,
            )
        )
    return tuple(cases)


def recovery_suite_evidence(planner: RecoveryPlanner = plan_recovery) -> tuple[MetricEvidence, ...]:
    """Run the whole suite with ``planner`` and return its ``recovery_correctness_rate`` evidence.

    The inventory is :func:`recovery_suite_case_digests`; the run is marked
    completed and synthetic, so the evidence carries ``host_supplied_golden``
    and ``synthetic_only``.
    """
    return recovery_release_evidence(
        run_recovery_suite(planner),
        expected_case_digests=recovery_suite_case_digests(),
        completed=True,
        synthetic=True,
    )
