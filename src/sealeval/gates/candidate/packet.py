"""The signed candidate packet (``openmed.eval.agent_candidate_packet.v1``).

:func:`sign_packet` signs an unsigned packet with HMAC-SHA256;
:class:`AgentCandidatePacket` parses a stored packet with the closed schema and
:meth:`AgentCandidatePacket.verify` checks it in constant time, never raising;
:func:`verify_packet_ed25519` checks the optional detached Ed25519 signature.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from sealeval._validate import check_exact
from sealeval.canonical import digest_openmed, encode_openmed, is_digest
from sealeval.gates.candidate.keys import (
    HmacKey,
    as_hmac_key,
    ed25519_public_key_sha256,
)
from sealeval.gates.candidate.vocabulary import (
    BLOCKING,
    DECISIONS,
    DETACHED_KEYS,
    ED25519_ALGORITHM,
    ED25519_SIGNATURE,
    GATE_KEYS,
    PACKET_KEYS,
    PACKET_SCHEMA,
    CandidateRunnerError,
)
from sealeval.gates.evaluation import (
    GATE_REASON_CODES,
)
from sealeval.gates.registry import GATE_METRICS

__all__ = [
    "AgentCandidatePacket",
    "PacketGate",
    "sign_packet",
    "verify_packet_document",
    "verify_packet_ed25519",
]

# ---------------------------------------------------------------------------
# Packet


@dataclass(frozen=True, slots=True)
class PacketGate:
    """One gate line of a packet."""

    event_count: int | None
    metric: str
    reason_code: str
    sample_size: int
    slice_count: int

    def to_dict(self) -> dict[str, Any]:
        """Return the gate document."""
        return {
            "event_count": self.event_count,
            "metric": self.metric,
            "reason_code": self.reason_code,
            "sample_size": self.sample_size,
            "slice_count": self.slice_count,
        }


def _is_count(value: object) -> bool:
    return type(value) is int and value >= 0


def _parse_gate(document: object, metric: str) -> PacketGate:
    document = check_exact(
        document, None, GATE_KEYS, error=CandidateRunnerError, code="packet_invalid"
    )
    sample_size = document["sample_size"]
    event_count = document["event_count"]
    reason_code = document["reason_code"]
    if (
        type(document["metric"]) is not str
        or document["metric"] != metric
        or type(reason_code) is not str
        or reason_code not in GATE_REASON_CODES
        or not _is_count(sample_size)
        or not _is_count(document["slice_count"])
        or not (event_count is None or (_is_count(event_count) and event_count <= sample_size))
    ):
        raise CandidateRunnerError("packet_invalid")
    return PacketGate(
        event_count=event_count,
        metric=metric,
        reason_code=reason_code,
        sample_size=sample_size,
        slice_count=document["slice_count"],
    )


def _check_packet_document(document: object) -> tuple[PacketGate, ...]:
    """Apply the closed packet schema; return the parsed gate lines."""
    document = check_exact(
        document, None, PACKET_KEYS, error=CandidateRunnerError, code="packet_invalid"
    )
    schema = document["schema_version"]
    if type(schema) is not str or schema != PACKET_SCHEMA:
        raise CandidateRunnerError("packet_invalid")
    for name in ("manifest_digest", "report_digest", "packet_digest", "signature"):
        if not is_digest(document[name]):
            raise CandidateRunnerError("packet_invalid")
    reasons = document["reason_codes"]
    if not isinstance(reasons, list | tuple) or not all(
        type(item) is str and item in BLOCKING for item in reasons
    ):
        raise CandidateRunnerError("packet_invalid")
    if list(reasons) != sorted(set(reasons)):
        raise CandidateRunnerError("packet_invalid")
    gates = document["gates"]
    if not isinstance(gates, list | tuple) or len(gates) != len(GATE_METRICS):
        raise CandidateRunnerError("packet_invalid")
    parsed = tuple(
        _parse_gate(item, metric) for item, metric in zip(gates, GATE_METRICS, strict=True)
    )
    decision = document["decision"]
    if type(decision) is not str or decision not in DECISIONS:
        raise CandidateRunnerError("packet_invalid")
    all_satisfied = all(gate.reason_code == "threshold_satisfied" for gate in parsed)
    if (decision == "READY") != (not reasons and all_satisfied):
        raise CandidateRunnerError("packet_invalid")
    return parsed


@dataclass(frozen=True, slots=True)
class AgentCandidatePacket:
    """The signed decision packet (closed 8-key document).

    ``packet_digest`` is the sha256 of the canonical packet without
    ``packet_digest`` and ``signature``; ``signature`` is the HMAC-SHA256 (spelled
    ``sha256:<hex>``) of the canonical packet without ``signature``.
    """

    decision: str
    gates: tuple[PacketGate, ...]
    manifest_digest: str
    reason_codes: tuple[str, ...]
    report_digest: str
    packet_digest: str
    signature: str
    schema_version: str = PACKET_SCHEMA

    def __post_init__(self) -> None:
        """Refuse a packet outside the closed schema; an invalid packet cannot exist."""
        if (
            type(self.gates) is not tuple
            or not all(type(gate) is PacketGate for gate in self.gates)
            or type(self.reason_codes) is not tuple
        ):
            raise CandidateRunnerError("packet_invalid")
        _check_packet_document(self.to_dict())

    @property
    def ready(self) -> bool:
        """Whether the decision is ``READY``."""
        return self.decision == "READY"

    def unsigned_dict(self) -> dict[str, Any]:
        """Return the packet without ``packet_digest`` and ``signature``."""
        return {
            "decision": self.decision,
            "gates": [gate.to_dict() for gate in self.gates],
            "manifest_digest": self.manifest_digest,
            "reason_codes": list(self.reason_codes),
            "report_digest": self.report_digest,
            "schema_version": self.schema_version,
        }

    def to_dict(self) -> dict[str, Any]:
        """Return the packet document (8 keys)."""
        return {
            **self.unsigned_dict(),
            "packet_digest": self.packet_digest,
            "signature": self.signature,
        }

    def to_json(self) -> str:
        """Return the canonical JSON text (openmed profile)."""
        return encode_openmed(self.to_dict())

    @classmethod
    def from_dict(cls, document: object) -> AgentCandidatePacket:
        """Parse a packet with the closed schema.

        Raises:
            CandidateRunnerError: ``packet_invalid`` for any violation.
        """
        parsed = _check_packet_document(document)
        assert isinstance(document, Mapping)
        return cls(
            decision=document["decision"],
            gates=parsed,
            manifest_digest=document["manifest_digest"],
            reason_codes=tuple(document["reason_codes"]),
            report_digest=document["report_digest"],
            packet_digest=document["packet_digest"],
            signature=document["signature"],
            schema_version=document["schema_version"],
        )

    def digest_matches(self) -> bool:
        """Whether ``packet_digest`` equals the digest recomputed from the packet."""
        computed = digest_openmed(self.unsigned_dict())
        return hmac.compare_digest(computed.encode("ascii"), self.packet_digest.encode("ascii"))

    def verify(self, key: HmacKey | bytes) -> bool:
        """Check the packet digest and the HMAC signature with ``key``; never raises.

        A key shorter than ``MIN_KEY_BYTES`` (or not bytes) verifies nothing.
        Both comparisons are constant-time.
        """
        wrapped = as_hmac_key(key)
        if wrapped is None or not wrapped.usable:
            return False
        signed = {**self.unsigned_dict(), "packet_digest": self.packet_digest}
        expected = wrapped.mac(encode_openmed(signed).encode("ascii"))
        signature_ok = hmac.compare_digest(expected.encode("ascii"), self.signature.encode("ascii"))
        return self.digest_matches() & signature_ok


def sign_packet(unsigned: Mapping[str, Any], key: HmacKey | bytes) -> dict[str, Any]:
    """Add ``packet_digest`` and ``signature`` to an unsigned packet document.

    Raises:
        CandidateRunnerError: ``signing_key_invalid`` for a key shorter than
            ``MIN_KEY_BYTES``.
    """
    wrapped = as_hmac_key(key)
    if wrapped is None:
        raise CandidateRunnerError("signing_key_invalid")
    document = dict(unsigned)
    document["packet_digest"] = digest_openmed(document)
    document["signature"] = wrapped.mac(encode_openmed(document).encode("ascii"))
    return document


def verify_packet_document(document: object, key: HmacKey | bytes) -> bool:
    """Parse ``document`` as a packet and verify it with ``key``; never raises."""
    try:
        packet = AgentCandidatePacket.from_dict(document)
    except CandidateRunnerError:
        return False
    return packet.verify(key)


def verify_packet_ed25519(
    packet: AgentCandidatePacket, detached: object, public_key: Ed25519PublicKey
) -> bool:
    """Verify a detached ``packet_ed25519`` signature document; never raises.

    The document must be ``{algorithm: "ed25519", public_key_sha256,
    signature}`` with the key id of ``public_key`` and a valid signature over
    the canonical packet bytes; the packet digest must also match.
    """
    if not isinstance(detached, Mapping) or set(detached) != DETACHED_KEYS:
        return False
    signature = detached["signature"]
    if (
        detached["algorithm"] != ED25519_ALGORITHM
        or not is_digest(detached["public_key_sha256"])
        or type(signature) is not str
        or ED25519_SIGNATURE.fullmatch(signature) is None
    ):
        return False
    if not hmac.compare_digest(
        str(detached["public_key_sha256"]).encode("ascii"),
        ed25519_public_key_sha256(public_key).encode("ascii"),
    ):
        return False
    try:
        public_key.verify(bytes.fromhex(signature), packet.to_json().encode("ascii"))
    except InvalidSignature:
        return False
    return packet.digest_matches()
