"""The recovery vocabulary (21-adapters.md §3.1).

Schema strings, phases and states, decision reasons, :class:`RecoveryError`,
the identifier grammars and deterministic idempotency keys.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Final, Self

from sealeval._validate import check_closed
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
    "RecoveryError",
    "derive_idempotency_key",
    "is_action_id",
    "is_governance_id",
    "is_idempotency_key",
    "is_run_id",
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
ALL_REASONS: Final = tuple(reason for group in DECISION_REASONS.values() for reason in group)


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


def is_integer(value: object) -> bool:
    """Return whether ``value`` is an exact ``int`` in ``0..MAX_INTEGER``."""
    return type(value) is int and 0 <= value <= MAX_INTEGER


def is_member(value: object, allowed: Sequence[str]) -> bool:
    """Return whether ``value`` is an exact ``str`` among ``allowed``."""
    return type(value) is str and value in allowed


def is_optional_digest(value: object) -> bool:
    """Return whether ``value`` is ``None`` or a ``sha256:`` digest."""
    return value is None or is_digest(value)


def ensure(condition: bool, code: str, field_name: str) -> None:
    """Refuse with ``RecoveryError(code, field_name)`` unless ``condition`` holds."""
    if not condition:
        raise RecoveryError(code, field_name)


def as_tuple(value: object, item_type: type, field_name: str) -> tuple[Any, ...]:
    """Return ``value`` as a tuple of ``item_type`` items, or refuse ``invalid_sequence``."""
    if not isinstance(value, list | tuple) or not all(type(item) is item_type for item in value):
        raise RecoveryError("invalid_sequence", field_name)
    return tuple(value)


def as_id_tuple(value: object, check: Callable[[object], bool], field_name: str) -> tuple[str, ...]:
    """Return ``value`` as a tuple of identifiers that pass ``check`` (else refuse)."""
    if not isinstance(value, list | tuple):
        raise RecoveryError("invalid_sequence", field_name)
    if not all(check(item) for item in value):
        raise RecoveryError("invalid_identifier", field_name)
    return tuple(value)


def all_unique(values: Sequence[object]) -> bool:
    """Return whether ``values`` holds no duplicate."""
    return len(set(values)) == len(values)


def closed_document(document: object, keys: frozenset[str], name: str) -> Mapping[str, Any]:
    """Return ``document`` if it is a mapping with exactly ``keys`` (closed parsing).

    A key that only compares equal to a member (a ``str`` subclass) is unknown.
    """
    checked = check_closed(
        document, name, (), keys, error=RecoveryError, type_code="invalid_document"
    )
    if not all(type(key) is str for key in checked):
        raise RecoveryError("unknown_field", name)
    if keys - set(checked):
        raise RecoveryError("missing_field", name)
    return checked


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
    ensure(is_run_id(run_id), "invalid_identifier", "run_id")
    ensure(is_action_id(action_id), "invalid_identifier", "action_id")
    ensure(is_governance_id(tool_id, "tool"), "invalid_identifier", "tool_id")
    ensure(is_member(kind, EFFECT_KINDS), "invalid_vocabulary", "kind")
    ensure(is_digest(operation_digest), "invalid_digest", "operation_digest")
    material = {
        "action_id": action_id,
        "kind": kind,
        "operation_digest": operation_digest,
        "run_id": run_id,
        "tool_id": tool_id,
    }
    return "idem_" + digest_openmed(material).removeprefix("sha256:")


# ---------------------------------------------------------------------------
# Digest-bound documents


class DigestBound:
    """Mixin of a frozen document whose digest field is computed over the other fields.

    A subclass (a frozen, slotted dataclass) names its digest field in
    :attr:`DIGEST_FIELD`, implements :meth:`_unsigned` (the document without
    that field, which the digest covers) and sets the field in
    ``__post_init__`` to ``digest_openmed(self._unsigned())``. The wire form
    (:meth:`to_dict`, :meth:`to_json`) and the closed re-load with its digest
    re-check (:meth:`_reload`) are written once here.
    """

    __slots__ = ()

    #: The name of the digest field (``checkpoint_digest``, ``evidence_digest``).
    DIGEST_FIELD: ClassVar[str]

    def _unsigned(self) -> dict[str, Any]:
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        """Return the document, its digest field included."""
        return {**self._unsigned(), self.DIGEST_FIELD: getattr(self, self.DIGEST_FIELD)}

    def to_json(self) -> str:
        """Return the canonical JSON text (openmed profile)."""
        return encode_openmed(self.to_dict())

    @classmethod
    def _reload(
        cls,
        document: object,
        name: str,
        fields: frozenset[str],
        items: str,
        parse_item: Callable[[object], object],
    ) -> Self:
        """Re-load a stored document: closed, digest well formed, rebuilt, digest re-checked.

        ``fields`` are the constructor's fields (the document holds them and
        the digest field); ``items`` names the one list among them whose
        members ``parse_item`` rebuilds.

        Raises:
            RecoveryError: ``<name>: invalid_document | unknown_field |
                missing_field``, ``<digest>: invalid_digest``, ``<items>:
                invalid_sequence``, a constructor refusal, then ``<digest>:
                payload_mismatch``.
        """
        digest = cls.DIGEST_FIELD
        data = closed_document(document, fields | {digest}, name)
        ensure(is_digest(data[digest]), "invalid_digest", digest)
        members = data[items]
        ensure(isinstance(members, list | tuple), "invalid_sequence", items)
        arguments = {key: data[key] for key in fields}
        arguments[items] = tuple(parse_item(item) for item in members)
        loaded = cls(**arguments)
        ensure(getattr(loaded, digest) == data[digest], "payload_mismatch", digest)
        return loaded
