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

The HMAC signature is spelled ``sha256:<hex>`` like a content digest for
compatibility; it is a MAC, keyed with the verbatim bytes of the key file.
"""

from __future__ import annotations

import codecs
import copy
import hashlib
import hmac
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from sealeval.canonical import decode, digest_bytes, digest_openmed, encode_openmed, is_digest
from sealeval.errors import CanonicalError
from sealeval.gates.evaluation import (
    GATE_REASON_CODES,
    AgentReleaseReport,
    evaluate_agent_release_gates,
)
from sealeval.gates.evidence import METRIC_KEYS, SLICE_KEYS, MetricEvidence
from sealeval.gates.registry import GATE_METRICS, GateError, gate_policy_digest

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
_ED25519_SIGNATURE: Final = re.compile(r"[0-9a-f]{128}")
_BLOCKING: Final = frozenset(BLOCKING_REASON_CODES)
_DECISIONS: Final = ("READY", "NOT_READY")
_ENVELOPE_KEYS: Final = frozenset({"schema_version", "source_sha", "metrics"})
_UNSIGNED_KEYS: Final = frozenset(
    {"decision", "gates", "manifest_digest", "reason_codes", "report_digest", "schema_version"}
)
_PACKET_KEYS: Final = _UNSIGNED_KEYS | {"packet_digest", "signature"}
_GATE_KEYS: Final = frozenset(
    {"event_count", "metric", "reason_code", "sample_size", "slice_count"}
)
_MANIFEST_KEYS: Final = frozenset(
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
_BUNDLE_KEYS: Final = frozenset({"manifest", "manifest_digest", "packet"})
_DETACHED_KEYS: Final = frozenset({"algorithm", "public_key_sha256", "signature"})


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


# ---------------------------------------------------------------------------
# Keys


class HmacKey:
    """HMAC-SHA256 key material that never shows itself in ``repr``/``str``.

    The bytes are kept verbatim: a trailing newline is part of the key
    (compatibility with the reference; see :attr:`ends_with_newline`).
    """

    __slots__ = ("_material",)

    def __init__(self, material: bytes) -> None:
        """Wrap ``material`` (exactly ``bytes``); any length is held, see :attr:`usable`."""
        if type(material) is not bytes:
            raise CandidateRunnerError("signing_key_invalid")
        self._material = material

    def __repr__(self) -> str:
        """Show nothing of the key."""
        return "HmacKey(<redacted>)"

    __str__ = __repr__

    @property
    def usable(self) -> bool:
        """Whether the key is long enough to sign or verify (``MIN_KEY_BYTES``)."""
        return len(self._material) >= MIN_KEY_BYTES

    @property
    def ends_with_newline(self) -> bool:
        """Whether the key bytes end with a newline byte (usually an editor artefact)."""
        return self._material.endswith(b"\n")

    def mac(self, data: bytes) -> str:
        """Return ``sha256:`` + lowercase hex of HMAC-SHA256 over ``data``."""
        if not self.usable:
            raise CandidateRunnerError("signing_key_invalid")
        return "sha256:" + hmac.new(self._material, data, hashlib.sha256).hexdigest()


def _as_hmac_key(key: HmacKey | bytes) -> HmacKey | None:
    if isinstance(key, HmacKey):
        return key
    if type(key) is bytes:
        return HmacKey(key)
    return None


class Ed25519SigningKey:
    """An Ed25519 private key for detached packet signatures; ``repr`` shows only the key id."""

    __slots__ = ("_key", "_public_key_sha256")

    def __init__(self, key: Ed25519PrivateKey) -> None:
        """Wrap a ``cryptography`` Ed25519 private key."""
        if not isinstance(key, Ed25519PrivateKey):
            raise CandidateRunnerError("ed25519_key_invalid")
        self._key = key
        self._public_key_sha256 = ed25519_public_key_sha256(key.public_key())

    @classmethod
    def from_pem(cls, data: bytes) -> Ed25519SigningKey:
        """Load an unencrypted PKCS#8 PEM Ed25519 private key.

        Raises:
            CandidateRunnerError: ``ed25519_key_invalid``.
        """
        try:
            key = serialization.load_pem_private_key(data, password=None)
        except (ValueError, TypeError, UnsupportedAlgorithm):
            raise CandidateRunnerError("ed25519_key_invalid") from None
        if not isinstance(key, Ed25519PrivateKey):
            raise CandidateRunnerError("ed25519_key_invalid")
        return cls(key)

    def __repr__(self) -> str:
        """Show the public key id only."""
        return f"Ed25519SigningKey(public_key_sha256={self._public_key_sha256!r})"

    __str__ = __repr__

    @property
    def public_key_sha256(self) -> str:
        """``sha256:`` of the raw 32-byte public key (the key identifier)."""
        return self._public_key_sha256

    def public_key(self) -> Ed25519PublicKey:
        """Return the matching public key."""
        return self._key.public_key()

    def sign_packet(self, packet: AgentCandidatePacket) -> dict[str, str]:
        """Return the detached signature document over the canonical packet bytes."""
        signature = self._key.sign(packet.to_json().encode("ascii"))
        return {
            "algorithm": ED25519_ALGORITHM,
            "public_key_sha256": self._public_key_sha256,
            "signature": signature.hex(),
        }


def ed25519_public_key_sha256(key: Ed25519PublicKey) -> str:
    """Return ``sha256:`` of the raw 32-byte encoding of an Ed25519 public key."""
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return digest_bytes(raw)


def load_ed25519_public_key(data: bytes) -> Ed25519PublicKey:
    """Load a PEM ``SubjectPublicKeyInfo`` Ed25519 public key.

    Raises:
        CandidateRunnerError: ``public_key_invalid``.
    """
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise CandidateRunnerError("public_key_invalid") from None
    if not isinstance(key, Ed25519PublicKey):
        raise CandidateRunnerError("public_key_invalid")
    return key


# ---------------------------------------------------------------------------
# Repository snapshot


@dataclass(frozen=True, slots=True)
class GitObservation:
    """Outputs of the git invocations of one snapshot (stripped text, ``None`` = failed).

    Attributes:
        head: ``git rev-parse --verify HEAD^{commit}``.
        status: ``git status --porcelain --untracked-files=all``; ``None`` also
            when it was not run because ``head`` failed.
        tag: the tag name given on the command line, or ``None`` when no tag
            option was given (an empty name counts as given).
        tag_commit: ``git rev-parse --verify --end-of-options
            refs/tags/<tag>^{commit}``; ``None`` when it failed, when
            ``git check-ref-format`` refused the name, or without a tag.
    """

    head: str | None
    status: str | None
    tag: str | None = None
    tag_commit: str | None = None


@dataclass(frozen=True, slots=True)
class RepositorySnapshot:
    """The repository document of the manifest (``repository`` / ``repository_after``)."""

    expected_sha: str
    git_sha: str | None
    reason_codes: tuple[str, ...]
    tag_digest: str | None
    tag_sha: str | None
    tree_status: str

    @classmethod
    def from_observation(cls, expected_sha: str, observation: GitObservation) -> RepositorySnapshot:
        """Apply the snapshot rules to the outputs of the git invocations."""
        reasons: set[str] = set()
        git_sha: str | None = None
        tree_status = "unknown"
        head, status = observation.head, observation.status
        if is_source_sha(head) and status is not None:
            tree_status = "dirty" if status else "clean"
            if status:
                reasons.add("dirty_tree")
            git_sha = head
            if head != expected_sha:
                reasons.add("sha_mismatch")
        else:
            reasons.add("repository_unavailable")
        tag_digest: str | None = None
        tag_sha: str | None = None
        if observation.tag is not None:
            tag_digest = digest_bytes(observation.tag.encode("utf-8", "surrogateescape"))
            if is_source_sha(observation.tag_commit):
                tag_sha = observation.tag_commit
                if tag_sha != expected_sha:
                    reasons.add("tag_mismatch")
            else:
                reasons.add("tag_unavailable")
        return cls(
            expected_sha=expected_sha,
            git_sha=git_sha,
            reason_codes=tuple(sorted(reasons)),
            tag_digest=tag_digest,
            tag_sha=tag_sha,
            tree_status=tree_status,
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the snapshot document."""
        return {
            "expected_sha": self.expected_sha,
            "git_sha": self.git_sha,
            "reason_codes": list(self.reason_codes),
            "tag_digest": self.tag_digest,
            "tag_sha": self.tag_sha,
            "tree_status": self.tree_status,
        }


