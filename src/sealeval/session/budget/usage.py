"""Budget usage: one (epoch, submission) pair's state and the whole ledger's.

:class:`SubmissionUsage` (``sealeval.feedback_budget_usage.v1``) is what a
ledger persists per pair; :class:`LedgerUsage`
(``sealeval.feedback_budget_ledger_usage.v1``) exports and restores a whole
ledger.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from sealeval.canonical import encode_openmed
from sealeval.session.budget.vocabulary import (
    ENTRY_KEYS,
    LEDGER_USAGE_KEYS,
    LEDGER_USAGE_SCHEMA,
    USAGE_KEYS,
    USAGE_SCHEMA,
    FeedbackBudgetError,
    check_count,
    check_digest,
    check_keys,
    check_schema,
    materialize,
    parse_json,
)

__all__ = ["LedgerUsage", "SubmissionUsage"]

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
        check_schema(self.schema_version, USAGE_SCHEMA, "usage.schema_version")
        official = check_count(self.official_attempts, "usage.official_attempts")
        scored = check_count(self.scored_attempts, "usage.scored_attempts")
        detailed = check_count(self.detailed_feedback_used, "usage.detailed_feedback_used")
        failures = materialize(
            self.infrastructure_failure_digests, "usage.infrastructure_failure_digests"
        )
        for digest in failures:
            check_digest(digest, "usage.infrastructure_failure_digests")
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
            check_digest(failure, "usage.approved_failures")
            check_digest(approval, "usage.approved_failures")
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
        fields = check_keys(document, USAGE_KEYS, "usage")
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
        return parse_json(data, "usage", cls.from_dict)


EMPTY_USAGE: Final = SubmissionUsage()


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
        check_schema(self.schema_version, LEDGER_USAGE_SCHEMA, "ledger_usage.schema_version")
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
            check_digest(key[0], "ledger_usage.entries.epoch_digest")
            check_digest(key[1], "ledger_usage.entries.submission_digest")
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
        fields = check_keys(document, LEDGER_USAGE_KEYS, "ledger_usage")
        check_schema(fields["schema_version"], LEDGER_USAGE_SCHEMA, "ledger_usage.schema_version")
        entries: dict[tuple[str, str], SubmissionUsage] = {}
        for index, entry in enumerate(materialize(fields["entries"], "ledger_usage.entries")):
            name = f"ledger_usage.entries[{index}]"
            item = check_keys(entry, ENTRY_KEYS, name)
            key = (
                check_digest(item["epoch_digest"], f"{name}.epoch_digest"),
                check_digest(item["submission_digest"], f"{name}.submission_digest"),
            )
            if key in entries:
                raise FeedbackBudgetError("duplicate_entry", name)
            entries[key] = SubmissionUsage.from_dict(item["usage"])
        return cls(entries=entries)

    @classmethod
    def from_json(cls, data: bytes | str) -> LedgerUsage:
        """Strictly parse a ledger usage document."""
        return parse_json(data, "ledger_usage", cls.from_dict)
