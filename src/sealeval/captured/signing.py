"""Ed25519 keys for evidence packs: PEM files, fingerprints, key generation, signature envelope.

Wire contract: ``31-pack.md`` §5-§6 of the invarlock specification; JSON Schema
``contracts/invarlock.evidence-pack-v2.signature.schema.json``.

* **Fingerprint** = ``"sha256:" + hex(SHA-256(raw 32-byte public key))``.
* **Public key PEM** (what is written and embedded in envelopes):
  ``-----BEGIN PUBLIC KEY-----``, one 60-character base64 line of the 44-byte
  SubjectPublicKeyInfo DER, ``-----END PUBLIC KEY-----``, each line ending LF.
* **Private key PEM**: PKCS#8, unencrypted, one 64-character base64 line of
  the 48-byte DER. Readers accept any password-less PEM private key that is
  Ed25519 and any PEM SPKI public key that is Ed25519.
* **Signature envelope** ``manifest.signature.json`` = canonical bytes of
  ``{format, algorithm, signing_key_fingerprint, public_key: {encoding: "pem",
  value}, signature: {encoding: "base64", value}}``; the signed message is the
  exact bytes of ``manifest.json`` (final LF included). Ed25519 is
  deterministic, so the same key and manifest always give the same file.

Key material never reaches an error message or a ``repr()``; refusals are
:class:`SigningKeyError` with a closed code.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from sealeval._fs import (
    create_directory,
    create_exclusive,
    fsync_directory,
    open_destination_parent,
    translated,
)
from sealeval._keys import (
    KeyCodes,
    load_private_pem,
    load_public_pem,
    raw_public_key,
    read_key_file,
)
from sealeval._validate import check_closed
from sealeval.canonical import encode_invarlock
from sealeval.errors import CapturedError

__all__ = [
    "MAX_KEY_FILE_BYTES",
    "PRIVATE_KEY_NAME",
    "PUBLIC_KEY_NAME",
    "SIGNATURE_ALGORITHM",
    "SIGNATURE_FORMAT",
    "GeneratedKey",
    "SignatureEnvelope",
    "SigningKey",
    "SigningKeyError",
    "VerifyKey",
    "generate_key_directory",
    "generate_signing_key",
    "key_fingerprint",
    "load_signing_key",
    "load_verify_key",
    "parse_signature_envelope",
    "signature_envelope",
    "verify_signature_envelope",
]

#: ``format`` of the manifest signature document.
SIGNATURE_FORMAT: Final = "invarlock/evidence-pack-signature-v1"
#: ``algorithm`` of the manifest signature document.
SIGNATURE_ALGORITHM: Final = "ed25519"
#: Largest key file read (signing key, verifier key), in bytes.
MAX_KEY_FILE_BYTES: Final = 65_536
#: File names written by :func:`generate_key_directory`.
PRIVATE_KEY_NAME: Final = "private.pem"
PUBLIC_KEY_NAME: Final = "public.pem"

_SPKI_PREFIX: Final = bytes.fromhex("302a300506032b6570032100")
_PKCS8_PREFIX: Final = bytes.fromhex("302e020100300506032b657004220420")
_ENVELOPE_MEMBERS: Final = frozenset(
    {"format", "algorithm", "signing_key_fingerprint", "public_key", "signature"}
)
_ENCODED_MEMBERS: Final = ("encoding", "value")
_BASE64_SIGNATURE: Final = re.compile(r"[A-Za-z0-9+/]{86}==")
_KEY_CODES: Final = KeyCodes(
    invalid_pem="invalid_pem", encrypted="encrypted_key", not_ed25519="not_ed25519"
)


class SigningKeyError(CapturedError):
    """Refusal of a key file, a key, a signature or a signature envelope."""

    module = "sealeval.captured.signing"
    codes = frozenset(
        {
            # key files
            "not_found",
            "not_regular_file",
            "unreadable",
            "too_large",
            "unsafe_path",
            # key material
            "invalid_pem",
            "encrypted_key",
            "not_ed25519",
            # signature envelope structure
            "invalid_type",
            "unknown_field",
            "missing_field",
            "invalid_constant",
            "invalid_encoding",
            # signature verification
            "invalid_base64",
            "invalid_signature",
            "fingerprint_mismatch",
            # key generation
            "output_exists",
            "output_parent_missing",
            "output_unwritable",
            "unsafe_destination",
        }
    )


def _fail(code: str, where: str | None = None) -> SigningKeyError:
    return SigningKeyError(code, where)


def key_fingerprint(raw_public_key: bytes) -> str:
    """Return ``sha256:`` + hex SHA-256 of a raw 32-byte Ed25519 public key."""
    if type(raw_public_key) is not bytes or len(raw_public_key) != 32:
        raise _fail("not_ed25519", "public_key")
    return "sha256:" + hashlib.sha256(raw_public_key).hexdigest()


def _pem(label: str, der: bytes) -> bytes:
    body = base64.b64encode(der)
    lines = [body[index : index + 64] for index in range(0, len(body), 64)]
    begin = f"-----BEGIN {label}-----\n".encode()
    end = f"-----END {label}-----\n".encode()
    return b"".join([begin, *(line + b"\n" for line in lines), end])


# ---------------------------------------------------------------------------
# Keys


@dataclass(frozen=True, slots=True, repr=False)
class VerifyKey:
    """An Ed25519 public key.

    Attributes:
        raw: the 32 raw key bytes.
        fingerprint: ``sha256:`` + hex SHA-256 of :attr:`raw`.
        pem: the SPKI PEM text in invarlock's layout (one base64 line).
    """

    raw: bytes
    fingerprint: str = field(init=False)
    pem: str = field(init=False)
    _key: Ed25519PublicKey = field(init=False)

    def __post_init__(self) -> None:
        """Check the length, derive the fingerprint and the PEM text."""
        object.__setattr__(self, "fingerprint", key_fingerprint(self.raw))
        object.__setattr__(self, "pem", _pem("PUBLIC KEY", _SPKI_PREFIX + self.raw).decode())
        try:
            key = Ed25519PublicKey.from_public_bytes(self.raw)
        except ValueError:  # pragma: no cover - every 32-byte string is accepted
            raise _fail("not_ed25519", "public_key") from None
        object.__setattr__(self, "_key", key)

    def __repr__(self) -> str:
        """Show the fingerprint only."""
        return f"VerifyKey(fingerprint={self.fingerprint!r})"

    @classmethod
    def from_pem(cls, data: bytes | str) -> VerifyKey:
        """Parse any PEM SubjectPublicKeyInfo public key; it must be Ed25519.

        Raises:
            SigningKeyError: ``invalid_pem`` or ``not_ed25519``.
        """
        raw = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data
        key = load_public_pem(raw, error=SigningKeyError, codes=_KEY_CODES, field="public_key")
        return cls(raw_public_key(key))

    def verify(self, signature: bytes, message: bytes) -> None:
        """Check an Ed25519 signature over ``message``.

        Raises:
            SigningKeyError: ``invalid_signature``.
        """
        try:
            self._key.verify(signature, message)
        except (InvalidSignature, ValueError, TypeError):
            raise _fail("invalid_signature", "signature") from None


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class SigningKey:
    """An Ed25519 private key (never shown, never compared by value).

    Build with :meth:`from_pem`, :meth:`from_seed`, :meth:`generate` or
    :func:`load_signing_key`.
    """

    _key: Ed25519PrivateKey
    public_key: VerifyKey = field(init=False)

    def __post_init__(self) -> None:
        """Derive the public key."""
        if not isinstance(self._key, Ed25519PrivateKey):
            raise _fail("not_ed25519", "signing_key")
        object.__setattr__(self, "public_key", VerifyKey(raw_public_key(self._key)))

    def __repr__(self) -> str:
        """Show the public fingerprint only."""
        return f"SigningKey(fingerprint={self.fingerprint!r})"

    @property
    def fingerprint(self) -> str:
        """The public key's fingerprint (the pack's ``signing_key_fingerprint``)."""
        return self.public_key.fingerprint

    @classmethod
    def generate(cls) -> SigningKey:
        """Return a fresh random key."""
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def from_seed(cls, seed: bytes) -> SigningKey:
        """Build from the raw 32-byte private seed.

        Raises:
            SigningKeyError: ``not_ed25519`` (not 32 bytes).
        """
        if type(seed) is not bytes or len(seed) != 32:
            raise _fail("not_ed25519", "signing_key")
        return cls(Ed25519PrivateKey.from_private_bytes(seed))

    @classmethod
    def from_pem(cls, data: bytes) -> SigningKey:
        """Parse any password-less PEM private key; it must be Ed25519.

        Raises:
            SigningKeyError: ``invalid_pem``, ``encrypted_key`` or ``not_ed25519``.
        """
        return cls(
            load_private_pem(data, error=SigningKeyError, codes=_KEY_CODES, field="signing_key")
        )

    def private_pem(self) -> bytes:
        """Return the unencrypted PKCS#8 PEM bytes in invarlock's layout."""
        seed = self._key.private_bytes_raw()
        return _pem("PRIVATE KEY", _PKCS8_PREFIX + seed)

    def sign(self, message: bytes) -> bytes:
        """Return the 64-byte Ed25519 signature of ``message`` (deterministic)."""
        return self._key.sign(message)


