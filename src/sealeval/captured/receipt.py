"""Signed verification receipts ``invarlock/evidence-verification-receipt-v3``.

Wire contract: ``32-verify.md`` §5.1 and §6 of the invarlock specification;
JSON Schema ``contracts/invarlock.evidence-verification-receipt-v3.schema.json``.
See ``docs/verification.md``.

A receipt is the verifier's signed statement about one examined pack: the
pack's manifest digest, the recipient's **expected** anchors (also on
rejection), the verifier, the replay status, the scoring assurance and the
verdict. It is written whenever the manifest was identified — for a
successful verification, a policy failure (7) and for contract (4) and
integrity (6) rejections alike — and never for an incomplete verification
(exit 2).

* :func:`receipt_statement` builds the statement of an outcome,
  :func:`sign_receipt` returns the file bytes (canonical
  ``{statement, signature}``, Ed25519 over the statement's canonical bytes;
  deterministic), :func:`issue_receipt` does both, and
  :func:`publish_receipt` writes them no-clobber with mode 0600.
* :func:`check_receipt` re-verifies a receipt against the caller's own
  expectations (never the pack's) and raises :class:`ReceiptError`;
  :func:`verify_receipt` returns a :class:`ReceiptCheck` instead. A
  rejection receipt is authentic and verifies: it attests the rejection.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from sealeval._fs import (
    FileSystemError,
    open_directory,
    publish_exclusive,
    read_regular,
    translated,
)
from sealeval._validate import check_exact, decode_object
from sealeval.canonical import digest_bytes, encode_invarlock, is_digest
from sealeval.captured.pack_reader import (
    DECISIONS,
    MANIFEST_NAME,
    MAX_MANIFEST_DETECT_BYTES,
    PACK_FORMAT,
    PACK_KIND,
    REFERENCE_PACK_LIMITS,
    ROLES,
    EvidencePackError,
    PackLimits,
    parse_manifest,
    read_evidence_pack,
)
from sealeval.captured.policy import (
    ComparisonPolicy,
    ComparisonPolicyError,
    parse_comparison_policy,
)
from sealeval.captured.request import comparison_id
from sealeval.captured.signing import SigningKey, SigningKeyError, VerifyKey
from sealeval.captured.trust import MAX_POLICY_BYTES, RecipientInputs, is_identity
from sealeval.captured.verify import (
    REPLAY_COMPLETED,
    REPLAY_STATUSES,
    STATUS_CONTRACT,
    STATUS_INTEGRITY,
    STATUS_PASS,
    STATUS_POLICY_FAIL,
    VerificationOutcome,
    scoring_assurance,
)
from sealeval.errors import CanonicalError, CapturedError

__all__ = [
    "MAX_RECEIPT_BYTES",
    "RECEIPT_FORMAT",
    "RECEIPT_KIND",
    "RECEIPT_SIGNATURE_FORMAT",
    "VERIFICATION_SCOPE",
    "ReceiptCheck",
    "ReceiptError",
    "check_receipt",
    "issue_receipt",
    "parse_receipt",
    "publish_receipt",
    "receipt_statement",
    "sign_receipt",
    "verify_receipt",
]

#: ``statement.format``.
RECEIPT_FORMAT: Final = "invarlock/evidence-verification-receipt-v3"
#: ``statement.kind``.
RECEIPT_KIND: Final = "captured"
#: ``signature.format``.
RECEIPT_SIGNATURE_FORMAT: Final = "invarlock/evidence-verification-receipt-signature-v1"
#: ``statement.verification_scope``.
VERIFICATION_SCOPE: Final = "captured_comparison"
#: Largest receipt file, in bytes.
MAX_RECEIPT_BYTES: Final = 1_048_576

_SUBJECT_KIND: Final = "captured_run"
_ALGORITHM: Final = "ed25519"
_STATEMENT: Final = (
    "format",
    "kind",
    "pack_format",
    "pack_manifest_digest",
    "anchors",
    "subject",
    "verifier",
    "verification_scope",
    "replay_status",
    "scoring_assurance",
    "verdict",
)
_ANCHORS: Final = (
    "baseline_run_digest",
    "subject_run_digest",
    "policy_digest",
    "request_digest",
    "signer_fingerprint",
)
_VERIFIER: Final = ("identity", "signing_key_fingerprint", "trust_profile_digest")
_VERDICT: Final = ("ok", "integrity_ok", "decision", "policy_verdict", "verification_status")
_ASSURANCE: Final = ("name", "slice", "kind", "scoring_assurance")
_ASSURANCES: Final = ("recorded", "recomputed")
_MAX_ASSURANCE: Final = 272
_TEXT128: Final = re.compile(r"[^\x00-\x1f\x7f]{1,128}")
_BASE64_SIGNATURE: Final = re.compile(r"[A-Za-z0-9+/]{86}==")


class ReceiptError(CapturedError):
    """Refusal to issue, publish or accept a verification receipt."""

    module = "sealeval.captured.receipt"
    codes = frozenset(
        {
            # issuing and publishing
            "invalid_type",
            "not_identified",
            "publication_failed",
            # reading
            "not_found",
            "not_regular_file",
            "unreadable",
            "too_large",
            "not_utf8",
            "invalid_json",
            "duplicate_key",
            "not_object",
            # the caller's expectations
            "invalid_expectation",
            "invalid_policy",
            # the receipt's closed schema and invariants
            "schema_violation",
            # checks against the caller's expectations
            "subject_mismatch",
            "assurance_mismatch",
            "pack_unidentified",
            "manifest_mismatch",
            "anchor_mismatch",
            "verifier_mismatch",
            "verifier_key_unauthorized",
            "signature_invalid",
            "pack_mismatch",
        }
    )


def _fail(code: str, where: str | None = None) -> ReceiptError:
    return ReceiptError(code, where)


# ---------------------------------------------------------------------------
# Issuing


def receipt_statement(outcome: VerificationOutcome, recipient: RecipientInputs) -> dict[str, Any]:
    """Return the receipt statement of an identified outcome.

    Anchors are the recipient's expected values (``policy_digest`` is the
    recipient policy's), even on rejection; ``scoring_assurance`` is set for
    statuses 0 and 7 only.

    Raises:
        ReceiptError: ``invalid_type``; ``not_identified`` (the pack was never
            identified: no receipt may be written).
    """
    if not isinstance(outcome, VerificationOutcome) or not isinstance(recipient, RecipientInputs):
        raise _fail("invalid_type", "receipt")
    if outcome.pack_manifest_digest is None:
        raise _fail("not_identified", "pack_manifest_digest")
    anchors = recipient.anchors
    assurance = outcome.assurance if outcome.integrity_ok else None
    return {
        "format": RECEIPT_FORMAT,
        "kind": RECEIPT_KIND,
        "pack_format": PACK_FORMAT,
        "pack_manifest_digest": outcome.pack_manifest_digest,
        "anchors": {
            "baseline_run_digest": anchors.baseline_run_digest,
            "subject_run_digest": anchors.subject_run_digest,
            "policy_digest": recipient.policy_digest,
            "request_digest": anchors.request_digest,
            "signer_fingerprint": anchors.signer_fingerprint,
        },
        "subject": {"kind": _SUBJECT_KIND, "run_digest": anchors.subject_run_digest},
        "verifier": {
            "identity": recipient.verifier_identity,
            "signing_key_fingerprint": recipient.verifier_fingerprint,
            "trust_profile_digest": recipient.trust_profile_digest,
        },
        "verification_scope": VERIFICATION_SCOPE,
        "replay_status": outcome.replay_status,
        "scoring_assurance": None if assurance is None else [item.to_dict() for item in assurance],
        "verdict": outcome.verdict(),
    }


def sign_receipt(statement: Mapping[str, Any], key: SigningKey) -> bytes:
    """Sign a statement; return the receipt file bytes (canonical ``{statement, signature}``).

    The statement is checked against the receipt schema first, so an
    inconsistent receipt is never signed.

    Raises:
        ReceiptError: ``invalid_type``, ``schema_violation``, ``too_large``.
    """
    if not isinstance(key, SigningKey):
        raise _fail("invalid_type", "verifier_signing_key")
    try:
        message = encode_invarlock(statement)
    except CanonicalError:
        raise _fail("schema_violation", "statement") from None
    signature = {
        "format": RECEIPT_SIGNATURE_FORMAT,
        "algorithm": _ALGORITHM,
        "public_key": {"encoding": "pem", "value": key.public_key.pem},
        "value": base64.b64encode(key.sign(message)).decode("ascii"),
    }
    document = {"statement": statement, "signature": signature}
    parse_receipt(document)
    data = encode_invarlock(document)
    if len(data) > MAX_RECEIPT_BYTES:  # pragma: no cover - at most 272 short entries
        raise _fail("too_large", "receipt")
    return data


def issue_receipt(outcome: VerificationOutcome, recipient: RecipientInputs) -> bytes:
    """Build and sign the receipt of an identified outcome with the recipient's verifier key."""
    return sign_receipt(receipt_statement(outcome, recipient), recipient.verifier_key)


