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

Every object is an immutable value that validates itself on construction and
refuses with :class:`RecoveryError` (message ``<field>: <code>``, the field a
library-chosen name, never a submitted value). Everything here is pure: no
I/O, no clock, no logging.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from sealeval.canonical import digest_openmed, encode_openmed, is_digest
from sealeval.gates.registry import GateError

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
    "TERMINAL_PHASES",
    "CommittedEffect",
    "RecoveryCheckpoint",
    "RecoveryDecision",
    "RecoveryEffect",
    "RecoveryError",
    "RecoveryObservation",
    "RecoveryPlanner",
    "derive_idempotency_key",
    "is_action_id",
    "is_governance_id",
    "is_idempotency_key",
    "is_run_id",
    "plan_recovery",
    "recover_from_lineage",
    "verify_lineage",
]

CHECKPOINT_SCHEMA: Final = "openmed.agent.recovery_checkpoint.v1"
DECISION_SCHEMA: Final = "openmed.agent.recovery_evidence.v1"
#: Largest integer accepted anywhere in the model (2**63 - 1).
MAX_INTEGER: Final = 2**63 - 1

#: The six checkpoint phases, in workflow order.
PHASES: Final[tuple[str, ...]] = (
    "planned",
    "approval_recorded",
    "dispatching",
    "reconciling",
    "completed",
    "aborted",
)
#: Phases after which a run journals nothing more.
TERMINAL_PHASES: Final[tuple[str, ...]] = ("completed", "aborted")
EFFECT_KINDS: Final[tuple[str, ...]] = ("local_tool", "fhir_write", "omop_batch")
EFFECT_STATES: Final[tuple[str, ...]] = ("pending", "committed")
COMPENSATION_LIMITS: Final[tuple[str, ...]] = ("none", "propose_only")
OBSERVATION_STATES: Final[tuple[str, ...]] = ("absent", "committed", "ambiguous")
DISPOSITIONS: Final[tuple[str, ...]] = ("retired", "resume", "complete", "review_required")
#: Closed reasons, keyed by the only disposition each may accompany.
DECISION_REASONS: Final[dict[str, tuple[str, ...]]] = {
    "retired": ("journal_retired",),
    "resume": ("safe_to_resume",),
    "complete": ("effects_reconciled", "already_complete"),
    "review_required": (
        "workflow_aborted",
        "ambiguous_effect",
        "effect_mismatch",
        "approval_missing",
        "approval_expired",
    ),
}
_ALL_REASONS: Final = tuple(reason for group in DECISION_REASONS.values() for reason in group)


class RecoveryError(GateError):
    """Refusal of the recovery data model or planner (``<field>: <code>``, or ``<code>``).

    ``code`` and ``field`` are also exposed as attributes.
    """

    module = "sealeval.gates.recovery"
    codes = frozenset(
        {
            # values
            "unsupported_version",
            "invalid_identifier",
            "invalid_digest",
            "invalid_vocabulary",
            "invalid_boolean",
            "invalid_integer",
            "invalid_sequence",
            "empty",
            # closed parsing of documents
            "invalid_document",
            "unknown_field",
            "missing_field",
            "payload_mismatch",
            # effect / checkpoint invariants
            "commit_evidence_mismatch",
            "ordinal_mismatch",
            "duplicate_action",
            "duplicate_key",
            "key_mismatch",
            "incomplete_approval",
            "approval_plan_mismatch",
            "approval_receipt_required",
            "effects_not_committed",
            "sequence_mismatch",
            # decision invariants
            "inconsistent_decision",
            # planner
            "observation_coverage_mismatch",
            # lineage
            "lineage_incomplete",
            "broken_lineage",
            "lineage_mismatch",
            "lineage_regressed",
            "after_terminal",
        }
    )


# ---------------------------------------------------------------------------
# Identifier grammars (00-conventions.md §3; full match, value exactly ``str``)

