"""Feedback budget: per-epoch policy, coarse banding and a ledger of official attempts.

Wire contracts (openmed canonical JSON): ``openmed.eval.feedback_budget_policy.v1``,
``openmed.eval.feedback_budget_decision.v1``,
``openmed.eval.feedback_budget_snapshot.v1`` and
``openmed.eval.failure_approval.v1``. Persistence documents (sealeval's own):
``sealeval.feedback_budget_usage.v1`` and
``sealeval.feedback_budget_ledger_usage.v1``.

The module is split in two layers (see ``docs/feedback-budget.md``):

* a **pure core** — :func:`decide_official_attempt`,
  :func:`decide_failure_approval` and :func:`budget_snapshot` map
  ``(policy, usage, request)`` to ``(document, new usage)`` without touching
  any state, so a durable store can run them inside its own transaction;
* :class:`FeedbackBudgetLedger`, a thin thread-safe in-memory wrapper that
  looks up the policy, holds one :class:`SubmissionUsage` per
  ``(epoch digest, submission digest)`` and swaps in the new usage the core
  returns. :class:`LedgerUsage` exports and restores its whole state.

Keys are digests only; no document or error ever carries a submitted value.
"""

from __future__ import annotations

import bisect
import itertools
import math
import threading
import types
from collections.abc import Callable, Container, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from sealeval.canonical import decode, digest_openmed, encode_openmed, is_digest
from sealeval.errors import CanonicalError, SessionError

__all__ = [
    "APPROVAL_SCHEMA",
    "DECISION_SCHEMA",
    "FEEDBACK_LEVELS",
    "LEDGER_USAGE_SCHEMA",
    "MAX_COUNT",
    "MAX_LIMIT",
    "POLICY_SCHEMA",
    "REASON_CODES",
    "SNAPSHOT_SCHEMA",
    "USAGE_SCHEMA",
    "FailureApproval",
    "FeedbackBudgetDecision",
    "FeedbackBudgetError",
    "FeedbackBudgetLedger",
    "FeedbackBudgetPolicy",
    "FeedbackBudgetSnapshot",
    "LedgerUsage",
    "SubmissionUsage",
    "attempt_limit",
    "budget_snapshot",
    "coarse_band",
    "decide_failure_approval",
    "decide_official_attempt",
]

POLICY_SCHEMA: Final = "openmed.eval.feedback_budget_policy.v1"
DECISION_SCHEMA: Final = "openmed.eval.feedback_budget_decision.v1"
SNAPSHOT_SCHEMA: Final = "openmed.eval.feedback_budget_snapshot.v1"
APPROVAL_SCHEMA: Final = "openmed.eval.failure_approval.v1"
USAGE_SCHEMA: Final = "sealeval.feedback_budget_usage.v1"
LEDGER_USAGE_SCHEMA: Final = "sealeval.feedback_budget_ledger_usage.v1"
#: Feedback levels of a decision, most to least informative.
FEEDBACK_LEVELS: Final = ("detailed", "coarse", "none")
#: Reason codes of a decision: accepted, denied.
REASON_CODES: Final = ("attempt_recorded", "rerun_budget_exhausted")
APPROVAL_REASON: Final = "failure_approved"
#: Largest accepted ``detailed_feedback_limit`` / ``rerun_limit`` (sealeval bound).
MAX_LIMIT: Final = 2**31 - 1
#: Largest count accepted in any document (exactly representable in binary64).
MAX_COUNT: Final = 2**53 - 1

_POLICY_KEYS: Final = frozenset(
    {
        "coarse_score_boundaries",
        "detailed_feedback_limit",
        "epoch_digest",
        "rerun_limit",
        "schema_version",
    }
)
_USAGE_KEYS: Final = frozenset(
    {
        "approved_failures",
        "detailed_feedback_used",
        "infrastructure_failure_digests",
        "official_attempts",
        "schema_version",
        "scored_attempts",
    }
)
_LEDGER_USAGE_KEYS: Final = frozenset({"entries", "schema_version"})
_ENTRY_KEYS: Final = frozenset({"epoch_digest", "submission_digest", "usage"})


class FeedbackBudgetError(SessionError):
    """Refusal of the feedback budget policy, ledger or usage documents."""

    module = "sealeval.session.budget"
    field_in_message = True
    codes = frozenset(
        {
            # openmed wire codes
            "unsupported_version",
            "invalid_digest",
            "invalid",
            "invalid_sequence",
            "empty",
            "invalid_boundary",
            "not_strictly_increasing",
            "invalid_policy",
            "duplicate_epoch",
            "unknown",
            "require_exactly_one",
            "already_recorded",
            "not_recorded",
            "already_approved",
            "already_used",
            # sealeval additions (documents, persistence, consistency)
            "invalid_document",
            "unknown_field",
            "missing_field",
            "invalid_mapping",
            "duplicate_entry",
            "inconsistent",
            "policy_mismatch",
            "unknown_epoch",
        }
    )


# ---------------------------------------------------------------------------
# Value checks


def _is_sequence(value: object) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes | bytearray)


