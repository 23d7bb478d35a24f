"""Signing keys: the HMAC packet key and the optional Ed25519 detached-signature key.

Key material never appears in a ``repr``; the HMAC key is the verbatim bytes of
the key file.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Final, Protocol

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from sealeval._keys import KeyCodes, load_private_pem, load_public_pem, raw_public_key
from sealeval.canonical import digest_bytes
from sealeval.gates.candidate.vocabulary import (
    ED25519_ALGORITHM,
    MIN_KEY_BYTES,
    CandidateRunnerError,
)

__all__ = ["Ed25519SigningKey", "HmacKey", "ed25519_public_key_sha256", "load_ed25519_public_key"]

# openmed refuses every problem with a key's PEM with one code per key kind.
_PRIVATE_KEY_CODES: Final = KeyCodes.single("ed25519_key_invalid")
_PUBLIC_KEY_CODES: Final = KeyCodes.single("public_key_invalid")

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


def as_hmac_key(key: HmacKey | bytes) -> HmacKey | None:
    """Return ``key`` as an :class:`HmacKey` (wrapping exact ``bytes``), or ``None``."""
    if isinstance(key, HmacKey):
        return key
    if type(key) is bytes:
        return HmacKey(key)
    return None


class _CanonicalPacket(Protocol):
    """What a detached signature covers: a packet's canonical JSON text."""

    def to_json(self) -> str:
        """Return the canonical packet text."""
        ...  # pragma: no cover - protocol


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
        key = load_private_pem(
            data, error=CandidateRunnerError, codes=_PRIVATE_KEY_CODES, field=None
        )
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

    def sign_packet(self, packet: _CanonicalPacket) -> dict[str, str]:
        """Return the detached signature document over the canonical packet bytes.

        ``packet`` is an :class:`~sealeval.gates.candidate.packet.AgentCandidatePacket`.
        """
        signature = self._key.sign(packet.to_json().encode("ascii"))
        return {
            "algorithm": ED25519_ALGORITHM,
            "public_key_sha256": self._public_key_sha256,
            "signature": signature.hex(),
        }


def ed25519_public_key_sha256(key: Ed25519PublicKey) -> str:
    """Return ``sha256:`` of the raw 32-byte encoding of an Ed25519 public key."""
    return digest_bytes(raw_public_key(key))


def load_ed25519_public_key(data: bytes) -> Ed25519PublicKey:
    """Load a PEM ``SubjectPublicKeyInfo`` Ed25519 public key.

    Raises:
        CandidateRunnerError: ``public_key_invalid``.
    """
    return load_public_pem(data, error=CandidateRunnerError, codes=_PUBLIC_KEY_CODES, field=None)
