"""Recipient trust inputs for verifying evidence packs: trust profile ``invarlock/trust-inputs-v2``.

Wire contract: ``32-verify.md`` §1-§2 of the invarlock specification; JSON
Schema ``contracts/invarlock.trust-inputs-v2.schema.json``. See
``docs/verification.md``.

A recipient verifies a pack only against inputs it owns — never against
anything the pack says about itself:

* the **approved policy** (the recipient's own file),
* four **anchors**: the expected baseline and subject run digests, the
  expected request digest and the expected signer fingerprint,
* the **verifier**: an identity string and the Ed25519 key that signs the
  verification receipt.

They come either from a trust profile (:func:`read_trust_profile`; policy and
key paths are safe relative references resolved against the profile's own
directory, every component opened without following symlinks) or from
explicit options (:func:`explicit_trust_inputs`). Either way,
:func:`check_verification_inputs` performs the input checks of §2 in the
reference's order and returns the loaded :class:`RecipientInputs`; every
refusal is an *incomplete* verification (exit 2, no receipt).

Refusals are :class:`TrustInputError` (message ``<field>: <code>``, never a
value or a path), or the owning layer's error for the policy
(:class:`~sealeval.captured.policy.ComparisonPolicyError`, field rooted at
``policy``) and the verifier key
(:class:`~sealeval.captured.signing.SigningKeyError`, field
``verifier_signing_key``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from sealeval._fs import read_below, read_regular, translated
from sealeval._validate import check_closed, decode_object
from sealeval.canonical import digest_invarlock, is_digest
from sealeval.captured.policy import (
    ComparisonPolicy,
    ComparisonPolicyError,
    is_yaml_policy_name,
    load_policy_yaml,
    parse_comparison_policy,
)
from sealeval.captured.signing import SigningKey, SigningKeyError
from sealeval.errors import CanonicalError, CapturedError

__all__ = [
    "ANCHOR_NAMES",
    "MAX_POLICY_BYTES",
    "MAX_PROFILE_BYTES",
    "MAX_VERIFIER_KEY_BYTES",
    "TRUST_PROFILE_FORMAT",
    "TRUST_PROFILE_KIND",
    "RecipientInputs",
    "TrustAnchors",
    "TrustInputError",
    "TrustInputs",
    "check_verification_inputs",
    "explicit_trust_inputs",
    "is_identity",
    "is_safe_relative_path",
    "parse_trust_profile",
    "read_trust_profile",
]

#: ``format`` of the trust profile.
TRUST_PROFILE_FORMAT: Final = "invarlock/trust-inputs-v2"
#: ``kind`` of the trust profile (the only pack family here).
TRUST_PROFILE_KIND: Final = "captured"
#: Largest trust profile file, in bytes.
MAX_PROFILE_BYTES: Final = 262_144
#: Largest recipient policy file, in bytes.
MAX_POLICY_BYTES: Final = 134_217_728
#: Largest verifier key file, in bytes.
MAX_VERIFIER_KEY_BYTES: Final = 65_536
#: The profile's ``anchors`` members, in the order they are checked.
ANCHOR_NAMES: Final = (
    "baseline_run_digest",
    "subject_run_digest",
    "request_digest",
    "evidence_signer_fingerprint",
)

_IDENTITY: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,255}")
_SAFE_PATH: Final = re.compile(r"[A-Za-z0-9._/-]{1,512}")
_TOP: Final = ("format", "kind", "policy", "anchors", "verifier")
_VERIFIER: Final = ("identity", "signing_key_path")


class TrustInputError(CapturedError):
    """Refusal of the recipient's verification inputs (exit 2, no receipt)."""

    module = "sealeval.captured.trust"
    codes = frozenset(
        {
            # files
            "not_found",
            "not_regular_file",
            "unreadable",
            "too_large",
            "not_utf8",
            "invalid_json",
            "duplicate_key",
            # the profile's closed schema
            "not_object",
            "unknown_field",
            "missing_field",
            "invalid_type",
            "invalid_constant",
            "invalid_path",
            # input checks (32-verify.md §2)
            "invalid_digest",
            "invalid_identity",
            "missing_input",
            "mixed_trust_inputs",
            "invalid_budget",
            "inside_pack",
            "invalid_destination",
        }
    )


def _fail(code: str, where: str | None = None) -> TrustInputError:
    return TrustInputError(code, where)


def is_identity(value: object) -> bool:
    """Return whether ``value`` is a verifier identity.

    Pattern ``^[A-Za-z0-9][A-Za-z0-9._:/-]{0,255}$``.
    """
    return type(value) is str and _IDENTITY.fullmatch(value) is not None


