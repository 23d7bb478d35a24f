"""Check a model directory's OpenSSF Model Signing signature before it is sealed.

The OpenSSF Model Signing format (the ``model-signing`` package, optional
extra ``sealeval[model-signing]``) signs a model directory as a Sigstore
bundle whose DSSE payload is an in-toto statement listing every file of the
model with its SHA-256 digest. :func:`check_model_signature` accepts the
signature only when, offline:

1. the public key is an ECDSA key on P-256, P-384 or P-521 (what
   ``model-signing`` supports for local keys; Ed25519 is not among them);
2. the signature document is a bundle whose statement uses the ``files``
   serialization with ``sha256`` digests (the package's defaults);
3. the signed file list covers **exactly** the regular files of the model
   directory, each with the same digest: a file the signature names but the
   directory lacks is ``missing_file``, a file (or symlink) the directory has
   but the signature does not name is ``extra_file``, a different digest is
   ``changed_file``. Files the package ignores by default (``.git``,
   ``.gitattributes``, ...) count: sealing covers them, so the signature must
   too. Directories themselves are not files and carry no digest;
4. the package's own verifier accepts the signature with the public key
   (cryptographic check; it also re-hashes the directory).

Steps 3 and 4 read the same signature bytes (the package is handed a private
copy), and step 3 uses the same directory walk whose tree digest is sealed,
so the sealed digest describes exactly what the signature covers.
Refusals are :class:`ModelSignatureError` with a closed code; nothing from the
signature, the key or the directory (file names included) reaches a message.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import logging
import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import load_pem_public_key

from sealeval._fs import read_regular, translated
from sealeval._validate import EMPTY, decode_object
from sealeval.canonical import DecodeLimits
from sealeval.errors import ManifestError, SealevalError
from sealeval.manifest.components import digest_tree_entries, tree_entries

__all__ = [
    "MAX_MODEL_SIGNATURE_BYTES",
    "MODEL_SIGNING_EXTRA",
    "MODEL_SIGNING_PREDICATE",
    "ModelSignatureCheck",
    "ModelSignatureError",
    "check_model_signature",
    "signed_files",
]

#: The pyproject extra that installs the verifier.
MODEL_SIGNING_EXTRA: Final = "sealeval[model-signing]"
#: ``predicateType`` of an OpenSSF Model Signing statement.
MODEL_SIGNING_PREDICATE: Final = "https://model_signing/signature/v1.0"
#: Largest signature file read, in bytes.
MAX_MODEL_SIGNATURE_BYTES: Final = 64 * 1024 * 1024
_MAX_KEY_BYTES: Final = 65_536
_CURVES: Final = (ec.SECP256R1, ec.SECP384R1, ec.SECP521R1)
_HEX: Final = re.compile(r"[0-9a-f]{64}")
_LIMITS: Final = DecodeLimits(max_bytes=MAX_MODEL_SIGNATURE_BYTES, max_depth=16)


class ModelSignatureError(ManifestError):
    """Refusal of a model's OpenSSF signature (``<field>: <code>``)."""

    module = "sealeval.manifest.model_signature"
    codes = frozenset(
        {
            "model_signing_extra_missing",
            "unavailable",
            "too_large",
            "invalid_public_key",
            "unsupported_public_key",
            "invalid_signature_document",
            "unsupported_serialization",
            "not_directory",
            "missing_file",
            "extra_file",
            "changed_file",
            "invalid_signature",
        }
    )


def _read(path: str | os.PathLike[str], limit: int, where: str) -> bytes:
    """Read a regular, non-symlink file of at most ``limit`` bytes (:mod:`sealeval._fs`)."""
    with translated(ModelSignatureError, where, default="unavailable"):
        return read_regular(path, limit=limit)


def _check_public_key(data: bytes) -> None:
    try:
        key = load_pem_public_key(data)
    except UnsupportedAlgorithm:  # pragma: no cover - a key type this build lacks
        raise ModelSignatureError("unsupported_public_key", "model_public_key") from None
    except (ValueError, TypeError):
        raise ModelSignatureError("invalid_public_key", "model_public_key") from None
    if not isinstance(key, ec.EllipticCurvePublicKey) or not isinstance(key.curve, _CURVES):
        raise ModelSignatureError("unsupported_public_key", "model_public_key")


def _decode(data: bytes) -> dict[str, Any]:
    """Decode a strict JSON object (the bundle or its statement); any refusal is one code."""
    return decode_object(
        data,
        "model_signature",
        error=ModelSignatureError,
        limit=_LIMITS,
        codes=EMPTY,
        other_code="invalid_signature_document",
        object_code="invalid_signature_document",
    )


def _member(document: object, name: str) -> Any:
    if not isinstance(document, Mapping) or name not in document:
        raise ModelSignatureError("invalid_signature_document", "model_signature")
    return document[name]


