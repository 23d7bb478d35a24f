"""The private alias -> identity mapping (``...mapping.v1``), sealed by an HMAC commitment.

The mapping carries identities and must stay with the evaluator;
:func:`compute_mapping_commitment` seals it with the randomization key.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sealeval._validate import decode_document
from sealeval.canonical import encode_openmed, is_digest
from sealeval.session.adjudication.ordering import (
    RandomizationKey,
    coerce_key,
)
from sealeval.session.adjudication.vocabulary import (
    ALIAS_PATTERN,
    ALIASES,
    ASSIGNMENT_KEYS,
    ENTRY_KEYS,
    MAPPING_KEYS,
    MAPPING_SCHEMA,
    MAX_CASES,
    AdjudicationError,
    check_header,
    checked_document,
    checked_items,
    document_items,
)
from sealeval.session.cases import (
    MAX_CANDIDATES,
    MIN_CANDIDATES,
    is_reference,
)

__all__ = ["MappingAssignment", "MappingEntry", "PrivateMapping", "compute_mapping_commitment"]

# ---------------------------------------------------------------------------
# Private mapping


@dataclass(frozen=True, slots=True, repr=False)
class MappingAssignment:
    """One slot of a mapping entry: alias -> identity, output and manifest digests."""

    alias: str
    candidate_identity: str
    output_digest: str
    submission_manifest_digest: str

    def __post_init__(self) -> None:
        """Validate alias, identity and both digests, in that order."""
        if type(self.alias) is not str or ALIAS_PATTERN.fullmatch(self.alias) is None:
            raise AdjudicationError("invalid_alias", "alias")
        if not is_reference(self.candidate_identity):
            raise AdjudicationError("invalid_reference", "candidate_identity")
        if not is_digest(self.output_digest):
            raise AdjudicationError("invalid_digest", "output_digest")
        if not is_digest(self.submission_manifest_digest):
            raise AdjudicationError("invalid_digest", "submission_manifest_digest")

    def __repr__(self) -> str:
        """Show the alias only: the identity is private."""
        return f"MappingAssignment(alias={self.alias!r})"

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh document."""
        return {
            "alias": self.alias,
            "candidate_identity": self.candidate_identity,
            "output_digest": self.output_digest,
            "submission_manifest_digest": self.submission_manifest_digest,
        }