def publish_receipt(destination: str | os.PathLike[str], data: bytes) -> None:
    """Write receipt bytes no-clobber (mode 0600); missing parent directories get mode 0700.

    The destination follows the one output rule of ``sealeval._fs``: no
    component of its folder may be a symlink, the name must not exist, the
    bytes are published atomically.

    Raises:
        ReceiptError: ``publication_failed`` (the destination exists, a
            folder component is a symlink, or it cannot be written).
    """
    try:
        publish_exclusive(destination, data, mode=0o600, create_parents=True)
    except FileSystemError:
        raise _fail("publication_failed", "receipt") from None


# ---------------------------------------------------------------------------
# The closed schema


def _constant(document: Mapping[str, Any], member: str, expected: str, where: str) -> None:
    value = document[member]
    if type(value) is not str or value != expected:
        raise _fail("schema_violation", f"{where}.{member}")


def _digest(value: object, where: str, *, nullable: bool = False) -> None:
    if value is None and nullable:
        return
    if not is_digest(value):
        raise _fail("schema_violation", where)


def _check_assurance(value: object) -> None:
    where = "statement.scoring_assurance"
    if value is None:
        return
    if not isinstance(value, list | tuple) or not 1 <= len(value) <= _MAX_ASSURANCE:
        raise _fail("schema_violation", where)
    for entry in value:
        item = check_exact(entry, where, _ASSURANCE, error=ReceiptError, code="schema_violation")
        for member in ("name", "slice", "kind"):
            if type(item[member]) is not str or _TEXT128.fullmatch(item[member]) is None:
                raise _fail("schema_violation", where)
        if item["scoring_assurance"] not in _ASSURANCES:
            raise _fail("schema_violation", where)