def is_safe_relative_path(value: object) -> bool:
    """Return whether ``value`` is a trust profile's safe relative path.

    1-512 characters of ``[A-Za-z0-9._/-]``, not starting with ``/``, no
    ``//``, no trailing ``/``, no ``.`` or ``..`` segment.
    """
    if type(value) is not str or _SAFE_PATH.fullmatch(value) is None:
        return False
    if value.startswith("/") or value.endswith("/") or "//" in value:
        return False
    return all(segment not in (".", "..") for segment in value.split("/"))


# ---------------------------------------------------------------------------
# Declared inputs


@dataclass(frozen=True, slots=True)
class TrustAnchors:
    """The recipient's four anchors (expected digests and signer fingerprint).

    Values are kept exactly as supplied; :func:`check_verification_inputs`
    refuses any that is not a lowercase ``sha256:`` digest.
    """

    baseline_run_digest: Any
    subject_run_digest: Any
    request_digest: Any
    signer_fingerprint: Any

    def items(self) -> tuple[tuple[str, Any], ...]:
        """Return ``(profile member name, value)`` in the checking order."""
        return tuple(
            zip(
                ANCHOR_NAMES,
                (
                    self.baseline_run_digest,
                    self.subject_run_digest,
                    self.request_digest,
                    self.signer_fingerprint,
                ),
                strict=True,
            )
        )


@dataclass(frozen=True, slots=True, repr=False)
class _FileReference:
    """A file the recipient names: a caller path, or a safe path below a base directory."""

    path: Path
    base: Path | None = None
    relative: str | None = None

    @property
    def resolved(self) -> Path:
        """The file's absolute path with every symlink of the directories resolved."""
        if self.base is not None:
            return self.path
        absolute = _lexical(self.path)
        return Path(os.path.realpath(absolute.parent)) / absolute.name


@dataclass(frozen=True, slots=True, repr=False)
class TrustInputs:
    """What the recipient declared, before any referenced file is read.

    Build with :func:`read_trust_profile` or :func:`explicit_trust_inputs`.

    Attributes:
        anchors: the four anchors as supplied.
        verifier_identity: the verifier identity as supplied (``None`` if missing).
        trust_profile_digest: ``digest(profile JSON value)`` in profile mode,
            else ``None``.
        profile_path: the trust profile (resolved), or ``None`` in explicit mode.
    """

    anchors: TrustAnchors
    verifier_identity: Any
    trust_profile_digest: str | None
    profile_path: Path | None
    policy: _FileReference | None
    verifier_key: _FileReference | None

    def __repr__(self) -> str:
        """Show the mode only."""
        mode = "explicit" if self.profile_path is None else "trust_profile"
        return f"TrustInputs(mode={mode!r})"


def _read_reference(reference: _FileReference, limit: int, where: str) -> bytes:
    """Read a named file through ``sealeval._fs`` (no-follow, never blocks, bounded, stable)."""
    with translated(TrustInputError, where):
        if reference.base is not None and reference.relative is not None:
            return read_below(reference.base, reference.relative, limit=limit)
        return read_regular(reference.path, limit=limit)


def parse_trust_profile(document: object) -> tuple[TrustAnchors, str, str, str]:
    """Check the closed profile schema; return ``(anchors, identity, policy path, key path)``.

    Raises:
        TrustInputError: ``not_object``, ``unknown_field``, ``missing_field``,
            ``invalid_type``, ``invalid_constant``, ``invalid_path``,
            ``invalid_digest``, ``invalid_identity`` (field ``trust_profile.<member>``).
    """
    if not isinstance(document, Mapping):
        raise _fail("not_object", "trust_profile")
    top = check_closed(document, "trust_profile", _TOP, error=TrustInputError)
    for member, expected in (("format", TRUST_PROFILE_FORMAT), ("kind", TRUST_PROFILE_KIND)):
        if type(top[member]) is not str or top[member] != expected:
            raise _fail("invalid_constant", f"trust_profile.{member}")
    policy = check_closed(top["policy"], "trust_profile.policy", ("path",), error=TrustInputError)
    anchors = check_closed(
        top["anchors"], "trust_profile.anchors", ANCHOR_NAMES, error=TrustInputError
    )
    verifier = check_closed(
        top["verifier"], "trust_profile.verifier", _VERIFIER, error=TrustInputError
    )
    if not is_safe_relative_path(policy["path"]):
        raise _fail("invalid_path", "trust_profile.policy.path")
    for name in ANCHOR_NAMES:
        if not is_digest(anchors[name]):
            raise _fail("invalid_digest", f"trust_profile.anchors.{name}")
    if not is_identity(verifier["identity"]):
        raise _fail("invalid_identity", "trust_profile.verifier.identity")
    if not is_safe_relative_path(verifier["signing_key_path"]):
        raise _fail("invalid_path", "trust_profile.verifier.signing_key_path")
    return (
        TrustAnchors(*(anchors[name] for name in ANCHOR_NAMES)),
        verifier["identity"],
        policy["path"],
        verifier["signing_key_path"],
    )