@dataclass(frozen=True, slots=True, repr=False)
class MappingEntry:
    """The assignments of one case, in slot order (aliases ``candidate-a``, ...)."""

    assignments: Sequence[MappingAssignment]
    case_ref: str

    def __post_init__(self) -> None:
        """Validate the case reference and the slot-ordered, identity-unique assignments."""
        if not is_reference(self.case_ref):
            raise AdjudicationError("invalid_reference", "case_ref")
        items: tuple[MappingAssignment, ...] = checked_items(
            self.assignments, MappingAssignment, "assignments", 0
        )
        if not MIN_CANDIDATES <= len(items) <= MAX_CANDIDATES:
            raise AdjudicationError("invalid_count", "assignments")
        if any(item.alias != ALIASES[slot] for slot, item in enumerate(items)):
            raise AdjudicationError("invalid_alias", "alias")
        if len({item.candidate_identity for item in items}) != len(items):
            raise AdjudicationError("duplicate_reference", "assignments")
        object.__setattr__(self, "assignments", items)

    def __repr__(self) -> str:
        """Show counts only."""
        return f"MappingEntry(assignments={len(self.assignments)})"

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh document."""
        return {
            "assignments": [item.to_dict() for item in self.assignments],
            "case_ref": self.case_ref,
        }


def mapping_payload(
    entries: Iterable[MappingEntry], holdout_commitment_digest: str, packet_set_ref: str
) -> dict[str, Any]:
    """Return the mapping document the commitment is computed over."""
    return {
        "entries": [entry.to_dict() for entry in entries],
        "holdout_commitment_digest": holdout_commitment_digest,
        "packet_set_ref": packet_set_ref,
        "schema_version": MAPPING_SCHEMA,
    }


def commit(key: RandomizationKey, payload: Mapping[str, Any]) -> str:
    """Return the keyed ``sha256:`` commitment of a mapping payload."""
    tag = key._mac(MAPPING_SCHEMA, encode_openmed(payload).encode("ascii"))
    return "sha256:" + tag.hex()


@dataclass(frozen=True, slots=True, repr=False)
class PrivateMapping:
    """The private alias -> identity mapping (``...blinded_adjudication.mapping.v1``).

    ``mapping_commitment`` is an HMAC-SHA256 tag under the randomization key
    over the canonical payload (every field but itself), spelled like a digest
    (``sha256:<hex>``) for compatibility. Construction checks the structure
    only; whether the commitment is authentic needs the key
    (:func:`audit_mapping`). The document names candidate identities: keep it
    with the evaluator, never with reviewers.
    """

    entries: Sequence[MappingEntry]
    holdout_commitment_digest: str
    mapping_commitment: str
    packet_set_ref: str
    schema_version: str = field(default=MAPPING_SCHEMA)

    def __post_init__(self) -> None:
        """Validate header, commitment spelling and the entries (unique case refs)."""
        check_header(
            self.schema_version,
            MAPPING_SCHEMA,
            self.packet_set_ref,
            self.holdout_commitment_digest,
        )
        if not is_digest(self.mapping_commitment):
            raise AdjudicationError("invalid_digest", "mapping_commitment")
        entries: tuple[MappingEntry, ...] = checked_items(
            self.entries, MappingEntry, "entries", 1, MAX_CASES
        )
        if len({entry.case_ref for entry in entries}) != len(entries):
            raise AdjudicationError("duplicate_reference", "entries")
        object.__setattr__(self, "entries", entries)

    def __repr__(self) -> str:
        """Show counts only: the mapping names candidate identities."""
        return f"PrivateMapping(entries={len(self.entries)})"

    def payload(self) -> dict[str, Any]:
        """Return the fresh document the commitment is computed over."""
        return mapping_payload(self.entries, self.holdout_commitment_digest, self.packet_set_ref)

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh wire document (payload plus ``mapping_commitment``)."""
        document = self.payload()
        document["mapping_commitment"] = self.mapping_commitment
        return document

    def to_json(self) -> str:
        """Return the canonical JSON text (openmed profile)."""
        return encode_openmed(self.to_dict())

    @classmethod
    def from_dict(cls, document: object) -> PrivateMapping:
        """Build from a parsed mapping document, refusing unknown or missing fields.

        Raises:
            AdjudicationError: ``mapping: invalid_document``,
                ``entries: invalid_document``, ``assignments: invalid_document``
                or any constructor refusal.
        """
        checked = checked_document(document, MAPPING_KEYS, "mapping")
        entries = []
        for item in document_items(checked["entries"], "entries"):
            entry = checked_document(item, ENTRY_KEYS, "entries")
            assignments = tuple(
                MappingAssignment(**checked_document(slot, ASSIGNMENT_KEYS, "assignments"))
                for slot in document_items(entry["assignments"], "assignments")
            )
            entries.append(MappingEntry(assignments=assignments, case_ref=entry["case_ref"]))
        return cls(
            entries=tuple(entries),
            holdout_commitment_digest=checked["holdout_commitment_digest"],
            mapping_commitment=checked["mapping_commitment"],
            packet_set_ref=checked["packet_set_ref"],
            schema_version=checked["schema_version"],
        )

    @classmethod
    def from_json(cls, data: bytes | str) -> PrivateMapping:
        """Strictly parse a mapping document (duplicate keys, NaN, ... refused)."""
        return cls.from_dict(decode_document(data, "mapping", error=AdjudicationError))


def compute_mapping_commitment(
    mapping: PrivateMapping, randomization_key: RandomizationKey | bytes
) -> str:
    """Return the commitment the key gives to ``mapping``'s payload.

    ``"sha256:" + hex(HMAC-SHA256(key, ASCII(MAPPING_SCHEMA) || 0x00 ||
    canonical(payload)))``: a MAC, not a content digest.
    """
    key = coerce_key(randomization_key)
    if type(mapping) is not PrivateMapping:
        raise AdjudicationError("invalid_mapping", "mapping")
    return commit(key, mapping.payload())