# ---------------------------------------------------------------------------
# Evidence envelopes


_BOMS: Final = (
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF16_BE, "utf-16"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF8, "utf-8-sig"),
)


def _detect_json_encoding(data: bytes) -> str:
    """Return the encoding of a JSON text per RFC 4627 section 3 (BOMs honoured)."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return encoding
    encoding = "utf-8"
    if len(data) >= 4:
        if not data[0]:
            encoding = "utf-16-be" if data[1] else "utf-32-be"
        elif not data[1]:
            encoding = "utf-16-le" if data[2] or data[3] else "utf-32-le"
    elif len(data) == 2:
        if not data[0]:
            encoding = "utf-16-be"
        elif not data[1]:
            encoding = "utf-16-le"
    return encoding


def _decode_autodetected(data: bytes) -> Any:
    """Decode JSON bytes in UTF-8/16/32 (with or without BOM), strictly otherwise."""
    try:
        text = data.decode(_detect_json_encoding(data))
    except UnicodeDecodeError:
        raise EvidenceEnvelopeError("not_utf8", "evidence") from None
    try:
        return decode(text)
    except CanonicalError as error:
        raise EvidenceEnvelopeError(error.code, "evidence") from None


def _check_keys(document: object, keys: frozenset[str], field: str) -> Mapping[str, Any]:
    if not isinstance(document, Mapping):
        raise EvidenceEnvelopeError("invalid_document", field)
    present = set(document)
    if present - keys:
        raise EvidenceEnvelopeError("unknown_field", field)
    if keys - present:
        raise EvidenceEnvelopeError("missing_field", field)
    return document


def _envelope_source_sha(document: object) -> str:
    """Check the envelope's top level and return its ``source_sha``."""
    envelope = _check_keys(document, _ENVELOPE_KEYS, "evidence")
    schema = envelope["schema_version"]
    if type(schema) is not str or schema != SOURCE_SCHEMA:
        raise EvidenceEnvelopeError("unsupported_version", "schema_version")
    source_sha = envelope["source_sha"]
    if not is_source_sha(source_sha):
        raise EvidenceEnvelopeError("invalid_sha", "source_sha")
    return str(source_sha)


