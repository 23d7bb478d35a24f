"""The signature envelope and the typed payloads of an evidence pack.

Part of :mod:`sealeval.captured.pack_reader` (``32-verify.md`` §3, steps 5.1
and 5.3-5.4): :func:`check_signature` checks the envelope's contract, then
the signature and fingerprints; :func:`typed_payload` builds a role's typed
value (run, policy, report, request document) and defers each contract
failure to a :class:`Deferred`, which raises the first in the reference's
order (record counts, then canonical bytes, then schemas; by role).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sealeval._validate import decode_object, freeze_json
from sealeval.canonical import digest_invarlock, encode_invarlock
from sealeval.captured.errors import CapturedRunError
from sealeval.captured.pack_layout import (
    MAX_CONTROL_BYTES,
    PACK_JSON_CODES,
    ROLES,
    SIGNATURE_NAME,
    EvidencePackError,
    PackLimits,
    PackManifest,
    ReportValidator,
    check_report_document,
)
from sealeval.captured.pack_reader.scan import PackSnapshot, Scanner
from sealeval.captured.policy import ComparisonPolicy, ComparisonPolicyError
from sealeval.captured.run import Limits, Run, run_from_decoded
from sealeval.captured.signing import (
    SignatureEnvelope,
    SigningKeyError,
    VerifyKey,
    parse_signature_envelope,
    verify_signature_envelope,
)
from sealeval.errors import SealevalError

__all__ = ["Deferred", "check_signature", "typed_payload"]


@dataclass(slots=True)
class Deferred:
    """Contract failures found while reading, raised later in the reference's order."""

    failures: list[tuple[int, int, EvidencePackError]] = field(default_factory=list)

    def add(self, rank: int, role: str, error: EvidencePackError) -> None:
        """Defer ``error`` of ``role`` at ``rank`` (record counts, canonical bytes, schemas)."""
        self.failures.append((rank, ROLES.index(role), error))

    def raise_first(self) -> None:
        """Raise the first deferred failure in the reference's order (rank, then role)."""
        if self.failures:
            raise min(self.failures, key=lambda item: (item[0], item[1]))[2]


_COUNT, _CANONICAL, _SCHEMA = 0, 1, 2


def _typed_run(
    role: str, document: dict[str, Any], file_digest: str, deferred: Deferred, limits: Limits
) -> Run | None:
    """Build a run (within the record cap, closed schema, canonical) or defer the refusal."""
    try:
        run = run_from_decoded(document, limits=limits)
    except CapturedRunError as error:
        if error.code == "too_many_records":
            deferred.add(_COUNT, role, EvidencePackError("too_many_records", role))
        else:
            deferred.add(_SCHEMA, role, EvidencePackError("invalid_payload", role))
        if digest_invarlock(document) != file_digest:
            deferred.add(_CANONICAL, role, EvidencePackError("not_canonical", role))
        return None
    if run.digest != file_digest:
        deferred.add(_CANONICAL, role, EvidencePackError("not_canonical", role))
    return run


def _typed_policy(document: dict[str, Any], deferred: Deferred) -> ComparisonPolicy | None:
    try:
        return ComparisonPolicy(document)
    except ComparisonPolicyError:
        deferred.add(_SCHEMA, "policy", EvidencePackError("invalid_payload", "policy"))
        return None


def _typed_report(
    document: dict[str, Any],
    deferred: Deferred,
    validate_report: ReportValidator | None,
    decision_order: str,
) -> Mapping[str, Any] | None:
    try:
        check_report_document(document, decision_order=decision_order)
        frozen: Mapping[str, Any] = freeze_json(document, "report", error=CapturedRunError)  # type: ignore[assignment]
        if validate_report is not None:
            validate_report(frozen)
    except SealevalError as error:
        field_name = error.field if isinstance(error, EvidencePackError) else "report"
        deferred.add(_SCHEMA, "report", EvidencePackError("invalid_payload", field_name))
        return None
    return frozen


def typed_payload(
    role: str,
    document: dict[str, Any],
    file_digest: str,
    deferred: Deferred,
    *,
    validate_report: ReportValidator | None,
    limits: PackLimits,
    decision_order: str,
) -> Any:
    """Build the typed value of a payload; defer contract failures (5.3/5.4 order)."""
    if role in ("baseline", "subject"):
        return _typed_run(role, document, file_digest, deferred, limits.run_limits())
    if digest_invarlock(document) != file_digest:
        deferred.add(_CANONICAL, role, EvidencePackError("not_canonical", role))
    if role == "policy":
        return _typed_policy(document, deferred)
    if role == "report":
        return _typed_report(document, deferred, validate_report, decision_order)
    return document  # the request: validated at step 5.7


def check_signature(
    scanner: Scanner, snapshot: PackSnapshot, manifest: PackManifest, manifest_bytes: bytes
) -> tuple[SignatureEnvelope, VerifyKey]:
    """Step 5.1: envelope contract (4), then signature and fingerprints (6)."""
    data = scanner.read(SIGNATURE_NAME, snapshot)
    document = decode_object(
        data, "signature", error=EvidencePackError, limit=MAX_CONTROL_BYTES, codes=PACK_JSON_CODES
    )
    if encode_invarlock(document) != data:
        raise EvidencePackError("not_canonical", "signature")
    try:
        envelope = parse_signature_envelope(document)
    except SigningKeyError as error:
        code = {"unknown_field": "unknown_field", "missing_field": "missing_field"}.get(
            error.code, "invalid_field"
        )
        raise EvidencePackError(code, "signature") from None
    try:
        key = verify_signature_envelope(
            envelope, manifest_bytes, manifest_fingerprint=manifest.signing_key_fingerprint
        )
    except SigningKeyError as error:
        code = "signer_mismatch" if error.code == "fingerprint_mismatch" else "signature_invalid"
        raise EvidencePackError(code, "signature") from None
    return envelope, key