def _materialize(value: object, field_name: str) -> tuple[Any, ...]:
    """Copy a sequence into a tuple; hostile sequences become ``invalid_sequence``."""
    if not _is_sequence(value):
        raise FeedbackBudgetError("invalid_sequence", field_name)
    try:
        return tuple(value)  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - a raising __iter__ must not leak its message
        raise FeedbackBudgetError("invalid_sequence", field_name) from None


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _as_float(value: int | float) -> float | None:
    """Return the exact float of a finite int/float, or ``None`` when impossible."""
    if isinstance(value, int):
        try:
            return float(int.__int__(value))
        except OverflowError:
            return None
    number = float.__float__(value)
    return number if math.isfinite(number) else None


def _check_score(value: object) -> float:
    """Return the score as a float; refuse anything but a finite number in [0, 1]."""
    if not _is_number(value):
        raise FeedbackBudgetError("invalid", "score")
    number = _as_float(value)  # type: ignore[arg-type]
    if number is None or not 0.0 <= number <= 1.0:
        raise FeedbackBudgetError("invalid", "score")
    return number


def _check_boundaries(value: object) -> tuple[float, ...]:
    items = _materialize(value, "coarse_score_boundaries")
    if not items:
        raise FeedbackBudgetError("empty", "coarse_score_boundaries")
    floats: list[float] = []
    for item in items:
        number = _as_float(item) if _is_number(item) else None
        if number is None or not 0.0 < number < 1.0:
            raise FeedbackBudgetError("invalid_boundary", "coarse_score_boundaries")
        floats.append(number)
    if any(low >= high for low, high in itertools.pairwise(floats)):
        raise FeedbackBudgetError("not_strictly_increasing", "coarse_score_boundaries")
    return tuple(floats)


def _check_limit(value: object, field_name: str) -> int:
    if type(value) is not int or not 0 <= value <= MAX_LIMIT:
        raise FeedbackBudgetError("invalid", field_name)
    return value


def _check_count(value: object, field_name: str) -> int:
    if type(value) is not int or not 0 <= value <= MAX_COUNT:
        raise FeedbackBudgetError("invalid", field_name)
    return value


def _check_schema(value: object, expected: str, field_name: str) -> None:
    if type(value) is not str or value != expected:
        raise FeedbackBudgetError("unsupported_version", field_name)


def _check_digest(value: object, field_name: str) -> str:
    if not is_digest(value):
        raise FeedbackBudgetError("invalid_digest", field_name)
    return value  # type: ignore[return-value]


def _check_keys(document: object, keys: frozenset[str], name: str) -> Mapping[str, Any]:
    """Refuse a non-mapping, unknown keys, then missing keys (alphabetical)."""
    if not isinstance(document, Mapping):
        raise FeedbackBudgetError("invalid_document", name)
    if any(key not in keys for key in document):
        raise FeedbackBudgetError("unknown_field", name)
    for key in sorted(keys):
        if key not in document:
            raise FeedbackBudgetError("missing_field", f"{name}.{key}")
    return document


_T = TypeVar("_T")


def _parse_json(data: bytes | str, name: str, build: Callable[[object], _T]) -> _T:
    try:
        document = decode(data)
    except CanonicalError:
        raise FeedbackBudgetError("invalid_document", name) from None
    return build(document)


def coarse_band(boundaries: object, score: object) -> int:
    """Return the coarse band of ``score``: the number of boundaries ``<=`` it.

    A score equal to a boundary falls in the upper band (right bisection):
    with boundaries ``(0.5, 0.8)``, ``0.5 -> 1`` and ``0.8 -> 2``.

    Raises:
        FeedbackBudgetError: ``coarse_score_boundaries: <code>`` as for a
            policy, or ``score: invalid``.
    """
    return bisect.bisect_right(_check_boundaries(boundaries), _check_score(score))


# ---------------------------------------------------------------------------
# Policy