def _parse_metric(record: object, field: str) -> MetricEvidence:
    document = _check_keys(record, METRIC_KEYS, field)
    if document["metric"] not in GATE_METRICS or type(document["metric"]) is not str:
        raise EvidenceEnvelopeError("unexpected_metric", f"{field}.metric")
    slices = document["slices"]
    if not isinstance(slices, list):
        raise EvidenceEnvelopeError("invalid_sequence", f"{field}.slices")
    for index, item in enumerate(slices):
        _check_keys(item, SLICE_KEYS, f"{field}.slices[{index}]")
    try:
        return MetricEvidence.from_dict(document)
    except GateError as error:
        name = error.field or "metric"
        raise type(error)(error.code, f"{field}.{name}") from None


def _parse_metrics(records: object, field: str) -> tuple[MetricEvidence, ...]:
    if not isinstance(records, list):
        raise EvidenceEnvelopeError("invalid_sequence", field)
    if not records:
        raise EvidenceEnvelopeError("empty", field)
    return tuple(_parse_metric(item, f"{field}[{index}]") for index, item in enumerate(records))


def parse_evidence_document(document: object) -> tuple[MetricEvidence, ...]:
    """Strictly parse decoded evidence: an array of MetricEvidence or an envelope.

    Every metric record must carry exactly the ten MetricEvidence keys, name
    one of the nine gates, and every slice exactly the six slice keys.

    Raises:
        EvidenceEnvelopeError: ``<field>: <code>`` for the shape of the file.
        GateError: ``metrics[i].<field>: <code>`` (or ``evidence[i]...``) for a
            record refused by :meth:`MetricEvidence.from_dict`.
    """
    if isinstance(document, list):
        return _parse_metrics(document, "evidence")
    _envelope_source_sha(document)
    assert isinstance(document, Mapping)
    return _parse_metrics(document["metrics"], "metrics")


def decode_evidence_bytes(data: bytes) -> Any:
    """Strictly decode an evidence file for ``sealeval gates evaluate`` (UTF-8 only).

    Raises:
        EvidenceEnvelopeError: ``evidence: <decoding code>``.
    """
    try:
        return decode(data)
    except CanonicalError as error:
        raise EvidenceEnvelopeError(error.code, "evidence") from None


