"""Exact-source candidate decisions: evidence envelopes, manifest, signed packet.

Pure core of the candidate runner (``22-candidate-runner.md``); the git checks,
file reads and output live in :mod:`sealeval.gates.runner`. Everything here
takes bytes and observations in and returns documents, so each rule is testable
without a repository.

* :func:`assess_evidence_file` turns the raw bytes of one evidence envelope
  file (``openmed.eval.agent_release_source.v1``) into a manifest entry
  ``{file_digest, metric_count, status}`` and its parsed metrics; any problem
  is a status, never an exception.
* :func:`parse_evidence_document` is the strict variant used by
  ``sealeval gates evaluate``: a JSON array of MetricEvidence documents or an
  envelope, refused with ``<field>: <code>`` (:class:`EvidenceEnvelopeError`).
* :class:`RepositorySnapshot` is the repository document built from the
  outputs of the git invocations (:class:`GitObservation`).
* :func:`decide_candidate` builds the manifest
  (``openmed.eval.agent_candidate_manifest.v1``), its digest, the gate report
  and the HMAC-signed packet (``openmed.eval.agent_candidate_packet.v1``).
* :class:`AgentCandidatePacket` parses a stored packet with the closed schema
  and :meth:`AgentCandidatePacket.verify` checks it with a key, in constant
  time, never raising.
* Optional, sealeval only: a detached Ed25519 signature over the canonical
  packet bytes (:class:`Ed25519SigningKey`, :func:`verify_packet_ed25519`),
  carried beside the packet in the output bundle as ``packet_ed25519`` so that
  anyone holding the public key can verify without the shared secret. The
  packet itself stays the reference's closed 8-key document.

Homes: :mod:`~sealeval.gates.candidate.vocabulary` (schemas, statuses, errors),
:mod:`~sealeval.gates.candidate.keys`, :mod:`~sealeval.gates.candidate.snapshot`,
:mod:`~sealeval.gates.candidate.envelope`, :mod:`~sealeval.gates.candidate.packet`
and :mod:`~sealeval.gates.candidate.decision`. This package is their face.

The HMAC signature is spelled ``sha256:<hex>`` like a content digest for
compatibility; it is a MAC, keyed with the verbatim bytes of the key file.
"""

from sealeval.gates.candidate.decision import (
    CandidateBundle,
    CandidateDecision,
    decide_candidate,
)
from sealeval.gates.candidate.envelope import (
    EvidenceFileEntry,
    assess_evidence_file,
    decode_evidence_bytes,
    parse_evidence_document,
)
from sealeval.gates.candidate.keys import (
    Ed25519SigningKey,
    HmacKey,
    ed25519_public_key_sha256,
    load_ed25519_public_key,
)
from sealeval.gates.candidate.packet import (
    AgentCandidatePacket,
    PacketGate,
    sign_packet,
    verify_packet_document,
    verify_packet_ed25519,
)
from sealeval.gates.candidate.snapshot import (
    GitObservation,
    RepositorySnapshot,
)
from sealeval.gates.candidate.vocabulary import (
    ARTIFACT_NAMES,
    BLOCKING_REASON_CODES,
    ED25519_ALGORITHM,
    EVIDENCE_STATUSES,
    MANIFEST_SCHEMA,
    MIN_KEY_BYTES,
    PACKET_SCHEMA,
    SOURCE_SCHEMA,
    CandidateRunnerError,
    EvidenceEnvelopeError,
    is_source_sha,
)

__all__ = [
    "ARTIFACT_NAMES",
    "BLOCKING_REASON_CODES",
    "ED25519_ALGORITHM",
    "EVIDENCE_STATUSES",
    "MANIFEST_SCHEMA",
    "MIN_KEY_BYTES",
    "PACKET_SCHEMA",
    "SOURCE_SCHEMA",
    "AgentCandidatePacket",
    "CandidateBundle",
    "CandidateDecision",
    "CandidateRunnerError",
    "Ed25519SigningKey",
    "EvidenceEnvelopeError",
    "EvidenceFileEntry",
    "GitObservation",
    "HmacKey",
    "PacketGate",
    "RepositorySnapshot",
    "assess_evidence_file",
    "decide_candidate",
    "decode_evidence_bytes",
    "ed25519_public_key_sha256",
    "is_source_sha",
    "load_ed25519_public_key",
    "parse_evidence_document",
    "sign_packet",
    "verify_packet_document",
    "verify_packet_ed25519",
]