def _check_verdict(statement: Mapping[str, Any]) -> None:
    """Check the verdict's types and the schema invariants (32-verify.md §5.1)."""
    where = "statement.verdict"
    verdict = check_exact(
        statement["verdict"], where, _VERDICT, error=ReceiptError, code="schema_violation"
    )
    ok, integrity, decision = verdict["ok"], verdict["integrity_ok"], verdict["decision"]
    policy_verdict, status = verdict["policy_verdict"], verdict["verification_status"]
    if type(ok) is not bool or type(integrity) is not bool or type(status) is not int:
        raise _fail("schema_violation", where)
    assurance = statement["scoring_assurance"]
    replay = statement["replay_status"]
    if integrity:
        passed = (ok, decision, policy_verdict, status) == (True, "pass", "pass", STATUS_PASS)
        failed = (
            ok is False
            and decision in DECISIONS[1:]
            and policy_verdict == "fail"
            and status == STATUS_POLICY_FAIL
        )
        if not (passed or failed) or replay != REPLAY_COMPLETED or assurance is None:
            raise _fail("schema_violation", where)
        return
    rejected = (ok, decision, policy_verdict, assurance) == (False, None, None, None)
    if not rejected or status not in (STATUS_CONTRACT, STATUS_INTEGRITY):
        raise _fail("schema_violation", where)
    if replay != "not_started" and status != STATUS_INTEGRITY:
        raise _fail("schema_violation", where)


