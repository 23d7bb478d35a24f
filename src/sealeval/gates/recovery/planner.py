"""Recovery observations, the planner and lineage verification.

After a crash, :func:`plan_recovery` reads the newest checkpoint together with
what the outside world reports about each effect (a
:class:`RecoveryObservation`) and decides, at an injected time ``now``, to
``resume``, ``complete`` or require review (``review_required``);
:func:`verify_lineage` checks a checkpoint chain and
:func:`recover_from_lineage` plans from its newest checkpoint. Pure: no I/O,
no clock, no logging.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from sealeval.canonical import is_digest
from sealeval.gates.recovery.checkpoint import (
    RecoveryCheckpoint,
    RecoveryEffect,
)
from sealeval.gates.recovery.decision import (
    CommittedEffect,
    RecoveryDecision,
)
from sealeval.gates.recovery.vocabulary import (
    OBSERVATION_STATES,
    TERMINAL_PHASES,
    as_tuple,
    closed_document,
    ensure,
    is_action_id,
    is_idempotency_key,
    is_integer,
    is_member,
    is_optional_digest,
)

__all__ = [
    "RecoveryObservation",
    "RecoveryPlanner",
    "plan_recovery",
    "recover_from_lineage",
    "verify_lineage",
]

# ---------------------------------------------------------------------------
# Observations and the planner

_OBSERVATION_KEYS: Final = frozenset(
    {"action_id", "commit_evidence_digest", "idempotency_key", "operation_digest", "state"}
)


@dataclass(frozen=True, slots=True, repr=False)
class RecoveryObservation:
    """What the outside world reports about one effect after a crash.

    ``state`` is ``absent`` (never happened), ``committed`` (happened, with
    commit evidence) or ``ambiguous`` (cannot tell); only ``committed``
    carries a ``commit_evidence_digest``.
    """

    action_id: str
    operation_digest: str
    idempotency_key: str
    state: str
    commit_evidence_digest: str | None = None

    def __post_init__(self) -> None:
        """Validate in document order, then the state/evidence invariant."""
        ensure(is_action_id(self.action_id), "invalid_identifier", "observation.action_id")
        ensure(is_digest(self.operation_digest), "invalid_digest", "observation.operation_digest")
        ensure(
            is_idempotency_key(self.idempotency_key),
            "invalid_identifier",
            "observation.idempotency_key",
        )
        ensure(is_member(self.state, OBSERVATION_STATES), "invalid_vocabulary", "observation.state")
        ensure(
            is_optional_digest(self.commit_evidence_digest),
            "invalid_digest",
            "observation.commit_evidence_digest",
        )
        ensure(
            (self.state == "committed") == (self.commit_evidence_digest is not None),
            "commit_evidence_mismatch",
            "observation.commit_evidence_digest",
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the observation document."""
        return {
            "action_id": self.action_id,
            "commit_evidence_digest": self.commit_evidence_digest,
            "idempotency_key": self.idempotency_key,
            "operation_digest": self.operation_digest,
            "state": self.state,
        }

    @classmethod
    def from_dict(cls, document: object) -> RecoveryObservation:
        """Parse an observation document (closed: exactly its five keys)."""
        data = closed_document(document, _OBSERVATION_KEYS, "observation")
        return cls(**{key: data[key] for key in _OBSERVATION_KEYS})

    def __repr__(self) -> str:
        """Show the observed state only."""
        return f"RecoveryObservation(state={self.state!r})"


class RecoveryPlanner(Protocol):
    """A recovery planner, called as ``planner(checkpoint, observations, now=...)``."""

    def __call__(
        self,
        checkpoint: RecoveryCheckpoint,
        observations: Sequence[RecoveryObservation],
        /,
        *,
        now: int,
    ) -> RecoveryDecision:
        """Return the decision for ``checkpoint`` given ``observations`` at time ``now``."""
        ...


