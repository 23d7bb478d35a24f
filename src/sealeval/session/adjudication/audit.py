"""Balance and audit reports (``...balance.v1``, ``...audit.v1``) over a private mapping.

:func:`balance_report` counts how often each identity occupies each slot;
:func:`audit_mapping` checks a mapping (and optionally its packets) against the
key and reports closed reason codes.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sealeval.canonical import digest_bytes, encode_openmed
from sealeval.session.adjudication.mapping import (
    PrivateMapping,
    commit,
)
from sealeval.session.adjudication.ordering import (
    RandomizationKey,
    coerce_key,
)
from sealeval.session.adjudication.packet import (
    BlindedPacket,
)
from sealeval.session.adjudication.vocabulary import (
    AUDIT_SCHEMA,
    BALANCE_SCHEMA,
    AdjudicationError,
)

__all__ = ["BalanceReport", "MappingAudit", "audit_mapping", "balance_report"]

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
    key = coerce_key(randomization_key)
    private = _coerce_mapping(mapping)
    parsed = _coerce_packets(packets)
    if parsed is None:
        return MappingAudit(packet_count=0, reason_codes=("invalid_packet_set",), valid=False)
    reasons: list[str] = []
    if not hmac.compare_digest(commit(key, private.payload()), private.mapping_commitment):
        reasons.append("commitment_mismatch")
    if not _packets_match(parsed, private):
        reasons.append("mapping_mismatch")
    return MappingAudit(
        packet_count=len(parsed), reason_codes=tuple(reasons) or ("valid",), valid=not reasons
    )