_RUN_ID: Final = re.compile(r"run_[0-9a-f]{32}")
_ACTION_ID: Final = re.compile(r"act_[0-9a-f]{32}")
_IDEMPOTENCY_KEY: Final = re.compile(r"idem_[0-9a-f]{64}")
_LABEL: Final = r"(?:[a-z0-9]|[a-z0-9][a-z0-9-]{0,61}[a-z0-9])"
_VERSION_NUMBER: Final = r"(?:0|[1-9][0-9]*)"
_GOVERNANCE_ID: Final = re.compile(
    rf"(capability|purpose|policy|workflow|tool):({_LABEL}(?:\.{_LABEL})+)/[a-z][a-z0-9-]{{0,63}}"
    rf"(?:@{_VERSION_NUMBER}\.{_VERSION_NUMBER}\.{_VERSION_NUMBER})?"
)
_MAX_NAMESPACE: Final = 253
_MAX_GOVERNANCE_ID: Final = 512


def is_run_id(value: object) -> bool:
    """Return whether ``value`` is a run id (``run_`` + 32 lowercase hex)."""
    return type(value) is str and _RUN_ID.fullmatch(value) is not None


def is_action_id(value: object) -> bool:
    """Return whether ``value`` is an action id (``act_`` + 32 lowercase hex)."""
    return type(value) is str and _ACTION_ID.fullmatch(value) is not None


def is_idempotency_key(value: object) -> bool:
    """Return whether ``value`` is an idempotency key (``idem_`` + 64 lowercase hex)."""
    return type(value) is str and _IDEMPOTENCY_KEY.fullmatch(value) is not None


def is_governance_id(value: object, kind: str) -> bool:
    """Return whether ``value`` is a governance id of ``kind`` (``tool``, ``workflow``, …).

    Grammar: ``<kind>:<namespace>/<local>[@<major>.<minor>.<patch>]`` with a
    namespace of at least two DNS-style labels (at most 253 characters), a
    local name ``[a-z][a-z0-9-]{0,63}``, version numbers without leading zeros
    and at most 512 characters in all.
    """
    if type(value) is not str or len(value) > _MAX_GOVERNANCE_ID:
        return False
    match = _GOVERNANCE_ID.fullmatch(value)
    return match is not None and match.group(1) == kind and len(match.group(2)) <= _MAX_NAMESPACE


def _is_integer(value: object) -> bool:
    return type(value) is int and 0 <= value <= MAX_INTEGER


def _is_member(value: object, allowed: Sequence[str]) -> bool:
    return type(value) is str and value in allowed


def _is_optional_digest(value: object) -> bool:
    return value is None or is_digest(value)


def _check(condition: bool, code: str, field_name: str) -> None:
    if not condition:
        raise RecoveryError(code, field_name)


def _as_tuple(value: object, item_type: type, field_name: str) -> tuple[Any, ...]:
    """Return ``value`` as a tuple of ``item_type`` items, or refuse ``invalid_sequence``."""
    if not isinstance(value, list | tuple) or not all(type(item) is item_type for item in value):
        raise RecoveryError("invalid_sequence", field_name)
    return tuple(value)


def _as_id_tuple(
    value: object, check: Callable[[object], bool], field_name: str
) -> tuple[str, ...]:
    if not isinstance(value, list | tuple):
        raise RecoveryError("invalid_sequence", field_name)
    if not all(check(item) for item in value):
        raise RecoveryError("invalid_identifier", field_name)
    return tuple(value)


def _unique(values: Sequence[object]) -> bool:
    return len(set(values)) == len(values)


def _closed(document: object, keys: frozenset[str], name: str) -> Mapping[str, Any]:
    """Return ``document`` if it is a mapping with exactly ``keys`` (closed parsing)."""
    if not isinstance(document, Mapping):
        raise RecoveryError("invalid_document", name)
    present = set(document)
    if not all(type(key) is str for key in present) or present - keys:
        raise RecoveryError("unknown_field", name)
    if keys - present:
        raise RecoveryError("missing_field", name)
    return document


# ---------------------------------------------------------------------------
# Idempotency keys