@dataclass(frozen=True, slots=True)
class FeedbackBudgetPolicy:
    """How much score information one submission may get in one benchmark epoch.

    ``coarse_score_boundaries`` is stored as a tuple of floats. Invalid
    policies cannot exist: construction checks, in order, the schema, the
    epoch digest, both limits and the boundaries.
    """

    epoch_digest: str
    detailed_feedback_limit: int
    rerun_limit: int
    coarse_score_boundaries: tuple[float, ...]
    schema_version: str = POLICY_SCHEMA

    def __post_init__(self) -> None:
        """Validate in the specified order and normalise the boundaries."""
        _check_schema(self.schema_version, POLICY_SCHEMA, "schema_version")
        _check_digest(self.epoch_digest, "epoch_digest")
        _check_limit(self.detailed_feedback_limit, "detailed_feedback_limit")
        _check_limit(self.rerun_limit, "rerun_limit")
        boundaries = _check_boundaries(self.coarse_score_boundaries)
        object.__setattr__(self, "coarse_score_boundaries", boundaries)

    def coarse_band(self, score: object) -> int:
        """Return the coarse band of a score under this policy (see :func:`coarse_band`)."""
        return bisect.bisect_right(self.coarse_score_boundaries, _check_score(score))

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh wire document."""
        return {
            "coarse_score_boundaries": list(self.coarse_score_boundaries),
            "detailed_feedback_limit": self.detailed_feedback_limit,
            "epoch_digest": self.epoch_digest,
            "rerun_limit": self.rerun_limit,
            "schema_version": self.schema_version,
        }

    def to_json(self) -> str:
        """Return the canonical JSON text (openmed profile)."""
        return encode_openmed(self.to_dict())

    def digest(self) -> str:
        """Return ``sha256:<hex>`` of the canonical policy document."""
        return digest_openmed(self.to_dict())

    @classmethod
    def from_dict(cls, document: object) -> FeedbackBudgetPolicy:
        """Build from a parsed document with exactly the five policy keys."""
        fields = _check_keys(document, _POLICY_KEYS, "policy")
        return cls(
            epoch_digest=fields["epoch_digest"],
            detailed_feedback_limit=fields["detailed_feedback_limit"],
            rerun_limit=fields["rerun_limit"],
            coarse_score_boundaries=fields["coarse_score_boundaries"],
            schema_version=fields["schema_version"],
        )

    @classmethod
    def from_json(cls, data: bytes | str) -> FeedbackBudgetPolicy:
        """Strictly parse a policy document (``policy: invalid_document`` if not JSON)."""
        return _parse_json(data, "policy", cls.from_dict)


# ---------------------------------------------------------------------------
# Usage (the persisted state of one (epoch, submission) pair)


@dataclass(frozen=True, slots=True)
class SubmissionUsage:
    """Budget usage of one submission in one epoch: the state the core transforms.

    Attributes:
        official_attempts: accepted official attempts (scored + failed).
        scored_attempts: accepted attempts that carried a score.
        detailed_feedback_used: scored attempts answered with the exact score.
        infrastructure_failure_digests: recorded failure digests, in
            recording order, no repeats.
        approved_failures: read-only map failure digest -> the operator
            approval digest that approved it, in approval order.
    """

    official_attempts: int = 0
    scored_attempts: int = 0
    detailed_feedback_used: int = 0
    infrastructure_failure_digests: tuple[str, ...] = ()
    approved_failures: Mapping[str, str] = field(default_factory=lambda: types.MappingProxyType({}))
    schema_version: str = USAGE_SCHEMA

    def __post_init__(self) -> None:
        """Validate every field and the invariants the core maintains."""
        _check_schema(self.schema_version, USAGE_SCHEMA, "usage.schema_version")
        official = _check_count(self.official_attempts, "usage.official_attempts")
        scored = _check_count(self.scored_attempts, "usage.scored_attempts")
        detailed = _check_count(self.detailed_feedback_used, "usage.detailed_feedback_used")
        failures = _materialize(
            self.infrastructure_failure_digests, "usage.infrastructure_failure_digests"
        )
        for digest in failures:
            _check_digest(digest, "usage.infrastructure_failure_digests")
        if len(set(failures)) != len(failures):
            raise FeedbackBudgetError("already_recorded", "usage.infrastructure_failure_digests")
        approved = self._checked_approvals(frozenset(failures))
        if official != scored + len(failures) or detailed > scored:
            raise FeedbackBudgetError("inconsistent", "usage")
        object.__setattr__(self, "infrastructure_failure_digests", failures)
        object.__setattr__(self, "approved_failures", types.MappingProxyType(approved))

    def _checked_approvals(self, recorded: frozenset[str]) -> dict[str, str]:
        source = self.approved_failures
        if not isinstance(source, Mapping):
            raise FeedbackBudgetError("invalid_mapping", "usage.approved_failures")
        try:
            pairs = list(source.items())
        except Exception:  # noqa: BLE001 - a raising mapping must not leak its message
            raise FeedbackBudgetError("invalid_mapping", "usage.approved_failures") from None
        approved: dict[str, str] = {}
        for failure, approval in pairs:
            _check_digest(failure, "usage.approved_failures")
            _check_digest(approval, "usage.approved_failures")
            if failure not in recorded:
                raise FeedbackBudgetError("not_recorded", "usage.approved_failures")
            approved[failure] = approval
        if len(approved) != len(pairs):
            raise FeedbackBudgetError("already_approved", "usage.approved_failures")
        if len(set(approved.values())) != len(approved):
            raise FeedbackBudgetError("already_used", "usage.approved_failures")
        return approved

    @property
    def infrastructure_failures(self) -> int:
        """Return the number of recorded infrastructure failures."""
        return len(self.infrastructure_failure_digests)

    @property
    def approved_failure_replacements(self) -> int:
        """Return the number of approved failures (each adds one allowed attempt)."""
        return len(self.approved_failures)

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh persistence document (``sealeval.feedback_budget_usage.v1``)."""
        return {
            "approved_failures": dict(self.approved_failures),
            "detailed_feedback_used": self.detailed_feedback_used,
            "infrastructure_failure_digests": list(self.infrastructure_failure_digests),
            "official_attempts": self.official_attempts,
            "schema_version": self.schema_version,
            "scored_attempts": self.scored_attempts,
        }

    def to_json(self) -> str:
        """Return the canonical JSON text (openmed profile)."""
        return encode_openmed(self.to_dict())

    @classmethod
    def from_dict(cls, document: object) -> SubmissionUsage:
        """Build from a parsed usage document with exactly its six keys.

        The approval order of a document is its key order; canonical text
        sorts keys, so a round trip through canonical JSON keeps the set of
        approvals but not their order.
        """
        fields = _check_keys(document, _USAGE_KEYS, "usage")
        return cls(
            official_attempts=fields["official_attempts"],
            scored_attempts=fields["scored_attempts"],
            detailed_feedback_used=fields["detailed_feedback_used"],
            infrastructure_failure_digests=fields["infrastructure_failure_digests"],
            approved_failures=fields["approved_failures"],
            schema_version=fields["schema_version"],
        )

    @classmethod
    def from_json(cls, data: bytes | str) -> SubmissionUsage:
        """Strictly parse a usage document (``usage: invalid_document`` if not JSON)."""
        return _parse_json(data, "usage", cls.from_dict)