def _check_signature_document(value: object) -> None:
    where = "signature"
    signature = check_exact(
        value,
        where,
        ("format", "algorithm", "public_key", "value"),
        error=ReceiptError,
        code="schema_violation",
    )
    _constant(signature, "format", RECEIPT_SIGNATURE_FORMAT, where)
    _constant(signature, "algorithm", _ALGORITHM, where)
    public_key = check_exact(
        signature["public_key"],
        f"{where}.public_key",
        ("encoding", "value"),
        error=ReceiptError,
        code="schema_violation",
    )
    _constant(public_key, "encoding", "pem", f"{where}.public_key")
    if type(public_key["value"]) is not str:
        raise _fail("schema_violation", f"{where}.public_key.value")
    text = signature["value"]
    if type(text) is not str or _BASE64_SIGNATURE.fullmatch(text) is None:
        raise _fail("schema_violation", f"{where}.value")


def parse_receipt(document: object) -> Mapping[str, Any]:
    """Check a receipt document against the closed v3 schema and its invariants.

    Returns the statement. The invariants: integrity ok ⇒ replay completed,
    assurance present, and either (ok, ``pass``, ``pass``, 0) or (not ok,
    ``regression``/``insufficient_evidence``, ``fail``, 7); otherwise not
    ok, decision, policy verdict and assurance null, status 4 or 6, and a
    failed or completed replay only with status 6.

    Raises:
        ReceiptError: ``schema_violation`` (field: the first failing location).
    """
    top = check_exact(
        document, "receipt", ("statement", "signature"), error=ReceiptError, code="schema_violation"
    )
    statement = check_exact(
        top["statement"], "statement", _STATEMENT, error=ReceiptError, code="schema_violation"
    )
    for member, expected in (
        ("format", RECEIPT_FORMAT),
        ("kind", RECEIPT_KIND),
        ("pack_format", PACK_FORMAT),
        ("verification_scope", VERIFICATION_SCOPE),
    ):
        _constant(statement, member, expected, "statement")
    _digest(statement["pack_manifest_digest"], "statement.pack_manifest_digest")
    anchors = check_exact(
        statement["anchors"],
        "statement.anchors",
        _ANCHORS,
        error=ReceiptError,
        code="schema_violation",
    )
    for name in _ANCHORS:
        _digest(anchors[name], f"statement.anchors.{name}")
    subject = check_exact(
        statement["subject"],
        "statement.subject",
        ("kind", "run_digest"),
        error=ReceiptError,
        code="schema_violation",
    )
    _constant(subject, "kind", _SUBJECT_KIND, "statement.subject")
    _digest(subject["run_digest"], "statement.subject.run_digest")
    verifier = check_exact(
        statement["verifier"],
        "statement.verifier",
        _VERIFIER,
        error=ReceiptError,
        code="schema_violation",
    )
    if not is_identity(verifier["identity"]):
        raise _fail("schema_violation", "statement.verifier.identity")
    _digest(verifier["signing_key_fingerprint"], "statement.verifier.signing_key_fingerprint")
    _digest(
        verifier["trust_profile_digest"],
        "statement.verifier.trust_profile_digest",
        nullable=True,
    )
    if statement["replay_status"] not in REPLAY_STATUSES:
        raise _fail("schema_violation", "statement.replay_status")
    _check_assurance(statement["scoring_assurance"])
    _check_verdict(statement)
    _check_signature_document(top["signature"])
    return statement


# ---------------------------------------------------------------------------
# Re-verification


@dataclass(frozen=True, slots=True, repr=False)
class ReceiptCheck:
    """The result of :func:`verify_receipt`.

    Attributes:
        ok: the receipt is authentic and matches every expectation.
        signed: always ``True`` (v3 receipts are always signed).
        verifier_fingerprint: the verifier key's fingerprint when ``ok``, else ``None``.
        error: the first refusal when not ``ok``, else ``None``.
        statement: the accepted statement when ``ok``, else ``None``.
        pack_rechecked: whether every payload file of the pack was re-examined
            (``recheck_pack=True`` on a positive receipt). When ``False`` an
            ``ok`` result vouches for the receipt and the pack's
            ``manifest.json`` only: payload files may have been edited since.
    """

    ok: bool
    verifier_fingerprint: str | None
    error: ReceiptError | None
    statement: Mapping[str, Any] | None = None
    signed: bool = True
    pack_rechecked: bool = False

    def __repr__(self) -> str:
        """Show the result and the refusal code only."""
        code = None if self.error is None else self.error.code
        return (
            f"ReceiptCheck(ok={self.ok!r}, error={code!r}, pack_rechecked={self.pack_rechecked!r})"
        )

    @property
    def errors(self) -> tuple[str, ...]:
        """The refusal messages (``<field>: <code>``), empty when ``ok``."""
        return () if self.error is None else (str(self.error),)


