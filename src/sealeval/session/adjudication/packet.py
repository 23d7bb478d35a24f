"""Reviewer-facing blinded packets (``openmed.eval.blinded_adjudication.packet.v1``).

Packets carry rubric questions, source evidence and aliased candidate outputs,
never identities or manifest digests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sealeval._validate import decode_document
from sealeval.canonical import encode_openmed, is_digest
from sealeval.session.adjudication.ordering import (
    require_cleared_reviewer,
)
from sealeval.session.adjudication.vocabulary import (
    ALIAS_PATTERN,
    ALIASES,
    CANDIDATE_KEYS,
    PACKET_KEYS,
    PACKET_SCHEMA,
    AdjudicationError,
    check_header,
    checked_document,
    checked_evidence,
    checked_items,
    document_items,
    rubric_criteria,
)
from sealeval.session.cases import (
    MAX_CANDIDATES,
    MIN_CANDIDATES,
    ConflictOfInterestMetadata,
    RubricCriterion,
    SourceEvidence,
    is_reference,
    is_text,
)

__all__ = ["BlindedCandidate", "BlindedPacket"]

# ---------------------------------------------------------------------------
# Packets


@dataclass(frozen=True, slots=True, repr=False)
class BlindedCandidate:
    """One candidate output under its positional alias (document ``{alias, content}``)."""

    alias: str
    content: str

    def __post_init__(self) -> None:
        """Refuse a bad alias (``alias: invalid_alias``) or text (``content: invalid_text``)."""
        if type(self.alias) is not str or ALIAS_PATTERN.fullmatch(self.alias) is None:
            raise AdjudicationError("invalid_alias", "alias")
        if not is_text(self.content):
            raise AdjudicationError("invalid_text", "content")

    def __repr__(self) -> str:
        """Show the alias only."""
        return f"BlindedCandidate(alias={self.alias!r})"

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh document."""
        return {"alias": self.alias, "content": self.content}


@dataclass(frozen=True, slots=True, repr=False)
class BlindedPacket:
    """One reviewer-facing packet (``openmed.eval.blinded_adjudication.packet.v1``).

    Carries the case reference, evidence, rubric, reviewer declaration and the
    candidate outputs under aliases ``candidate-a``, ``candidate-b``, ... in slot
    order. It has no field that can hold a candidate identity or a submission
    manifest digest. Construction refuses a recused reviewer.
    """

    candidates: Sequence[BlindedCandidate]
    case_ref: str
    conflict_of_interest: ConflictOfInterestMetadata
    holdout_commitment_digest: str
    mapping_commitment: str
    packet_set_ref: str
    rubric: Sequence[RubricCriterion]
    source_evidence: Sequence[SourceEvidence]
    schema_version: str = field(default=PACKET_SCHEMA)

    def __post_init__(self) -> None:
        """Validate every field; an invalid or identity-bearing packet cannot exist."""
        check_header(
            self.schema_version,
            PACKET_SCHEMA,
            self.packet_set_ref,
            self.holdout_commitment_digest,
        )
        if not is_digest(self.mapping_commitment):
            raise AdjudicationError("invalid_digest", "mapping_commitment")
        if not is_reference(self.case_ref):
            raise AdjudicationError("invalid_reference", "case_ref")
        require_cleared_reviewer(self.conflict_of_interest)
        rubric = rubric_criteria(self.rubric)
        evidence = checked_evidence(self.source_evidence)
        candidates: tuple[BlindedCandidate, ...] = checked_items(
            self.candidates, BlindedCandidate, "candidates", 0
        )
        if not MIN_CANDIDATES <= len(candidates) <= MAX_CANDIDATES:
            raise AdjudicationError("invalid_count", "candidates")
        if any(item.alias != ALIASES[slot] for slot, item in enumerate(candidates)):
            raise AdjudicationError("invalid_alias", "alias")
        object.__setattr__(self, "candidates", candidates)
        object.__setattr__(self, "rubric", rubric)
        object.__setattr__(self, "source_evidence", evidence)

    def __repr__(self) -> str:
        """Show counts only: a packet carries clinical text."""
        return f"BlindedPacket(candidates={len(self.candidates)})"

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh wire document."""
        return {
            "candidates": [item.to_dict() for item in self.candidates],
            "case_ref": self.case_ref,
            "conflict_of_interest": self.conflict_of_interest.to_dict(),
            "holdout_commitment_digest": self.holdout_commitment_digest,
            "mapping_commitment": self.mapping_commitment,
            "packet_set_ref": self.packet_set_ref,
            "rubric": [item.to_dict() for item in self.rubric],
            "schema_version": self.schema_version,
            "source_evidence": [item.to_dict() for item in self.source_evidence],
        }

    def to_json(self) -> str:
        """Return the canonical JSON text (openmed profile)."""
        return encode_openmed(self.to_dict())

    @classmethod
    def from_dict(cls, document: object) -> BlindedPacket:
        """Build from a parsed packet document, refusing unknown or missing fields.

        Raises:
            AdjudicationError: ``packet: invalid_document``,
                ``candidates: invalid_document`` or any constructor refusal.
            CaseError: a malformed rubric criterion, evidence item or
                conflict-of-interest document.
        """
        checked = checked_document(document, PACKET_KEYS, "packet")
        candidates = tuple(
            BlindedCandidate(**checked_document(item, CANDIDATE_KEYS, "candidates"))
            for item in document_items(checked["candidates"], "candidates")
        )
        return cls(
            candidates=candidates,
            case_ref=checked["case_ref"],
            conflict_of_interest=ConflictOfInterestMetadata.from_dict(
                checked["conflict_of_interest"]
            ),
            holdout_commitment_digest=checked["holdout_commitment_digest"],
            mapping_commitment=checked["mapping_commitment"],
            packet_set_ref=checked["packet_set_ref"],
            rubric=tuple(
                RubricCriterion.from_dict(item)
                for item in document_items(checked["rubric"], "rubric")
            ),
            source_evidence=tuple(
                SourceEvidence.from_dict(item)
                for item in document_items(checked["source_evidence"], "source_evidence")
            ),
            schema_version=checked["schema_version"],
        )

    @classmethod
    def from_json(cls, data: bytes | str) -> BlindedPacket:
        """Strictly parse a packet document (duplicate keys, NaN, ... refused)."""
        return cls.from_dict(decode_document(data, "packet", error=AdjudicationError))