def _read_key_file(path: str | os.PathLike[str], where: str) -> bytes:
    """Read a regular key file (not a symlink, no ``..`` component, at most 64 KiB)."""
    return read_key_file(
        path,
        limit=MAX_KEY_FILE_BYTES,
        error=SigningKeyError,
        field=where,
        renames={"file_changed": "unreadable"},
        unsafe_path="unsafe_path",
    )


def load_signing_key(path: str | os.PathLike[str]) -> SigningKey:
    """Read a PEM Ed25519 private key file (``evaluate --signing-key``).

    The file must be a regular file (a symlink is refused), at most 64 KiB,
    and the path may not contain a ``..`` component.

    Raises:
        SigningKeyError: ``unsafe_path``, ``not_found``, ``not_regular_file``,
            ``unreadable``, ``too_large``, ``invalid_pem``, ``encrypted_key``,
            ``not_ed25519`` (field ``signing_key``).
    """
    return SigningKey.from_pem(_read_key_file(path, "signing_key"))


def load_verify_key(path: str | os.PathLike[str]) -> VerifyKey:
    """Read a PEM SPKI Ed25519 public key file (same file rules as :func:`load_signing_key`).

    Raises:
        SigningKeyError: as :func:`load_signing_key`, field ``public_key``.
    """
    return VerifyKey.from_pem(_read_key_file(path, "public_key"))


