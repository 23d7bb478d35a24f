"""The one home of Ed25519 key loading: bounded key files, PEM parsing, type checks.

Every function takes the caller's error class and codes as parameters (like
:mod:`sealeval._validate`), so each family refuses with its own closed codes
while the rules are written once:

* :func:`read_key_file` -- a key file read through :mod:`sealeval._fs`
  (no-follow, regular file only, bounded, stable while read), its
  :class:`~sealeval._fs.FileSystemError` codes mapped onto the caller's.
* :func:`load_private_pem` -- a password-less PEM private key that must be
  Ed25519 (:class:`KeyCodes` names the code of each refusal).
* :func:`load_public_pem` -- a PEM ``SubjectPublicKeyInfo`` public key that
  must be Ed25519.
* :func:`raw_public_key` -- the raw 32-byte encoding both fingerprint formats
  hash (each caller keeps its own fingerprint spelling: they are contracts).

Key material never reaches an error: a refusal carries the caller's code and
its fixed field name only, and the library's exception is never chained.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    PublicFormat,
    load_pem_private_key,
    load_pem_public_key,
)

from sealeval._fs import read_regular, translated
from sealeval.errors import SealevalError

__all__ = [
    "KeyCodes",
    "load_private_pem",
    "load_public_pem",
    "raw_public_key",
    "read_key_file",
]


@dataclass(frozen=True, slots=True)
class KeyCodes:
    """The caller's code for each way a PEM key is refused.

    Attributes:
        invalid_pem: not bytes, not PEM, or a PEM the library cannot decode.
        encrypted: a private key that needs a password (never asked for).
        not_ed25519: a well-formed key of another type, or one of an algorithm
            this build of ``cryptography`` lacks.
    """

    invalid_pem: str
    encrypted: str
    not_ed25519: str

    @classmethod
    def single(cls, code: str) -> KeyCodes:
        """Return codes that refuse every problem with the same ``code``."""
        return cls(invalid_pem=code, encrypted=code, not_ed25519=code)


def read_key_file(
    path: str | os.PathLike[str],
    *,
    limit: int,
    error: type[SealevalError],
    field: str | None,
    renames: Mapping[str, str] | None = None,
    default: str = "unreadable",
    unsafe_path: str | None = None,
) -> bytes:
    """Read a whole key file: regular, not a symlink, at most ``limit`` bytes.

    A :class:`~sealeval._fs.FileSystemError` becomes ``error(code, field)``
    exactly as :func:`sealeval._fs.translated` maps it (``renames``, the same
    code when ``error`` declares it, else ``default``). With ``unsafe_path``
    given, a path with a ``..`` component is refused with that code first.

    Raises:
        SealevalError: an instance of ``error``.
    """
    text = os.fspath(path)
    if unsafe_path is not None and (not isinstance(text, str) or ".." in Path(text).parts):
        raise error(unsafe_path, field)
    with translated(error, field, renames, default=default):
        return read_regular(text, limit=limit)


def load_private_pem(
    data: object, *, error: type[SealevalError], codes: KeyCodes, field: str | None
) -> Ed25519PrivateKey:
    """Parse a password-less PEM private key (PKCS#8 or traditional); it must be Ed25519.

    Raises:
        SealevalError: ``error`` with ``codes.invalid_pem``, ``codes.encrypted``
            or ``codes.not_ed25519``.
    """
    if not isinstance(data, bytes):
        raise error(codes.invalid_pem, field)
    try:
        key = load_pem_private_key(data, password=None)
    except TypeError:
        # Raised when the key is encrypted and no password was given.
        raise error(codes.encrypted, field) from None
    except UnsupportedAlgorithm:  # pragma: no cover - a key type this build lacks
        raise error(codes.not_ed25519, field) from None
    except ValueError:
        raise error(codes.invalid_pem, field) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise error(codes.not_ed25519, field)
    return key


def load_public_pem(
    data: object, *, error: type[SealevalError], codes: KeyCodes, field: str | None
) -> Ed25519PublicKey:
    """Parse a PEM ``SubjectPublicKeyInfo`` public key; it must be Ed25519.

    ``codes.encrypted`` is never used (a public key has no password).

    Raises:
        SealevalError: ``error`` with ``codes.invalid_pem`` or ``codes.not_ed25519``.
    """
    if not isinstance(data, bytes):
        raise error(codes.invalid_pem, field)
    try:
        key = load_pem_public_key(data)
    except UnsupportedAlgorithm:  # pragma: no cover - a key type this build lacks
        raise error(codes.not_ed25519, field) from None
    except (ValueError, TypeError):
        raise error(codes.invalid_pem, field) from None
    if not isinstance(key, Ed25519PublicKey):
        raise error(codes.not_ed25519, field)
    return key


def raw_public_key(key: Ed25519PublicKey | Ed25519PrivateKey) -> bytes:
    """Return the raw 32-byte public key (of a private key: its public half)."""
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    return public.public_bytes(Encoding.Raw, PublicFormat.Raw)