_EMPTY_USAGE: Final = SubmissionUsage()


# ---------------------------------------------------------------------------
# Result documents


def _check_optional_count(value: object, field_name: str) -> None:
    if value is not None:
        _check_count(value, field_name)


@dataclass(frozen=True, slots=True)
class FeedbackBudgetDecision:
    """The answer to one official attempt: accepted (with feedback) or denied."""

    accepted: bool
    reason_code: str
    feedback_level: str
    official_attempt_number: int | None
    detailed_score: float | None
    coarse_band: int | None
    official_attempts: int
    scored_attempts: int
    attempts_remaining: int
    detailed_feedback_remaining: int
    schema_version: str = DECISION_SCHEMA

    def __post_init__(self) -> None:
        """Refuse a decision the ledger could never have produced."""
        _check_schema(self.schema_version, DECISION_SCHEMA, "decision.schema_version")
        if type(self.accepted) is not bool:
            raise FeedbackBudgetError("invalid", "decision.accepted")
        if type(self.reason_code) is not str or self.reason_code not in REASON_CODES:
            raise FeedbackBudgetError("invalid", "decision.reason_code")
        if type(self.feedback_level) is not str or self.feedback_level not in FEEDBACK_LEVELS:
            raise FeedbackBudgetError("invalid", "decision.feedback_level")
        for name in (
            "official_attempts",
            "scored_attempts",
            "attempts_remaining",
            "detailed_feedback_remaining",
        ):
            _check_count(getattr(self, name), f"decision.{name}")
        _check_optional_count(self.official_attempt_number, "decision.official_attempt_number")
        _check_optional_count(self.coarse_band, "decision.coarse_band")
        score = self.detailed_score
        if score is not None and (type(score) is not float or not 0.0 <= score <= 1.0):
            raise FeedbackBudgetError("invalid", "decision.detailed_score")
        if not self._consistent():
            raise FeedbackBudgetError("inconsistent", "decision")

    def _consistent(self) -> bool:
        level = self.feedback_level
        shape = (
            (self.detailed_score is not None) == (level == "detailed")
            and (self.coarse_band is not None) == (level == "coarse")
            and self.scored_attempts <= self.official_attempts
        )
        if not self.accepted:
            return (
                shape
                and self.reason_code == "rerun_budget_exhausted"
                and level == "none"
                and self.official_attempt_number is None
                and self.attempts_remaining == 0
            )
        return (
            shape
            and self.reason_code == "attempt_recorded"
            and self.official_attempt_number == self.official_attempts
            and self.official_attempts >= 1
            and (level == "none" or self.scored_attempts >= 1)
        )

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh wire document."""
        return {
            "accepted": self.accepted,
            "attempts_remaining": self.attempts_remaining,
            "coarse_band": self.coarse_band,
            "detailed_feedback_remaining": self.detailed_feedback_remaining,
            "detailed_score": self.detailed_score,
            "feedback_level": self.feedback_level,
            "official_attempt_number": self.official_attempt_number,
            "official_attempts": self.official_attempts,
            "reason_code": self.reason_code,
            "schema_version": self.schema_version,
            "scored_attempts": self.scored_attempts,
        }

    def to_json(self) -> str:
        """Return the canonical JSON text (openmed profile)."""
        return encode_openmed(self.to_dict())


@dataclass(frozen=True, slots=True)
class FeedbackBudgetSnapshot:
    """Counters of one (epoch, submission) pair; no digests, no scores."""

    official_attempts: int
    scored_attempts: int
    detailed_feedback_used: int
    detailed_feedback_remaining: int
    attempts_remaining: int
    infrastructure_failures: int
    approved_failure_replacements: int
    schema_version: str = SNAPSHOT_SCHEMA

    def __post_init__(self) -> None:
        """Refuse a snapshot the ledger could never have produced."""
        _check_schema(self.schema_version, SNAPSHOT_SCHEMA, "snapshot.schema_version")
        for name in (
            "official_attempts",
            "scored_attempts",
            "detailed_feedback_used",
            "detailed_feedback_remaining",
            "attempts_remaining",
            "infrastructure_failures",
            "approved_failure_replacements",
        ):
            _check_count(getattr(self, name), f"snapshot.{name}")
        if (
            self.official_attempts != self.scored_attempts + self.infrastructure_failures
            or self.detailed_feedback_used > self.scored_attempts
            or self.approved_failure_replacements > self.infrastructure_failures
        ):
            raise FeedbackBudgetError("inconsistent", "snapshot")

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh wire document."""
        return {
            "approved_failure_replacements": self.approved_failure_replacements,
            "attempts_remaining": self.attempts_remaining,
            "detailed_feedback_remaining": self.detailed_feedback_remaining,
            "detailed_feedback_used": self.detailed_feedback_used,
            "infrastructure_failures": self.infrastructure_failures,
            "official_attempts": self.official_attempts,
            "schema_version": self.schema_version,
            "scored_attempts": self.scored_attempts,
        }

    def to_json(self) -> str:
        """Return the canonical JSON text (openmed profile)."""
        return encode_openmed(self.to_dict())

    def digest(self) -> str:
        """Return ``sha256:<hex>`` of the canonical snapshot document."""
        return digest_openmed(self.to_dict())


