"""Comparison cases, their reviewer-facing parts, and the evaluation case digest.

These value types feed blinded adjudication (``sealeval.session.adjudication``)
and evaluation sessions. Every object validates itself on construction (errors
``<field>: <code>``, :class:`CaseError`), stores sequences as tuples and
mappings as read-only copies, and never shows clinical text in its ``repr``.

* :class:`SourceEvidence` and :class:`RubricCriterion` are reviewer-facing and
  appear verbatim in blinded packets.
* :class:`ConflictOfInterestMetadata` describes the reviewer; a ``recused``
  reviewer receives no packets.
* :class:`ComparisonCase` is private (it maps candidate identities to their
  outputs) and has no wire document; :func:`evaluation_case_digest` is the
  only thing derived from it that sessions persist.
"""

from __future__ import annotations

import re
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sealeval.canonical import digest_openmed, is_digest
from sealeval.errors import SessionError

__all__ = [
    "CONFLICT_STATUSES",
    "MAX_CANDIDATES",
    "MAX_QUESTION_LENGTH",
    "MAX_SCORE",
    "MAX_SCORE_SPAN",
    "MAX_TEXT_LENGTH",
    "MIN_CANDIDATES",
    "REFERENCE_PATTERN",
    "CaseError",
    "ComparisonCase",
    "ConflictOfInterestMetadata",
    "RubricCriterion",
    "SourceEvidence",
    "evaluation_case_digest",
    "evaluation_case_payload",
    "is_reference",
    "is_text",
]

#: The adjudication reference grammar (full match, value must be exactly ``str``).
REFERENCE_PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
#: Longest accepted text, in code points.
MAX_TEXT_LENGTH: Final = 1_000_000
#: Longest accepted rubric question, in code points.
MAX_QUESTION_LENGTH: Final = 500
#: Highest accepted rubric score.
MAX_SCORE: Final = 10
#: Widest accepted rubric score range (``maximum_score - minimum_score``).
MAX_SCORE_SPAN: Final = 4
#: Fewest and most candidates per comparison case (one alias letter each).
MIN_CANDIDATES: Final = 2
MAX_CANDIDATES: Final = 26
#: Closed set of conflict-of-interest statuses.
CONFLICT_STATUSES: Final = frozenset({"cleared", "recused"})

_EVIDENCE_KEYS: Final = frozenset({"content", "evidence_ref"})
_CRITERION_KEYS: Final = frozenset({"criterion_ref", "maximum_score", "minimum_score", "question"})
_CONFLICT_KEYS: Final = frozenset({"declaration_digest", "reviewer_ref", "status"})


class CaseError(SessionError):
    """Refusal of a comparison case or one of its parts (message ``<field>: <code>``)."""

    module = "sealeval.session.cases"
    codes = frozenset(
        {
            "invalid_reference",
            "invalid_text",
            "invalid_range",
            "invalid_sequence",
            "duplicate_reference",
            "invalid_mapping",
            "invalid_count",
            "invalid_digest",
            "invalid_status",
            "invalid_document",
            "invalid_case",
        }
    )


def is_reference(value: object) -> bool:
    """Return whether ``value`` is exactly a ``str`` matching the reference grammar."""
    return type(value) is str and REFERENCE_PATTERN.fullmatch(value) is not None


def is_text(value: object, max_length: int = MAX_TEXT_LENGTH) -> bool:
    """Return whether ``value`` is an encodable ``str`` with non-whitespace content.

    The value must be exactly ``str``, at most ``max_length`` code points long,
    contain at least one non-whitespace character (Unicode ``str.isspace``), and
    be encodable as UTF-8 (no unpaired surrogates), so that every accepted text
    can be digested.
    """
    if type(value) is not str or not value or len(value) > max_length or value.isspace():
        return False
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
    return True


def _checked_document(document: object, keys: frozenset[str], name: str) -> Mapping[str, Any]:
    """Return ``document`` if it is a mapping with exactly ``keys``."""
    if not isinstance(document, Mapping):
        raise CaseError("invalid_document", name)
    try:
        present = set(document)
    except Exception:  # noqa: BLE001 - hostile mappings must not leak their exception
        raise CaseError("invalid_document", name) from None
    if present != keys:
        raise CaseError("invalid_document", name)
    return document