def _read_limited(path: str | os.PathLike[str], limit: int, where: str) -> bytes:
    with translated(ReceiptError, where, {"file_changed": "unreadable"}):
        return read_regular(path, limit=limit)


def _recipient_policy(policy: ComparisonPolicy | str | os.PathLike[str]) -> ComparisonPolicy:
    if isinstance(policy, ComparisonPolicy):
        return policy
    document = decode_object(
        _read_limited(policy, MAX_POLICY_BYTES, "policy"),
        "policy",
        error=ReceiptError,
        limit=MAX_POLICY_BYTES,
    )
    try:
        return parse_comparison_policy(document)
    except ComparisonPolicyError:
        raise _fail("invalid_policy", "policy") from None


def _identified_manifest(evidence: str | os.PathLike[str]) -> tuple[bytes, dict[str, Any]]:
    """Read ``manifest.json`` by the detection rules (regular, ≤256 KiB, format and kind)."""
    try:
        root = open_directory(evidence)
        try:
            data = read_regular(MANIFEST_NAME, limit=MAX_MANIFEST_DETECT_BYTES, dir_fd=root)
        finally:
            os.close(root)
    except FileSystemError:
        raise _fail("pack_unidentified", "pack") from None
    try:
        document = decode_object(data, "pack", error=ReceiptError, limit=MAX_MANIFEST_DETECT_BYTES)
    except ReceiptError:
        raise _fail("pack_unidentified", "pack") from None
    if document.get("format") != PACK_FORMAT or document.get("kind") != PACK_KIND:
        raise _fail("pack_unidentified", "pack")
    return data, document


def _expectations(
    values: Mapping[str, object], verifier_identity: object, trust_profile_digest: object
) -> None:
    for name, value in values.items():
        if not is_digest(value):
            raise _fail("invalid_expectation", name)
    if not is_identity(verifier_identity):
        raise _fail("invalid_expectation", "verifier_identity")
    if trust_profile_digest is not None and not is_digest(trust_profile_digest):
        raise _fail("invalid_expectation", "trust_profile_digest")


def _check_pack(
    manifest_bytes: bytes, document: Mapping[str, Any], expected: Mapping[str, str]
) -> None:
    """For a positive receipt: the manifest is canonical, signed and bound to the anchors."""
    where = "pack"
    try:
        if encode_invarlock(document) != manifest_bytes:
            raise _fail("pack_mismatch", where)
        manifest = parse_manifest(document)
    except (EvidencePackError, CanonicalError):
        raise _fail("pack_mismatch", where) from None
    if not manifest.signed or manifest.signing_key_fingerprint != expected["signer_fingerprint"]:
        raise _fail("pack_mismatch", where)
    for role, anchor in (
        ("baseline", "baseline_run_digest"),
        ("subject", "subject_run_digest"),
        ("policy", "policy_digest"),
        ("request", "request_digest"),
    ):
        if manifest.files[role].digest != expected[anchor]:
            raise _fail("pack_mismatch", where)
    digests = {role: manifest.files[role].digest for role in ROLES}
    recomputed = comparison_id(
        request_digest=digests["request"],
        baseline_run_digest=digests["baseline"],
        subject_run_digest=digests["subject"],
        policy_digest=digests["policy"],
    )
    if manifest.request_digest != digests["request"] or manifest.comparison_id != recomputed:
        raise _fail("pack_mismatch", where)


