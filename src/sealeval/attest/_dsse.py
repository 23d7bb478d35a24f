"""DSSE v1 envelopes signed with sealeval's Ed25519 keys.

Wire format (https://github.com/secure-systems-lab/dsse, ``envelope.md``)::

    {"payload": <base64>, "payloadType": <text>, "signatures": [{"keyid": <text>, "sig": <base64>}]}

* The signature covers the **PAE** (pre-authentication encoding):
  ``"DSSEv1" SP LEN(type) SP type SP LEN(body) SP body`` with ``LEN`` the
  ASCII decimal byte length, so neither the payload type nor the payload can
  be changed without breaking the signature.
* ``keyid`` is the sealeval key fingerprint, ``sha256:`` + hex SHA-256 of
  the raw 32-byte Ed25519 public key (the same value evidence packs call
  ``signing_key_fingerprint``).
* The envelope file is the invarlock canonical JSON of the document (sorted
  keys, no spaces, final LF). Ed25519 is deterministic, so the same key and
  payload always give the same bytes.
* Reading is strict: exactly these members, standard padded base64 that
  re-encodes to itself (the DSSE spec also allows URL-safe base64 on input;
  sealeval refuses it), 1 to :data:`MAX_SIGNATURES` signatures.
"""

from __future__ import annotations

import base64
import binascii
import re
import types
from dataclasses import dataclass
from typing import Final

from sealeval._validate import check_exact, decode_object
from sealeval.attest._errors import AttestationError
from sealeval.canonical import DecodeLimits, encode_invarlock
from sealeval.captured.signing import SigningKey, SigningKeyError, VerifyKey

__all__ = [
    "MAX_ENVELOPE_BYTES",
    "MAX_SIGNATURES",
    "ParsedEnvelope",
    "open_envelope",
    "pae",
    "parse_envelope",
    "sign_envelope",
]

#: Largest envelope accepted, in bytes.
MAX_ENVELOPE_BYTES: Final = 16 * 1024 * 1024
#: Most signatures accepted in one envelope.
MAX_SIGNATURES: Final = 16
_ENVELOPE_KEYS: Final = frozenset({"payload", "payloadType", "signatures"})
_SIGNATURE_KEYS: Final = frozenset({"keyid", "sig"})
_BASE64: Final = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")
_KEYID: Final = re.compile(r"[\x21-\x7e]{1,256}")
_LIMITS: Final = DecodeLimits(max_bytes=MAX_ENVELOPE_BYTES, max_depth=8)
#: The decoder's codes as an envelope reports them (anything else: ``invalid_json``).
_JSON_CODES: Final = types.MappingProxyType(
    {"too_large": "too_large", "string_too_long": "too_large"}
)


def pae(payload_type: str, payload: bytes) -> bytes:
    """Return the DSSE v1 pre-authentication encoding of ``payload``."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %b %d %b" % (len(kind), kind, len(payload), payload)


def _b64decode(text: object, where: str) -> bytes:
    if type(text) is not str or _BASE64.fullmatch(text) is None:
        raise AttestationError("invalid_base64", where)
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):  # pragma: no cover - the pattern admits only valid text
        raise AttestationError("invalid_base64", where) from None
    if base64.b64encode(raw).decode("ascii") != text:
        # Non-zero padding bits: the text is not the encoding of its bytes.
        raise AttestationError("invalid_base64", where)
    return raw


def sign_envelope(payload: bytes, payload_type: str, key: SigningKey) -> bytes:
    """Sign ``payload`` and return the canonical envelope bytes (final LF).

    Raises:
        AttestationError: ``invalid_type``.
    """
    if not isinstance(key, SigningKey):
        raise AttestationError("invalid_type", "signing_key")
    if type(payload) is not bytes or type(payload_type) is not str:
        raise AttestationError("invalid_type", "payload")
    signature = key.sign(pae(payload_type, payload))
    return encode_invarlock(
        {
            "payload": base64.b64encode(payload).decode("ascii"),
            "payloadType": payload_type,
            "signatures": [
                {"keyid": key.fingerprint, "sig": base64.b64encode(signature).decode("ascii")}
            ],
        }
    )


@dataclass(frozen=True, slots=True, repr=False)
class ParsedEnvelope:
    """A structurally valid envelope (not yet verified).

    Attributes:
        payload: the decoded payload bytes.
        payload_type: the declared payload type.
        signatures: ``(keyid, signature bytes)`` pairs in document order.
    """

    payload: bytes
    payload_type: str
    signatures: tuple[tuple[str, bytes], ...]

    def __repr__(self) -> str:
        """Show the sizes only."""
        return (
            f"ParsedEnvelope(payload={len(self.payload)} bytes, signatures={len(self.signatures)})"
        )


def parse_envelope(data: bytes) -> ParsedEnvelope:
    """Strictly parse envelope bytes (JSON, members, base64, signature count).

    Raises:
        AttestationError: ``invalid_type``, ``too_large``, ``invalid_json``,
            ``invalid_envelope``, ``invalid_base64``, ``too_many_signatures``.
    """
    if type(data) is not bytes:
        raise AttestationError("invalid_type", "envelope")
    document = decode_object(
        data,
        "envelope",
        error=AttestationError,
        limit=_LIMITS,
        codes=_JSON_CODES,
        object_code="invalid_envelope",
    )
    top = check_exact(
        document, "envelope", _ENVELOPE_KEYS, error=AttestationError, code="invalid_envelope"
    )
    payload_type = top["payloadType"]
    if type(payload_type) is not str:
        raise AttestationError("invalid_envelope", "payloadType")
    payload = _b64decode(top["payload"], "payload")
    entries = top["signatures"]
    if not isinstance(entries, list) or not entries:
        raise AttestationError("invalid_envelope", "signatures")
    if len(entries) > MAX_SIGNATURES:
        raise AttestationError("too_many_signatures", "signatures")
    signatures: list[tuple[str, bytes]] = []
    for entry in entries:
        item = check_exact(
            entry, "signatures", _SIGNATURE_KEYS, error=AttestationError, code="invalid_envelope"
        )
        keyid = item["keyid"]
        if type(keyid) is not str or _KEYID.fullmatch(keyid) is None:
            raise AttestationError("invalid_envelope", "signatures.keyid")
        signatures.append((keyid, _b64decode(item["sig"], "signatures.sig")))
    return ParsedEnvelope(payload=payload, payload_type=payload_type, signatures=tuple(signatures))


def open_envelope(data: bytes, key: VerifyKey, *, payload_type: str) -> bytes:
    """Parse and verify an envelope with a trusted key; return the payload bytes.

    Order: strict parsing (:func:`parse_envelope`); the payload type must
    equal ``payload_type``; at least one signature must carry the key's
    ``keyid``; every signature carrying it must verify over the PAE.
    Signatures under other key ids are ignored.

    Raises:
        AttestationError: the codes of :func:`parse_envelope`,
            ``invalid_payload_type``, ``unknown_keyid``, ``invalid_signature``.
    """
    if not isinstance(key, VerifyKey):
        raise AttestationError("invalid_type", "public_key")
    envelope = parse_envelope(data)
    if envelope.payload_type != payload_type:
        raise AttestationError("invalid_payload_type", "payloadType")
    matching = [sig for keyid, sig in envelope.signatures if keyid == key.fingerprint]
    if not matching:
        raise AttestationError("unknown_keyid", "signatures.keyid")
    message = pae(envelope.payload_type, envelope.payload)
    for signature in matching:
        try:
            key.verify(signature, message)
        except SigningKeyError:
            raise AttestationError("invalid_signature", "signatures.sig") from None
    return envelope.payload