@dataclass(frozen=True, slots=True, repr=False)
class SourceEvidence:
    """One reviewer-facing evidence item (document ``{content, evidence_ref}``)."""

    evidence_ref: str
    content: str

    def __post_init__(self) -> None:
        """Refuse a bad reference (``evidence_ref: invalid_reference``) or text."""
        if not is_reference(self.evidence_ref):
            raise CaseError("invalid_reference", "evidence_ref")
        if not is_text(self.content):
            raise CaseError("invalid_text", "content")

    def __repr__(self) -> str:
        """Show the type only: evidence is clinical text."""
        return "SourceEvidence(<redacted>)"

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh document."""
        return {"content": self.content, "evidence_ref": self.evidence_ref}

    @classmethod
    def from_dict(cls, document: object) -> SourceEvidence:
        """Build from a document with exactly the keys ``content`` and ``evidence_ref``."""
        checked = _checked_document(document, _EVIDENCE_KEYS, "source_evidence")
        return cls(evidence_ref=checked["evidence_ref"], content=checked["content"])


@dataclass(frozen=True, slots=True, repr=False)
class RubricCriterion:
    """One rubric question with an integer score range.

    Scores are ``int`` (``bool`` refused) with ``0 <= minimum_score <
    maximum_score <= 10`` and a span of at most 4.
    """

    criterion_ref: str
    question: str
    minimum_score: int
    maximum_score: int

    def __post_init__(self) -> None:
        """Refuse a bad reference, question or score range, in that order."""
        if not is_reference(self.criterion_ref):
            raise CaseError("invalid_reference", "criterion_ref")
        if not is_text(self.question, MAX_QUESTION_LENGTH):
            raise CaseError("invalid_text", "question")
        low, high = self.minimum_score, self.maximum_score
        if (
            type(low) is not int
            or type(high) is not int
            or not 0 <= low < high <= MAX_SCORE
            or high - low > MAX_SCORE_SPAN
        ):
            raise CaseError("invalid_range", "score_range")

    def __repr__(self) -> str:
        """Show the type only."""
        return "RubricCriterion(<redacted>)"

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh document."""
        return {
            "criterion_ref": self.criterion_ref,
            "maximum_score": self.maximum_score,
            "minimum_score": self.minimum_score,
            "question": self.question,
        }

    @classmethod
    def from_dict(cls, document: object) -> RubricCriterion:
        """Build from a document with exactly the four criterion keys."""
        checked = _checked_document(document, _CRITERION_KEYS, "criterion")
        return cls(
            criterion_ref=checked["criterion_ref"],
            question=checked["question"],
            minimum_score=checked["minimum_score"],
            maximum_score=checked["maximum_score"],
        )