def _verify_signature(
    top: Mapping[str, Any], statement: Mapping[str, Any], expected_fingerprint: str
) -> VerifyKey:
    signature = top["signature"]
    try:
        key = VerifyKey.from_pem(signature["public_key"]["value"])
    except SigningKeyError:
        raise _fail("verifier_key_unauthorized", "signature.public_key") from None
    declared = statement["verifier"]["signing_key_fingerprint"]
    if key.fingerprint != expected_fingerprint or key.fingerprint != declared:
        raise _fail("verifier_key_unauthorized", "signature.public_key")
    try:
        raw = base64.b64decode(signature["value"], validate=True)
        key.verify(raw, encode_invarlock(statement))
    except (binascii.Error, ValueError, SigningKeyError, CanonicalError):
        raise _fail("signature_invalid", "signature.value") from None
    return key


def _receipt_bytes(receipt: str | os.PathLike[str] | bytes) -> bytes:
    if isinstance(receipt, bytes | bytearray):
        if len(receipt) > MAX_RECEIPT_BYTES:
            raise _fail("too_large", "receipt")
        return bytes(receipt)
    return _read_limited(receipt, MAX_RECEIPT_BYTES, "receipt")


def check_receipt(
    receipt: str | os.PathLike[str] | bytes,
    *,
    evidence: str | os.PathLike[str],
    policy: ComparisonPolicy | str | os.PathLike[str],
    expected_baseline_run_digest: str,
    expected_subject_run_digest: str,
    expected_request_digest: str,
    expected_signer_fingerprint: str,
    expected_verifier_identity: str,
    expected_verifier_fingerprint: str,
    expected_trust_profile_digest: str | None,
    recheck_pack: bool = False,
    pack_limits: PackLimits = REFERENCE_PACK_LIMITS,
    decision_order: str = "reference",
) -> Mapping[str, Any]:
    """Re-verify a receipt against the caller's expectations; return its statement.

    Nothing is taken from the pack to select the expectations. Order
    (32-verify.md §6): strict JSON receipt (≤1 MiB); the recipient policy
    (portable validation); the receipt schema; the subject run digest; for a
    positive receipt the scoring assurance the policy implies; the pack's
    manifest digest (detection rules); the anchors; the verifier identity
    and trust profile digest; the receipt key's fingerprint against the
    expected verifier fingerprint and the statement's; the signature over the
    statement's canonical bytes; for a positive receipt the manifest itself
    (canonical, signed by the expected signer, file digests equal to the
    anchors, request digest and ``comparison_id``).

    Args:
        receipt: the receipt file, or its bytes.
        evidence: the pack directory the receipt is about.
        policy: the recipient's policy (object or file).
        expected_baseline_run_digest: the baseline anchor.
        expected_subject_run_digest: the subject anchor.
        expected_request_digest: the request anchor.
        expected_signer_fingerprint: the pack signer anchor.
        expected_verifier_identity: the verifier's identity.
        expected_verifier_fingerprint: the verifier key's fingerprint.
        expected_trust_profile_digest: the trust profile digest, or ``None``
            when the receipt was issued from explicit options.
        recheck_pack: also re-examine the whole pack for a positive receipt
            (every payload file re-hashed against the manifest, the signature,
            the bindings: :func:`~sealeval.captured.pack_reader.read_evidence_pack`).
            Without it only ``manifest.json`` is checked, so payload files
            edited after the receipt was issued go unnoticed here (their
            digests no longer match the manifest, which ``sealeval verify``
            detects).
        pack_limits: the envelope of the re-check (see ``read_evidence_pack``).
        decision_order: the decision order of the re-check.

    Raises:
        ReceiptError: the first refusal (see the class); ``pack: pack_mismatch``
            also when the re-check refuses the pack or finds another manifest.
    """
    expected = {
        "baseline_run_digest": expected_baseline_run_digest,
        "subject_run_digest": expected_subject_run_digest,
        "request_digest": expected_request_digest,
        "signer_fingerprint": expected_signer_fingerprint,
        "verifier_fingerprint": expected_verifier_fingerprint,
    }
    _expectations(expected, expected_verifier_identity, expected_trust_profile_digest)
    document = decode_object(
        _receipt_bytes(receipt), "receipt", error=ReceiptError, limit=MAX_RECEIPT_BYTES
    )
    approved = _recipient_policy(policy)
    statement = parse_receipt(document)
    if statement["subject"]["run_digest"] != expected_subject_run_digest:
        raise _fail("subject_mismatch", "statement.subject.run_digest")
    integrity_ok = statement["verdict"]["integrity_ok"]
    if integrity_ok:
        derived = [item.to_dict() for item in scoring_assurance(approved)]
        if [dict(entry) for entry in statement["scoring_assurance"]] != derived:
            raise _fail("assurance_mismatch", "statement.scoring_assurance")
    manifest_bytes, manifest_document = _identified_manifest(evidence)
    if digest_bytes(manifest_bytes) != statement["pack_manifest_digest"]:
        raise _fail("manifest_mismatch", "statement.pack_manifest_digest")
    anchors = {**expected, "policy_digest": approved.digest}
    for name in _ANCHORS:
        if statement["anchors"][name] != anchors[name]:
            raise _fail("anchor_mismatch", f"statement.anchors.{name}")
    verifier = statement["verifier"]
    if verifier["identity"] != expected_verifier_identity:
        raise _fail("verifier_mismatch", "statement.verifier.identity")
    if verifier["trust_profile_digest"] != expected_trust_profile_digest:
        raise _fail("verifier_mismatch", "statement.verifier.trust_profile_digest")
    _verify_signature(document, statement, expected_verifier_fingerprint)
    if integrity_ok:
        _check_pack(manifest_bytes, manifest_document, anchors)
        if recheck_pack:
            _recheck_pack(evidence, statement["pack_manifest_digest"], pack_limits, decision_order)
    return statement


