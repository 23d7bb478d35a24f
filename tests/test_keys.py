"""The one home of Ed25519 key loading refuses with the caller's class, codes and field.

:mod:`sealeval._keys` is run with two families: the evidence packs'
:class:`SigningKeyError` (one code per problem, a field) and the candidate
runner's :class:`CandidateRunnerError` (one code for every PEM problem, no
field). A refusal is exactly the caller's class with the caller's code and
never echoes the key file's bytes or its path.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from sealeval import _keys
from sealeval.captured.signing import SigningKeyError, key_fingerprint
from sealeval.errors import SealevalError
from sealeval.gates.candidate import CandidateRunnerError, ed25519_public_key_sha256
from sealeval.gates.runner import MAX_KEY_BYTES, read_ed25519_key
from support.refusals import CANARY, assert_refused

SIGNING_CODES = _keys.KeyCodes(
    invalid_pem="invalid_pem", encrypted="encrypted_key", not_ed25519="not_ed25519"
)
CANDIDATE_CODES = _keys.KeyCodes.single("ed25519_key_invalid")
CANARY_BYTES = CANARY.encode("ascii")


def _private_pem(
    key: Ed25519PrivateKey | ec.EllipticCurvePrivateKey, password: bytes = b""
) -> bytes:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password)
        if password
        else serialization.NoEncryption()
    )
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    )


def _public_pem(key: Ed25519PrivateKey | ec.EllipticCurvePrivateKey) -> bytes:
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


ED25519 = Ed25519PrivateKey.generate()
P256 = ec.generate_private_key(ec.SECP256R1())
GARBAGE_PEM = b"-----BEGIN PRIVATE KEY-----\n" + CANARY_BYTES + b"\n-----END PRIVATE KEY-----\n"
GARBAGE_PUBLIC = b"-----BEGIN PUBLIC KEY-----\n" + CANARY_BYTES + b"\n-----END PUBLIC KEY-----\n"

# (id, the data, the problem) for the private-key loader
PRIVATE_REFUSALS = [
    ("not-bytes", CANARY, "invalid_pem"),
    ("not-pem", CANARY_BYTES, "invalid_pem"),
    ("pem-garbage", GARBAGE_PEM, "invalid_pem"),
    ("a-public-key", _public_pem(ED25519), "invalid_pem"),
    ("encrypted", _private_pem(ED25519, CANARY_BYTES), "encrypted"),
    ("p256", _private_pem(P256), "not_ed25519"),
]
PUBLIC_REFUSALS = [
    ("not-bytes", CANARY, "invalid_pem"),
    ("not-pem", CANARY_BYTES, "invalid_pem"),
    ("pem-garbage", GARBAGE_PUBLIC, "invalid_pem"),
    ("a-private-key", _private_pem(ED25519), "invalid_pem"),
    ("p256", _public_pem(P256), "not_ed25519"),
]


@pytest.mark.parametrize(
    ("data", "problem"),
    [row[1:] for row in PRIVATE_REFUSALS],
    ids=[row[0] for row in PRIVATE_REFUSALS],
)
def test_private_key_refusals_use_the_callers_codes(data: object, problem: str) -> None:
    signing = assert_refused(
        lambda: _keys.load_private_pem(
            data, error=SigningKeyError, codes=SIGNING_CODES, field="signing_key"
        ),
        getattr(SIGNING_CODES, problem),
        "signing_key",
    )
    assert type(signing) is SigningKeyError
    assert signing.__cause__ is None
    candidate = assert_refused(
        lambda: _keys.load_private_pem(
            data, error=CandidateRunnerError, codes=CANDIDATE_CODES, field=None
        ),
        "ed25519_key_invalid",
    )
    assert type(candidate) is CandidateRunnerError
    assert candidate.field is None


@pytest.mark.parametrize(
    ("data", "problem"),
    [row[1:] for row in PUBLIC_REFUSALS],
    ids=[row[0] for row in PUBLIC_REFUSALS],
)
def test_public_key_refusals_use_the_callers_codes(data: object, problem: str) -> None:
    signing = assert_refused(
        lambda: _keys.load_public_pem(
            data, error=SigningKeyError, codes=SIGNING_CODES, field="public_key"
        ),
        getattr(SIGNING_CODES, problem),
        "public_key",
    )
    assert type(signing) is SigningKeyError
    codes = _keys.KeyCodes.single("public_key_invalid")
    candidate = assert_refused(
        lambda: _keys.load_public_pem(data, error=CandidateRunnerError, codes=codes, field=None),
        "public_key_invalid",
    )
    assert type(candidate) is CandidateRunnerError


def test_keys_load_and_both_fingerprints_hash_the_same_raw_key() -> None:
    private = _keys.load_private_pem(
        _private_pem(ED25519), error=SigningKeyError, codes=SIGNING_CODES, field="signing_key"
    )
    public = _keys.load_public_pem(
        _public_pem(ED25519), error=SigningKeyError, codes=SIGNING_CODES, field="public_key"
    )
    raw = _keys.raw_public_key(private)
    assert len(raw) == 32
    assert raw == _keys.raw_public_key(public) == _keys.raw_public_key(ED25519)
    # The two contracts spell the fingerprint the same way over the same raw bytes.
    assert key_fingerprint(raw) == ed25519_public_key_sha256(public)
    message = b"signed by the loaded key"
    public.verify(private.sign(message), message)


Read = Callable[[Path], bytes]


def _signing_read(path: Path) -> bytes:
    return _keys.read_key_file(
        path,
        limit=64,
        error=SigningKeyError,
        field="signing_key",
        renames={"file_changed": "unreadable"},
        unsafe_path="unsafe_path",
    )


def _candidate_read(path: Path) -> bytes:
    return _keys.read_key_file(
        path,
        limit=64,
        error=CandidateRunnerError,
        field=None,
        renames={"too_large": "ed25519_key_invalid"},
        default="ed25519_key_unavailable",
    )


@pytest.fixture
def key_dir(tmp_path: Path) -> Path:
    folder = tmp_path / CANARY
    folder.mkdir()
    (folder / "small.pem").write_bytes(CANARY_BYTES)
    (folder / "large.pem").write_bytes(CANARY_BYTES * 4)
    # Over the candidate runner's 64 KiB bound, and a real key up front.
    (folder / "huge.pem").write_bytes(_private_pem(ED25519).ljust(MAX_KEY_BYTES + 1, b"\n"))
    (folder / "folder.pem").mkdir()
    os.symlink(folder / "small.pem", folder / "link.pem")
    return folder


@pytest.mark.parametrize(
    ("name", "signing_code", "candidate_code"),
    [
        ("missing.pem", "not_found", "ed25519_key_unavailable"),
        ("large.pem", "too_large", "ed25519_key_invalid"),
        ("folder.pem", "not_regular_file", "ed25519_key_unavailable"),
        ("link.pem", "not_regular_file", "ed25519_key_unavailable"),
    ],
)
def test_key_file_refusals_map_onto_the_callers_codes(
    key_dir: Path, name: str, signing_code: str, candidate_code: str
) -> None:
    path = key_dir / name
    error = assert_refused(lambda: _signing_read(path), signing_code, "signing_key")
    assert str(key_dir) not in str(error)
    assert_refused(lambda: _candidate_read(path), candidate_code)


def test_a_key_file_is_read_whole_and_a_parent_step_is_refused_when_asked(key_dir: Path) -> None:
    assert _signing_read(key_dir / "small.pem") == CANARY_BYTES
    assert _candidate_read(key_dir / "small.pem") == CANARY_BYTES
    dotted = key_dir / "folder.pem" / ".." / "small.pem"
    assert_refused(lambda: _signing_read(dotted), "unsafe_path", "signing_key")
    # Without ``unsafe_path`` the family does not refuse the spelling itself.
    assert _candidate_read(dotted) == CANARY_BYTES


def test_every_code_the_home_is_given_is_the_callers_own() -> None:
    families: list[tuple[type[SealevalError], _keys.KeyCodes]] = [
        (SigningKeyError, SIGNING_CODES),
        (CandidateRunnerError, CANDIDATE_CODES),
        (CandidateRunnerError, _keys.KeyCodes.single("public_key_invalid")),
    ]
    for error, codes in families:
        assert {codes.invalid_pem, codes.encrypted, codes.not_ed25519} <= error.codes


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("missing.pem", "ed25519_key_unavailable"),
        ("huge.pem", "ed25519_key_invalid"),
        ("folder.pem", "ed25519_key_unavailable"),
        ("link.pem", "ed25519_key_unavailable"),
        ("small.pem", "ed25519_key_invalid"),
    ],
)
def test_the_candidate_runner_reads_its_key_through_the_home(
    key_dir: Path, name: str, code: str
) -> None:
    assert_refused(lambda: read_ed25519_key(key_dir / name), code)


def test_the_candidate_runner_loads_a_real_key(tmp_path: Path) -> None:
    path = tmp_path / "ed.pem"
    path.write_bytes(_private_pem(ED25519))
    key = read_ed25519_key(path)
    assert key.public_key_sha256 == ed25519_public_key_sha256(ED25519.public_key())
