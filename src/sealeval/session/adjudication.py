"""Blinded adjudication packets and the HMAC-sealed private identity mapping.

Wire contracts (openmed canonical JSON): ``openmed.eval.blinded_adjudication``
``.packet.v1`` (one reviewer-facing packet per case), ``.mapping.v1`` (the
private alias -> identity mapping, sealed by an HMAC "mapping commitment"),
``.balance.v1`` (slot balance report) and ``.audit.v1`` (mapping audit).

Given a secret randomization key, :func:`render_blinded_packets` orders the
candidates and the cases by keyed HMAC, rotates the candidate order by one
position per case (so every identity occupies every slot equally often, to
within one), and replaces identities by positional aliases ``candidate-a``,
``candidate-b``, .... Packets carry reviewer-facing text (rubric questions,
source evidence, candidate outputs) but never identities or manifest digests;
the private mapping carries identities and must stay with the evaluator.

Everything here is a pure function over immutable values: nothing is
persisted, logged or printed. Errors are :class:`AdjudicationError` (and
:class:`~sealeval.session.cases.CaseError` for the case value types), message
``<field>: <code>``.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NoReturn

from sealeval.canonical import decode, digest_bytes, encode_openmed, is_digest
from sealeval.errors import CanonicalError, SessionError
from sealeval.session.cases import (
    MAX_CANDIDATES,
    MIN_CANDIDATES,
    ComparisonCase,
    ConflictOfInterestMetadata,
    RubricCriterion,
    SourceEvidence,
    is_reference,
    is_text,
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
    "BalanceReport",
    "BlindedCandidate",
    "BlindedPacket",
    "BlindedPacketSet",
    "MappingAssignment",
    "MappingAudit",
    "MappingEntry",
    "PrivateMapping",
    "RandomizationKey",
    "alias_for_slot",
    "audit_mapping",
    "balance_report",
    "candidate_base_order",
    "compute_mapping_commitment",
    "keyed_case_order",
    "keyed_hmac",
    "render_blinded_packets",
    "require_cleared_reviewer",
    "rotated_order",
]

PACKET_SCHEMA: Final = "openmed.eval.blinded_adjudication.packet.v1"
MAPPING_SCHEMA: Final = "openmed.eval.blinded_adjudication.mapping.v1"
BALANCE_SCHEMA: Final = "openmed.eval.blinded_adjudication.balance.v1"
AUDIT_SCHEMA: Final = "openmed.eval.blinded_adjudication.audit.v1"
#: HMAC domains of the two keyed orderings.
CANDIDATE_ORDER_DOMAIN: Final = "candidate-order-v1"
CASE_ORDER_DOMAIN: Final = "case-order-v1"
_ORDER_DOMAINS: Final = frozenset({CANDIDATE_ORDER_DOMAIN, CASE_ORDER_DOMAIN})
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

_PACKET_KEYS: Final = frozenset(
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
_CANDIDATE_KEYS: Final = frozenset({"alias", "content"})
_MAPPING_KEYS: Final = frozenset(
    {
        "entries",
        "holdout_commitment_digest",
        "mapping_commitment",
        "packet_set_ref",
        "schema_version",
    }
)
_ENTRY_KEYS: Final = frozenset({"assignments", "case_ref"})
_ASSIGNMENT_KEYS: Final = frozenset(
    {"alias", "candidate_identity", "output_digest", "submission_manifest_digest"}
)
_ALIASES: Final = tuple(f"candidate-{chr(ord('a') + slot)}" for slot in range(MAX_CANDIDATES))


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
# The secret key


class RandomizationKey:
    """The secret key behind the orderings and the mapping commitment.

    Holds at least :data:`MIN_KEY_BYTES` bytes (use ``secrets.token_bytes(32)``
    or more). The object is immutable, never shows its bytes (``repr`` and
    ``str`` are redacted), cannot be pickled, and compares by identity.
    """

    __slots__ = ("_material",)
    _material: bytes

    def __init__(self, material: bytes) -> None:
        """Wrap ``material``; refuse anything but ``bytes`` of at least 32 bytes.

        Raises:
            AdjudicationError: ``randomization_key: invalid_key``.
        """
        if not isinstance(material, bytes) or len(material) < MIN_KEY_BYTES:
            raise AdjudicationError("invalid_key", "randomization_key")
        object.__setattr__(self, "_material", bytes(material))

    def __setattr__(self, name: str, value: object) -> NoReturn:
        """Refuse mutation."""
        raise AttributeError("RandomizationKey is immutable")

    def __delattr__(self, name: str) -> NoReturn:
        """Refuse mutation."""
        raise AttributeError("RandomizationKey is immutable")

    def __repr__(self) -> str:
        """Show nothing of the key."""
        return "RandomizationKey(<redacted>)"

    __str__ = __repr__

    def __reduce__(self) -> NoReturn:
        """Refuse pickling: a key must not be persisted by accident."""
        raise TypeError("RandomizationKey cannot be pickled")

    def __copy__(self) -> RandomizationKey:
        """Return ``self``: the key is immutable."""
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> RandomizationKey:
        """Return ``self``: the key is immutable."""
        return self

    def _mac(self, domain: str, message: bytes) -> bytes:
        """Return HMAC-SHA256(key, ASCII(domain) || 0x00 || message)."""
        return hmac.new(
            self._material, domain.encode("ascii") + b"\x00" + message, hashlib.sha256
        ).digest()


def _coerce_key(value: object) -> RandomizationKey:
    if isinstance(value, RandomizationKey):
        return value
    if isinstance(value, bytes):
        return RandomizationKey(value)
    raise AdjudicationError("invalid_key", "randomization_key")


# ---------------------------------------------------------------------------
# Keyed orderings, rotation and aliases


def keyed_hmac(key: RandomizationKey | bytes, domain: str, value: str) -> bytes:
    """Return keyed(key, domain, value) = HMAC-SHA256(key, ASCII(domain) || 0x00 || UTF-8(value)).

    Args:
        key: the randomization key (or its bytes, at least 32).
        domain: ``candidate-order-v1`` or ``case-order-v1``.
        value: a candidate identity or case reference.

    Returns:
        The raw 32-byte tag.

    Raises:
        AdjudicationError: ``randomization_key: invalid_key``,
            ``domain: invalid_domain`` or ``value: invalid_reference``.
    """
    secret = _coerce_key(key)
    if type(domain) is not str or domain not in _ORDER_DOMAINS:
        raise AdjudicationError("invalid_domain", "domain")
    if not is_reference(value):
        raise AdjudicationError("invalid_reference", "value")
    return secret._mac(domain, value.encode("utf-8"))


def _sorted_keyed(key: RandomizationKey, domain: str, values: Iterable[str]) -> list[str]:
    """Sort by (keyed tag bytes, value): one HMAC per value, O(n log n)."""
    return sorted(values, key=lambda value: (key._mac(domain, value.encode("utf-8")), value))


def candidate_base_order(
    key: RandomizationKey | bytes, identities: Iterable[str]
) -> tuple[str, ...]:
    """Return the candidate base order: identities sorted by (keyed tag, identity).

    Raises:
        AdjudicationError: ``randomization_key: invalid_key``,
            ``candidate_identity: invalid_reference`` or
            ``candidate_identity: duplicate_reference``.
    """
    secret = _coerce_key(key)
    items = tuple(identities)
    if not all(is_reference(identity) for identity in items):
        raise AdjudicationError("invalid_reference", "candidate_identity")
    if len(set(items)) != len(items):
        raise AdjudicationError("duplicate_reference", "candidate_identity")
    return tuple(_sorted_keyed(secret, CANDIDATE_ORDER_DOMAIN, items))


def keyed_case_order(
    key: RandomizationKey | bytes, cases: Iterable[ComparisonCase]
) -> tuple[ComparisonCase, ...]:
    """Return the cases sorted by (keyed tag of ``case_ref``, ``case_ref``).

    Raises:
        AdjudicationError: ``randomization_key: invalid_key``,
            ``cases: invalid_sequence`` or ``cases: duplicate_reference``.
    """
    secret = _coerce_key(key)
    items = tuple(cases)
    if any(type(case) is not ComparisonCase for case in items):
        raise AdjudicationError("invalid_sequence", "cases")
    by_ref = {case.case_ref: case for case in items}
    if len(by_ref) != len(items):
        raise AdjudicationError("duplicate_reference", "cases")
    return tuple(by_ref[ref] for ref in _sorted_keyed(secret, CASE_ORDER_DOMAIN, by_ref))


def rotated_order(base: Sequence[str], position: int) -> tuple[str, ...]:
    """Return ``base`` rotated left by ``position mod len(base)``.

    The k-th case in keyed case order uses ``rotated_order(base, k)``.
    """
    if not base:
        return ()
    shift = position % len(base)
    return tuple(base[shift:]) + tuple(base[:shift])


def alias_for_slot(slot: int) -> str:
    """Return the alias of slot ``slot`` (0 -> ``candidate-a`` ... 25 -> ``candidate-z``).

    Raises:
        AdjudicationError: ``slot: invalid_alias`` outside 0..25.
    """
    if type(slot) is not int or not 0 <= slot < MAX_CANDIDATES:
        raise AdjudicationError("invalid_alias", "slot")
    return _ALIASES[slot]


def require_cleared_reviewer(conflict_of_interest: object) -> ConflictOfInterestMetadata:
    """Return the metadata when the reviewer is cleared; refuse otherwise.

    Raises:
        AdjudicationError: ``conflict_of_interest: invalid_metadata`` (not a
            :class:`ConflictOfInterestMetadata`) or
            ``conflict_of_interest: reviewer_recused``.
    """
    if type(conflict_of_interest) is not ConflictOfInterestMetadata:
        raise AdjudicationError("invalid_metadata", "conflict_of_interest")
    if conflict_of_interest.status != "cleared":
        raise AdjudicationError("reviewer_recused", "conflict_of_interest")
    return conflict_of_interest


# ---------------------------------------------------------------------------
# Shared checks


def _checked_items(
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


def _checked_rubric(rubric: object) -> tuple[RubricCriterion, ...]:
    items: tuple[RubricCriterion, ...] = _checked_items(
        rubric, RubricCriterion, "rubric", 1, MAX_RUBRIC_CRITERIA
    )
    if len({item.criterion_ref for item in items}) != len(items):
        raise AdjudicationError("duplicate_reference", "rubric")
    return items


def _checked_evidence(evidence: object) -> tuple[SourceEvidence, ...]:
    items: tuple[SourceEvidence, ...] = _checked_items(
        evidence, SourceEvidence, "source_evidence", 1
    )
    if len({item.evidence_ref for item in items}) != len(items):
        raise AdjudicationError("duplicate_reference", "source_evidence")
    return items


def _checked_document(document: object, keys: frozenset[str], name: str) -> Mapping[str, Any]:
    """Return ``document`` if it is a mapping with exactly ``keys``."""
    if not isinstance(document, Mapping):
        raise AdjudicationError("invalid_document", name)
    try:
        present = set(document)
    except Exception:  # noqa: BLE001 - hostile mappings must not leak their exception
        raise AdjudicationError("invalid_document", name) from None
    if present != keys:
        raise AdjudicationError("invalid_document", name)
    return document


def _document_items(value: object, name: str) -> tuple[Any, ...]:
    if not isinstance(value, tuple | list):
        raise AdjudicationError("invalid_document", name)
    return tuple(value)


def _check_header(
    schema_version: object, expected_schema: str, packet_set_ref: object, holdout: object
) -> None:
    if type(schema_version) is not str or schema_version != expected_schema:
        raise AdjudicationError("unsupported_version", "schema_version")
    if not is_reference(packet_set_ref):
        raise AdjudicationError("invalid_reference", "packet_set_ref")
    if not is_digest(holdout):
        raise AdjudicationError("invalid_digest", "holdout_commitment_digest")


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
        _check_header(
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
        rubric = _checked_rubric(self.rubric)
        evidence = _checked_evidence(self.source_evidence)
        candidates: tuple[BlindedCandidate, ...] = _checked_items(
            self.candidates, BlindedCandidate, "candidates", 0
        )
        if not MIN_CANDIDATES <= len(candidates) <= MAX_CANDIDATES:
            raise AdjudicationError("invalid_count", "candidates")
        if any(item.alias != _ALIASES[slot] for slot, item in enumerate(candidates)):
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
        checked = _checked_document(document, _PACKET_KEYS, "packet")
        candidates = tuple(
            BlindedCandidate(**_checked_document(item, _CANDIDATE_KEYS, "candidates"))
            for item in _document_items(checked["candidates"], "candidates")
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
                for item in _document_items(checked["rubric"], "rubric")
            ),
            source_evidence=tuple(
                SourceEvidence.from_dict(item)
                for item in _document_items(checked["source_evidence"], "source_evidence")
            ),
            schema_version=checked["schema_version"],
        )

    @classmethod
    def from_json(cls, data: bytes | str) -> BlindedPacket:
        """Strictly parse a packet document (duplicate keys, NaN, ... refused)."""
        try:
            document = decode(data)
        except CanonicalError:
            raise AdjudicationError("invalid_document", "packet") from None
        return cls.from_dict(document)


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
        items: tuple[MappingAssignment, ...] = _checked_items(
            self.assignments, MappingAssignment, "assignments", 0
        )
        if not MIN_CANDIDATES <= len(items) <= MAX_CANDIDATES:
            raise AdjudicationError("invalid_count", "assignments")
        if any(item.alias != _ALIASES[slot] for slot, item in enumerate(items)):
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


def _mapping_payload(
    entries: Iterable[MappingEntry], holdout_commitment_digest: str, packet_set_ref: str
) -> dict[str, Any]:
    return {
        "entries": [entry.to_dict() for entry in entries],
        "holdout_commitment_digest": holdout_commitment_digest,
        "packet_set_ref": packet_set_ref,
        "schema_version": MAPPING_SCHEMA,
    }


def _commit(key: RandomizationKey, payload: Mapping[str, Any]) -> str:
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
        _check_header(
            self.schema_version,
            MAPPING_SCHEMA,
            self.packet_set_ref,
            self.holdout_commitment_digest,
        )
        if not is_digest(self.mapping_commitment):
            raise AdjudicationError("invalid_digest", "mapping_commitment")
        entries: tuple[MappingEntry, ...] = _checked_items(
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
        return _mapping_payload(self.entries, self.holdout_commitment_digest, self.packet_set_ref)

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
        checked = _checked_document(document, _MAPPING_KEYS, "mapping")
        entries = []
        for item in _document_items(checked["entries"], "entries"):
            entry = _checked_document(item, _ENTRY_KEYS, "entries")
            assignments = tuple(
                MappingAssignment(**_checked_document(slot, _ASSIGNMENT_KEYS, "assignments"))
                for slot in _document_items(entry["assignments"], "assignments")
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
        try:
            document = decode(data)
        except CanonicalError:
            raise AdjudicationError("invalid_document", "mapping") from None
        return cls.from_dict(document)


def compute_mapping_commitment(
    mapping: PrivateMapping, randomization_key: RandomizationKey | bytes
) -> str:
    """Return the commitment the key gives to ``mapping``'s payload.

    ``"sha256:" + hex(HMAC-SHA256(key, ASCII(MAPPING_SCHEMA) || 0x00 ||
    canonical(payload)))``: a MAC, not a content digest.
    """
    key = _coerce_key(randomization_key)
    if type(mapping) is not PrivateMapping:
        raise AdjudicationError("invalid_mapping", "mapping")
    return _commit(key, mapping.payload())


# ---------------------------------------------------------------------------
# Balance and audit reports


@dataclass(frozen=True, slots=True)
class BalanceReport:
    """Slot balance of a mapping (``openmed.eval.blinded_adjudication.balance.v1``)."""

    balanced: bool
    candidate_count: int
    maximum_slot_imbalance: int
    packet_count: int
    schema_version: str = BALANCE_SCHEMA

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh wire document."""
        return {
            "balanced": self.balanced,
            "candidate_count": self.candidate_count,
            "maximum_slot_imbalance": self.maximum_slot_imbalance,
            "packet_count": self.packet_count,
            "schema_version": self.schema_version,
        }

    def to_json(self) -> str:
        """Return the canonical JSON text (openmed profile)."""
        return encode_openmed(self.to_dict())


