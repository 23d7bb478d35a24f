"""Rendering: cases and candidate manifests in, blinded packets and the sealed mapping out.

:func:`render_blinded_packets` orders candidates and cases by keyed HMAC,
rotates the candidate order per case and aliases identities, returning a
:class:`BlindedPacketSet`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sealeval.canonical import digest_bytes, is_digest
from sealeval.session.adjudication.audit import (
    BalanceReport,
    balance_report,
)
from sealeval.session.adjudication.mapping import (
    MappingAssignment,
    MappingEntry,
    PrivateMapping,
    commit,
    mapping_payload,
)
from sealeval.session.adjudication.ordering import (
    RandomizationKey,
    coerce_key,
    require_cleared_reviewer,
    rotated_order,
    sorted_keyed,
)
from sealeval.session.adjudication.packet import (
    BlindedCandidate,
    BlindedPacket,
)
from sealeval.session.adjudication.vocabulary import (
    ALIASES,
    CANDIDATE_ORDER_DOMAIN,
    CASE_ORDER_DOMAIN,
    MAX_CASES,
    AdjudicationError,
    checked_items,
    rubric_criteria,
)
from sealeval.session.cases import (
    ComparisonCase,
    ConflictOfInterestMetadata,
    RubricCriterion,
    is_reference,
)

__all__ = ["BlindedPacketSet", "render_blinded_packets"]

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
    items: tuple[ComparisonCase, ...] = checked_items(cases, ComparisonCase, "cases", 1, MAX_CASES)
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
    key = coerce_key(randomization_key)
    reviewer = require_cleared_reviewer(conflict_of_interest)
    checked_cases = _checked_cases(cases)
    checked_rubric = rubric_criteria(rubric)
    identities = checked_cases[0].candidate_identities
    if any(case.candidate_identities != identities for case in checked_cases):
        raise AdjudicationError("inconsistent_candidates", "cases")
    manifests = _checked_manifests(submission_manifest_digests, identities)

    base = sorted_keyed(key, CANDIDATE_ORDER_DOMAIN, identities)
    by_ref = {case.case_ref: case for case in checked_cases}
    ordered = [by_ref[ref] for ref in sorted_keyed(key, CASE_ORDER_DOMAIN, by_ref)]
    entries: list[MappingEntry] = []
    for position, case in enumerate(ordered):
        slots = rotated_order(base, position)
        entries.append(
            MappingEntry(
                assignments=tuple(
                    MappingAssignment(
                        alias=ALIASES[slot],
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
    payload = mapping_payload(entries, holdout_commitment_digest, packet_set_ref)
    mapping = PrivateMapping(
        entries=tuple(entries),
        holdout_commitment_digest=holdout_commitment_digest,
        mapping_commitment=commit(key, payload),
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
