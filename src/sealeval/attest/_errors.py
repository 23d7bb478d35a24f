"""The closed refusal codes of attestations (``sealeval.attest``)."""

from __future__ import annotations

from sealeval.errors import SealevalError

__all__ = ["AttestationError"]


class AttestationError(SealevalError):
    """Refusal to build, sign or accept an in-toto attestation (``<field>: <code>``).

    It is the family base of every ``sealeval.attest`` refusal and is raised
    itself.
    """

    module = "sealeval.attest"
    codes = frozenset(
        {
            # inputs handed to the library or read by the CLI
            "invalid_type",
            "input_unavailable",
            "too_large",
            "invalid_json",
            # the DSSE envelope
            "invalid_envelope",
            "invalid_payload_type",
            "invalid_base64",
            "too_many_signatures",
            "unknown_keyid",
            "invalid_signature",
            # the in-toto statement
            "invalid_statement",
            "non_canonical_payload",
            "unknown_predicate_type",
            "predicate_type_mismatch",
            "invalid_subject",
            "no_subject",
            "subject_mismatch",
            # the predicate
            "invalid_predicate",
            "inconsistent_predicate",
            "predicate_signature_invalid",
        }
    )