def signed_files(signature: bytes) -> dict[str, str]:
    """Return the file list a signature claims, ``{relative path: "sha256:<hex>"}``.

    Nothing is verified here; :func:`check_model_signature` verifies.

    Raises:
        ModelSignatureError: ``invalid_signature_document``,
            ``unsupported_serialization``.
    """
    envelope = _member(_decode(signature), "dsseEnvelope")
    if _member(envelope, "payloadType") != "application/vnd.in-toto+json":
        raise ModelSignatureError("invalid_signature_document", "model_signature")
    try:
        payload = base64.b64decode(_member(envelope, "payload"), validate=True)
    except (binascii.Error, ValueError, TypeError):
        raise ModelSignatureError("invalid_signature_document", "model_signature") from None
    statement = _decode(payload)
    if _member(statement, "predicateType") != MODEL_SIGNING_PREDICATE:
        raise ModelSignatureError("invalid_signature_document", "model_signature")
    predicate = _member(statement, "predicate")
    serialization = _member(predicate, "serialization")
    if (
        _member(serialization, "method") != "files"
        or _member(serialization, "hash_type") != "sha256"
    ):
        raise ModelSignatureError("unsupported_serialization", "model_signature")
    resources = _member(predicate, "resources")
    if not isinstance(resources, list):
        raise ModelSignatureError("invalid_signature_document", "model_signature")
    files: dict[str, str] = {}
    for resource in resources:
        name, digest = _member(resource, "name"), _member(resource, "digest")
        if _member(resource, "algorithm") != "sha256":
            raise ModelSignatureError("unsupported_serialization", "model_signature")
        if (
            type(name) is not str
            or type(digest) is not str
            or _HEX.fullmatch(digest) is None
            or name in files
        ):
            raise ModelSignatureError("invalid_signature_document", "model_signature")
        files[name] = "sha256:" + digest
    return files


def _compare(signed: Mapping[str, str], entries: tuple[tuple[Any, ...], ...]) -> int:
    present: dict[str, str] = {}
    for entry in entries:
        if entry[0] == "f":
            present[entry[1]] = entry[3]
        elif entry[0] == "l":
            raise ModelSignatureError("extra_file", "model")
    if set(signed) - set(present):
        raise ModelSignatureError("missing_file", "model")
    if set(present) - set(signed):
        raise ModelSignatureError("extra_file", "model")
    if any(present[name] != signed[name] for name in present):
        raise ModelSignatureError("changed_file", "model")
    return len(present)


@contextlib.contextmanager
def _private_copies(signature: bytes, public_key: bytes) -> Iterator[tuple[Path, Path]]:
    with tempfile.TemporaryDirectory(prefix="sealeval-model-signature-") as directory:
        signature_path = Path(directory) / "model.sig"
        key_path = Path(directory) / "model.pub"
        signature_path.write_bytes(signature)
        key_path.write_bytes(public_key)
        yield signature_path, key_path


def _package_verifies(model: Path, signature: bytes, public_key: bytes) -> None:
    # The optional extra; its presence was checked before any input was read.
    from model_signing import verifying  # noqa: PLC0415

    with _private_copies(signature, public_key) as (signature_path, key_path):
        config = verifying.Config()  # type: ignore[no-untyped-call]
        config = config.use_elliptic_key_verifier(public_key=key_path)
        config = config.set_ignore_unsigned_files(False)
        quiet = logging.getLogger("model_signing")
        level = quiet.level
        quiet.setLevel(logging.CRITICAL)
        try:
            config.verify(model, signature_path)
        except Exception:  # noqa: BLE001 - the package's errors quote file names
            raise ModelSignatureError("invalid_signature", "model_signature") from None
        finally:
            quiet.setLevel(level)


@dataclass(frozen=True, slots=True)
class ModelSignatureCheck:
    """An accepted model signature.

    Attributes:
        model_digest: the tree digest of the model directory (the sealed
            ``model`` component), from the walk that was compared.
        file_count: how many files the signature covers.
    """

    model_digest: str
    file_count: int


def check_model_signature(
    model: str | os.PathLike[str],
    signature: str | os.PathLike[str],
    public_key: str | os.PathLike[str],
) -> ModelSignatureCheck:
    """Verify a model directory's OpenSSF signature offline (see the module docstring).

    Args:
        model: the model directory (the ``model`` component being sealed).
        signature: the signature file written by ``model-signing`` (keep it
            outside the model directory: inside, it is an extra file).
        public_key: the PEM public key of the ECDSA key that signed.

    Raises:
        ModelSignatureError: ``model_signing_extra_missing``, ``unavailable``,
            ``too_large``, ``invalid_public_key``, ``unsupported_public_key``,
            ``invalid_signature_document``, ``unsupported_serialization``,
            ``not_directory``, ``missing_file``, ``extra_file``,
            ``changed_file``, ``invalid_signature``.
        ComponentDigestError: the directory walk's refusals (field ``model``).
    """
    try:
        import model_signing.verifying  # noqa: F401, PLC0415 - fail early without the extra
    except ImportError:
        raise ModelSignatureError("model_signing_extra_missing", "model_signature") from None
    key_data = _read(public_key, _MAX_KEY_BYTES, "model_public_key")
    _check_public_key(key_data)
    signature_data = _read(signature, MAX_MODEL_SIGNATURE_BYTES, "model_signature")
    claimed = signed_files(signature_data)
    directory = Path(model)
    if not directory.is_dir():
        raise ModelSignatureError("not_directory", "model")
    try:
        entries = tree_entries(directory)
    except SealevalError as error:
        raise type(error)(error.code, "model") from None
    count = _compare(claimed, entries)
    _package_verifies(directory, signature_data, key_data)
    return ModelSignatureCheck(model_digest=digest_tree_entries(entries), file_count=count)
