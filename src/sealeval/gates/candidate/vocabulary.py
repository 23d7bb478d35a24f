"""The candidate runner's vocabulary: schema strings, statuses, reason codes and errors.

:class:`CandidateRunnerError` refuses a run, a key or a stored bundle;
:class:`EvidenceEnvelopeError` refuses an evidence document
(``<field>: <code>``).
"""

from __future__ import annotations

import re
from typing import Final

from sealeval.gates.registry import GateError

__all__ = [
    "ARTIFACT_NAMES",
    "BLOCKING_REASON_CODES",
    "ED25519_ALGORITHM",
    "EVIDENCE_STATUSES",
    "MANIFEST_SCHEMA",
    "MIN_KEY_BYTES",
    "PACKET_SCHEMA",
    "SOURCE_SCHEMA",
    "TREE_STATUSES",
    "CandidateRunnerError",
    "EvidenceEnvelopeError",
    "is_source_sha",
]


SOURCE_SCHEMA: Final = "openmed.eval.agent_release_source.v1"
MANIFEST_SCHEMA: Final = "openmed.eval.agent_candidate_manifest.v1"
PACKET_SCHEMA: Final = "openmed.eval.agent_candidate_packet.v1"
ED25519_ALGORITHM: Final = "ed25519"
#: Shortest accepted HMAC key, in bytes.
MIN_KEY_BYTES: Final = 32
#: Artifact names in processing order (``--wheel``, ``--sdist``, ...).
ARTIFACT_NAMES: Final = ("wheel", "sdist", "tool_catalog", "policy")
#: The closed set of blocking reason codes of a candidate packet.
BLOCKING_REASON_CODES: Final = (
    "repository_unavailable",
    "dirty_tree",
    "sha_mismatch",
    "tag_unavailable",
    "tag_mismatch",
    "repository_changed",
    "wheel_missing",
    "sdist_missing",
    "tool_catalog_missing",
    "policy_missing",
    "evidence_missing",
    "evidence_invalid",
    "evidence_sha_mismatch",
    "evidence_duplicate_metric",
    "gate_missing_evidence",
    "gate_failed",
)
#: Status of one evidence file in the manifest.
EVIDENCE_STATUSES: Final = (
    "accepted",
    "evidence_missing",
    "evidence_invalid",
    "evidence_sha_mismatch",
)
TREE_STATUSES: Final = ("clean", "dirty", "unknown")

_SHA: Final = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
ED25519_SIGNATURE: Final = re.compile(r"[0-9a-f]{128}")
BLOCKING: Final = frozenset(BLOCKING_REASON_CODES)
DECISIONS: Final = ("READY", "NOT_READY")
ENVELOPE_KEYS: Final = frozenset({"schema_version", "source_sha", "metrics"})
_UNSIGNED_KEYS: Final = frozenset(
    {"decision", "gates", "manifest_digest", "reason_codes", "report_digest", "schema_version"}
)
PACKET_KEYS: Final = _UNSIGNED_KEYS | {"packet_digest", "signature"}
GATE_KEYS: Final = frozenset({"event_count", "metric", "reason_code", "sample_size", "slice_count"})
MANIFEST_KEYS: Final = frozenset(
    {
        "artifacts",
        "evidence",
        "gate_policy_digest",
        "reason_codes",
        "repository",
        "repository_after",
        "schema_version",
    }
)
BUNDLE_KEYS: Final = frozenset({"manifest", "manifest_digest", "packet"})
DETACHED_KEYS: Final = frozenset({"algorithm", "public_key_sha256", "signature"})


class CandidateRunnerError(GateError):
    """Configuration, output or packet refusal of the candidate runner (message ``<code>``).

    Every problem with the *candidate* itself becomes a signed ``NOT_READY``
    packet instead; these codes are the only failures of a run.
    """

    module = "sealeval.gates.candidate"
    field_in_message = False
    codes = frozenset(
        {
            "signing_key_unavailable",
            "signing_key_invalid",
            "source_sha_invalid",
            "output_unavailable",
            "packet_invalid",
            # sealeval additions (verify-packet, Ed25519)
            "packet_unavailable",
            "bundle_invalid",
            "ed25519_key_unavailable",
            "ed25519_key_invalid",
            "public_key_unavailable",
            "public_key_invalid",
        }
    )


class EvidenceEnvelopeError(GateError):
    """Refusal of an evidence file by the strict parser (``<field>: <code>``).

    Used by ``sealeval gates evaluate``; the candidate runner maps every
    refusal to the file status ``evidence_invalid`` instead.
    """

    module = "sealeval.gates.candidate"
    codes = frozenset(
        {
            # reading and strict decoding (``sealeval.canonical.decode``)
            "unavailable",
            "too_large",
            "byte_order_mark",
            "not_utf8",
            "invalid_json",
            "duplicate_key",
            "non_standard_constant",
            "non_finite_number",
            "string_too_long",
            "too_deep",
            "integer_too_long",
            "unpaired_surrogate",
            # shape
            "invalid_document",
            "unknown_field",
            "missing_field",
            "unsupported_version",
            "invalid_sha",
            "invalid_sequence",
            "empty",
            "unexpected_metric",
        }
    )


def is_source_sha(value: object) -> bool:
    """Return whether ``value`` is a ``str`` full git commit SHA (40 or 64 lowercase hex)."""
    return type(value) is str and _SHA.fullmatch(value) is not None
