"""The candidate decision: manifest, digest, gate report, signed packet and bundle.

:func:`decide_candidate` builds the manifest
(``openmed.eval.agent_candidate_manifest.v1``), its digest, the gate report and
the HMAC-signed packet; :class:`CandidateBundle` parses a stored output bundle.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sealeval._validate import check_closed, check_exact
from sealeval.canonical import digest_openmed, encode_openmed, is_digest
from sealeval.errors import CanonicalError
from sealeval.gates.candidate.envelope import (
    EvidenceFileEntry,
)
from sealeval.gates.candidate.keys import (
    Ed25519SigningKey,
    HmacKey,
    as_hmac_key,
)
from sealeval.gates.candidate.packet import (
    AgentCandidatePacket,
    sign_packet,
)
from sealeval.gates.candidate.snapshot import (
    RepositorySnapshot,
)
from sealeval.gates.candidate.vocabulary import (
    ARTIFACT_NAMES,
    BUNDLE_KEYS,
    MANIFEST_KEYS,
    MANIFEST_SCHEMA,
    PACKET_SCHEMA,
    CandidateRunnerError,
    is_source_sha,
)
from sealeval.gates.evaluation import (
    AgentReleaseReport,
    evaluate_agent_release_gates,
)
from sealeval.gates.evidence import MetricEvidence
from sealeval.gates.registry import gate_policy_digest

__all__ = ["CandidateBundle", "CandidateDecision", "decide_candidate"]

# ---------------------------------------------------------------------------
# Manifest, decision and bundle


@dataclass(frozen=True, slots=True)
class CandidateDecision:
    """The result of one run: manifest, its digest, gate report and signed packet."""

    manifest: Mapping[str, Any]
    manifest_digest: str
    report: AgentReleaseReport
    packet: AgentCandidatePacket
    packet_ed25519: Mapping[str, str] | None = None

    @property
    def ready(self) -> bool:
        """Whether the packet decision is ``READY``."""
        return self.packet.ready

    def bundle(self) -> dict[str, Any]:
        """Return the output bundle ``{manifest, manifest_digest, packet}``.

        ``packet_ed25519`` is added only when an Ed25519 key signed the run.
        """
        document: dict[str, Any] = {
            "manifest": copy.deepcopy(dict(self.manifest)),
            "manifest_digest": self.manifest_digest,
            "packet": self.packet.to_dict(),
        }
        if self.packet_ed25519 is not None:
            document["packet_ed25519"] = dict(self.packet_ed25519)
        return document

    def bundle_json(self) -> str:
        """Return the canonical JSON text of the bundle (without the final newline)."""
        return encode_openmed(self.bundle())


def decide_candidate(
    *,
    expected_sha: str,
    before: RepositorySnapshot,
    after: RepositorySnapshot,
    artifacts: Mapping[str, str | None],
    evidence: Sequence[EvidenceFileEntry],
    key: HmacKey | bytes,
    ed25519_key: Ed25519SigningKey | None = None,
) -> CandidateDecision:
    """Build the manifest, evaluate the gates and sign the packet (steps 5-13).

    Args:
        expected_sha: the validated ``--source-sha``.
        before: the repository snapshot taken before reading any input.
        after: the snapshot taken after reading every input.
        artifacts: ``wheel``/``sdist``/``tool_catalog``/``policy`` digests,
            ``None`` for a missing artifact.
        evidence: the assessed ``--evidence`` files in the given order.
        key: the HMAC key (at least ``MIN_KEY_BYTES``).
        ed25519_key: an optional key for the detached Ed25519 signature.

    Raises:
        CandidateRunnerError: ``source_sha_invalid`` or ``signing_key_invalid``.
    """
    if not is_source_sha(expected_sha):
        raise CandidateRunnerError("source_sha_invalid")
    wrapped = as_hmac_key(key)
    if wrapped is None or not wrapped.usable:
        raise CandidateRunnerError("signing_key_invalid")
    reasons: set[str] = set(before.reason_codes)
    digests: dict[str, str | None] = {}
    for name in ARTIFACT_NAMES:
        digests[name] = artifacts.get(name)
        if digests[name] is None:
            reasons.add(f"{name}_missing")
    metrics: list[MetricEvidence] = []
    for entry in evidence:
        if entry.status != "accepted":
            reasons.add(entry.status)
        else:
            metrics.extend(entry.metrics)
    counts = Counter(item.metric for item in metrics)
    duplicated = {name for name, count in counts.items() if count > 1}
    if duplicated:
        reasons.add("evidence_duplicate_metric")
        metrics = [item for item in metrics if item.metric not in duplicated]
    if not evidence:
        reasons.add("evidence_missing")
    if before != after:
        reasons.add("repository_changed")
    reasons.update(after.reason_codes)
    entries = sorted((entry.to_dict() for entry in evidence), key=encode_openmed)
    manifest = {
        "artifacts": digests,
        "evidence": entries,
        "gate_policy_digest": gate_policy_digest(),
        "reason_codes": sorted(reasons),
        "repository": before.to_dict(),
        "repository_after": after.to_dict(),
        "schema_version": MANIFEST_SCHEMA,
    }
    manifest_digest = digest_openmed(manifest)
    report = evaluate_agent_release_gates(metrics, candidate_digest=manifest_digest)
    if not report.ready:
        reasons.add("gate_failed")
    if any(result.reason_code == "missing_evidence" for result in report.gate_results):
        reasons.add("gate_missing_evidence")
    unsigned = {
        "decision": "NOT_READY" if reasons else "READY",
        "gates": [
            {
                "event_count": result.event_count,
                "metric": result.gate.metric,
                "reason_code": result.reason_code,
                "sample_size": result.sample_size,
                "slice_count": len(result.slice_sizes),
            }
            for result in report.gate_results
        ],
        "manifest_digest": manifest_digest,
        "reason_codes": sorted(reasons),
        "report_digest": report.report_digest,
        "schema_version": PACKET_SCHEMA,
    }
    packet = AgentCandidatePacket.from_dict(sign_packet(unsigned, wrapped))
    detached = ed25519_key.sign_packet(packet) if ed25519_key is not None else None
    return CandidateDecision(
        manifest=manifest,
        manifest_digest=manifest_digest,
        report=report,
        packet=packet,
        packet_ed25519=detached,
    )


@dataclass(frozen=True, slots=True)
class CandidateBundle:
    """A stored output bundle: manifest, manifest digest, packet, optional Ed25519 signature."""

    manifest: Mapping[str, Any]
    manifest_digest: str
    packet: AgentCandidatePacket
    packet_ed25519: Mapping[str, Any] | None = None

    @classmethod
    def from_dict(cls, document: object) -> CandidateBundle:
        """Parse a bundle (closed: the three keys, plus ``packet_ed25519`` when present).

        Raises:
            CandidateRunnerError: ``bundle_invalid`` or ``packet_invalid``.
        """
        document = check_closed(
            document,
            None,
            BUNDLE_KEYS,
            ("packet_ed25519",),
            error=CandidateRunnerError,
            type_code="bundle_invalid",
            unknown_code="bundle_invalid",
            missing_code="bundle_invalid",
        )
        manifest = check_exact(
            document["manifest"],
            None,
            MANIFEST_KEYS,
            error=CandidateRunnerError,
            code="bundle_invalid",
        )
        if manifest["schema_version"] != MANIFEST_SCHEMA or not is_digest(
            document["manifest_digest"]
        ):
            raise CandidateRunnerError("bundle_invalid")
        packet = AgentCandidatePacket.from_dict(document["packet"])
        detached = document.get("packet_ed25519")
        if "packet_ed25519" in document and not isinstance(detached, Mapping):
            raise CandidateRunnerError("bundle_invalid")
        return cls(
            manifest=manifest,
            manifest_digest=document["manifest_digest"],
            packet=packet,
            packet_ed25519=detached,
        )

    def consistent(self) -> bool:
        """Whether the manifest hashes to ``manifest_digest`` and the packet names it."""
        try:
            computed = digest_openmed(self.manifest)
        except CanonicalError:
            return False
        return computed == self.manifest_digest == self.packet.manifest_digest