def _recheck_pack(
    evidence: str | os.PathLike[str], manifest_digest: str, limits: PackLimits, order: str
) -> None:
    """Re-examine every file of the pack; it must still be the pack the receipt names."""
    try:
        pack = read_evidence_pack(
            evidence, limits=limits, decision_order=order, runs="outline_no_ids"
        )
    except EvidencePackError:
        raise _fail("pack_mismatch", "pack") from None
    if pack.manifest_digest != manifest_digest:
        raise _fail("pack_mismatch", "pack")


def verify_receipt(
    receipt: str | os.PathLike[str] | bytes,
    *,
    evidence: str | os.PathLike[str],
    policy: ComparisonPolicy | str | os.PathLike[str],
    expected_baseline_run_digest: str,
    expected_subject_run_digest: str,
    expected_request_digest: str,
    expected_signer_fingerprint: str,
    expected_verifier_identity: str,
    expected_verifier_fingerprint: str,
    expected_trust_profile_digest: str | None,
    recheck_pack: bool = False,
    pack_limits: PackLimits = REFERENCE_PACK_LIMITS,
    decision_order: str = "reference",
) -> ReceiptCheck:
    """Re-verify a receipt (see :func:`check_receipt`) and return the result instead of raising.

    By default only the pack's ``manifest.json`` is checked against the
    receipt, and the result says so (``pack_rechecked=False``): payload files
    edited since the receipt was issued are not detected. Pass
    ``recheck_pack=True`` to re-examine every file of the pack as well.
    """
    try:
        statement = check_receipt(
            receipt,
            evidence=evidence,
            policy=policy,
            expected_baseline_run_digest=expected_baseline_run_digest,
            expected_subject_run_digest=expected_subject_run_digest,
            expected_request_digest=expected_request_digest,
            expected_signer_fingerprint=expected_signer_fingerprint,
            expected_verifier_identity=expected_verifier_identity,
            expected_verifier_fingerprint=expected_verifier_fingerprint,
            expected_trust_profile_digest=expected_trust_profile_digest,
            recheck_pack=recheck_pack,
            pack_limits=pack_limits,
            decision_order=decision_order,
        )
    except ReceiptError as error:
        return ReceiptCheck(ok=False, verifier_fingerprint=None, error=error)
    return ReceiptCheck(
        ok=True,
        verifier_fingerprint=expected_verifier_fingerprint,
        error=None,
        statement=statement,
        pack_rechecked=recheck_pack and bool(statement["verdict"]["integrity_ok"]),
    )