# ---------------------------------------------------------------------------
# Key generation


@dataclass(frozen=True, slots=True)
class GeneratedKey:
    """What key generation wrote.

    Attributes:
        private_key: the private key file (PKCS#8 PEM, mode 0600).
        public_key: the public key file (SPKI PEM, mode 0600).
        fingerprint: the public key's fingerprint.
    """

    private_key: Path
    public_key: Path
    fingerprint: str


def generate_signing_key(
    private_path: str | os.PathLike[str], public_path: str | os.PathLike[str]
) -> GeneratedKey:
    """Generate a fresh Ed25519 key pair and write both PEM files with mode 0600.

    Each file is created exclusively (an existing file or symlink is refused,
    nothing is overwritten) and fsynced. If the second file cannot be written
    the first one is removed again, so either both files exist or neither.

    Raises:
        SigningKeyError: ``output_exists``, ``output_parent_missing``,
            ``unsafe_destination`` (a symlinked folder component),
            ``output_unwritable`` (field ``output``).
    """
    key = SigningKey.generate()
    private = Path(private_path)
    public = Path(public_path)
    with translated(SigningKeyError, "output", default="output_unwritable"):
        private_dir, private_name = open_destination_parent(private)
        try:
            public_dir, public_name = open_destination_parent(public)
            try:
                create_exclusive(private_dir, private_name, key.private_pem())
                try:
                    public_pem = key.public_key.pem.encode("ascii")
                    create_exclusive(public_dir, public_name, public_pem)
                except BaseException:
                    with contextlib.suppress(OSError):
                        os.unlink(private_name, dir_fd=private_dir)
                    raise
                fsync_directory(private_dir)
                fsync_directory(public_dir)
            finally:
                os.close(public_dir)
        finally:
            os.close(private_dir)
    return GeneratedKey(private_key=private, public_key=public, fingerprint=key.fingerprint)


