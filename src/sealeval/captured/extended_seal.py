"""Signed extended statistics beside an evidence pack (``sealeval/extended-seal-v1``).

Decision: ``docs/decisions/comparison-policy-extension.md`` ("Signing the
extended results"). A pack stays byte-for-byte invarlock's (its file set is
closed, so extra files would make invarlock refuse it); a user who opted in to
the extended statistics signs them in a **detached seal** with the *same*
Ed25519 key that signed the pack, bound to the pack's exact ``manifest.json``
bytes by digest. A pack without a seal, and every pack built without an
extension, are exactly the reference's.

The seal is one canonical JSON document::

    {"format": "sealeval/extended-seal-v1",
     "statement": {"pack_manifest_digest": "sha256:…",
                   "extension": {…every member explicit…},
                   "extended": {…the sealeval/extended-comparison-v1 document…}},
     "signing_key_fingerprint": "sha256:…",
     "public_key": {"encoding": "pem", "value": "-----BEGIN PUBLIC KEY-----…"},
     "signature": {"encoding": "base64", "value": "…"}}

The signed message is the ASCII bytes ``sealeval/extended-seal-v1``, one line
feed, then the canonical bytes of ``statement`` (the domain prefix keeps a seal signature
from ever passing for a manifest signature, whose message starts with ``{``).

:func:`verify_extended_seal` refuses, each with its own code: a document that
is not strict, canonical JSON of exactly these members; an unsigned pack; a
signer other than the pack's; a bad signature; another pack; an extension
for another policy or not written in full; and — unless the caller opts out
— extended numbers that differ from the ones recomputed from the pack's runs.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from sealeval._validate import EMPTY, check_closed, decode_object, thaw_json
from sealeval.canonical import DecodeLimits, decode, digest_bytes, encode_invarlock
from sealeval.captured.extended import (
    EXTENDED_FORMAT,
    ExtensionError,
    PolicyExtension,
    parse_policy_extension,
)
from sealeval.captured.pack_reader import EvidencePack
from sealeval.captured.report.extended import extended_for_pack
from sealeval.captured.signing import (
    SignatureEnvelope,
    SigningKey,
    SigningKeyError,
    verify_signature_envelope,
)
from sealeval.errors import CapturedError

__all__ = [
    "MAX_SEAL_BYTES",
    "SEAL_FORMAT",
    "ExtendedSealError",
    "SealedExtended",
    "seal_extended",
    "verify_extended_seal",
]

SEAL_FORMAT: Final = "sealeval/extended-seal-v1"
#: Largest seal read (the extended document lists at most 1,000 flip ids per entry).
MAX_SEAL_BYTES: Final = 64 * 1024 * 1024
_DOMAIN: Final = SEAL_FORMAT.encode("ascii") + b"\n"
_MEMBERS: Final = frozenset(
    {"format", "statement", "signing_key_fingerprint", "public_key", "signature"}
)
_STATEMENT: Final = frozenset({"pack_manifest_digest", "extension", "extended"})


class ExtendedSealError(CapturedError):
    """Refusal to seal, or to accept a seal of, extended statistics (fields are member names)."""

    module = "sealeval.captured.extended_seal"
    field_in_message = True
    codes = frozenset(
        {
            "too_large",
            "invalid_document",
            "not_canonical",
            "unknown_member",
            "missing_member",
            "invalid_value",
            "unsigned_pack",
            "signer_mismatch",
            "invalid_signature",
            "pack_mismatch",
            "extension_mismatch",
            "extended_mismatch",
        }
    )


@dataclass(frozen=True, slots=True)
class SealedExtended:
    """A verified seal.

    Attributes:
        extension: the extension the numbers were computed with.
        extended_bytes: the canonical bytes of the ``sealeval/extended-comparison-v1``
            document (immutable; :meth:`extended_document` decodes a copy).
        signer: the fingerprint of the key that signed both the pack and the seal.
        pack_manifest_digest: the pack it belongs to.
        recomputed: whether the numbers were checked against a recomputation
            from the pack's runs.
    """

    extension: PolicyExtension
    extended_bytes: bytes
    signer: str
    pack_manifest_digest: str
    recomputed: bool

    def extended_document(self) -> dict[str, Any]:
        """Return a fresh copy of the extended document (for the report renderers)."""
        document: dict[str, Any] = decode(self.extended_bytes)
        return document


def _message(statement: Mapping[str, Any]) -> bytes:
    return _DOMAIN + encode_invarlock(statement)


def seal_extended(pack: EvidencePack, extension: PolicyExtension, key: SigningKey) -> bytes:
    """Compute the extended statistics of a signed pack and seal them with its key.

    The numbers are recomputed from the pack's runs, streamed from its files
    with memory bounded by the record count (:func:`extended_for_pack`,
    refused unless the recomputed reference comparison is byte-identical to the
    stored one). Returns the canonical seal bytes (final LF); Ed25519 is
    deterministic, so the same pack, extension and key give the same bytes.

    Raises:
        ExtendedSealError: ``unsigned_pack``; ``signer_mismatch`` (``key`` is
            not the key that signed the pack); ``invalid_value`` (not a pack,
            extension or key).
        ExtensionError: the extension names another policy.
        ReportError: ``extended_mismatch`` (the stored comparison does not
            recompute).
        EvidencePackError: ``file_changed`` (a run file was replaced since
            the pack was read; the runs are re-scored streamed from its files).
    """
    if not isinstance(pack, EvidencePack):
        raise ExtendedSealError("invalid_value", "pack")
    if not isinstance(extension, PolicyExtension):
        raise ExtendedSealError("invalid_value", "extension")
    if not isinstance(key, SigningKey):
        raise ExtendedSealError("invalid_value", "signing_key")
    if pack.signer is None:
        raise ExtendedSealError("unsigned_pack", "pack")
    if key.fingerprint != pack.signer.fingerprint:
        raise ExtendedSealError("signer_mismatch", "signing_key")
    statement = {
        "pack_manifest_digest": pack.manifest_digest,
        "extension": extension.to_dict(),
        "extended": extended_for_pack(pack, extension),
    }
    signature = base64.b64encode(key.sign(_message(statement))).decode("ascii")
    return encode_invarlock(
        {
            "format": SEAL_FORMAT,
            "statement": statement,
            "signing_key_fingerprint": key.fingerprint,
            "public_key": {"encoding": "pem", "value": key.public_key.pem},
            "signature": {"encoding": "base64", "value": signature},
        }
    )


def _closed(document: object, members: frozenset[str], where: str) -> Mapping[str, Any]:
    """Check a closed seal object (the toolkit's rule); a missing member is named."""
    return check_closed(
        document,
        where,
        tuple(sorted(members)),
        error=ExtendedSealError,
        type_code="invalid_document",
        unknown_code="unknown_member",
        missing_code="missing_member",
        missing_prefix="" if where == "seal" else f"{where}.",
    )


def _encoded(document: Mapping[str, Any], member: str, encoding: str) -> str:
    value = _closed(document[member], frozenset({"encoding", "value"}), member)
    if value["encoding"] != encoding or type(value["value"]) is not str:
        raise ExtendedSealError("invalid_value", member)
    return str(value["value"])


def _check_signature(
    document: Mapping[str, Any], statement: Mapping[str, Any], pack: EvidencePack
) -> str:
    if pack.signer is None:
        raise ExtendedSealError("unsigned_pack", "pack")
    pem = _encoded(document, "public_key", "pem")
    signature = _encoded(document, "signature", "base64")
    envelope = SignatureEnvelope(
        signing_key_fingerprint=document["signing_key_fingerprint"],
        public_key_pem=pem,
        signature_base64=signature,
    )
    try:
        key = verify_signature_envelope(
            envelope, _message(statement), manifest_fingerprint=pack.signer.fingerprint
        )
    except SigningKeyError as error:
        if error.code == "fingerprint_mismatch":
            raise ExtendedSealError("signer_mismatch", "signing_key_fingerprint") from None
        raise ExtendedSealError("invalid_signature", "signature") from None
    return key.fingerprint


def _decode(data: bytes) -> Mapping[str, Any]:
    if not isinstance(data, bytes | bytearray | memoryview):
        raise ExtendedSealError("invalid_document", "seal")
    if len(data) > MAX_SEAL_BYTES:
        raise ExtendedSealError("too_large", "seal")
    document = decode_object(
        bytes(data),
        "seal",
        error=ExtendedSealError,
        limit=DecodeLimits(max_bytes=MAX_SEAL_BYTES),
        codes=EMPTY,
        other_code="invalid_document",
        object_code="invalid_document",
        canonical=encode_invarlock,
    )
    return _closed(document, _MEMBERS, "seal")


def verify_extended_seal(
    pack: EvidencePack, data: bytes, *, recompute: bool = True
) -> SealedExtended:
    """Check a seal against a (read, verified) pack; return its extended numbers.

    Order: size, strict canonical decoding and closed members; the pack is
    signed; the seal's key is the pack's and its signature covers the
    statement; the statement names this pack's manifest; the extension is
    written in full and names this pack's policy; the extended document is
    bound to this pack's comparison and this extension; finally (unless
    ``recompute=False``) the numbers equal a recomputation from the runs.

    Raises:
        ExtendedSealError: ``too_large``, ``invalid_document``,
            ``not_canonical``, ``unknown_member``, ``missing_member``,
            ``invalid_value``, ``unsigned_pack``, ``signer_mismatch``,
            ``invalid_signature``, ``pack_mismatch``, ``extension_mismatch``,
            ``extended_mismatch``.
    """
    if not isinstance(pack, EvidencePack):
        raise ExtendedSealError("invalid_value", "pack")
    document = _decode(data)
    if document["format"] != SEAL_FORMAT:
        raise ExtendedSealError("invalid_value", "format")
    statement = _closed(document["statement"], _STATEMENT, "statement")
    signer = _check_signature(document, statement, pack)
    if statement["pack_manifest_digest"] != pack.manifest_digest:
        raise ExtendedSealError("pack_mismatch", "statement.pack_manifest_digest")
    try:
        extension = parse_policy_extension(statement["extension"])
    except ExtensionError:
        raise ExtendedSealError("extension_mismatch", "statement.extension") from None
    if extension.to_dict() != statement["extension"]:
        raise ExtendedSealError("extension_mismatch", "statement.extension")
    if extension.policy_digest != pack.policy.digest:
        raise ExtendedSealError("extension_mismatch", "statement.extension.policy_digest")
    extended = statement["extended"]
    stored = digest_bytes(encode_invarlock(thaw_json(pack.report)))
    if (
        not isinstance(extended, Mapping)
        or extended.get("format") != EXTENDED_FORMAT
        or extended.get("comparison_digest") != stored
        or extended.get("policy_digest") != pack.policy.digest
        or extended.get("extension_digest") != extension.digest
    ):
        raise ExtendedSealError("extended_mismatch", "statement.extended")
    if recompute and extended_for_pack(pack, extension) != extended:
        raise ExtendedSealError("extended_mismatch", "statement.extended")
    return SealedExtended(
        extension=extension,
        extended_bytes=encode_invarlock(extended),
        signer=signer,
        pack_manifest_digest=pack.manifest_digest,
        recomputed=recompute,
    )
