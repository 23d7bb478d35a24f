"""The adjudication vocabulary: wire schemas, limits, aliases, the error and shared checks.

:class:`AdjudicationError` (message ``<field>: <code>``) and the closed-document
and header checks every adjudication document uses.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from sealeval._validate import check_exact
from sealeval.canonical import is_digest
from sealeval.errors import SessionError
from sealeval.session.cases import (
    MAX_CANDIDATES,
    RubricCriterion,
    SourceEvidence,
    is_reference,
)

__all__ = [
    "ALIAS_PATTERN",
    "AUDIT_REASON_CODES",
    "AUDIT_SCHEMA",
    "BALANCE_SCHEMA",
    "CANDIDATE_ORDER_DOMAIN",
    "CASE_ORDER_DOMAIN",
    "MAPPING_SCHEMA",
    "MAX_CASES",
    "MAX_RUBRIC_CRITERIA",
    "MIN_KEY_BYTES",
    "PACKET_SCHEMA",
    "AdjudicationError",
]

PACKET_SCHEMA: Final = "openmed.eval.blinded_adjudication.packet.v1"
MAPPING_SCHEMA: Final = "openmed.eval.blinded_adjudication.mapping.v1"
BALANCE_SCHEMA: Final = "openmed.eval.blinded_adjudication.balance.v1"
AUDIT_SCHEMA: Final = "openmed.eval.blinded_adjudication.audit.v1"
#: HMAC domains of the two keyed orderings.
CANDIDATE_ORDER_DOMAIN: Final = "candidate-order-v1"
CASE_ORDER_DOMAIN: Final = "case-order-v1"
ORDER_DOMAINS: Final = frozenset({CANDIDATE_ORDER_DOMAIN, CASE_ORDER_DOMAIN})
#: Shortest accepted randomization key, in bytes.
MIN_KEY_BYTES: Final = 32
#: Most cases per packet set, most criteria per rubric.
MAX_CASES: Final = 100_000
MAX_RUBRIC_CRITERIA: Final = 8
#: Blinded alias grammar (full match).
ALIAS_PATTERN: Final = re.compile(r"candidate-[a-z]")
#: Closed reason codes of a mapping audit, in check order.
AUDIT_REASON_CODES: Final = (
    "valid",
    "invalid_packet_set",
    "commitment_mismatch",
    "mapping_mismatch",
)

PACKET_KEYS: Final = frozenset(
    {
        "candidates",
        "case_ref",
        "conflict_of_interest",
        "holdout_commitment_digest",
        "mapping_commitment",
        "packet_set_ref",
        "rubric",
        "schema_version",
        "source_evidence",
    }
)
CANDIDATE_KEYS: Final = frozenset({"alias", "content"})
MAPPING_KEYS: Final = frozenset(
    {
        "entries",
        "holdout_commitment_digest",
        "mapping_commitment",
        "packet_set_ref",
        "schema_version",
    }
)
ENTRY_KEYS: Final = frozenset({"assignments", "case_ref"})
ASSIGNMENT_KEYS: Final = frozenset(
    {"alias", "candidate_identity", "output_digest", "submission_manifest_digest"}
)
ALIASES: Final = tuple(f"candidate-{chr(ord('a') + slot)}" for slot in range(MAX_CANDIDATES))


class AdjudicationError(SessionError):
    """Refusal of blinded adjudication input (message ``<field>: <code>``)."""

    module = "sealeval.session.adjudication"
    codes = frozenset(
        {
            "invalid_reference",
            "invalid_digest",
            "invalid_key",
            "invalid_metadata",
            "reviewer_recused",
            "invalid_sequence",
            "duplicate_reference",
            "inconsistent_candidates",
            "invalid_keys",
            "unbalanced",
            "invalid_mapping",
            "invalid_document",
            "invalid_text",
            "invalid_count",
            "invalid_alias",
            "invalid_domain",
            "unsupported_version",
        }
    )


# ---------------------------------------------------------------------------
# Shared checks


def checked_items(
    value: object, kind: type, name: str, low: int, high: int | None = None
) -> tuple[Any, ...]:
    """Return ``value`` as a tuple of ``kind`` with ``low..high`` items, else refuse."""
    if (
        not isinstance(value, tuple | list)
        or len(value) < low
        or (high is not None and len(value) > high)
    ):
        raise AdjudicationError("invalid_sequence", name)
    items = tuple(value)
    if any(type(item) is not kind for item in items):
        raise AdjudicationError("invalid_sequence", name)
    return items


def rubric_criteria(rubric: object) -> tuple[RubricCriterion, ...]:
    """Return the checked rubric criteria (at least one, unique references)."""
    items: tuple[RubricCriterion, ...] = checked_items(
        rubric, RubricCriterion, "rubric", 1, MAX_RUBRIC_CRITERIA
    )
    if len({item.criterion_ref for item in items}) != len(items):
        raise AdjudicationError("duplicate_reference", "rubric")
    return items


def checked_evidence(evidence: object) -> tuple[SourceEvidence, ...]:
    """Return the checked source evidence (at least one, unique references)."""
    items: tuple[SourceEvidence, ...] = checked_items(
        evidence, SourceEvidence, "source_evidence", 1
    )
    if len({item.evidence_ref for item in items}) != len(items):
        raise AdjudicationError("duplicate_reference", "source_evidence")
    return items


def checked_document(document: object, keys: frozenset[str], name: str) -> Mapping[str, Any]:
    """Return ``document`` if it is a mapping with exactly ``keys`` (``invalid_document``)."""
    try:
        return check_exact(document, name, keys, error=AdjudicationError, code="invalid_document")
    except AdjudicationError:
        raise
    except Exception:  # noqa: BLE001 - hostile mappings must not leak their exception
        raise AdjudicationError("invalid_document", name) from None


def document_items(value: object, name: str) -> tuple[Any, ...]:
    """Return a JSON array as a tuple, or refuse ``invalid_document`` at ``name``."""
    if not isinstance(value, tuple | list):
        raise AdjudicationError("invalid_document", name)
    return tuple(value)


def check_header(
    schema_version: object, expected_schema: str, packet_set_ref: object, holdout: object
) -> None:
    """Check a document's schema version, packet-set reference and holdout digest."""
    if type(schema_version) is not str or schema_version != expected_schema:
        raise AdjudicationError("unsupported_version", "schema_version")
    if not is_reference(packet_set_ref):
        raise AdjudicationError("invalid_reference", "packet_set_ref")
    if not is_digest(holdout):
        raise AdjudicationError("invalid_digest", "holdout_commitment_digest")
