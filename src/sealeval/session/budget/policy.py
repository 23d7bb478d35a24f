"""The per-epoch feedback budget policy (``openmed.eval.feedback_budget_policy.v1``)."""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

from sealeval.canonical import digest_openmed, encode_openmed
from sealeval.session.budget.vocabulary import (
    POLICY_KEYS,
    POLICY_SCHEMA,
    check_boundaries,
    check_digest,
    check_keys,
    check_limit,
    check_schema,
    check_score,
    parse_json,
)

__all__ = ["FeedbackBudgetPolicy"]

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
        check_schema(self.schema_version, POLICY_SCHEMA, "schema_version")
        check_digest(self.epoch_digest, "epoch_digest")
        check_limit(self.detailed_feedback_limit, "detailed_feedback_limit")
        check_limit(self.rerun_limit, "rerun_limit")
        boundaries = check_boundaries(self.coarse_score_boundaries)
        object.__setattr__(self, "coarse_score_boundaries", boundaries)

    def coarse_band(self, score: object) -> int:
        """Return the coarse band of a score under this policy (see :func:`coarse_band`)."""
        return bisect.bisect_right(self.coarse_score_boundaries, check_score(score))

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
        fields = check_keys(document, POLICY_KEYS, "policy")
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
        return parse_json(data, "policy", cls.from_dict)