def read_trust_profile(path: str | os.PathLike[str]) -> TrustInputs:
    """Read a trust profile (regular file, not a symlink, strict JSON, ≤256 KiB, closed).

    The policy and verifier key paths are resolved against the profile's own
    (symlink-resolved) directory; they are opened later, component by
    component without following symlinks. ``trust_profile_digest`` is the
    digest of the parsed profile (the file need not be canonical).

    Raises:
        TrustInputError: a file refusal (field ``trust_profile``) or a schema
            refusal (see :func:`parse_trust_profile`).
    """
    absolute = _lexical(path)
    if absolute.name in ("", ".", ".."):
        raise _fail("not_regular_file", "trust_profile")
    directory = Path(os.path.realpath(absolute.parent))
    with translated(TrustInputError, "trust_profile"):
        data = read_below(directory, absolute.name, limit=MAX_PROFILE_BYTES)
    document = decode_object(data, "trust_profile", error=TrustInputError, limit=MAX_PROFILE_BYTES)
    anchors, identity, policy_path, key_path = parse_trust_profile(document)
    try:
        profile_digest = digest_invarlock(document)
    except CanonicalError:  # pragma: no cover - every string member is checked by a pattern
        raise _fail("invalid_json", "trust_profile") from None
    return TrustInputs(
        anchors=anchors,
        verifier_identity=identity,
        trust_profile_digest=profile_digest,
        profile_path=directory / absolute.name,
        policy=_FileReference(directory / policy_path, directory, policy_path),
        verifier_key=_FileReference(directory / key_path, directory, key_path),
    )


def explicit_trust_inputs(
    *,
    policy: str | os.PathLike[str] | None,
    expected_baseline_run: object,
    expected_subject_run: object,
    expected_request_digest: object,
    expected_signer: object,
    verifier_signing_key: str | os.PathLike[str] | None,
    verifier_identity: object,
) -> TrustInputs:
    """Declare trust inputs from explicit options (``trust_profile_digest`` is ``None``).

    Nothing is checked or read here; :func:`check_verification_inputs` does it
    in the reference's order. Paths are the caller's (relative to the working
    directory); the final component of each must not be a symlink.
    """
    return TrustInputs(
        anchors=TrustAnchors(
            expected_baseline_run,
            expected_subject_run,
            expected_request_digest,
            expected_signer,
        ),
        verifier_identity=verifier_identity,
        trust_profile_digest=None,
        profile_path=None,
        policy=None if policy is None else _FileReference(Path(policy)),
        verifier_key=None
        if verifier_signing_key is None
        else _FileReference(Path(verifier_signing_key)),
    )


# ---------------------------------------------------------------------------
# Loaded inputs


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class RecipientInputs:
    """The recipient's checked, loaded verification inputs.

    Attributes:
        policy: the recipient's approved policy (portable validation passed).
        anchors: the four anchors (each a lowercase ``sha256:`` digest).
        verifier_key: the Ed25519 key that signs the receipt.
        verifier_identity: the verifier identity.
        trust_profile_digest: the trust profile's digest, or ``None`` (explicit mode).
        receipt: where the receipt goes (absolute, lexical), or ``None``.
        max_bootstrap_draws: the local work budget (``None`` = unlimited).
    """

    policy: ComparisonPolicy
    anchors: TrustAnchors
    verifier_key: SigningKey
    verifier_identity: str
    trust_profile_digest: str | None
    receipt: Path | None
    max_bootstrap_draws: int | None

    def __repr__(self) -> str:
        """Show the policy digest and the verifier fingerprint only."""
        return (
            f"RecipientInputs(policy_digest={self.policy.digest!r}, "
            f"verifier_fingerprint={self.verifier_key.fingerprint!r})"
        )

    @property
    def policy_digest(self) -> str:
        """The recipient policy's digest (the receipt's ``anchors.policy_digest``)."""
        return self.policy.digest

    @property
    def verifier_fingerprint(self) -> str:
        """The verifier key's fingerprint."""
        return self.verifier_key.fingerprint


def _inside(path: Path, directory: Path) -> bool:
    return path == directory or directory in path.parents


def _lexical(path: str | os.PathLike[str]) -> Path:
    """Return the absolute path without resolving symlinks (``..`` removed lexically)."""
    return Path(os.path.normpath(Path.cwd() / path))


