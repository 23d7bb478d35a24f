"""Result documents: the decision, the snapshot and the failure approval.

``openmed.eval.feedback_budget_decision.v1``,
``openmed.eval.feedback_budget_snapshot.v1`` and
``openmed.eval.failure_approval.v1``; each validates its own consistency.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sealeval.canonical import digest_openmed, encode_openmed
from sealeval.session.budget.vocabulary import (
    APPROVAL_REASON,
    APPROVAL_SCHEMA,
    DECISION_SCHEMA,
    FEEDBACK_LEVELS,
    REASON_CODES,
    SNAPSHOT_SCHEMA,
    FeedbackBudgetError,
    check_count,
    check_schema,
)

__all__ = ["FailureApproval", "FeedbackBudgetDecision", "FeedbackBudgetSnapshot"]

# ---------------------------------------------------------------------------
# Result documents


def _check_optional_count(value: object, field_name: str) -> None:
    if value is not None:
        check_count(value, field_name)


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
        check_schema(self.schema_version, DECISION_SCHEMA, "decision.schema_version")
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
            check_count(getattr(self, name), f"decision.{name}")
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
        check_schema(self.schema_version, SNAPSHOT_SCHEMA, "snapshot.schema_version")
        for name in (
            "official_attempts",
            "scored_attempts",
            "detailed_feedback_used",
            "detailed_feedback_remaining",
            "attempts_remaining",
            "infrastructure_failures",
            "approved_failure_replacements",
        ):
            check_count(getattr(self, name), f"snapshot.{name}")
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
        check_schema(self.schema_version, APPROVAL_SCHEMA, "approval.schema_version")
        if self.approved is not True:
            raise FeedbackBudgetError("invalid", "approval.approved")
        if type(self.reason_code) is not str or self.reason_code != APPROVAL_REASON:
            raise FeedbackBudgetError("invalid", "approval.reason_code")
        replacements = check_count(
            self.approved_failure_replacements, "approval.approved_failure_replacements"
        )
        check_count(self.attempts_remaining, "approval.attempts_remaining")
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
