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

Homes: :mod:`~sealeval.session.adjudication.vocabulary` (schemas, limits,
the error, shared checks), :mod:`~sealeval.session.adjudication.ordering`
(the key, keyed orderings, aliases), :mod:`~sealeval.session.adjudication.packet`,
:mod:`~sealeval.session.adjudication.mapping`,
:mod:`~sealeval.session.adjudication.audit` and
:mod:`~sealeval.session.adjudication.render`. This package is their face.
"""

from sealeval.session.adjudication.audit import (
    BalanceReport,
    MappingAudit,
    audit_mapping,
    balance_report,
)
from sealeval.session.adjudication.mapping import (
    MappingAssignment,
    MappingEntry,
    PrivateMapping,
    compute_mapping_commitment,
)
from sealeval.session.adjudication.ordering import (
    RandomizationKey,
    alias_for_slot,
    candidate_base_order,
    keyed_case_order,
    keyed_hmac,
    require_cleared_reviewer,
    rotated_order,
)
from sealeval.session.adjudication.packet import (
    BlindedCandidate,
    BlindedPacket,
)
from sealeval.session.adjudication.render import (
    BlindedPacketSet,
    render_blinded_packets,
)
from sealeval.session.adjudication.vocabulary import (
    ALIAS_PATTERN,
    AUDIT_REASON_CODES,
    AUDIT_SCHEMA,
    BALANCE_SCHEMA,
    CANDIDATE_ORDER_DOMAIN,
    CASE_ORDER_DOMAIN,
    MAPPING_SCHEMA,
    MAX_CASES,
    MAX_RUBRIC_CRITERIA,
    MIN_KEY_BYTES,
    PACKET_SCHEMA,
    AdjudicationError,
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
