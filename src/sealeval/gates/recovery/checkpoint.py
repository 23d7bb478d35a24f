"""Recovery effects and checkpoints (``openmed.agent.recovery_checkpoint.v1``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from sealeval.canonical import digest_openmed, is_digest
from sealeval.gates.recovery.vocabulary import (
    CHECKPOINT_SCHEMA,
    COMPENSATION_LIMITS,
    EFFECT_KINDS,
    EFFECT_STATES,
    PHASES,
    DigestBound,
    all_unique,
    as_tuple,
    closed_document,
    derive_idempotency_key,
    ensure,
    is_action_id,
    is_governance_id,
    is_idempotency_key,
    is_integer,
    is_member,
    is_optional_digest,
    is_run_id,
)

__all__ = ["RecoveryCheckpoint", "RecoveryEffect"]

# ---------------------------------------------------------------------------
# Effects

_EFFECT_KEYS: Final = frozenset(
    {
        "action_id",
        "approval_required",
        "commit_evidence_digest",
        "compensation_limit",
        "idempotency_key",
        "kind",
        "operation_digest",
        "ordinal",
        "state",
        "tool_id",
    }
)


@dataclass(frozen=True, slots=True, repr=False)
class RecoveryEffect:
    """One journalled side effect of a run.

    ``state`` is ``pending`` (no ``commit_evidence_digest``) or ``committed``
    (a commit evidence digest is required). That ``idempotency_key`` equals
    its derivation is checked by the checkpoint, which knows the run id; use
    :meth:`derive` to build an effect with its key computed.
    """

    action_id: str
    tool_id: str
    kind: str
    operation_digest: str
    idempotency_key: str
    ordinal: int
    approval_required: bool
    compensation_limit: str = "none"
    state: str = "pending"
    commit_evidence_digest: str | None = None

    def __post_init__(self) -> None:
        """Validate in document order, then the state/evidence invariant."""
        ensure(is_action_id(self.action_id), "invalid_identifier", "effect.action_id")
        ensure(is_governance_id(self.tool_id, "tool"), "invalid_identifier", "effect.tool_id")
        ensure(is_member(self.kind, EFFECT_KINDS), "invalid_vocabulary", "effect.kind")
        ensure(is_digest(self.operation_digest), "invalid_digest", "effect.operation_digest")
        ensure(
            is_idempotency_key(self.idempotency_key),
            "invalid_identifier",
            "effect.idempotency_key",
        )
        ensure(is_integer(self.ordinal), "invalid_integer", "effect.ordinal")
        ensure(type(self.approval_required) is bool, "invalid_boolean", "effect.approval_required")
        ensure(
            is_member(self.compensation_limit, COMPENSATION_LIMITS),
            "invalid_vocabulary",
            "effect.compensation_limit",
        )
        ensure(is_member(self.state, EFFECT_STATES), "invalid_vocabulary", "effect.state")
        ensure(
            is_optional_digest(self.commit_evidence_digest),
            "invalid_digest",
            "effect.commit_evidence_digest",
        )
        ensure(
            (self.state == "committed") == (self.commit_evidence_digest is not None),
            "commit_evidence_mismatch",
            "effect.commit_evidence_digest",
        )

    @classmethod
    def derive(
        cls,
        *,
        run_id: str,
        action_id: str,
        tool_id: str,
        kind: str,
        operation_digest: str,
        ordinal: int,
        approval_required: bool,
        compensation_limit: str = "none",
        state: str = "pending",
        commit_evidence_digest: str | None = None,
    ) -> RecoveryEffect:
        """Build an effect whose idempotency key is derived from ``run_id`` and its identity."""
        key = derive_idempotency_key(
            run_id=run_id,
            action_id=action_id,
            tool_id=tool_id,
            kind=kind,
            operation_digest=operation_digest,
        )
        return cls(
            action_id=action_id,
            tool_id=tool_id,
            kind=kind,
            operation_digest=operation_digest,
            idempotency_key=key,
            ordinal=ordinal,
            approval_required=approval_required,
            compensation_limit=compensation_limit,
            state=state,
            commit_evidence_digest=commit_evidence_digest,
        )

    def identity(self) -> tuple[str, str, str, str, str, int, bool, str]:
        """Return every field except the mutable ``state`` and ``commit_evidence_digest``."""
        return (
            self.action_id,
            self.tool_id,
            self.kind,
            self.operation_digest,
            self.idempotency_key,
            self.ordinal,
            self.approval_required,
            self.compensation_limit,
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the effect document (ten keys)."""
        return {
            "action_id": self.action_id,
            "approval_required": self.approval_required,
            "commit_evidence_digest": self.commit_evidence_digest,
            "compensation_limit": self.compensation_limit,
            "idempotency_key": self.idempotency_key,
            "kind": self.kind,
            "operation_digest": self.operation_digest,
            "ordinal": self.ordinal,
            "state": self.state,
            "tool_id": self.tool_id,
        }

    @classmethod
    def from_dict(cls, document: object) -> RecoveryEffect:
        """Parse an effect document (closed: exactly its ten keys)."""
        data = closed_document(document, _EFFECT_KEYS, "effect")
        return cls(**{key: data[key] for key in _EFFECT_KEYS})

    def __repr__(self) -> str:
        """Show the ordinal, kind and state only."""
        return f"RecoveryEffect(ordinal={self.ordinal!r}, kind={self.kind!r}, state={self.state!r})"