@dataclass(frozen=True, slots=True, repr=False)
class ConflictOfInterestMetadata:
    """The reviewer's conflict-of-interest declaration.

    ``declaration_digest`` is the digest of the signed declaration kept
    elsewhere; ``status`` is ``cleared`` (default) or ``recused``.
    """

    reviewer_ref: str
    declaration_digest: str
    status: str = "cleared"

    def __post_init__(self) -> None:
        """Refuse a bad reviewer reference, declaration digest or status, in that order."""
        if not is_reference(self.reviewer_ref):
            raise CaseError("invalid_reference", "reviewer_ref")
        if not is_digest(self.declaration_digest):
            raise CaseError("invalid_digest", "declaration_digest")
        if type(self.status) is not str or self.status not in CONFLICT_STATUSES:
            raise CaseError("invalid_status", "conflict_status")

    @property
    def recused(self) -> bool:
        """Whether the reviewer is recused (and must receive nothing)."""
        return self.status == "recused"

    def __repr__(self) -> str:
        """Show the status only."""
        return f"ConflictOfInterestMetadata(status={self.status!r})"

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh document."""
        return {
            "declaration_digest": self.declaration_digest,
            "reviewer_ref": self.reviewer_ref,
            "status": self.status,
        }

    @classmethod
    def from_dict(cls, document: object) -> ConflictOfInterestMetadata:
        """Build from a document with exactly the three keys (``status`` included)."""
        checked = _checked_document(document, _CONFLICT_KEYS, "conflict_of_interest")
        return cls(
            reviewer_ref=checked["reviewer_ref"],
            declaration_digest=checked["declaration_digest"],
            status=checked["status"],
        )


def _checked_evidence(source_evidence: object) -> tuple[SourceEvidence, ...]:
    if not isinstance(source_evidence, tuple | list):
        raise CaseError("invalid_sequence", "source_evidence")
    items = tuple(source_evidence)
    if not items or any(type(item) is not SourceEvidence for item in items):
        raise CaseError("invalid_sequence", "source_evidence")
    if len({item.evidence_ref for item in items}) != len(items):
        raise CaseError("duplicate_reference", "source_evidence")
    return items


def _checked_outputs(candidate_outputs: object) -> dict[str, str]:
    if not isinstance(candidate_outputs, Mapping):
        raise CaseError("invalid_mapping", "candidate_outputs")
    try:
        pairs = list(candidate_outputs.items())
    except Exception:  # noqa: BLE001 - hostile mappings must not leak their exception
        raise CaseError("invalid_mapping", "candidate_outputs") from None
    if not MIN_CANDIDATES <= len(pairs) <= MAX_CANDIDATES:
        raise CaseError("invalid_count", "candidate_outputs")
    outputs: dict[str, str] = {}
    for identity, output in pairs:
        if not is_reference(identity):
            raise CaseError("invalid_reference", "candidate_identity")
        if not is_text(output):
            raise CaseError("invalid_text", "candidate_output")
        outputs[identity] = output
    if len(outputs) != len(pairs):
        # Only a mapping that yields one key twice can get here.
        raise CaseError("invalid_mapping", "candidate_outputs")
    return outputs


@dataclass(frozen=True, slots=True, repr=False)
class ComparisonCase:
    """One case to adjudicate: evidence plus every candidate's output.

    Private: ``candidate_outputs`` maps candidate identities to output text, so
    a case must never be shown to a reviewer; blinded packets are rendered from
    it instead. ``source_evidence`` is stored as a tuple, ``candidate_outputs``
    as a read-only mapping (insertion order kept; digests sort the keys).
    """

    case_ref: str
    source_evidence: Sequence[SourceEvidence]
    candidate_outputs: Mapping[str, str]

    def __post_init__(self) -> None:
        """Validate reference, evidence and outputs, in that order."""
        if not is_reference(self.case_ref):
            raise CaseError("invalid_reference", "case_ref")
        evidence = _checked_evidence(self.source_evidence)
        outputs = _checked_outputs(self.candidate_outputs)
        object.__setattr__(self, "source_evidence", evidence)
        object.__setattr__(self, "candidate_outputs", types.MappingProxyType(outputs))

    @property
    def candidate_identities(self) -> frozenset[str]:
        """The set of candidate identities of this case."""
        return frozenset(self.candidate_outputs)

    def __repr__(self) -> str:
        """Show counts only: a case holds identities and clinical text."""
        return (
            f"ComparisonCase(evidence_items={len(self.source_evidence)}, "
            f"candidates={len(self.candidate_outputs)})"
        )


def evaluation_case_payload(case: ComparisonCase) -> dict[str, Any]:
    """Return the fresh document hashed by :func:`evaluation_case_digest`.

    ``{"candidate_outputs": {identity: text}, "case_ref", "source_evidence":
    [{"content", "evidence_ref"} in the case's order]}``. The payload holds
    identities and clinical text: never persist or log it.
    """
    if type(case) is not ComparisonCase:
        raise CaseError("invalid_case", "case")
    return {
        "candidate_outputs": dict(case.candidate_outputs),
        "case_ref": case.case_ref,
        "source_evidence": [item.to_dict() for item in case.source_evidence],
    }


def evaluation_case_digest(case: ComparisonCase) -> str:
    """Return the evaluation case digest (sha256 of the canonical case payload).

    Used by evaluation sessions and as the holdout ``case`` manifest item.

    Raises:
        CaseError: ``case: invalid_case`` when ``case`` is not a
            :class:`ComparisonCase`.
    """
    return digest_openmed(evaluation_case_payload(case))