@dataclass(frozen=True, slots=True)
class FailureApproval:
    """Result of approving one infrastructure failure (one more allowed attempt)."""

    approved_failure_replacements: int
    attempts_remaining: int
    approved: bool = True
    reason_code: str = APPROVAL_REASON
    schema_version: str = APPROVAL_SCHEMA

    def __post_init__(self) -> None:
        """Refuse an approval the ledger could never have produced."""
        _check_schema(self.schema_version, APPROVAL_SCHEMA, "approval.schema_version")
        if self.approved is not True:
            raise FeedbackBudgetError("invalid", "approval.approved")
        if type(self.reason_code) is not str or self.reason_code != APPROVAL_REASON:
            raise FeedbackBudgetError("invalid", "approval.reason_code")
        replacements = _check_count(
            self.approved_failure_replacements, "approval.approved_failure_replacements"
        )
        _check_count(self.attempts_remaining, "approval.attempts_remaining")
        if replacements < 1:
            raise FeedbackBudgetError("inconsistent", "approval")

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh wire document."""
        return {
            "approved": self.approved,
            "approved_failure_replacements": self.approved_failure_replacements,
            "attempts_remaining": self.attempts_remaining,
            "reason_code": self.reason_code,
            "schema_version": self.schema_version,
        }

    def to_json(self) -> str:
        """Return the canonical JSON text (openmed profile)."""
        return encode_openmed(self.to_dict())


# ---------------------------------------------------------------------------
# Pure core: (policy, usage, request) -> (document, new usage)


def attempt_limit(policy: FeedbackBudgetPolicy, usage: SubmissionUsage) -> int:
    """Return 1 + rerun limit + number of approved failures."""
    return 1 + policy.rerun_limit + usage.approved_failure_replacements


def _attempts_remaining(policy: FeedbackBudgetPolicy, usage: SubmissionUsage) -> int:
    return max(0, attempt_limit(policy, usage) - usage.official_attempts)


def _detail_remaining(policy: FeedbackBudgetPolicy, usage: SubmissionUsage) -> int:
    return max(0, policy.detailed_feedback_limit - usage.detailed_feedback_used)


def _check_state(policy: object, usage: object) -> None:
    """Refuse a foreign policy/usage object or a usage no policy run could produce."""
    if not isinstance(policy, FeedbackBudgetPolicy):
        raise FeedbackBudgetError("invalid_policy", "policy")
    if not isinstance(usage, SubmissionUsage):
        raise FeedbackBudgetError("invalid_document", "usage")
    # Detail is spent on the first scored attempts, so the count is determined,
    # and the attempt limit only ever grows.
    if usage.detailed_feedback_used != min(
        usage.scored_attempts, policy.detailed_feedback_limit
    ) or usage.official_attempts > attempt_limit(policy, usage):
        raise FeedbackBudgetError("policy_mismatch", "usage")


def budget_snapshot(policy: FeedbackBudgetPolicy, usage: SubmissionUsage) -> FeedbackBudgetSnapshot:
    """Return the snapshot document of ``usage`` under ``policy`` (pure)."""
    _check_state(policy, usage)
    return FeedbackBudgetSnapshot(
        official_attempts=usage.official_attempts,
        scored_attempts=usage.scored_attempts,
        detailed_feedback_used=usage.detailed_feedback_used,
        detailed_feedback_remaining=_detail_remaining(policy, usage),
        attempts_remaining=_attempts_remaining(policy, usage),
        infrastructure_failures=usage.infrastructure_failures,
        approved_failure_replacements=usage.approved_failure_replacements,
    )


def decide_official_attempt(
    policy: FeedbackBudgetPolicy,
    usage: SubmissionUsage,
    *,
    score: object = None,
    infrastructure_failure_digest: object = None,
) -> tuple[FeedbackBudgetDecision, SubmissionUsage]:
    """Decide one official attempt (pure): return the decision and the new usage.

    Exactly one of ``score`` (an int/float in [0, 1]) and
    ``infrastructure_failure_digest`` must be given. A denial
    (``rerun_budget_exhausted``) is a decision, not an error, and returns
    ``usage`` unchanged.

    Raises:
        FeedbackBudgetError: ``attempt_outcome: require_exactly_one``,
            ``score: invalid``, ``infrastructure_failure_digest:
            invalid_digest`` or ``...: already_recorded`` (this order), and
            ``policy: invalid_policy`` / ``usage: invalid_document`` /
            ``usage: policy_mismatch`` for a state no ledger could hold.
    """
    _check_state(policy, usage)
    if (score is None) == (infrastructure_failure_digest is None):
        raise FeedbackBudgetError("require_exactly_one", "attempt_outcome")
    exact = _check_score(score) if score is not None else None
    failure = (
        _check_digest(infrastructure_failure_digest, "infrastructure_failure_digest")
        if exact is None
        else None
    )
    if _attempts_remaining(policy, usage) == 0:
        denial = FeedbackBudgetDecision(
            accepted=False,
            reason_code="rerun_budget_exhausted",
            feedback_level="none",
            official_attempt_number=None,
            detailed_score=None,
            coarse_band=None,
            official_attempts=usage.official_attempts,
            scored_attempts=usage.scored_attempts,
            attempts_remaining=0,
            detailed_feedback_remaining=_detail_remaining(policy, usage),
        )
        return denial, usage
    level, detailed_score, band = "none", None, None
    scored, detailed, failures = (
        usage.scored_attempts,
        usage.detailed_feedback_used,
        usage.infrastructure_failure_digests,
    )
    if failure is not None:
        if failure in failures:
            raise FeedbackBudgetError("already_recorded", "infrastructure_failure_digest")
        failures = (*failures, failure)
    else:
        assert exact is not None  # exactly one outcome was given
        scored += 1
        if detailed < policy.detailed_feedback_limit:
            detailed += 1
            level, detailed_score = "detailed", exact
        else:
            level, band = "coarse", bisect.bisect_right(policy.coarse_score_boundaries, exact)
    new_usage = SubmissionUsage(
        official_attempts=usage.official_attempts + 1,
        scored_attempts=scored,
        detailed_feedback_used=detailed,
        infrastructure_failure_digests=failures,
        approved_failures=usage.approved_failures,
    )
    decision = FeedbackBudgetDecision(
        accepted=True,
        reason_code="attempt_recorded",
        feedback_level=level,
        official_attempt_number=new_usage.official_attempts,
        detailed_score=detailed_score,
        coarse_band=band,
        official_attempts=new_usage.official_attempts,
        scored_attempts=new_usage.scored_attempts,
        attempts_remaining=_attempts_remaining(policy, new_usage),
        detailed_feedback_remaining=_detail_remaining(policy, new_usage),
    )
    return decision, new_usage


def decide_failure_approval(
    policy: FeedbackBudgetPolicy,
    usage: SubmissionUsage,
    *,
    failure_digest: object,
    operator_approval_digest: object,
    used_approval_digests: Container[str],
) -> tuple[FailureApproval, SubmissionUsage]:
    """Approve one recorded infrastructure failure (pure).

    ``used_approval_digests`` answers "was this approval digest already used
    anywhere in the ledger?" (a set, or a store-backed container). The
    caller must add ``operator_approval_digest`` to it when it commits the
    returned usage.

    Raises:
        FeedbackBudgetError: ``failure_digest: invalid_digest``,
            ``operator_approval_digest: invalid_digest``,
            ``failure_digest: not_recorded``, ``failure_digest:
            already_approved``, ``operator_approval_digest: already_used``
            (this order), or the state refusals of
            :func:`decide_official_attempt`.
    """
    _check_state(policy, usage)
    failure = _check_digest(failure_digest, "failure_digest")
    approval = _check_digest(operator_approval_digest, "operator_approval_digest")
    if failure not in usage.infrastructure_failure_digests:
        raise FeedbackBudgetError("not_recorded", "failure_digest")
    if failure in usage.approved_failures:
        raise FeedbackBudgetError("already_approved", "failure_digest")
    if approval in used_approval_digests or approval in usage.approved_failures.values():
        raise FeedbackBudgetError("already_used", "operator_approval_digest")
    new_usage = SubmissionUsage(
        official_attempts=usage.official_attempts,
        scored_attempts=usage.scored_attempts,
        detailed_feedback_used=usage.detailed_feedback_used,
        infrastructure_failure_digests=usage.infrastructure_failure_digests,
        approved_failures={**usage.approved_failures, failure: approval},
    )
    result = FailureApproval(
        approved_failure_replacements=new_usage.approved_failure_replacements,
        attempts_remaining=_attempts_remaining(policy, new_usage),
    )
    return result, new_usage


# ---------------------------------------------------------------------------
# Whole-ledger state (for persistence and restore)


@dataclass(frozen=True, slots=True)
class LedgerUsage:
    """Every pair's usage: what a ledger exports and is restored from.

    ``entries`` is a read-only map ``(epoch digest, submission digest) ->``
    :class:`SubmissionUsage`, sorted by key. Operator approval digests are
    unique across the whole ledger; the ledger-wide set of used approvals is
    the union of every entry's approvals.
    """

    entries: Mapping[tuple[str, str], SubmissionUsage] = field(
        default_factory=lambda: types.MappingProxyType({})
    )
    schema_version: str = LEDGER_USAGE_SCHEMA

    def __post_init__(self) -> None:
        """Validate keys, values and ledger-wide approval uniqueness."""
        _check_schema(self.schema_version, LEDGER_USAGE_SCHEMA, "ledger_usage.schema_version")
        if not isinstance(self.entries, Mapping):
            raise FeedbackBudgetError("invalid_mapping", "ledger_usage.entries")
        try:
            pairs = list(self.entries.items())
        except Exception:  # noqa: BLE001 - a raising mapping must not leak its message
            raise FeedbackBudgetError("invalid_mapping", "ledger_usage.entries") from None
        checked: dict[tuple[str, str], SubmissionUsage] = {}
        approvals: set[str] = set()
        for key, usage in pairs:
            if type(key) is not tuple or len(key) != 2:
                raise FeedbackBudgetError("invalid_document", "ledger_usage.entries")
            _check_digest(key[0], "ledger_usage.entries.epoch_digest")
            _check_digest(key[1], "ledger_usage.entries.submission_digest")
            if not isinstance(usage, SubmissionUsage):
                raise FeedbackBudgetError("invalid_document", "ledger_usage.entries")
            if not approvals.isdisjoint(usage.approved_failures.values()):
                raise FeedbackBudgetError("already_used", "ledger_usage.entries")
            approvals.update(usage.approved_failures.values())
            checked[key] = usage
        ordered = dict(sorted(checked.items()))
        object.__setattr__(self, "entries", types.MappingProxyType(ordered))

    def used_approval_digests(self) -> frozenset[str]:
        """Return every operator approval digest used in the ledger."""
        return frozenset(
            approval
            for usage in self.entries.values()
            for approval in usage.approved_failures.values()
        )

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh persistence document (``sealeval.feedback_budget_ledger_usage.v1``)."""
        return {
            "entries": [
                {"epoch_digest": epoch, "submission_digest": submission, "usage": usage.to_dict()}
                for (epoch, submission), usage in self.entries.items()
            ],
            "schema_version": self.schema_version,
        }

    def to_json(self) -> str:
        """Return the canonical JSON text (openmed profile)."""
        return encode_openmed(self.to_dict())

    @classmethod
    def from_dict(cls, document: object) -> LedgerUsage:
        """Build from a parsed ledger usage document; repeated pairs are refused."""
        fields = _check_keys(document, _LEDGER_USAGE_KEYS, "ledger_usage")
        _check_schema(fields["schema_version"], LEDGER_USAGE_SCHEMA, "ledger_usage.schema_version")
        entries: dict[tuple[str, str], SubmissionUsage] = {}
        for index, entry in enumerate(_materialize(fields["entries"], "ledger_usage.entries")):
            name = f"ledger_usage.entries[{index}]"
            item = _check_keys(entry, _ENTRY_KEYS, name)
            key = (
                _check_digest(item["epoch_digest"], f"{name}.epoch_digest"),
                _check_digest(item["submission_digest"], f"{name}.submission_digest"),
            )
            if key in entries:
                raise FeedbackBudgetError("duplicate_entry", name)
            entries[key] = SubmissionUsage.from_dict(item["usage"])
        return cls(entries=entries)

    @classmethod
    def from_json(cls, data: bytes | str) -> LedgerUsage:
        """Strictly parse a ledger usage document."""
        return _parse_json(data, "ledger_usage", cls.from_dict)