def _decide(
    checkpoint: RecoveryCheckpoint,
    disposition: str,
    reason: str,
    *,
    committed: Sequence[CommittedEffect] = (),
    retry: Sequence[RecoveryEffect] = (),
    compensation: Sequence[str] = (),
) -> RecoveryDecision:
    return RecoveryDecision(
        source_checkpoint_digest=checkpoint.checkpoint_digest,
        disposition=disposition,
        reason=reason,
        committed_effects=tuple(committed),
        retry_effect_ids=tuple(effect.action_id for effect in retry),
        retry_idempotency_keys=tuple(effect.idempotency_key for effect in retry),
        compensation_effect_ids=tuple(compensation),
    )


def _classify(effect: RecoveryEffect, seen: RecoveryObservation) -> str:
    """Return ``mismatch``, ``ambiguous``, ``committed`` or ``retry`` for one effect."""
    if (
        seen.operation_digest != effect.operation_digest
        or seen.idempotency_key != effect.idempotency_key
    ):
        return "mismatch"
    if seen.state == "ambiguous":
        return "ambiguous"
    if effect.state == "committed" and (
        seen.state != "committed" or seen.commit_evidence_digest != effect.commit_evidence_digest
    ):
        return "ambiguous"
    return "committed" if seen.state == "committed" else "retry"


def _refusal_reason(
    checkpoint: RecoveryCheckpoint,
    outcomes: set[str],
    retry: Sequence[RecoveryEffect],
    now: int,
) -> str | None:
    """Return the highest-priority refusal reason, or ``None`` if recovery may proceed."""
    if "mismatch" in outcomes:
        return "effect_mismatch"
    if "ambiguous" in outcomes:
        return "ambiguous_effect"
    if not any(effect.approval_required for effect in retry):
        return None
    if not checkpoint.approval_recorded:
        return "approval_missing"
    expires_at = checkpoint.approval_expires_at
    if expires_at is not None and expires_at <= now:
        return "approval_expired"
    return None


def plan_recovery(
    checkpoint: RecoveryCheckpoint,
    observations: Sequence[RecoveryObservation],
    *,
    now: int,
) -> RecoveryDecision:
    """Decide how to recover a run from its newest ``checkpoint`` at time ``now``.

    Rules (``21-adapters.md`` §3.1, informative; ``docs/recovery.md``):

    1. ``completed`` → complete / ``already_complete``; ``aborted`` →
       review_required / ``workflow_aborted`` (no lists).
    2. Otherwise exactly one observation per effect (matched by action id).
       Per effect, in ordinal order: an operation digest or idempotency key
       that differs from the journal → *mismatch*; an ``ambiguous``
       observation → *ambiguous*; a committed effect not observed committed
       with the same evidence → *ambiguous*; an effect observed committed →
       committed list (with the observed evidence); a pending effect observed
       absent → retry list.
    3. In priority order: mismatch → ``effect_mismatch``; ambiguous →
       ``ambiguous_effect``; a retried effect requires approval and no receipt
       is recorded → ``approval_missing``; a retried effect requires approval
       and ``approval_expires_at ≤ now`` → ``approval_expired`` (all
       review_required, retries dropped, committed effects kept and those
       with ``compensation_limit = propose_only`` proposed for compensation);
       any retries → resume / ``safe_to_resume`` with their keys; else
       complete / ``effects_reconciled``.

    Raises:
        RecoveryError: ``checkpoint: invalid_document``,
            ``observations: invalid_sequence``, ``now: invalid_integer``,
            ``observations: observation_coverage_mismatch``.
    """
    ensure(type(checkpoint) is RecoveryCheckpoint, "invalid_document", "checkpoint")
    observed = as_tuple(observations, RecoveryObservation, "observations")
    ensure(is_integer(now), "invalid_integer", "now")
    if checkpoint.phase == "completed":
        return _decide(checkpoint, "complete", "already_complete")
    if checkpoint.phase == "aborted":
        return _decide(checkpoint, "review_required", "workflow_aborted")
    by_action = {item.action_id: item for item in observed}
    ensure(
        len(by_action) == len(observed)
        and set(by_action) == {effect.action_id for effect in checkpoint.effects},
        "observation_coverage_mismatch",
        "observations",
    )
    outcomes = {
        effect.action_id: _classify(effect, by_action[effect.action_id])
        for effect in checkpoint.effects
    }
    committed = [
        effect for effect in checkpoint.effects if outcomes[effect.action_id] == "committed"
    ]
    retry = [effect for effect in checkpoint.effects if outcomes[effect.action_id] == "retry"]
    reason = _refusal_reason(checkpoint, set(outcomes.values()), retry, now)
    committed_effects = []
    for effect in committed:
        evidence = by_action[effect.action_id].commit_evidence_digest
        assert evidence is not None  # observed committed, so it carries evidence
        committed_effects.append(CommittedEffect(effect.action_id, evidence))
    if reason is not None:
        compensation = [
            effect.action_id for effect in committed if effect.compensation_limit == "propose_only"
        ]
        return _decide(
            checkpoint,
            "review_required",
            reason,
            committed=committed_effects,
            compensation=compensation,
        )
    if retry:
        return _decide(
            checkpoint, "resume", "safe_to_resume", committed=committed_effects, retry=retry
        )
    return _decide(checkpoint, "complete", "effects_reconciled", committed=committed_effects)