def _check_outside(
    trust: TrustInputs, evidence: str | os.PathLike[str], receipt: str | os.PathLike[str] | None
) -> Path | None:
    """Refuse a receipt, profile, policy or key inside the pack (lexically or resolved)."""
    pack_lexical = _lexical(evidence)
    pack_resolved = Path(os.path.realpath(evidence))
    destination: Path | None = None
    if receipt is not None:
        text = os.fspath(receipt)
        name = Path(text).name
        if not text or text.endswith(("/", os.sep)) or name in ("", ".", ".."):
            raise _fail("invalid_destination", "receipt")
        destination = _lexical(text)
        real = Path(os.path.realpath(destination.parent)) / destination.name
        if _inside(destination, pack_lexical) or _inside(real, pack_resolved):
            raise _fail("inside_pack", "receipt")
    for where, reference in (
        ("trust_profile", trust.profile_path),
        ("policy", None if trust.policy is None else trust.policy.resolved),
        (
            "verifier_signing_key",
            None if trust.verifier_key is None else trust.verifier_key.resolved,
        ),
    ):
        if reference is None:
            continue
        if _inside(_lexical(reference), pack_lexical) or _inside(
            Path(os.path.realpath(reference)), pack_resolved
        ):
            raise _fail("inside_pack", where)
    return destination


def _budget(value: object) -> int | None:
    if value is None:
        return None
    if type(value) is not int or value < 0:
        raise _fail("invalid_budget", "max_bootstrap_draws")
    return value


def _load_policy(reference: _FileReference) -> ComparisonPolicy:
    data = _read_reference(reference, MAX_POLICY_BYTES, "policy")
    if is_yaml_policy_name(reference.path):  # sealeval: strict YAML policies too
        document = load_policy_yaml(data)
        if not isinstance(document, dict):
            raise _fail("not_object", "policy")
    else:
        document = decode_object(data, "policy", error=TrustInputError, limit=MAX_POLICY_BYTES)
    try:
        return parse_comparison_policy(document)
    except ComparisonPolicyError as error:
        field = error.field
        rooted = "policy" if field in (None, "policy") else f"policy.{field}"
        raise ComparisonPolicyError(error.code, rooted[:128]) from None


def _load_key(reference: _FileReference) -> SigningKey:
    where = "verifier_signing_key"
    data = _read_reference(reference, MAX_VERIFIER_KEY_BYTES, where)
    try:
        return SigningKey.from_pem(data)
    except SigningKeyError as error:
        raise SigningKeyError(error.code, where) from None


def check_verification_inputs(
    trust: TrustInputs,
    *,
    evidence: str | os.PathLike[str],
    receipt: str | os.PathLike[str] | None,
    max_bootstrap_draws: object,
    require_receipt: bool = True,
) -> RecipientInputs:
    """Run the input checks of ``32-verify.md`` §2 in order and load the inputs.

    Order: the four anchors are lowercase ``sha256:`` digests; the verifier
    identity; the trust profile digest; the receipt path and the verifier key
    are present; the budget is ``None`` or an ``int`` >= 0; the receipt (and
    the profile, policy and key) lie outside the pack, both lexically and
    after resolving symlinks; the policy file (≤128 MiB, strict JSON object,
    portable validation); the verifier key (password-less PEM Ed25519
    private key, ≤64 KiB).

    Args:
        trust: the declared inputs.
        evidence: the pack directory (only its location is used here).
        receipt: the receipt destination.
        max_bootstrap_draws: the local work budget (``None`` = unlimited).
        require_receipt: whether a receipt destination is required (the CLI
            always requires one).

    Raises:
        TrustInputError: see the class; also
        ComparisonPolicyError: the policy fails portable validation;
        SigningKeyError: the verifier key is not a usable Ed25519 key.
    """
    if not isinstance(trust, TrustInputs):
        raise _fail("invalid_type", "trust_inputs")
    for name, value in trust.anchors.items():
        if value is None:
            raise _fail("missing_input", f"anchors.{name}")
        if not is_digest(value):
            raise _fail("invalid_digest", f"anchors.{name}")
    if trust.verifier_identity is None:
        raise _fail("missing_input", "verifier_identity")
    if not is_identity(trust.verifier_identity):
        raise _fail("invalid_identity", "verifier_identity")
    if trust.trust_profile_digest is not None and not is_digest(trust.trust_profile_digest):
        raise _fail("invalid_digest", "trust_profile_digest")  # pragma: no cover - computed
    if receipt is None and require_receipt:
        raise _fail("missing_input", "receipt")
    if trust.policy is None:
        raise _fail("missing_input", "policy")
    if trust.verifier_key is None:
        raise _fail("missing_input", "verifier_signing_key")
    budget = _budget(max_bootstrap_draws)
    destination = _check_outside(trust, evidence, receipt)
    policy = _load_policy(trust.policy)
    key = _load_key(trust.verifier_key)
    return RecipientInputs(
        policy=policy,
        anchors=trust.anchors,
        verifier_key=key,
        verifier_identity=str(trust.verifier_identity),
        trust_profile_digest=trust.trust_profile_digest,
        receipt=destination,
        max_bootstrap_draws=budget,
    )
