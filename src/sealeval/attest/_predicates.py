"""The three sealeval predicates: their URIs, subjects, builders and checks.

* :data:`SEALED_MANIFEST_PREDICATE`: subjects the eight sealed components,
  predicate the sealed manifest;
* :data:`RELEASE_DECISION_PREDICATE`: subjects the wheel and the sdist,
  predicate the candidate bundle (manifest and signed packet);
* :data:`VERIFICATION_RECEIPT_PREDICATE`: subject the pack's ``manifest.json``,
  predicate the verification receipt.

Each check re-validates the predicate with the library's own strict parser
(so an attestation never carries a document sealeval itself would refuse) and
ties the subjects to it: the subjects are derived from the predicate, never
taken on trust.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Mapping
from typing import Any, Final

from sealeval._validate import check_closed
from sealeval.attest._errors import AttestationError
from sealeval.attest._statement import Statement, Subject
from sealeval.canonical import encode_invarlock, is_digest
from sealeval.captured.pack_reader import MANIFEST_NAME
from sealeval.captured.receipt import ReceiptError, parse_receipt
from sealeval.captured.signing import SigningKeyError, VerifyKey
from sealeval.errors import CanonicalError, ManifestError
from sealeval.gates.candidate import CandidateBundle, CandidateRunnerError
from sealeval.manifest.sealed import COMPONENTS, SealedWorkflowManifest

__all__ = [
    "PREDICATE_TYPES",
    "RELEASE_DECISION_PREDICATE",
    "RELEASE_SUBJECT_ROLES",
    "SEALED_MANIFEST_PREDICATE",
    "VERIFICATION_RECEIPT_PREDICATE",
    "check_statement",
    "release_decision_statement",
    "sealed_manifest_statement",
    "verification_receipt_statement",
]

SEALED_MANIFEST_PREDICATE: Final = "https://sealeval.dev/attestations/sealed-manifest/v1"
RELEASE_DECISION_PREDICATE: Final = "https://sealeval.dev/attestations/release-decision/v1"
VERIFICATION_RECEIPT_PREDICATE: Final = "https://sealeval.dev/attestations/verification-receipt/v1"
#: Short names (the CLI's ``--type``) of the predicate types.
PREDICATE_TYPES: Final[Mapping[str, str]] = {
    "manifest": SEALED_MANIFEST_PREDICATE,
    "release": RELEASE_DECISION_PREDICATE,
    "receipt": VERIFICATION_RECEIPT_PREDICATE,
}
#: Candidate artifacts that become subjects of a release decision, in order.
RELEASE_SUBJECT_ROLES: Final = ("wheel", "sdist")


def _digests(subjects: tuple[Subject, ...]) -> list[str]:
    return [item.digest for item in subjects]


# ---------------------------------------------------------------------------
# Sealed manifest


def _manifest(predicate: object) -> SealedWorkflowManifest:
    if isinstance(predicate, SealedWorkflowManifest):
        return predicate
    try:
        return SealedWorkflowManifest.from_dict(predicate)
    except ManifestError as error:
        code = "inconsistent_predicate" if error.code == "payload_mismatch" else "invalid_predicate"
        raise AttestationError(code, "predicate") from None


def _manifest_subjects(manifest: SealedWorkflowManifest) -> tuple[Subject, ...]:
    return tuple(Subject(name, manifest.component_digests[name]) for name in COMPONENTS)


def sealed_manifest_statement(manifest: SealedWorkflowManifest | Mapping[str, Any]) -> Statement:
    """Return the statement of a sealed manifest.

    Subjects: the eight components in component order, named by component,
    each with its sealed digest. Predicate: the manifest document.

    Raises:
        AttestationError: ``invalid_predicate``, ``inconsistent_predicate``.
    """
    sealed = _manifest(manifest)
    return Statement(
        predicate_type=SEALED_MANIFEST_PREDICATE,
        subjects=_manifest_subjects(sealed),
        predicate=sealed.to_dict(),
    )


def _check_manifest(statement: Statement) -> None:
    sealed = _manifest(statement.predicate)
    expected = _manifest_subjects(sealed)
    if statement.subjects != expected:
        raise AttestationError("subject_mismatch", "subject")


# ---------------------------------------------------------------------------
# Release decision


def _bundle(predicate: object) -> CandidateBundle:
    if isinstance(predicate, CandidateBundle):
        raise AttestationError("invalid_type", "predicate")
    try:
        bundle = CandidateBundle.from_dict(predicate)
    except CandidateRunnerError:
        raise AttestationError("invalid_predicate", "predicate") from None
    if not bundle.consistent() or not bundle.packet.digest_matches():
        raise AttestationError("inconsistent_predicate", "predicate")
    return bundle


def _release_digests(bundle: CandidateBundle) -> list[tuple[str, str]]:
    artifacts = bundle.manifest.get("artifacts")
    if not isinstance(artifacts, Mapping):
        raise AttestationError("invalid_predicate", "predicate.manifest.artifacts")
    present = [(role, artifacts.get(role)) for role in RELEASE_SUBJECT_ROLES]
    found = [(role, value) for role, value in present if value is not None]
    if any(not is_digest(value) for _, value in found):
        raise AttestationError("invalid_predicate", "predicate.manifest.artifacts")
    if not found:
        raise AttestationError("no_subject", "subject")
    return [(role, str(value)) for role, value in found]


def release_decision_statement(
    bundle: Mapping[str, Any], *, names: Mapping[str, str] | None = None
) -> Statement:
    """Return the statement of an agent release decision.

    Subjects: the wheel and the sdist whose digests the candidate manifest
    records (a missing artifact is no subject; with neither there is nothing
    to attest). Predicate: the output bundle of ``gates agent-release``
    (candidate manifest, its digest, the signed packet and, when present, the
    detached Ed25519 packet signature).

    Args:
        bundle: the parsed ``bundle.json`` document.
        names: subject names by role (``wheel``/``sdist``), for example the
            artifact file names; a role without a name is named by the role.

    Raises:
        AttestationError: ``invalid_predicate``, ``inconsistent_predicate``,
            ``no_subject``, ``invalid_subject``, ``invalid_type``.
    """
    parsed = _bundle(bundle)
    # A closed object whose members are all optional: a subset of the roles.
    names = check_closed(
        names or {},
        "names",
        (),
        RELEASE_SUBJECT_ROLES,
        error=AttestationError,
        type_code="invalid_type",
        unknown_code="invalid_type",
    )
    subjects = tuple(
        Subject(names.get(role, role), digest) for role, digest in _release_digests(parsed)
    )
    return Statement(
        predicate_type=RELEASE_DECISION_PREDICATE, subjects=subjects, predicate=dict(bundle)
    )


def _check_release(statement: Statement) -> None:
    expected = [digest for _, digest in _release_digests(_bundle(statement.predicate))]
    if _digests(statement.subjects) != expected:
        raise AttestationError("subject_mismatch", "subject")


# ---------------------------------------------------------------------------
# Verification receipt


def _receipt(predicate: object) -> Mapping[str, Any]:
    """Check the receipt schema and its own signature; return its statement."""
    try:
        statement = parse_receipt(predicate)
    except ReceiptError:
        raise AttestationError("invalid_predicate", "predicate") from None
    assert isinstance(predicate, Mapping)
    signature = predicate["signature"]
    try:
        key = VerifyKey.from_pem(signature["public_key"]["value"])
        raw = base64.b64decode(signature["value"], validate=True)
        if key.fingerprint != statement["verifier"]["signing_key_fingerprint"]:
            raise AttestationError("predicate_signature_invalid", "predicate.signature")
        key.verify(raw, encode_invarlock(statement))
    except (SigningKeyError, binascii.Error, ValueError, CanonicalError):
        raise AttestationError("predicate_signature_invalid", "predicate.signature") from None
    return statement


def verification_receipt_statement(receipt: Mapping[str, Any]) -> Statement:
    """Return the statement of an evidence-pack verification receipt.

    The receipt must follow its closed schema and carry a valid signature by
    the verifier key it names (any verdict: a rejection receipt attests the
    rejection). Subject: the pack's ``manifest.json`` with the receipt's
    ``pack_manifest_digest``. Predicate: the receipt document.

    Raises:
        AttestationError: ``invalid_predicate``, ``predicate_signature_invalid``.
    """
    statement = _receipt(receipt)
    return Statement(
        predicate_type=VERIFICATION_RECEIPT_PREDICATE,
        subjects=(Subject(MANIFEST_NAME, statement["pack_manifest_digest"]),),
        predicate=dict(receipt),
    )


def _check_receipt(statement: Statement) -> None:
    receipt = _receipt(statement.predicate)
    if _digests(statement.subjects) != [receipt["pack_manifest_digest"]]:
        raise AttestationError("subject_mismatch", "subject")


_CHECKS: Final[Mapping[str, Callable[[Statement], None]]] = {
    SEALED_MANIFEST_PREDICATE: _check_manifest,
    RELEASE_DECISION_PREDICATE: _check_release,
    VERIFICATION_RECEIPT_PREDICATE: _check_receipt,
}


def check_statement(statement: Statement) -> None:
    """Check a statement's predicate and its subjects against it.

    Raises:
        AttestationError: ``unknown_predicate_type``, ``subject_mismatch``
            and the codes of the predicate's builder.
    """
    if not isinstance(statement, Statement):
        raise AttestationError("invalid_type", "statement")
    check = _CHECKS.get(statement.predicate_type)
    if check is None:
        raise AttestationError("unknown_predicate_type", "predicateType")
    check(statement)