# ---------------------------------------------------------------------------
# Lineages


def verify_lineage(lineage: Sequence[RecoveryCheckpoint]) -> RecoveryCheckpoint:
    """Verify a run's journal (oldest first, from sequence 0) and return its newest checkpoint.

    Each checkpoint must link to its predecessor's digest with the next
    sequence number, keep the run, workflow, plan and every effect's identity
    (all fields but state and commit evidence), never un-commit an effect or
    change its commit evidence, never drop a recorded approval, and no
    checkpoint may follow a terminal phase.

    Raises:
        RecoveryError: ``lineage: invalid_sequence`` / ``empty`` /
            ``lineage_incomplete`` / ``broken_lineage`` / ``lineage_mismatch`` /
            ``lineage_regressed`` / ``after_terminal``.
    """
    chain = as_tuple(lineage, RecoveryCheckpoint, "lineage")
    ensure(bool(chain), "empty", "lineage")
    ensure(chain[0].sequence == 0, "lineage_incomplete", "lineage")
    for before, after in itertools.pairwise(chain):
        ensure(before.phase not in TERMINAL_PHASES, "after_terminal", "lineage")
        ensure(
            after.previous_checkpoint_digest == before.checkpoint_digest
            and after.sequence == before.sequence + 1,
            "broken_lineage",
            "lineage",
        )
        ensure(
            (after.run_id, after.workflow_id, after.plan_digest)
            == (before.run_id, before.workflow_id, before.plan_digest)
            and [effect.identity() for effect in after.effects]
            == [effect.identity() for effect in before.effects],
            "lineage_mismatch",
            "lineage",
        )
        ensure(
            all(
                old.state == "pending" or new.commit_evidence_digest == old.commit_evidence_digest
                for old, new in zip(before.effects, after.effects, strict=True)
            )
            and (not before.approval_recorded or after.approval_recorded),
            "lineage_regressed",
            "lineage",
        )
    newest: RecoveryCheckpoint = chain[-1]
    return newest


def recover_from_lineage(
    lineage: Sequence[RecoveryCheckpoint],
    observations: Sequence[RecoveryObservation],
    *,
    now: int,
    planner: RecoveryPlanner = plan_recovery,
) -> RecoveryDecision:
    """Verify ``lineage`` (:func:`verify_lineage`) and plan from its newest checkpoint."""
    return planner(verify_lineage(lineage), observations, now=now)