# ---------------------------------------------------------------------------
# Checkpoints

_CHECKPOINT_FIELDS: Final = frozenset(
    {
        "approval_action_digest",
        "approval_expires_at",
        "approval_receipt_digest",
        "effects",
        "phase",
        "plan_digest",
        "previous_checkpoint_digest",
        "recovery_evidence_digest",
        "run_id",
        "schema_version",
        "sequence",
        "workflow_id",
    }
)


@dataclass(frozen=True, slots=True, repr=False)
class RecoveryCheckpoint(DigestBound):
    """One journal entry of a run (``openmed.agent.recovery_checkpoint.v1``).

    ``checkpoint_digest`` is computed on construction. Invariants: effects
    non-empty with ordinals 0…n-1 in order, unique action ids and keys, every
    key equal to its derivation; the approval fields all null or all set
    (``approval_action_digest`` = ``plan_digest``); ``approval_recorded``
    needs a receipt, ``dispatching`` / ``completed`` need one if any effect
    requires approval; ``completed`` needs every effect committed; sequence 0
    if and only if there is no previous checkpoint; integers ≤ 2**63 - 1.
    """

    run_id: str
    workflow_id: str
    plan_digest: str
    phase: str
    sequence: int
    effects: tuple[RecoveryEffect, ...]
    previous_checkpoint_digest: str | None = None
    approval_action_digest: str | None = None
    approval_expires_at: int | None = None
    approval_receipt_digest: str | None = None
    recovery_evidence_digest: str | None = None
    schema_version: str = CHECKPOINT_SCHEMA
    checkpoint_digest: str = field(init=False, compare=False)

    DIGEST_FIELD: ClassVar[str] = "checkpoint_digest"

    def __post_init__(self) -> None:
        """Validate fields in document order, then the cross-field invariants."""
        ensure(
            type(self.schema_version) is str and self.schema_version == CHECKPOINT_SCHEMA,
            "unsupported_version",
            "schema_version",
        )
        ensure(is_run_id(self.run_id), "invalid_identifier", "run_id")
        ensure(is_governance_id(self.workflow_id, "workflow"), "invalid_identifier", "workflow_id")
        ensure(is_digest(self.plan_digest), "invalid_digest", "plan_digest")
        ensure(is_member(self.phase, PHASES), "invalid_vocabulary", "phase")
        ensure(is_integer(self.sequence), "invalid_integer", "sequence")
        ensure(
            is_optional_digest(self.previous_checkpoint_digest),
            "invalid_digest",
            "previous_checkpoint_digest",
        )
        ensure(
            (self.sequence == 0) == (self.previous_checkpoint_digest is None),
            "sequence_mismatch",
            "previous_checkpoint_digest",
        )
        ensure(
            is_optional_digest(self.recovery_evidence_digest),
            "invalid_digest",
            "recovery_evidence_digest",
        )
        self._check_approval()
        effects = as_tuple(self.effects, RecoveryEffect, "effects")
        ensure(bool(effects), "empty", "effects")
        object.__setattr__(self, "effects", effects)
        self._check_effects()
        self._check_phase()
        object.__setattr__(self, "checkpoint_digest", digest_openmed(self._unsigned()))

    def _check_approval(self) -> None:
        ensure(
            is_optional_digest(self.approval_action_digest),
            "invalid_digest",
            "approval_action_digest",
        )
        ensure(
            self.approval_expires_at is None or is_integer(self.approval_expires_at),
            "invalid_integer",
            "approval_expires_at",
        )
        ensure(
            is_optional_digest(self.approval_receipt_digest),
            "invalid_digest",
            "approval_receipt_digest",
        )
        present = {
            self.approval_action_digest is not None,
            self.approval_expires_at is not None,
            self.approval_receipt_digest is not None,
        }
        ensure(len(present) == 1, "incomplete_approval", "approval")
        if self.approval_action_digest is not None:
            ensure(
                self.approval_action_digest == self.plan_digest,
                "approval_plan_mismatch",
                "approval_action_digest",
            )

    def _check_effects(self) -> None:
        effects = self.effects
        ensure(
            [effect.ordinal for effect in effects] == list(range(len(effects))),
            "ordinal_mismatch",
            "effects",
        )
        ensure(all_unique([effect.action_id for effect in effects]), "duplicate_action", "effects")
        ensure(
            all_unique([effect.idempotency_key for effect in effects]), "duplicate_key", "effects"
        )
        for effect in effects:
            derived = derive_idempotency_key(
                run_id=self.run_id,
                action_id=effect.action_id,
                tool_id=effect.tool_id,
                kind=effect.kind,
                operation_digest=effect.operation_digest,
            )
            ensure(effect.idempotency_key == derived, "key_mismatch", "effects")

    def _check_phase(self) -> None:
        receipt = self.approval_receipt_digest is not None
        if self.phase == "approval_recorded":
            ensure(receipt, "approval_receipt_required", "approval_receipt_digest")
        if self.phase in ("dispatching", "completed") and any(
            effect.approval_required for effect in self.effects
        ):
            ensure(receipt, "approval_receipt_required", "approval_receipt_digest")
        if self.phase == "completed":
            ensure(
                all(effect.state == "committed" for effect in self.effects),
                "effects_not_committed",
                "effects",
            )

    @property
    def approval_recorded(self) -> bool:
        """Whether an approval receipt is recorded."""
        return self.approval_receipt_digest is not None

    def _unsigned(self) -> dict[str, Any]:
        return {
            "approval_action_digest": self.approval_action_digest,
            "approval_expires_at": self.approval_expires_at,
            "approval_receipt_digest": self.approval_receipt_digest,
            "effects": [effect.to_dict() for effect in self.effects],
            "phase": self.phase,
            "plan_digest": self.plan_digest,
            "previous_checkpoint_digest": self.previous_checkpoint_digest,
            "recovery_evidence_digest": self.recovery_evidence_digest,
            "run_id": self.run_id,
            "schema_version": self.schema_version,
            "sequence": self.sequence,
            "workflow_id": self.workflow_id,
        }

    @classmethod
    def from_dict(cls, document: object) -> RecoveryCheckpoint:
        """Re-load a stored checkpoint document (closed) and re-verify its digest."""
        return cls._reload(
            document, "checkpoint", _CHECKPOINT_FIELDS, "effects", RecoveryEffect.from_dict
        )

    def __repr__(self) -> str:
        """Show the phase, sequence, effect count and the computed digest only."""
        return (
            f"RecoveryCheckpoint(phase={self.phase!r}, sequence={self.sequence!r}, "
            f"effects={len(self.effects)}, checkpoint_digest={self.checkpoint_digest!r})"
        )