# ---------------------------------------------------------------------------
# In-memory ledger: a thin, thread-safe wrapper around the pure core


class FeedbackBudgetLedger:
    """Thread-safe in-memory ledger of official attempts, keyed by digests only.

    Every operation looks up the epoch's policy, reads the pair's
    :class:`SubmissionUsage`, runs the pure core and stores the usage it
    returns, all under one lock. Usage lives only in memory: export it with
    :meth:`export_usage` and pass it back as ``usage`` to restore.
    """

    __slots__ = ("_lock", "_policies", "_usage", "_used_approvals")

    _policies: Mapping[str, FeedbackBudgetPolicy]
    _usage: dict[tuple[str, str], SubmissionUsage]
    _used_approvals: set[str]

    def __init__(self, policies: object, usage: LedgerUsage | None = None) -> None:
        """Build a ledger from a non-empty sequence of policies with distinct epochs.

        Raises:
            FeedbackBudgetError: ``policies: invalid_sequence``, ``policies:
                invalid_policy``, ``policies: duplicate_epoch``, ``policies:
                empty``; for ``usage``: ``usage: invalid_document``, ``usage:
                unknown_epoch``, ``usage: policy_mismatch``.
        """
        items = _materialize(policies, "policies")
        by_epoch: dict[str, FeedbackBudgetPolicy] = {}
        for policy in items:
            if not isinstance(policy, FeedbackBudgetPolicy):
                raise FeedbackBudgetError("invalid_policy", "policies")
            if policy.epoch_digest in by_epoch:
                raise FeedbackBudgetError("duplicate_epoch", "policies")
            by_epoch[policy.epoch_digest] = policy
        if not by_epoch:
            raise FeedbackBudgetError("empty", "policies")
        restored = LedgerUsage() if usage is None else usage
        if not isinstance(restored, LedgerUsage):
            raise FeedbackBudgetError("invalid_document", "usage")
        for (epoch, _submission), entry in restored.entries.items():
            if epoch not in by_epoch:
                raise FeedbackBudgetError("unknown_epoch", "usage")
            _check_state(by_epoch[epoch], entry)
        self._lock = threading.Lock()
        self._policies = types.MappingProxyType(by_epoch)
        self._usage = dict(restored.entries)
        self._used_approvals = set(restored.used_approval_digests())

    def __repr__(self) -> str:
        """Show counts only."""
        return f"FeedbackBudgetLedger(policies={len(self._policies)}, pairs={len(self._usage)})"

    @property
    def policies(self) -> tuple[FeedbackBudgetPolicy, ...]:
        """Return the policies in construction order."""
        return tuple(self._policies.values())

    def policy_for(self, epoch_digest: object) -> FeedbackBudgetPolicy:
        """Return the policy of an epoch.

        Raises:
            FeedbackBudgetError: ``epoch_digest: invalid_digest`` or
                ``epoch_digest: unknown``.
        """
        epoch = _check_digest(epoch_digest, "epoch_digest")
        policy = self._policies.get(epoch)
        if policy is None:
            raise FeedbackBudgetError("unknown", "epoch_digest")
        return policy

    def _key(self, epoch_digest: object, submission_digest: object) -> tuple[str, str]:
        policy = self.policy_for(epoch_digest)
        submission = _check_digest(submission_digest, "submission_digest")
        return policy.epoch_digest, submission

    def usage(self, epoch_digest: object, submission_digest: object) -> SubmissionUsage:
        """Return a pair's usage (all zero for an unknown submission)."""
        key = self._key(epoch_digest, submission_digest)
        with self._lock:
            return self._usage.get(key, _EMPTY_USAGE)

    def snapshot(self, epoch_digest: object, submission_digest: object) -> FeedbackBudgetSnapshot:
        """Return the snapshot document of a pair.

        Raises:
            FeedbackBudgetError: epoch lookup errors, ``submission_digest:
                invalid_digest``.
        """
        key = self._key(epoch_digest, submission_digest)
        with self._lock:
            usage = self._usage.get(key, _EMPTY_USAGE)
        return budget_snapshot(self._policies[key[0]], usage)

    def record_official_attempt(
        self,
        epoch_digest: object,
        submission_digest: object,
        *,
        score: object = None,
        infrastructure_failure_digest: object = None,
    ) -> FeedbackBudgetDecision:
        """Record one official attempt atomically and return its decision.

        Raises:
            FeedbackBudgetError: epoch lookup errors, ``submission_digest:
                invalid_digest``, then the refusals of
                :func:`decide_official_attempt`.
        """
        key = self._key(epoch_digest, submission_digest)
        policy = self._policies[key[0]]
        with self._lock:
            decision, usage = decide_official_attempt(
                policy,
                self._usage.get(key, _EMPTY_USAGE),
                score=score,
                infrastructure_failure_digest=infrastructure_failure_digest,
            )
            if decision.accepted:
                self._usage[key] = usage
        return decision

    def approve_infrastructure_failure(
        self,
        epoch_digest: object,
        submission_digest: object,
        failure_digest: object,
        operator_approval_digest: object,
    ) -> FailureApproval:
        """Approve a recorded infrastructure failure: one more allowed attempt.

        Raises:
            FeedbackBudgetError: epoch lookup errors, ``submission_digest:
                invalid_digest``, then the refusals of
                :func:`decide_failure_approval`.
        """
        key = self._key(epoch_digest, submission_digest)
        policy = self._policies[key[0]]
        with self._lock:
            approval, usage = decide_failure_approval(
                policy,
                self._usage.get(key, _EMPTY_USAGE),
                failure_digest=failure_digest,
                operator_approval_digest=operator_approval_digest,
                used_approval_digests=self._used_approvals,
            )
            self._usage[key] = usage
            self._used_approvals.update(usage.approved_failures.values())
        return approval

    def export_usage(self) -> LedgerUsage:
        """Return an immutable copy of every pair's usage (for persistence)."""
        with self._lock:
            return LedgerUsage(entries=dict(self._usage))
