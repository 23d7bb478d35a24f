"""Sign a statement into a DSSE envelope; verify an envelope back into a statement."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Final

from sealeval.attest._dsse import open_envelope, sign_envelope
from sealeval.attest._errors import AttestationError
from sealeval.attest._predicates import PREDICATE_TYPES, check_statement
from sealeval.attest._statement import PAYLOAD_TYPE, Statement, parse_statement
from sealeval.captured.signing import SigningKey, VerifyKey

__all__ = ["VerifiedAttestation", "sign_statement", "verify_attestation"]

_KNOWN: Final = frozenset(PREDICATE_TYPES.values())


def sign_statement(statement: Statement, key: SigningKey) -> bytes:
    """Check a statement and return its signed DSSE envelope bytes (canonical, final LF).

    Raises:
        AttestationError: ``invalid_type`` and the codes of
            :func:`sealeval.attest.check_statement`.
    """
    check_statement(statement)
    return sign_envelope(statement.payload, PAYLOAD_TYPE, key)


@dataclass(frozen=True, slots=True, repr=False)
class VerifiedAttestation:
    """An envelope that verified with a trusted key.

    Attributes:
        statement: the checked statement.
        keyid: the trusted key's id (``sha256:`` of the raw public key).
        payload_digest: ``sha256:`` of the signed payload bytes.
    """

    statement: Statement
    keyid: str
    payload_digest: str

    def __repr__(self) -> str:
        """Show the predicate type and key id only."""
        return (
            f"VerifiedAttestation(predicate_type={self.statement.predicate_type!r}, "
            f"keyid={self.keyid!r})"
        )


def verify_attestation(
    envelope: bytes, key: VerifyKey, *, predicate_type: str | None = None
) -> VerifiedAttestation:
    """Verify a DSSE envelope with a trusted Ed25519 key and check its statement.

    Order: envelope structure, payload type, key id, signature over the PAE
    (nothing in the payload is read before the signature verified), then
    the statement (canonical bytes, subjects), the predicate type (one of
    sealeval's; equal to ``predicate_type`` when given) and the predicate
    with its subjects.

    Args:
        envelope: the envelope file bytes.
        key: the trusted public key.
        predicate_type: the expected predicate type URI, or ``None`` for any
            sealeval predicate.

    Raises:
        AttestationError: the first refusal (see ``docs/errors.md``).
    """
    if predicate_type is not None and predicate_type not in _KNOWN:
        raise AttestationError("unknown_predicate_type", "predicate_type")
    payload = open_envelope(envelope, key, payload_type=PAYLOAD_TYPE)
    statement = parse_statement(payload)
    if statement.predicate_type not in _KNOWN:
        raise AttestationError("unknown_predicate_type", "predicateType")
    if predicate_type is not None and statement.predicate_type != predicate_type:
        raise AttestationError("predicate_type_mismatch", "predicateType")
    check_statement(statement)
    return VerifiedAttestation(
        statement=statement,
        keyid=key.fingerprint,
        payload_digest="sha256:" + hashlib.sha256(payload).hexdigest(),
    )
