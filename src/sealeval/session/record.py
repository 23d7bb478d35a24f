"""The persisted evaluation-session record, its steps, and the session error.

Wire contract: ``openmed.eval.workflow_session.v1`` (openmed canonical JSON)::

    {"binding_digest": digest, "schema_version": "openmed.eval.workflow_session.v1",
     "session_digest": digest, "session_key": digest,
     "steps": [[phase, digest, count, tick, band], ...]}

A record is content-free by construction: it holds digests, counts, clock
ticks and (on the terminal step only) a coarse band, nothing else.
``session_digest`` is the SHA-256 of the canonical JSON of the other four
members. Persisted text is parsed strictly (:meth:`SessionRecord.from_json`):
repeated keys, unknown or missing keys, a foreign schema, an invalid step or a
``session_digest`` that does not match all fail with ``record_invalid``.

:class:`EvaluationSessionError` lives here because every layer of the session
(record, store, state machine) raises it; it is re-exported by
:mod:`sealeval.session.session` and :mod:`sealeval.session.store`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple, TypeGuard

from sealeval.canonical import decode, digest_openmed, encode_openmed, is_digest
from sealeval.errors import SessionError

__all__ = [
    "ERROR_CODES",
    "MAX_STEPS",
    "MAX_VALUE",
    "PHASES",
    "SESSION_SCHEMA",
    "TERMINAL_PHASES",
    "EvaluationSessionError",
    "SessionRecord",
    "SessionStep",
    "session_digest",
]

SESSION_SCHEMA: Final = "openmed.eval.workflow_session.v1"
#: The phases of steps 0..4, in order.
PHASES: Final = ("verified", "cases", "forensics", "adjudication", "release_claimed")
#: The two possible phases of the terminal step (index 5).
TERMINAL_PHASES: Final = ("released", "budget_denied")
#: Most steps a record can hold.
MAX_STEPS: Final = 6
#: Largest count, tick or band accepted (sealeval bound: a signed 64-bit integer).
MAX_VALUE: Final = 2**63 - 1

#: The closed error codes of an evaluation session, alphabetically.
ERROR_CODES: Final = (
    "adjudication_failed",
    "adjudication_required",
    "budget_state_unverified",
    "checkpoint_mismatch",
    "component_digest_mismatch",
    "component_failed",
    "execution_failed",
    "execution_required",
    "feedback_already_claimed",
    "feedback_failed",
    "forensics_failed",
    "forensics_required",
    "holdout_commitment_mismatch",
    "incomplete_evaluation_snapshot",
    "incomplete_manifest",
    "invalid_clock",
    "invalid_configuration",
    "invalid_digest",
    "invalid_evaluation_snapshot",
    "invalid_manifest",
    "invalid_order",
    "invalid_output",
    "invalid_score",
    "mutable_manifest",
    "record_conflict",
    "record_invalid",
    "rerun_budget_exhausted",
    "store_failed",
    "verification_failed",
    "verification_required",
)

_RECORD_KEYS: Final = frozenset(
    {"binding_digest", "schema_version", "session_digest", "session_key", "steps"}
)
_STEP_LENGTH: Final = 5


class EvaluationSessionError(SessionError):
    """Refusal of an evaluation session, its record or its store.

    The message is the bare code (no field), also available as ``code``.
    Unlike other sealeval errors, constructing it with a code outside the
    closed set does not fail: the code collapses to ``component_failed``
    (openmed's observable behaviour). Errors are always raised fresh, with
    neither ``__cause__`` nor ``__context__`` pointing at a provider
    exception.
    """

    module = "sealeval.session.session"
    field_in_message = False
    codes = frozenset(ERROR_CODES)
    fallback_code = "component_failed"


class SessionStep(NamedTuple):
    """One step of a record: ``[phase, digest, count, tick, band]``.

    ``band`` is ``None`` except on the terminal step, where it is the coarse
    band of a coarse decision (``None`` for a detailed or denied one).
    """

    phase: str
    digest: str
    count: int  # type: ignore[assignment]  # the wire name; shadows tuple.count
    tick: int
    band: int | None


def _is_sequence(value: object) -> TypeGuard[list[Any] | tuple[Any, ...]]:
    return isinstance(value, list | tuple)


def _is_value(value: object) -> bool:
    """Return whether ``value`` is exactly an ``int`` (bools refused) in ``0..MAX_VALUE``."""
    return type(value) is int and 0 <= value <= MAX_VALUE


def _checked_step(index: int, step: object) -> SessionStep:
    """Validate step ``index``: shape, phase, digest, count, tick, band (in that order)."""
    if not _is_sequence(step):
        raise EvaluationSessionError("record_invalid")
    items: tuple[Any, ...] = tuple(step)
    if len(items) != _STEP_LENGTH:
        raise EvaluationSessionError("record_invalid")
    phase, digest, count, tick, band = items
    allowed = (PHASES[index],) if index < len(PHASES) else TERMINAL_PHASES
    if type(phase) is not str or phase not in allowed:
        raise EvaluationSessionError("record_invalid")
    if not is_digest(digest):
        raise EvaluationSessionError("invalid_digest")
    if not _is_value(count) or not _is_value(tick):
        raise EvaluationSessionError("record_invalid")
    if band is not None and (index < len(PHASES) or not _is_value(band)):
        raise EvaluationSessionError("record_invalid")
    return SessionStep(phase, digest, count, tick, band)


def _checked_steps(steps: object) -> tuple[SessionStep, ...]:
    if not _is_sequence(steps):
        raise EvaluationSessionError("record_invalid")
    items: tuple[Any, ...] = tuple(steps)
    if len(items) > MAX_STEPS:
        raise EvaluationSessionError("record_invalid")
    return tuple(_checked_step(index, step) for index, step in enumerate(items))


def _digest_payload(
    session_key: str, binding_digest: str, steps: Sequence[SessionStep]
) -> dict[str, Any]:
    return {
        "binding_digest": binding_digest,
        "schema_version": SESSION_SCHEMA,
        "session_key": session_key,
        "steps": [list(step) for step in steps],
    }


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """An immutable, validated session record.

    Construction checks, in order: ``session_key`` and ``binding_digest`` are
    digests (``invalid_digest``), the schema string (``record_invalid``),
    ``steps`` is a list/tuple of at most six five-item steps in phase order
    (``record_invalid``) with digest step digests (``invalid_digest``),
    ``int`` counts and ticks >= 0 and a band only on the terminal step
    (``record_invalid``). ``steps`` is stored as a tuple of
    :class:`SessionStep`; ``session_digest`` is computed.
    """

    session_key: str
    binding_digest: str
    steps: tuple[SessionStep, ...] = ()
    schema_version: str = SESSION_SCHEMA
    session_digest: str = field(init=False)

    def __post_init__(self) -> None:
        """Validate every member and compute ``session_digest``."""
        if not is_digest(self.session_key) or not is_digest(self.binding_digest):
            raise EvaluationSessionError("invalid_digest")
        if type(self.schema_version) is not str or self.schema_version != SESSION_SCHEMA:
            raise EvaluationSessionError("record_invalid")
        steps = _checked_steps(self.steps)
        object.__setattr__(self, "steps", steps)
        object.__setattr__(
            self,
            "session_digest",
            digest_openmed(_digest_payload(self.session_key, self.binding_digest, steps)),
        )

    def with_step(self, step: SessionStep) -> SessionRecord:
        """Return a new record with ``step`` appended (validated like any record)."""
        return SessionRecord(
            session_key=self.session_key,
            binding_digest=self.binding_digest,
            steps=(*self.steps, step),
        )

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh wire document (steps as five-item lists)."""
        document = _digest_payload(self.session_key, self.binding_digest, self.steps)
        document["session_digest"] = self.session_digest
        return document

    def to_json(self) -> str:
        """Return the canonical JSON text (openmed profile): the persisted form."""
        return encode_openmed(self.to_dict())

    @classmethod
    def from_dict(cls, document: object) -> SessionRecord:
        """Strictly rebuild a record from a parsed document.

        The document must have exactly the five keys and the v1 schema, must
        construct, and must re-serialize to the same canonical text (which
        checks ``session_digest`` and refuses ``1.0`` for ``1``).

        Raises:
            EvaluationSessionError: ``record_invalid`` for every failure.
        """
        try:
            record: SessionRecord | None = cls._from_dict(document)
        except Exception:  # noqa: BLE001 - every parse failure is the same refusal
            record = None
        if record is None:
            # Raised outside the except block: no __context__ is attached.
            raise EvaluationSessionError("record_invalid") from None
        return record

    @classmethod
    def _from_dict(cls, document: object) -> SessionRecord:
        if not isinstance(document, Mapping) or set(document) != _RECORD_KEYS:
            raise EvaluationSessionError("record_invalid")
        record = cls(
            session_key=document["session_key"],
            binding_digest=document["binding_digest"],
            steps=document["steps"],
            schema_version=document["schema_version"],
        )
        if encode_openmed(dict(document)) != record.to_json():
            raise EvaluationSessionError("record_invalid")
        return record

    @classmethod
    def from_json(cls, data: bytes | str) -> SessionRecord:
        """Strictly parse persisted record text (repeated keys, NaN, ... refused).

        Raises:
            EvaluationSessionError: ``record_invalid`` for every failure.
        """
        try:
            document = decode(data)
        except Exception:  # noqa: BLE001 - not JSON, or not text at all
            document = None
        return cls.from_dict(document)


def session_digest(session_key: str, binding_digest: str, steps: Sequence[Sequence[Any]]) -> str:
    """Return the ``session_digest`` of a record with these members.

    SHA-256 of the canonical JSON of ``{"binding_digest", "schema_version",
    "session_key", "steps"}``.

    Raises:
        EvaluationSessionError: as :class:`SessionRecord` construction.
    """
    return SessionRecord(
        session_key=session_key,
        binding_digest=binding_digest,
        steps=steps,  # type: ignore[arg-type]
    ).session_digest