@dataclass(frozen=True, slots=True)
class MappingAudit:
    """Result of :func:`audit_mapping` (``openmed.eval.blinded_adjudication.audit.v1``).

    Holds only a count, closed reason codes and a boolean.
    """

    packet_count: int
    reason_codes: tuple[str, ...]
    valid: bool
    schema_version: str = AUDIT_SCHEMA

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh wire document."""
        return {
            "packet_count": self.packet_count,
            "reason_codes": list(self.reason_codes),
            "schema_version": self.schema_version,
            "valid": self.valid,
        }

    def to_json(self) -> str:
        """Return the canonical JSON text (openmed profile)."""
        return encode_openmed(self.to_dict())


def _coerce_mapping(mapping: object) -> PrivateMapping:
    if type(mapping) is PrivateMapping:
        return mapping
    if not isinstance(mapping, Mapping):
        raise AdjudicationError("invalid_mapping", "mapping")
    try:
        return PrivateMapping.from_dict(mapping)
    except Exception:  # noqa: BLE001 - any malformed document is the same refusal
        raise AdjudicationError("invalid_mapping", "mapping") from None


def balance_report(mapping: PrivateMapping | Mapping[str, Any]) -> BalanceReport:
    """Count identity-per-slot occurrences and report the worst imbalance.

    The first entry fixes the candidate count and identity set; entries of
    another shape are skipped and make the report unbalanced. The imbalance of
    an identity is its highest minus its lowest slot count (zero counts
    included); the report is balanced when every entry has the first entry's
    shape and the maximum imbalance is at most 1. Runs in O(entries x slots).

    Args:
        mapping: a :class:`PrivateMapping` or its parsed document.

    Raises:
        AdjudicationError: ``mapping: invalid_mapping``.
    """
    private = _coerce_mapping(mapping)
    first = private.entries[0].assignments
    count = len(first)
    identities = frozenset(item.candidate_identity for item in first)
    slot_counts = {identity: [0] * count for identity in identities}
    shape_ok = True
    for entry in private.entries:
        row = entry.assignments
        if len(row) != count or frozenset(item.candidate_identity for item in row) != identities:
            shape_ok = False
            continue
        for slot, item in enumerate(row):
            slot_counts[item.candidate_identity][slot] += 1
    imbalance = max((max(counts) - min(counts) for counts in slot_counts.values()), default=0)
    return BalanceReport(
        balanced=shape_ok and imbalance <= 1,
        candidate_count=count,
        maximum_slot_imbalance=imbalance,
        packet_count=len(private.entries),
    )


def _coerce_packets(packets: object) -> tuple[BlindedPacket, ...] | None:
    if not isinstance(packets, tuple | list) or not packets:
        return None
    parsed: list[BlindedPacket] = []
    for item in packets:
        if type(item) is BlindedPacket:
            parsed.append(item)
            continue
        if not isinstance(item, Mapping):
            return None
        try:
            parsed.append(BlindedPacket.from_dict(item))
        except Exception:  # noqa: BLE001 - any malformed packet voids the set
            return None
    return tuple(parsed)


def _packets_match(packets: Sequence[BlindedPacket], mapping: PrivateMapping) -> bool:
    if len(packets) != len(mapping.entries):
        return False
    for packet, entry in zip(packets, mapping.entries, strict=True):
        if (
            packet.packet_set_ref != mapping.packet_set_ref
            or packet.holdout_commitment_digest != mapping.holdout_commitment_digest
            or packet.mapping_commitment != mapping.mapping_commitment
            or packet.case_ref != entry.case_ref
            or len(packet.candidates) != len(entry.assignments)
        ):
            return False
        for candidate, assignment in zip(packet.candidates, entry.assignments, strict=True):
            # Both constructors tie aliases to slots; the alias check is a guard.
            if (
                candidate.alias != assignment.alias
                or digest_bytes(candidate.content.encode("utf-8")) != assignment.output_digest
            ):
                return False
    return True


def audit_mapping(
    packets: Sequence[BlindedPacket | Mapping[str, Any]],
    mapping: PrivateMapping | Mapping[str, Any],
    randomization_key: RandomizationKey | bytes,
) -> MappingAudit:
    """Check packets against the private mapping and its commitment.

    Reasons, in order: ``commitment_mismatch`` (the commitment recomputed with
    the key differs from the stored one; compared in constant time), then
    ``mapping_mismatch`` (packet count differs from the entry count, or, pair
    by pair, the packet set ref, holdout digest, stored commitment, case ref,
    candidate count, a slot alias, or the SHA-256 of a candidate's text
    differs; the first difference stops the check). An empty packet list, a
    non-sequence, or any item that is not a valid packet (object or document)
    gives ``invalid_packet_set`` with packet count 0. ``["valid"]`` otherwise.

    Bad *configuration* raises instead of being reported (as in the reference).

    Raises:
        AdjudicationError: ``randomization_key: invalid_key`` or
            ``mapping: invalid_mapping`` (not a mapping object or a valid
            mapping document).
    """
    key = _coerce_key(randomization_key)
    private = _coerce_mapping(mapping)
    parsed = _coerce_packets(packets)
    if parsed is None:
        return MappingAudit(packet_count=0, reason_codes=("invalid_packet_set",), valid=False)
    reasons: list[str] = []
    if not hmac.compare_digest(_commit(key, private.payload()), private.mapping_commitment):
        reasons.append("commitment_mismatch")
    if not _packets_match(parsed, private):
        reasons.append("mapping_mismatch")
    return MappingAudit(
        packet_count=len(parsed), reason_codes=tuple(reasons) or ("valid",), valid=not reasons
    )


# ---------------------------------------------------------------------------
# Rendering


@dataclass(frozen=True, slots=True, repr=False)
class BlindedPacketSet:
    """The outcome of :func:`render_blinded_packets`.

    ``packets`` (one per case, keyed case order) go to the reviewer;
    ``mapping`` (identities) stays with the evaluator; ``balance`` is the slot
    balance report of the mapping.
    """

    packets: tuple[BlindedPacket, ...]
    mapping: PrivateMapping
    balance: BalanceReport

    def __repr__(self) -> str:
        """Show counts only."""
        return f"BlindedPacketSet(packets={len(self.packets)})"


def _checked_cases(cases: object) -> tuple[ComparisonCase, ...]:
    items: tuple[ComparisonCase, ...] = _checked_items(cases, ComparisonCase, "cases", 1, MAX_CASES)
    if len({case.case_ref for case in items}) != len(items):
        raise AdjudicationError("duplicate_reference", "cases")
    return items


def _checked_manifests(manifests: object, identities: frozenset[str]) -> dict[str, str]:
    if not isinstance(manifests, Mapping):
        raise AdjudicationError("invalid_keys", "submission_manifest_digests")
    try:
        pairs = dict(manifests.items())
    except Exception:  # noqa: BLE001 - hostile mappings must not leak their exception
        raise AdjudicationError("invalid_keys", "submission_manifest_digests") from None
    if len(pairs) != len(identities) or set(pairs) != identities:
        raise AdjudicationError("invalid_keys", "submission_manifest_digests")
    for identity in sorted(identities):
        if not is_digest(pairs[identity]):
            raise AdjudicationError("invalid_digest", "submission_manifest_digest")
    return pairs


def render_blinded_packets(
    *,
    packet_set_ref: str,
    cases: Sequence[ComparisonCase],
    rubric: Sequence[RubricCriterion],
    conflict_of_interest: ConflictOfInterestMetadata,
    holdout_commitment_digest: str,
    submission_manifest_digests: Mapping[str, str],
    randomization_key: RandomizationKey | bytes,
) -> BlindedPacketSet:
    """Render identity-blinded packets and the sealed private mapping.

    Cases are put in keyed case order; the k-th case shows the candidate base
    order rotated left by ``k mod n`` under aliases ``candidate-a``, ... . Pure:
    nothing is persisted. Refusals, first failure wins:

    1. ``packet_set_ref: invalid_reference``
    2. ``holdout_commitment_digest: invalid_digest``
    3. ``randomization_key: invalid_key`` (not bytes / key object, or < 32 bytes)
    4. ``conflict_of_interest: invalid_metadata`` / ``conflict_of_interest: reviewer_recused``
    5. ``cases: invalid_sequence`` (1..100 000 ``ComparisonCase``) /
       ``cases: duplicate_reference``
    6. ``rubric: invalid_sequence`` (1..8 ``RubricCriterion``) /
       ``rubric: duplicate_reference``
    7. ``cases: inconsistent_candidates`` (identity sets differ)
    8. ``submission_manifest_digests: invalid_keys`` /
       ``submission_manifest_digest: invalid_digest``

    and ``mapping: unbalanced`` as a guard (unreachable with cyclic rotation).

    Raises:
        AdjudicationError: see above.
    """
    if not is_reference(packet_set_ref):
        raise AdjudicationError("invalid_reference", "packet_set_ref")
    if not is_digest(holdout_commitment_digest):
        raise AdjudicationError("invalid_digest", "holdout_commitment_digest")
    key = _coerce_key(randomization_key)
    reviewer = require_cleared_reviewer(conflict_of_interest)
    checked_cases = _checked_cases(cases)
    checked_rubric = _checked_rubric(rubric)
    identities = checked_cases[0].candidate_identities
    if any(case.candidate_identities != identities for case in checked_cases):
        raise AdjudicationError("inconsistent_candidates", "cases")
    manifests = _checked_manifests(submission_manifest_digests, identities)

    base = _sorted_keyed(key, CANDIDATE_ORDER_DOMAIN, identities)
    by_ref = {case.case_ref: case for case in checked_cases}
    ordered = [by_ref[ref] for ref in _sorted_keyed(key, CASE_ORDER_DOMAIN, by_ref)]
    entries: list[MappingEntry] = []
    for position, case in enumerate(ordered):
        slots = rotated_order(base, position)
        entries.append(
            MappingEntry(
                assignments=tuple(
                    MappingAssignment(
                        alias=_ALIASES[slot],
                        candidate_identity=identity,
                        output_digest=digest_bytes(
                            case.candidate_outputs[identity].encode("utf-8")
                        ),
                        submission_manifest_digest=manifests[identity],
                    )
                    for slot, identity in enumerate(slots)
                ),
                case_ref=case.case_ref,
            )
        )
    payload = _mapping_payload(entries, holdout_commitment_digest, packet_set_ref)
    mapping = PrivateMapping(
        entries=tuple(entries),
        holdout_commitment_digest=holdout_commitment_digest,
        mapping_commitment=_commit(key, payload),
        packet_set_ref=packet_set_ref,
    )
    balance = balance_report(mapping)
    if not balance.balanced:
        raise AdjudicationError("unbalanced", "mapping")
    packets = tuple(
        BlindedPacket(
            candidates=tuple(
                BlindedCandidate(
                    alias=assignment.alias,
                    content=case.candidate_outputs[assignment.candidate_identity],
                )
                for assignment in entry.assignments
            ),
            case_ref=case.case_ref,
            conflict_of_interest=reviewer,
            holdout_commitment_digest=holdout_commitment_digest,
            mapping_commitment=mapping.mapping_commitment,
            packet_set_ref=packet_set_ref,
            rubric=checked_rubric,
            source_evidence=case.source_evidence,
        )
        for case, entry in zip(ordered, mapping.entries, strict=True)
    )
    return BlindedPacketSet(packets=packets, mapping=mapping, balance=balance)
