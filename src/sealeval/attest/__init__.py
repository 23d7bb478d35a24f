"""in-toto attestations of sealeval evidence, in DSSE envelopes signed with Ed25519.

Three kinds of evidence become in-toto Statement v1 attestations that
supply-chain tooling (DSSE verifiers, in-toto parsers, policy engines) can
consume; see ``docs/attestations.md`` for the predicate types, subjects and
how to verify with independent tools::

    from sealeval.attest import sealed_manifest_statement, sign_statement, verify_attestation
    from sealeval.captured.signing import load_signing_key, load_verify_key
    from sealeval.manifest import SealedWorkflowManifest

    manifest = SealedWorkflowManifest.from_json(open("manifest.json", "rb").read())
    key = load_signing_key("keys/private.pem")
    envelope = sign_statement(sealed_manifest_statement(manifest), key)
    verified = verify_attestation(envelope, load_verify_key("keys/public.pem"))
    assert verified.statement.predicate["manifest_digest"] == manifest.manifest_digest

Keys are the Ed25519 PEM keys of ``sealeval evaluate --keygen``; an envelope's
``keyid`` is the key fingerprint ``sha256:<hex of the raw public key>``.
Refusals are :class:`AttestationError` with a closed code.
"""

from sealeval.attest._api import VerifiedAttestation, sign_statement, verify_attestation
from sealeval.attest._dsse import MAX_ENVELOPE_BYTES, pae
from sealeval.attest._errors import AttestationError
from sealeval.attest._predicates import (
    PREDICATE_TYPES,
    RELEASE_DECISION_PREDICATE,
    RELEASE_SUBJECT_ROLES,
    SEALED_MANIFEST_PREDICATE,
    VERIFICATION_RECEIPT_PREDICATE,
    check_statement,
    release_decision_statement,
    sealed_manifest_statement,
    verification_receipt_statement,
)
from sealeval.attest._statement import (
    PAYLOAD_TYPE,
    STATEMENT_TYPE,
    Statement,
    Subject,
    parse_statement,
)

__all__ = [
    "MAX_ENVELOPE_BYTES",
    "PAYLOAD_TYPE",
    "PREDICATE_TYPES",
    "RELEASE_DECISION_PREDICATE",
    "RELEASE_SUBJECT_ROLES",
    "SEALED_MANIFEST_PREDICATE",
    "STATEMENT_TYPE",
    "VERIFICATION_RECEIPT_PREDICATE",
    "AttestationError",
    "Statement",
    "Subject",
    "VerifiedAttestation",
    "check_statement",
    "pae",
    "parse_statement",
    "release_decision_statement",
    "sealed_manifest_statement",
    "sign_statement",
    "verification_receipt_statement",
    "verify_attestation",
]
