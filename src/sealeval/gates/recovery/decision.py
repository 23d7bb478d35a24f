"""Recovery decisions (``openmed.agent.recovery_evidence.v1``) and committed effects."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from sealeval.canonical import digest_openmed, is_digest
from sealeval.gates.recovery.vocabulary import (
    ALL_REASONS,
    DECISION_REASONS,
    DECISION_SCHEMA,
    DISPOSITIONS,
    DigestBound,
    all_unique,
    as_id_tuple,
    as_tuple,
    closed_document,
    ensure,
    is_action_id,
    is_idempotency_key,
    is_member,
)

__all__ = ["CommittedEffect", "RecoveryDecision"]

# ---------------------------------------------------------------------------
# Decisions

_COMMITTED_KEYS: Final = frozenset({"action_id", "commit_evidence_digest"})
_DECISION_FIELDS: Final = frozenset(
    {
        "committed_effects",
        "compensation_effect_ids",
        "disposition",
        "reason",
        "retry_effect_ids",
        "retry_idempotency_keys",
        "schema_version",
        "source_checkpoint_digest",
    }
)


@dataclass(frozen=True, slots=True, repr=False)
class CommittedEffect:
    """An effect known to be committed, with the evidence of its commit."""

    action_id: str
    commit_evidence_digest: str

    def __post_init__(self) -> None:
        """Validate both fields."""
        ensure(is_action_id(self.action_id), "invalid_identifier", "committed_effect.action_id")
        ensure(
            is_digest(self.commit_evidence_digest),
            "invalid_digest",
            "committed_effect.commit_evidence_digest",
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the committed-effect document."""
        return {"action_id": self.action_id, "commit_evidence_digest": self.commit_evidence_digest}

    @classmethod
    def from_dict(cls, document: object) -> CommittedEffect:
        """Parse a committed-effect document (closed)."""
        data = closed_document(document, _COMMITTED_KEYS, "committed_effect")
        return cls(
            action_id=data["action_id"], commit_evidence_digest=data["commit_evidence_digest"]
        )

    def __repr__(self) -> str:
        """Show nothing submitted."""
        return "CommittedEffect(...)"


@dataclass(frozen=True, slots=True, repr=False)
class RecoveryDecision(DigestBound):
    """A recovery decision for one checkpoint (``openmed.agent.recovery_evidence.v1``).

    ``evidence_digest`` is computed on construction. Structural invariants
    (sealeval; every decision the planner or the vectors produce satisfies
    them): the reason belongs to the disposition; retry ids and keys pair up
    one to one and are non-empty exactly when the disposition is ``resume``;
    no action id repeats within a list; compensation ids are committed
    effects; a committed effect is never retried. Two decisions are equal iff
    their documents are identical.
    """

    source_checkpoint_digest: str
    disposition: str
    reason: str
    committed_effects: tuple[CommittedEffect, ...] = ()
    retry_effect_ids: tuple[str, ...] = ()
    retry_idempotency_keys: tuple[str, ...] = ()
    compensation_effect_ids: tuple[str, ...] = ()
    schema_version: str = DECISION_SCHEMA
    evidence_digest: str = field(init=False, compare=False)

    DIGEST_FIELD: ClassVar[str] = "evidence_digest"

    def __post_init__(self) -> None:
        """Validate fields, then the structural invariants."""
        ensure(
            type(self.schema_version) is str and self.schema_version == DECISION_SCHEMA,
            "unsupported_version",
            "schema_version",
        )
        ensure(
            is_digest(self.source_checkpoint_digest), "invalid_digest", "source_checkpoint_digest"
        )
        ensure(is_member(self.disposition, DISPOSITIONS), "invalid_vocabulary", "disposition")
        ensure(is_member(self.reason, ALL_REASONS), "invalid_vocabulary", "reason")
        committed = as_tuple(self.committed_effects, CommittedEffect, "committed_effects")
        retry_ids = as_id_tuple(self.retry_effect_ids, is_action_id, "retry_effect_ids")
        retry_keys = as_id_tuple(
            self.retry_idempotency_keys, is_idempotency_key, "retry_idempotency_keys"
        )
        compensation = as_id_tuple(
            self.compensation_effect_ids, is_action_id, "compensation_effect_ids"
        )
        object.__setattr__(self, "committed_effects", committed)
        object.__setattr__(self, "retry_effect_ids", retry_ids)
        object.__setattr__(self, "retry_idempotency_keys", retry_keys)
        object.__setattr__(self, "compensation_effect_ids", compensation)
        self._check_structure()
        object.__setattr__(self, "evidence_digest", digest_openmed(self._unsigned()))

    def _check_structure(self) -> None:
        committed_ids = [item.action_id for item in self.committed_effects]
        ensure(self.reason in DECISION_REASONS[self.disposition], "inconsistent_decision", "reason")
        ensure(all_unique(committed_ids), "duplicate_action", "committed_effects")
        ensure(all_unique(self.retry_effect_ids), "duplicate_action", "retry_effect_ids")
        ensure(all_unique(self.retry_idempotency_keys), "duplicate_key", "retry_idempotency_keys")
        ensure(
            all_unique(self.compensation_effect_ids), "duplicate_action", "compensation_effect_ids"
        )
        ensure(
            len(self.retry_effect_ids) == len(self.retry_idempotency_keys),
            "inconsistent_decision",
            "retry_idempotency_keys",
        )
        ensure(
            bool(self.retry_effect_ids) == (self.disposition == "resume"),
            "inconsistent_decision",
            "retry_effect_ids",
        )
        ensure(
            not set(self.retry_effect_ids) & set(committed_ids),
            "inconsistent_decision",
            "retry_effect_ids",
        )
        ensure(
            set(self.compensation_effect_ids) <= set(committed_ids),
            "inconsistent_decision",
            "compensation_effect_ids",
        )

    @property
    def is_refusal(self) -> bool:
        """Whether the decision hands the run to a human (``review_required``)."""
        return self.disposition == "review_required"

    def _unsigned(self) -> dict[str, Any]:
        return {
            "committed_effects": [item.to_dict() for item in self.committed_effects],
            "compensation_effect_ids": list(self.compensation_effect_ids),
            "disposition": self.disposition,
            "reason": self.reason,
            "retry_effect_ids": list(self.retry_effect_ids),
            "retry_idempotency_keys": list(self.retry_idempotency_keys),
            "schema_version": self.schema_version,
            "source_checkpoint_digest": self.source_checkpoint_digest,
        }

    @classmethod
    def from_dict(cls, document: object) -> RecoveryDecision:
        """Re-load a stored decision document (closed) and re-verify its digest."""
        return cls._reload(
            document, "decision", _DECISION_FIELDS, "committed_effects", CommittedEffect.from_dict
        )

    def __repr__(self) -> str:
        """Show the disposition, reason and computed digest only."""
        return (
            f"RecoveryDecision(disposition={self.disposition!r}, reason={self.reason!r}, "
            f"evidence_digest={self.evidence_digest!r})"
        )