def derive_idempotency_key(
    *, run_id: str, action_id: str, tool_id: str, kind: str, operation_digest: str
) -> str:
    """Return the idempotency key of one operation of one run.

    ``idem_`` + hex SHA-256 of the canonical JSON of ``{action_id, kind,
    operation_digest, run_id, tool_id}``. The key depends on nothing else, so
    a re-dispatch of the same operation of the same run carries the same key.

    Raises:
        RecoveryError: ``run_id`` / ``action_id`` / ``tool_id``:
            ``invalid_identifier``, ``kind: invalid_vocabulary``,
            ``operation_digest: invalid_digest``.
    """
    _check(is_run_id(run_id), "invalid_identifier", "run_id")
    _check(is_action_id(action_id), "invalid_identifier", "action_id")
    _check(is_governance_id(tool_id, "tool"), "invalid_identifier", "tool_id")
    _check(_is_member(kind, EFFECT_KINDS), "invalid_vocabulary", "kind")
    _check(is_digest(operation_digest), "invalid_digest", "operation_digest")
    material = {
        "action_id": action_id,
        "kind": kind,
        "operation_digest": operation_digest,
        "run_id": run_id,
        "tool_id": tool_id,
    }
    return "idem_" + digest_openmed(material).removeprefix("sha256:")


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
        _check(is_action_id(self.action_id), "invalid_identifier", "effect.action_id")
        _check(is_governance_id(self.tool_id, "tool"), "invalid_identifier", "effect.tool_id")
        _check(_is_member(self.kind, EFFECT_KINDS), "invalid_vocabulary", "effect.kind")
        _check(is_digest(self.operation_digest), "invalid_digest", "effect.operation_digest")
        _check(
            is_idempotency_key(self.idempotency_key),
            "invalid_identifier",
            "effect.idempotency_key",
        )
        _check(_is_integer(self.ordinal), "invalid_integer", "effect.ordinal")
        _check(type(self.approval_required) is bool, "invalid_boolean", "effect.approval_required")
        _check(
            _is_member(self.compensation_limit, COMPENSATION_LIMITS),
            "invalid_vocabulary",
            "effect.compensation_limit",
        )
        _check(_is_member(self.state, EFFECT_STATES), "invalid_vocabulary", "effect.state")
        _check(
            _is_optional_digest(self.commit_evidence_digest),
            "invalid_digest",
            "effect.commit_evidence_digest",
        )
        _check(
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
        data = _closed(document, _EFFECT_KEYS, "effect")
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
_CHECKPOINT_KEYS: Final = _CHECKPOINT_FIELDS | {"checkpoint_digest"}


@dataclass(frozen=True, slots=True, repr=False)
class RecoveryCheckpoint:
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

    def __post_init__(self) -> None:
        """Validate fields in document order, then the cross-field invariants."""
        _check(
            type(self.schema_version) is str and self.schema_version == CHECKPOINT_SCHEMA,
            "unsupported_version",
            "schema_version",
        )
        _check(is_run_id(self.run_id), "invalid_identifier", "run_id")
        _check(is_governance_id(self.workflow_id, "workflow"), "invalid_identifier", "workflow_id")
        _check(is_digest(self.plan_digest), "invalid_digest", "plan_digest")
        _check(_is_member(self.phase, PHASES), "invalid_vocabulary", "phase")
        _check(_is_integer(self.sequence), "invalid_integer", "sequence")
        _check(
            _is_optional_digest(self.previous_checkpoint_digest),
            "invalid_digest",
            "previous_checkpoint_digest",
        )
        _check(
            (self.sequence == 0) == (self.previous_checkpoint_digest is None),
            "sequence_mismatch",
            "previous_checkpoint_digest",
        )
        _check(
            _is_optional_digest(self.recovery_evidence_digest),
            "invalid_digest",
            "recovery_evidence_digest",
        )
        self._check_approval()
        effects = _as_tuple(self.effects, RecoveryEffect, "effects")
        _check(bool(effects), "empty", "effects")
        object.__setattr__(self, "effects", effects)
        self._check_effects()
        self._check_phase()
        object.__setattr__(self, "checkpoint_digest", digest_openmed(self._unsigned()))

    def _check_approval(self) -> None:
        _check(
            _is_optional_digest(self.approval_action_digest),
            "invalid_digest",
            "approval_action_digest",
        )
        _check(
            self.approval_expires_at is None or _is_integer(self.approval_expires_at),
            "invalid_integer",
            "approval_expires_at",
        )
        _check(
            _is_optional_digest(self.approval_receipt_digest),
            "invalid_digest",
            "approval_receipt_digest",
        )
        present = {
            self.approval_action_digest is not None,
            self.approval_expires_at is not None,
            self.approval_receipt_digest is not None,
        }
        _check(len(present) == 1, "incomplete_approval", "approval")
        if self.approval_action_digest is not None:
            _check(
                self.approval_action_digest == self.plan_digest,
                "approval_plan_mismatch",
                "approval_action_digest",
            )

    def _check_effects(self) -> None:
        effects = self.effects
        _check(
            [effect.ordinal for effect in effects] == list(range(len(effects))),
            "ordinal_mismatch",
            "effects",
        )
        _check(_unique([effect.action_id for effect in effects]), "duplicate_action", "effects")
        _check(_unique([effect.idempotency_key for effect in effects]), "duplicate_key", "effects")
        for effect in effects:
            derived = derive_idempotency_key(
                run_id=self.run_id,
                action_id=effect.action_id,
                tool_id=effect.tool_id,
                kind=effect.kind,
                operation_digest=effect.operation_digest,
            )
            _check(effect.idempotency_key == derived, "key_mismatch", "effects")

    def _check_phase(self) -> None:
        receipt = self.approval_receipt_digest is not None
        if self.phase == "approval_recorded":
            _check(receipt, "approval_receipt_required", "approval_receipt_digest")
        if self.phase in ("dispatching", "completed") and any(
            effect.approval_required for effect in self.effects
        ):
            _check(receipt, "approval_receipt_required", "approval_receipt_digest")
        if self.phase == "completed":
            _check(
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

    def to_dict(self) -> dict[str, Any]:
        """Return the checkpoint document including ``checkpoint_digest``."""
        return {**self._unsigned(), "checkpoint_digest": self.checkpoint_digest}

    def to_json(self) -> str:
        """Return the canonical JSON text (openmed profile)."""
        return encode_openmed(self.to_dict())

    @classmethod
    def from_dict(cls, document: object) -> RecoveryCheckpoint:
        """Re-load a stored checkpoint document (closed) and re-verify its digest."""
        data = _closed(document, _CHECKPOINT_KEYS, "checkpoint")
        _check(is_digest(data["checkpoint_digest"]), "invalid_digest", "checkpoint_digest")
        effects = data["effects"]
        _check(isinstance(effects, list | tuple), "invalid_sequence", "effects")
        fields = {key: data[key] for key in _CHECKPOINT_FIELDS}
        fields["effects"] = tuple(RecoveryEffect.from_dict(item) for item in effects)
        checkpoint = cls(**fields)
        _check(
            checkpoint.checkpoint_digest == data["checkpoint_digest"],
            "payload_mismatch",
            "checkpoint_digest",
        )
        return checkpoint

    def __repr__(self) -> str:
        """Show the phase, sequence, effect count and the computed digest only."""
        return (
            f"RecoveryCheckpoint(phase={self.phase!r}, sequence={self.sequence!r}, "
            f"effects={len(self.effects)}, checkpoint_digest={self.checkpoint_digest!r})"
        )


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
_DECISION_KEYS: Final = _DECISION_FIELDS | {"evidence_digest"}


@dataclass(frozen=True, slots=True, repr=False)
class CommittedEffect:
    """An effect known to be committed, with the evidence of its commit."""

    action_id: str
    commit_evidence_digest: str

    def __post_init__(self) -> None:
        """Validate both fields."""
        _check(is_action_id(self.action_id), "invalid_identifier", "committed_effect.action_id")
        _check(
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
        data = _closed(document, _COMMITTED_KEYS, "committed_effect")
        return cls(
            action_id=data["action_id"], commit_evidence_digest=data["commit_evidence_digest"]
        )

    def __repr__(self) -> str:
        """Show nothing submitted."""
        return "CommittedEffect(...)"


@dataclass(frozen=True, slots=True, repr=False)
class RecoveryDecision:
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

    def __post_init__(self) -> None:
        """Validate fields, then the structural invariants."""
        _check(
            type(self.schema_version) is str and self.schema_version == DECISION_SCHEMA,
            "unsupported_version",
            "schema_version",
        )
        _check(
            is_digest(self.source_checkpoint_digest), "invalid_digest", "source_checkpoint_digest"
        )
        _check(_is_member(self.disposition, DISPOSITIONS), "invalid_vocabulary", "disposition")
        _check(_is_member(self.reason, _ALL_REASONS), "invalid_vocabulary", "reason")
        committed = _as_tuple(self.committed_effects, CommittedEffect, "committed_effects")
        retry_ids = _as_id_tuple(self.retry_effect_ids, is_action_id, "retry_effect_ids")
        retry_keys = _as_id_tuple(
            self.retry_idempotency_keys, is_idempotency_key, "retry_idempotency_keys"
        )
        compensation = _as_id_tuple(
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
        _check(self.reason in DECISION_REASONS[self.disposition], "inconsistent_decision", "reason")
        _check(_unique(committed_ids), "duplicate_action", "committed_effects")
        _check(_unique(self.retry_effect_ids), "duplicate_action", "retry_effect_ids")
        _check(_unique(self.retry_idempotency_keys), "duplicate_key", "retry_idempotency_keys")
        _check(_unique(self.compensation_effect_ids), "duplicate_action", "compensation_effect_ids")
        _check(
            len(self.retry_effect_ids) == len(self.retry_idempotency_keys),
            "inconsistent_decision",
            "retry_idempotency_keys",
        )
        _check(
            bool(self.retry_effect_ids) == (self.disposition == "resume"),
            "inconsistent_decision",
            "retry_effect_ids",
        )
        _check(
            not set(self.retry_effect_ids) & set(committed_ids),
            "inconsistent_decision",
            "retry_effect_ids",
        )
        _check(
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

    def to_dict(self) -> dict[str, Any]:
        """Return the decision document including ``evidence_digest``."""
        return {**self._unsigned(), "evidence_digest": self.evidence_digest}

    def to_json(self) -> str:
        """Return the canonical JSON text (openmed profile)."""
        return encode_openmed(self.to_dict())

    @classmethod
    def from_dict(cls, document: object) -> RecoveryDecision:
        """Re-load a stored decision document (closed) and re-verify its digest."""
        data = _closed(document, _DECISION_KEYS, "decision")
        _check(is_digest(data["evidence_digest"]), "invalid_digest", "evidence_digest")
        committed = data["committed_effects"]
        _check(isinstance(committed, list | tuple), "invalid_sequence", "committed_effects")
        fields = {key: data[key] for key in _DECISION_FIELDS}
        fields["committed_effects"] = tuple(CommittedEffect.from_dict(item) for item in committed)
        decision = cls(**fields)
        _check(
            decision.evidence_digest == data["evidence_digest"],
            "payload_mismatch",
            "evidence_digest",
        )
        return decision

    def __repr__(self) -> str:
        """Show the disposition, reason and computed digest only."""
        return (
            f"RecoveryDecision(disposition={self.disposition!r}, reason={self.reason!r}, "
            f"evidence_digest={self.evidence_digest!r})"
        )


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
        _check(is_action_id(self.action_id), "invalid_identifier", "observation.action_id")
        _check(is_digest(self.operation_digest), "invalid_digest", "observation.operation_digest")
        _check(
            is_idempotency_key(self.idempotency_key),
            "invalid_identifier",
            "observation.idempotency_key",
        )
        _check(
            _is_member(self.state, OBSERVATION_STATES), "invalid_vocabulary", "observation.state"
        )
        _check(
            _is_optional_digest(self.commit_evidence_digest),
            "invalid_digest",
            "observation.commit_evidence_digest",
        )
        _check(
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
        data = _closed(document, _OBSERVATION_KEYS, "observation")
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
    _check(type(checkpoint) is RecoveryCheckpoint, "invalid_document", "checkpoint")
    observed = _as_tuple(observations, RecoveryObservation, "observations")
    _check(_is_integer(now), "invalid_integer", "now")
    if checkpoint.phase == "completed":
        return _decide(checkpoint, "complete", "already_complete")
    if checkpoint.phase == "aborted":
        return _decide(checkpoint, "review_required", "workflow_aborted")
    by_action = {item.action_id: item for item in observed}
    _check(
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
    chain = _as_tuple(lineage, RecoveryCheckpoint, "lineage")
    _check(bool(chain), "empty", "lineage")
    _check(chain[0].sequence == 0, "lineage_incomplete", "lineage")
    for before, after in itertools.pairwise(chain):
        _check(before.phase not in TERMINAL_PHASES, "after_terminal", "lineage")
        _check(
            after.previous_checkpoint_digest == before.checkpoint_digest
            and after.sequence == before.sequence + 1,
            "broken_lineage",
            "lineage",
        )
        _check(
            (after.run_id, after.workflow_id, after.plan_digest)
            == (before.run_id, before.workflow_id, before.plan_digest)
            and [effect.identity() for effect in after.effects]
            == [effect.identity() for effect in before.effects],
            "lineage_mismatch",
            "lineage",
        )
        _check(
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
