"""Recovery checkpoints, recovery decisions and the recovery planner (openmed 3.1 wire format).

A workflow that performs side effects (local tool calls, FHIR writes, OMOP
batches) journals a *checkpoint* before and while it dispatches them. After a
crash, the planner reads the newest checkpoint together with what the outside
world reports about each effect (an *observation*) and decides, at an injected
time ``now``, one of:

* ``resume`` — re-dispatch the effects that are observably absent, each with
  its deterministic idempotency key (so a duplicate delivery is harmless);
* ``complete`` — nothing left to do;
* ``review_required`` — refuse to act and hand the run to a human, listing the
  committed effects whose compensation may be *proposed* (never executed).

Wire documents (``21-adapters.md`` §3.1, byte for byte):

* ``openmed.agent.recovery_checkpoint.v1`` — :class:`RecoveryCheckpoint`;
  ``checkpoint_digest`` = sha256 of the canonical document without it;
* ``openmed.agent.recovery_evidence.v1`` — :class:`RecoveryDecision`;
  ``evidence_digest`` = sha256 of the canonical document without it.

Homes: :mod:`~sealeval.gates.recovery.vocabulary` (schemas, states, reasons,
:class:`RecoveryError`, identifier grammars, idempotency keys),
:mod:`~sealeval.gates.recovery.checkpoint` (effects and checkpoints),
:mod:`~sealeval.gates.recovery.decision` (decisions),
:mod:`~sealeval.gates.recovery.planner` (observations, the planner, lineages),
:mod:`~sealeval.gates.recovery.evidence` (the release-evidence adapter,
:class:`RecoveryEvidenceCase`) and :mod:`~sealeval.gates.recovery.suite` (the
bundled synthetic suite). This package is their face.

Every object is an immutable value that validates itself on construction and
refuses with :class:`RecoveryError` (message ``<field>: <code>``, the field a
library-chosen name, never a submitted value). Everything here is pure: no
I/O, no clock, no logging.
"""

from sealeval.gates.recovery.checkpoint import RecoveryCheckpoint, RecoveryEffect
from sealeval.gates.recovery.decision import CommittedEffect, RecoveryDecision
from sealeval.gates.recovery.evidence import (
    RECOVERY_METRIC,
    RecoveryEvidenceCase,
    recovery_release_evidence,
)
from sealeval.gates.recovery.planner import (
    RecoveryObservation,
    RecoveryPlanner,
    plan_recovery,
    recover_from_lineage,
    verify_lineage,
)
from sealeval.gates.recovery.suite import (
    RecoveryScenario,
    recovery_suite,
    recovery_suite_case_digests,
    recovery_suite_evidence,
    run_recovery_suite,
)
from sealeval.gates.recovery.vocabulary import (
    CHECKPOINT_SCHEMA,
    COMPENSATION_LIMITS,
    DECISION_REASONS,
    DECISION_SCHEMA,
    DISPOSITIONS,
    EFFECT_KINDS,
    EFFECT_STATES,
    MAX_INTEGER,
    OBSERVATION_STATES,
    PHASES,
    TERMINAL_PHASES,
    RecoveryError,
    derive_idempotency_key,
    is_action_id,
    is_governance_id,
    is_idempotency_key,
    is_run_id,
)

__all__ = [
    "CHECKPOINT_SCHEMA",
    "COMPENSATION_LIMITS",
    "DECISION_REASONS",
    "DECISION_SCHEMA",
    "DISPOSITIONS",
    "EFFECT_KINDS",
    "EFFECT_STATES",
    "MAX_INTEGER",
    "OBSERVATION_STATES",
    "PHASES",
    "RECOVERY_METRIC",
    "TERMINAL_PHASES",
    "CommittedEffect",
    "RecoveryCheckpoint",
    "RecoveryDecision",
    "RecoveryEffect",
    "RecoveryError",
    "RecoveryEvidenceCase",
    "RecoveryObservation",
    "RecoveryPlanner",
    "RecoveryScenario",
    "derive_idempotency_key",
    "is_action_id",
    "is_governance_id",
    "is_idempotency_key",
    "is_run_id",
    "plan_recovery",
    "recover_from_lineage",
    "recovery_release_evidence",
    "recovery_suite",
    "recovery_suite_case_digests",
    "recovery_suite_evidence",
    "run_recovery_suite",
    "verify_lineage",
]