def _fill_key_directory(parent_fd: int, name: str) -> SigningKey:
    """Create ``name`` (0700) in ``parent_fd`` with both key files; remove it all on failure."""
    dir_fd = create_directory(name, dir_fd=parent_fd)
    try:
        try:
            key = SigningKey.generate()
            create_exclusive(dir_fd, PRIVATE_KEY_NAME, key.private_pem())
            create_exclusive(dir_fd, PUBLIC_KEY_NAME, key.public_key.pem.encode("ascii"))
            fsync_directory(dir_fd)
        except BaseException:
            for leaf in (PRIVATE_KEY_NAME, PUBLIC_KEY_NAME):
                with contextlib.suppress(OSError):
                    os.unlink(leaf, dir_fd=dir_fd)
            raise
        finally:
            os.close(dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.rmdir(name, dir_fd=parent_fd)
        raise
    return key


def generate_key_directory(directory: str | os.PathLike[str]) -> GeneratedKey:
    """Create ``directory`` (mode 0700, must not exist) with ``private.pem`` and ``public.pem``.

    This is ``evaluate --keygen DIR``. The directory is created exclusively
    (``mkdir`` fails on any existing entry, so nothing is ever overwritten);
    both key files are created inside it with mode 0600. On any failure the
    directory and whatever was written into it are removed.

    Raises:
        SigningKeyError: ``output_exists``, ``output_parent_missing``,
            ``unsafe_destination`` (a symlinked folder component),
            ``output_unwritable`` (field ``output``).
    """
    target = Path(directory)
    with translated(SigningKeyError, "output", default="output_unwritable"):
        parent_fd, name = open_destination_parent(target)
        try:
            key = _fill_key_directory(parent_fd, name)
            fsync_directory(parent_fd)
        finally:
            os.close(parent_fd)
    return GeneratedKey(
        private_key=target / PRIVATE_KEY_NAME,
        public_key=target / PUBLIC_KEY_NAME,
        fingerprint=key.fingerprint,
    )


# ---------------------------------------------------------------------------
# The manifest signature envelope


@dataclass(frozen=True, slots=True, repr=False)
class SignatureEnvelope:
    """A structurally valid ``manifest.signature.json`` (not yet verified).

    Attributes:
        signing_key_fingerprint: the fingerprint the document declares (any JSON value
            the document holds; compared, never trusted).
        public_key_pem: the embedded public key text.
        signature_base64: the embedded signature text.
    """

    signing_key_fingerprint: Any
    public_key_pem: str
    signature_base64: str

    def __repr__(self) -> str:
        """Show the class only."""
        return "SignatureEnvelope(...)"

    def to_dict(self) -> dict[str, Any]:
        """Return the wire document."""
        return {
            "format": SIGNATURE_FORMAT,
            "algorithm": SIGNATURE_ALGORITHM,
            "signing_key_fingerprint": self.signing_key_fingerprint,
            "public_key": {"encoding": "pem", "value": self.public_key_pem},
            "signature": {"encoding": "base64", "value": self.signature_base64},
        }


def signature_envelope(manifest_bytes: bytes, key: SigningKey) -> bytes:
    """Sign the exact manifest bytes; return the canonical envelope bytes (final LF)."""
    if not isinstance(key, SigningKey):
        raise _fail("invalid_type", "signing_key")
    signature = base64.b64encode(key.sign(bytes(manifest_bytes))).decode("ascii")
    envelope = SignatureEnvelope(
        signing_key_fingerprint=key.fingerprint,
        public_key_pem=key.public_key.pem,
        signature_base64=signature,
    )
    return encode_invarlock(envelope.to_dict())


def _encoded(document: Mapping[str, Any], member: str, encoding: str) -> str:
    value = document[member]
    # The contract's order: more than two members is an unknown one; two (or
    # fewer) that are not exactly ``encoding`` and ``value`` is a missing one.
    oversized = isinstance(value, Mapping) and len(value) > len(_ENCODED_MEMBERS)
    value = check_closed(
        value,
        member,
        _ENCODED_MEMBERS,
        error=SigningKeyError,
        unknown_code="unknown_field" if oversized else "missing_field",
    )
    if value["encoding"] != encoding or type(value["encoding"]) is not str:
        raise _fail("invalid_encoding", f"{member}.encoding")
    text = value["value"]
    if type(text) is not str:
        raise _fail("invalid_type", f"{member}.value")
    return text


def parse_signature_envelope(document: object) -> SignatureEnvelope:
    """Check the envelope's structure: five members, constants, encodings, string values.

    This is the contract part (a failure is a contract violation, exit 4);
    :func:`verify_signature_envelope` is the integrity part.

    Raises:
        SigningKeyError: ``invalid_type``, ``unknown_field``, ``missing_field``,
            ``invalid_constant``, ``invalid_encoding``.
    """
    document = check_closed(document, "signature", _ENVELOPE_MEMBERS, error=SigningKeyError)
    if document["format"] != SIGNATURE_FORMAT or type(document["format"]) is not str:
        raise _fail("invalid_constant", "format")
    if document["algorithm"] != SIGNATURE_ALGORITHM or type(document["algorithm"]) is not str:
        raise _fail("invalid_constant", "algorithm")
    pem = _encoded(document, "public_key", "pem")
    signature = _encoded(document, "signature", "base64")
    return SignatureEnvelope(
        signing_key_fingerprint=document["signing_key_fingerprint"],
        public_key_pem=pem,
        signature_base64=signature,
    )


def _strict_signature_bytes(text: str) -> bytes:
    """Decode standard padded base64 of exactly 64 bytes; nothing else is accepted."""
    if _BASE64_SIGNATURE.fullmatch(text) is None:
        raise _fail("invalid_base64", "signature.value")
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):  # pragma: no cover - the pattern admits only valid text
        raise _fail("invalid_base64", "signature.value") from None
    if len(raw) != 64 or base64.b64encode(raw).decode("ascii") != text:
        # Non-zero padding bits: the text is not the encoding of its bytes.
        raise _fail("invalid_base64", "signature.value")
    return raw


def verify_signature_envelope(
    envelope: SignatureEnvelope, manifest_bytes: bytes, *, manifest_fingerprint: object
) -> VerifyKey:
    """Verify the envelope over the exact manifest bytes; return the signer's key.

    Order: parse the PEM (must be Ed25519), strictly decode the base64
    signature, verify it, then require the key's fingerprint to equal both
    the envelope's and the manifest's ``signing_key_fingerprint``.

    Raises:
        SigningKeyError: ``invalid_pem``, ``not_ed25519``, ``invalid_base64``,
            ``invalid_signature``, ``fingerprint_mismatch``.
    """
    key = VerifyKey.from_pem(envelope.public_key_pem)
    signature = _strict_signature_bytes(envelope.signature_base64)
    key.verify(signature, bytes(manifest_bytes))
    declared = envelope.signing_key_fingerprint
    if type(declared) is not str or declared != key.fingerprint:
        raise _fail("fingerprint_mismatch", "signing_key_fingerprint")
    if type(manifest_fingerprint) is not str or manifest_fingerprint != key.fingerprint:
        raise _fail("fingerprint_mismatch", "manifest.signing_key_fingerprint")
    return key