#: Everything a parse of untrusted evidence may raise (``SealevalError`` is a
#: ``ValueError``); the assessment turns any of them into ``evidence_invalid``.
_PARSE_FAILURES: Final = (ValueError, TypeError, LookupError, ArithmeticError, RecursionError)


@dataclass(frozen=True, slots=True)
class EvidenceFileEntry:
    """The manifest entry of one ``--evidence`` file, with its accepted metrics."""

    file_digest: str | None
    metric_count: int
    status: str
    metrics: tuple[MetricEvidence, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Return the manifest entry ``{file_digest, metric_count, status}``."""
        return {
            "file_digest": self.file_digest,
            "metric_count": self.metric_count,
            "status": self.status,
        }


def assess_evidence_file(
    data: bytes | None, *, expected_sha: str, file_digest: str | None = None
) -> EvidenceFileEntry:
    """Assess one evidence envelope file; never raises.

    Args:
        data: the raw bytes, or ``None`` when the file is missing, not a
            regular non-symlink file, unreadable or larger than the reader's
            limit (then ``file_digest`` may still be given).
        expected_sha: the ``--source-sha`` value.
        file_digest: the digest of the file when ``data`` is ``None`` because
            the file was too large to parse (status ``evidence_invalid``).
    """
    if data is None:
        if file_digest is not None:
            return EvidenceFileEntry(file_digest, 0, "evidence_invalid")
        return EvidenceFileEntry(None, 0, "evidence_missing")
    digest = digest_bytes(data)
    try:
        document = _decode_autodetected(data)
        source_sha = _envelope_source_sha(document)
    except _PARSE_FAILURES:
        return EvidenceFileEntry(digest, 0, "evidence_invalid")
    if source_sha != expected_sha:
        return EvidenceFileEntry(digest, 0, "evidence_sha_mismatch")
    try:
        metrics = _parse_metrics(document["metrics"], "metrics")
    except _PARSE_FAILURES:
        return EvidenceFileEntry(digest, 0, "evidence_invalid")
    return EvidenceFileEntry(digest, len(metrics), "accepted", metrics)


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
    if not isinstance(document, Mapping) or set(document) != _GATE_KEYS:
        raise CandidateRunnerError("packet_invalid")
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
    if not isinstance(document, Mapping) or set(document) != _PACKET_KEYS:
        raise CandidateRunnerError("packet_invalid")
    schema = document["schema_version"]
    if type(schema) is not str or schema != PACKET_SCHEMA:
        raise CandidateRunnerError("packet_invalid")
    for name in ("manifest_digest", "report_digest", "packet_digest", "signature"):
        if not is_digest(document[name]):
            raise CandidateRunnerError("packet_invalid")
    reasons = document["reason_codes"]
    if not isinstance(reasons, list | tuple) or not all(
        type(item) is str and item in _BLOCKING for item in reasons
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
    if type(decision) is not str or decision not in _DECISIONS:
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
        wrapped = _as_hmac_key(key)
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
    wrapped = _as_hmac_key(key)
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
    if not isinstance(detached, Mapping) or set(detached) != _DETACHED_KEYS:
        return False
    signature = detached["signature"]
    if (
        detached["algorithm"] != ED25519_ALGORITHM
        or not is_digest(detached["public_key_sha256"])
        or type(signature) is not str
        or _ED25519_SIGNATURE.fullmatch(signature) is None
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
    wrapped = _as_hmac_key(key)
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
        if not isinstance(document, Mapping):
            raise CandidateRunnerError("bundle_invalid")
        keys = set(document)
        if keys not in (_BUNDLE_KEYS, _BUNDLE_KEYS | {"packet_ed25519"}):
            raise CandidateRunnerError("bundle_invalid")
        manifest = document["manifest"]
        if (
            not isinstance(manifest, Mapping)
            or set(manifest) != _MANIFEST_KEYS
            or manifest["schema_version"] != MANIFEST_SCHEMA
            or not is_digest(document["manifest_digest"])
        ):
            raise CandidateRunnerError("bundle_invalid")
        packet = AgentCandidatePacket.from_dict(document["packet"])
        detached = document.get("packet_ed25519")
        if "packet_ed25519" in keys and not isinstance(detached, Mapping):
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
