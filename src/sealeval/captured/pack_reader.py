"""Strict reading of the directory evidence pack ``invarlock/evidence-pack-v2``.

Wire contract: ``31-pack.md`` (layout, ledger, manifest, signature) and
``32-verify.md`` §3 (examining the pack) of the invarlock specification; JSON
Schemas ``contracts/invarlock.evidence-pack-v2.manifest.schema.json`` and
``contracts/invarlock.evidence-pack-v2.signature.schema.json``. See
``docs/evidence-pack.md``.

:func:`read_evidence_pack` is the shared examination every consumer (verify,
report, receipts) builds on. It returns an :class:`EvidencePack` of typed,
validated objects — the normalized request, the policy, both runs, the
report document, the manifest and the signer's key — or refuses with an
:class:`EvidencePackError` whose :attr:`~EvidencePackError.status` is the
reference's verification status: **4** (contract: inventory, size, strict
JSON, canonical bytes, schemas) or **6** (integrity: digests, ledger,
signature, bindings, files changing while read). An error raised before the
manifest was identified has ``manifest_digest is None`` (no receipt may be
written); afterwards it carries the examined manifest's digest.

What this module does *not* do: the recipient's checks (authentication
required, signer and digest anchors, recipient policy), the Unicode and
work-budget checks, and the replay — they belong to verification.

The format's constants, the checksum ledger, the manifest schema and the
report envelope check live in :mod:`sealeval.captured.pack_layout` and are
re-exported here, so that construction (:mod:`sealeval.captured.pack`)
self-checks with exactly the reader's rules.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

from sealeval._validate import freeze_json
from sealeval.canonical import (
    DecodeLimits,
    decode,
    digest_bytes,
    digest_invarlock,
    encode_invarlock,
)
from sealeval.captured.comparison import DECISION_ORDERS, WIDTH_FIRST_RULE
from sealeval.captured.errors import CapturedRunError
from sealeval.captured.pack_layout import (
    _DIR_FLAGS,
    _FILE_FLAGS,
    _JSON_CODES,
    _MIB,
    AUTHENTICATIONS,
    CHECKSUMS_NAME,
    DECISIONS,
    DIRECTORIES,
    MANIFEST_NAME,
    MAX_CONTROL_BYTES,
    MAX_MANIFEST_DETECT_BYTES,
    MAX_REPORT_METRICS,
    MAX_ROLE_BYTES,
    MAX_TOTAL_BYTES,
    PACK_FORMAT,
    PACK_KIND,
    REFERENCE_PACK_LIMITS,
    REPORT_FORMAT,
    ROLE_PATHS,
    ROLES,
    SIGNATURE_NAME,
    SIGNED,
    UNCAPPED_PACK_LIMITS,
    UNSIGNED,
    EvidencePackError,
    ManifestFacts,
    PackFile,
    PackLimits,
    PackManifest,
    ReportValidator,
    _fail,
    _identified,
    check_report_document,
    checksum_ledger,
    parse_manifest,
)
from sealeval.captured.policy import ComparisonPolicy, ComparisonPolicyError
from sealeval.captured.request import (
    CapturedRequestError,
    NormalizedRequest,
    authored_from_normalized,
    comparison_id,
    normalize_captured_request,
    parse_normalized_request,
)
from sealeval.captured.run import (
    STREAM_MIN_BYTES,
    Limits,
    Run,
    read_canonical_run,
    run_from_decoded,
)
from sealeval.captured.run_outline import RunOutline, outline_run
from sealeval.captured.signing import (
    SignatureEnvelope,
    SigningKeyError,
    VerifyKey,
    parse_signature_envelope,
    verify_signature_envelope,
)
from sealeval.errors import CanonicalError, SealevalError

__all__ = [
    "AUTHENTICATIONS",
    "CHECKSUMS_NAME",
    "DECISIONS",
    "DECISION_ORDERS",
    "DIRECTORIES",
    "MANIFEST_NAME",
    "MAX_CONTROL_BYTES",
    "MAX_MANIFEST_DETECT_BYTES",
    "MAX_REPORT_METRICS",
    "MAX_ROLE_BYTES",
    "MAX_TOTAL_BYTES",
    "PACK_FORMAT",
    "PACK_KIND",
    "REFERENCE_PACK_LIMITS",
    "REPORT_FORMAT",
    "ROLES",
    "ROLE_PATHS",
    "RUN_FORMS",
    "SIGNATURE_NAME",
    "SIGNED",
    "STREAM_MIN_BYTES",
    "UNCAPPED_PACK_LIMITS",
    "UNSIGNED",
    "WIDTH_FIRST_RULE",
    "Authenticator",
    "EvidencePack",
    "EvidencePackError",
    "ManifestFacts",
    "PackFile",
    "PackLimits",
    "PackManifest",
    "PackSnapshot",
    "ReportValidator",
    "RunOutline",
    "check_report_document",
    "checksum_ledger",
    "parse_manifest",
    "read_evidence_pack",
]


#: How :func:`read_evidence_pack` keeps streamed run files (see its ``runs``).
RUN_FORMS: Final = ("full", "outline", "outline_no_ids")

# ---------------------------------------------------------------------------
# Snapshot of the inventory


@dataclass(frozen=True, slots=True)
class _Identity:
    """What must not change while a pack is examined."""

    device: int
    inode: int
    mode: int
    size: int
    mtime_ns: int
    ctime_ns: int

    @classmethod
    def of(cls, result: os.stat_result) -> _Identity:
        return cls(
            result.st_dev,
            result.st_ino,
            result.st_mode,
            result.st_size,
            result.st_mtime_ns,
            result.st_ctime_ns,
        )


@dataclass(frozen=True, slots=True, repr=False)
class PackSnapshot:
    """The identities of every entry of a pack when it was examined.

    Keys are pack-relative names (``"."`` for the root, ``"records"``,
    ``"records/baseline.json"``, …). :meth:`EvidencePack.check_unchanged`
    compares a fresh scan with it (verification re-scans after replay).
    """

    entries: Mapping[str, _Identity]

    def __repr__(self) -> str:
        """Show the entry count only."""
        return f"PackSnapshot(entries={len(self.entries)})"

    @property
    def total_bytes(self) -> int:
        """Sum of the sizes of all files."""
        return sum(
            identity.size for identity in self.entries.values() if stat.S_ISREG(identity.mode)
        )


def _open_root(path: str | os.PathLike[str]) -> int:
    try:
        return os.open(path, _DIR_FLAGS)
    except OSError:
        raise _fail("not_directory", "pack") from None


def _lstat(dir_fd: int, name: str, where: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    except OSError:  # pragma: no cover - EACCES
        raise _fail("unreadable", where) from None


def _listdir(dir_fd: int, where: str) -> list[str]:
    try:
        return sorted(os.listdir(dir_fd))
    except OSError:  # pragma: no cover - EACCES
        raise _fail("unreadable", where) from None


def _expected_files(signed: bool) -> dict[str, str]:
    """Pack-relative file name -> size-limit key."""
    files = {MANIFEST_NAME: "control", CHECKSUMS_NAME: "control"}
    if signed:
        files[SIGNATURE_NAME] = "control"
    for role in ROLES:
        files[ROLE_PATHS[role]] = role
    return files


def _limit(kind: str, limits: PackLimits) -> int | None:
    return MAX_CONTROL_BYTES if kind == "control" else limits.role_limit(kind)


@dataclass(frozen=True, slots=True)
class _OutlineRequest:
    """Read large run files as outlines: the policy (slices, case-set pin), keep the ids."""

    policy: ComparisonPolicy | None
    keep_ids: bool


class _Scanner:
    """The inventory scan: names, types, then presence, then sizes (31-pack.md §1)."""

    def __init__(
        self, root_fd: int, signed: bool, limits: PackLimits = REFERENCE_PACK_LIMITS
    ) -> None:
        self.root_fd = root_fd
        self.expected = _expected_files(signed)
        self.limits = limits
        self.dir_fds: dict[str, int] = {}

    def close(self) -> None:
        for fd in self.dir_fds.values():
            os.close(fd)
        self.dir_fds.clear()

    def _entries(self, dir_fd: int, prefix: str) -> dict[str, os.stat_result]:
        found: dict[str, os.stat_result] = {}
        for name in _listdir(dir_fd, prefix or "pack"):
            relative = f"{prefix}{name}"
            result = _lstat(dir_fd, name, "pack")
            if result is not None:
                found[relative] = result
        return found

    def _check_entries(self, entries: Mapping[str, os.stat_result], *, top: bool) -> None:
        """Refuse unknown names first, then entries of the wrong type."""
        for name in entries:
            if name not in self.expected and not (top and name in DIRECTORIES):
                raise _fail("unknown_entry", "pack")
        for name, result in entries.items():
            wanted = stat.S_ISDIR if top and name in DIRECTORIES else stat.S_ISREG
            if not wanted(result.st_mode):
                raise _fail("unsafe_entry", "pack")

    def _open_directories(self, top: Mapping[str, os.stat_result]) -> dict[str, os.stat_result]:
        """Open the pack's real directories (no symlink) and list them."""
        nested: dict[str, os.stat_result] = {}
        for directory in DIRECTORIES:
            if directory not in top:
                continue
            try:
                fd = os.open(directory, _DIR_FLAGS, dir_fd=self.root_fd)
            except OSError:  # pragma: no cover - replaced after the listing
                raise _fail("unsafe_entry", "pack") from None
            self.dir_fds[directory] = fd
            if _Identity.of(os.fstat(fd)) != _Identity.of(top[directory]):  # pragma: no cover
                raise _fail("file_changed", "pack")
            nested.update(self._entries(fd, f"{directory}/"))
        return nested

    def _check_sizes(self, found: Mapping[str, os.stat_result]) -> None:
        total = 0
        for name, kind in self.expected.items():
            size = found[name].st_size
            total += size
            limit = _limit(kind, self.limits)
            if limit is not None and size > limit:
                raise _fail("too_large", kind if kind != "control" else name)
        maximum = self.limits.max_total_bytes
        if maximum is not None and total > maximum:
            raise _fail("too_large", "pack")

    def scan(self) -> PackSnapshot:
        """Return the snapshot, refusing unknown, unsafe, missing and oversized entries."""
        top = self._entries(self.root_fd, "")
        self._check_entries(top, top=True)
        nested = self._open_directories(top)
        self._check_entries(nested, top=False)
        found = {**top, **nested}
        for name in (*self.expected, *DIRECTORIES):
            if name not in found:
                raise _fail("missing_entry", "pack")
        self._check_sizes(found)
        entries = {".": _Identity.of(os.fstat(self.root_fd))}
        entries.update((name, _Identity.of(result)) for name, result in found.items())
        return PackSnapshot(types.MappingProxyType(entries))

    def streamed_run(
        self,
        name: str,
        snapshot: PackSnapshot,
        role: str,
        expected_digest: str,
        outline: _OutlineRequest | None = None,
    ) -> Run | RunOutline | None:
        """Read a large canonical run file without holding its bytes (uncapped packs).

        Two passes over one open file: the digest (``digest_mismatch`` as the
        whole-file path), then :func:`~sealeval.captured.run.read_canonical_run`,
        whose run digest — the hash of exactly the bytes it parsed, canonical
        ones — must equal the file digest (``file_changed`` otherwise). Any
        refusal of the parse returns ``None``: the caller then takes the
        whole-file path, which names the refusal exactly as for a small file.
        With ``outline`` the second pass builds a :class:`RunOutline` (the
        run's facts without its records) instead of the run.
        """
        fd = self._open(name, snapshot)
        expected = snapshot.entries[name]
        try:
            with os.fdopen(os.dup(fd), "rb") as handle:
                hasher = hashlib.sha256()
                size = 0
                while chunk := handle.read(_MIB):
                    hasher.update(chunk)
                    size += len(chunk)
                if size != expected.size or _Identity.of(os.fstat(fd)) != expected:
                    raise _fail("file_changed", "pack")
                if "sha256:" + hasher.hexdigest() != expected_digest:
                    raise _fail("digest_mismatch", role)
                handle.seek(0)
                run: Run | RunOutline
                try:
                    if outline is None:
                        run = read_canonical_run(handle, limits=self.limits.run_limits())
                    else:
                        run = outline_run(
                            handle,
                            policy=outline.policy,
                            limits=self.limits.run_limits(),
                            keep_ids=outline.keep_ids,
                        )
                except CapturedRunError:
                    return None
            if run.digest != expected_digest or _Identity.of(os.fstat(fd)) != expected:
                raise _fail("file_changed", "pack")
        except OSError:  # pragma: no cover - an I/O error after a successful open
            raise _fail("unreadable", "pack") from None
        finally:
            os.close(fd)
        return run

    def _open(self, name: str, snapshot: PackSnapshot) -> int:
        """Open one snapshotted file (blocking), refusing a changed identity."""
        directory, _, leaf = name.rpartition("/")
        dir_fd = self.dir_fds[directory] if directory else self.root_fd
        try:
            fd = os.open(leaf, _FILE_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError:
            raise _fail("file_changed", "pack") from None
        except OSError as error:
            if error.errno in (errno.ELOOP, errno.EISDIR):
                raise _fail("file_changed", "pack") from None
            raise _fail("unreadable", "pack") from None  # pragma: no cover - EACCES
        try:
            same = _Identity.of(os.fstat(fd)) == snapshot.entries[name]
            if same:
                os.set_blocking(fd, True)
        except OSError:  # pragma: no cover - an I/O error after a successful open
            os.close(fd)
            raise _fail("unreadable", "pack") from None
        if not same:
            os.close(fd)
            raise _fail("file_changed", "pack")
        return fd

    def read(self, name: str, snapshot: PackSnapshot) -> bytes:
        """Read one snapshotted file once, refusing any change of identity or size."""
        directory, _, leaf = name.rpartition("/")
        dir_fd = self.dir_fds[directory] if directory else self.root_fd
        expected = snapshot.entries[name]
        try:
            fd = os.open(leaf, _FILE_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError:
            raise _fail("file_changed", "pack") from None
        except OSError as error:
            if error.errno in (errno.ELOOP, errno.EISDIR):
                raise _fail("file_changed", "pack") from None
            raise _fail("unreadable", "pack") from None  # pragma: no cover - EACCES
        try:
            if _Identity.of(os.fstat(fd)) != expected:
                raise _fail("file_changed", "pack")
            os.set_blocking(fd, True)
            with os.fdopen(os.dup(fd), "rb") as handle:
                data: bytes = handle.read(expected.size + 1)
            if len(data) != expected.size or _Identity.of(os.fstat(fd)) != expected:
                raise _fail("file_changed", "pack")
        except OSError:  # pragma: no cover - an I/O error after a successful open
            raise _fail("unreadable", "pack") from None
        finally:
            os.close(fd)
        return data


def _rescan(path: Path, signed: bool, snapshot: PackSnapshot, limits: PackLimits) -> None:
    fd = _open_root(path)
    scanner = _Scanner(fd, signed, limits)
    try:
        try:
            current = scanner.scan()
        except EvidencePackError:
            raise _fail("file_changed", "pack") from None
        if dict(current.entries) != dict(snapshot.entries):
            raise _fail("file_changed", "pack")
    finally:
        scanner.close()
        os.close(fd)


# ---------------------------------------------------------------------------
# Reading


def _strict_object(data: bytes, limit: int | None, where: str) -> dict[str, Any]:
    if limit is None:
        limit = max(len(data), 1)
    try:
        value = decode(data, limits=DecodeLimits(max_bytes=limit, max_string_length=limit))
    except CanonicalError as error:
        raise _fail(_JSON_CODES.get(error.code, "invalid_json"), where) from None
    if not isinstance(value, dict):
        raise _fail("not_object", where)
    return value


def _identify(root_fd: int) -> tuple[bytes, dict[str, Any], _Identity]:
    """Step 1: read and identify ``manifest.json`` (failures carry no manifest digest)."""
    result = _lstat(root_fd, MANIFEST_NAME, MANIFEST_NAME)
    if result is None:
        raise _fail("manifest_missing", MANIFEST_NAME)
    if not stat.S_ISREG(result.st_mode):
        raise _fail("unsafe_entry", MANIFEST_NAME)
    if result.st_size > MAX_MANIFEST_DETECT_BYTES:
        raise _fail("too_large", MANIFEST_NAME)
    identity = _Identity.of(result)
    try:
        fd = os.open(MANIFEST_NAME, _FILE_FLAGS, dir_fd=root_fd)
    except OSError:  # pragma: no cover - replaced after the lstat
        raise _fail("unsafe_entry", MANIFEST_NAME) from None
    try:
        if _Identity.of(os.fstat(fd)) != identity:  # pragma: no cover - replaced after the lstat
            raise _fail("file_changed", MANIFEST_NAME)
        os.set_blocking(fd, True)
        with os.fdopen(os.dup(fd), "rb") as handle:
            data: bytes = handle.read(MAX_MANIFEST_DETECT_BYTES + 1)
        if len(data) != identity.size or _Identity.of(os.fstat(fd)) != identity:
            raise _fail("file_changed", MANIFEST_NAME)
    except OSError:  # pragma: no cover - an I/O error after a successful open
        raise _fail("unreadable", MANIFEST_NAME) from None
    finally:
        os.close(fd)
    document = _strict_object(data, MAX_MANIFEST_DETECT_BYTES, MANIFEST_NAME)
    if document.get("format") != PACK_FORMAT or document.get("kind") != PACK_KIND:
        raise _fail("unsupported_format", MANIFEST_NAME)
    if len(data) > MAX_CONTROL_BYTES:
        raise _fail("too_large", MANIFEST_NAME)
    return data, document, identity


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class EvidencePack(ManifestFacts):
    """A pack that passed the examination of ``32-verify.md`` §3 (typed, validated).

    Attributes:
        path: the pack directory as given.
        manifest: the manifest (its digest is ``pack_manifest_digest``).
        signature: the signature envelope, or ``None`` when unsigned.
        signer: the verified signer's public key, or ``None`` when unsigned.
        request: the normalized request (``request.json``).
        policy: the policy (``inputs/policy.json``).
        baseline: the baseline run (``records/baseline.json``): a run, or its
            outline when read with ``runs="outline"`` and streamed.
        subject: the subject run (``records/subject.json``), likewise.
        report: the comparison report document (read-only).
        snapshot: the identities of every entry when examined.
        limits: the envelope the pack was read within.
    """

    path: Path
    manifest: PackManifest
    signature: SignatureEnvelope | None
    signer: VerifyKey | None
    request: NormalizedRequest
    policy: ComparisonPolicy
    baseline: Run | RunOutline
    subject: Run | RunOutline
    report: Mapping[str, Any]
    snapshot: PackSnapshot
    limits: PackLimits = REFERENCE_PACK_LIMITS

    def __repr__(self) -> str:
        """Show the manifest digest and the authentication mode only."""
        return (
            f"EvidencePack(manifest_digest={self.manifest_digest!r}, "
            f"authentication={self.authentication!r})"
        )

    @property
    def decision(self) -> str:
        """The report's overall decision."""
        return str(self.report["decision"])

    def held_runs(self) -> tuple[Run, Run]:
        """Return both runs as held :class:`~sealeval.captured.run.Run` objects.

        Raises:
            EvidencePackError: ``invalid_field`` (field ``runs``) when a run
                was read as an outline (``runs="outline"``).
        """
        baseline, subject = self.baseline, self.subject
        if not isinstance(baseline, Run) or not isinstance(subject, Run):
            raise _fail("invalid_field", "runs")
        return baseline, subject

    def open_run(self, role: str) -> IO[bytes]:
        """Open the run file of ``role`` read-only, refusing any change since it was examined.

        Raises:
            EvidencePackError: ``file_changed`` (status 6) when the file or
                its directory is not the one examined.
        """
        name = ROLE_PATHS[role]
        directory = name.rpartition("/")[0]
        with _identified(self.manifest_digest):
            root_fd = _open_root(self.path)
            try:
                dir_fd = os.open(directory, _DIR_FLAGS, dir_fd=root_fd)
            except OSError:
                raise _fail("file_changed", "pack") from None
            finally:
                os.close(root_fd)
            scanner = _Scanner(dir_fd, self.signed, self.limits)
            scanner.dir_fds[directory] = dir_fd
            try:
                fd = scanner._open(name, self.snapshot)
            finally:
                scanner.close()
            return os.fdopen(fd, "rb")

    def check_unchanged(self) -> None:
        """Re-scan the directory; refuse (``file_changed``, status 6) any change since reading."""
        with _identified(self.manifest_digest):
            _rescan(self.path, self.signed, self.snapshot, self.limits)


@dataclass(slots=True)
class _Deferred:
    """Contract failures found while reading, raised later in the reference's order."""

    failures: list[tuple[int, int, EvidencePackError]] = field(default_factory=list)

    def add(self, rank: int, role: str, error: EvidencePackError) -> None:
        self.failures.append((rank, ROLES.index(role), error))

    def raise_first(self) -> None:
        if self.failures:
            raise min(self.failures, key=lambda item: (item[0], item[1]))[2]


_COUNT, _CANONICAL, _SCHEMA = 0, 1, 2


def _typed_run(
    role: str, document: dict[str, Any], file_digest: str, deferred: _Deferred, limits: Limits
) -> Run | None:
    """Build a run (within the record cap, closed schema, canonical) or defer the refusal."""
    try:
        run = run_from_decoded(document, limits=limits)
    except CapturedRunError as error:
        if error.code == "too_many_records":
            deferred.add(_COUNT, role, _fail("too_many_records", role))
        else:
            deferred.add(_SCHEMA, role, _fail("invalid_payload", role))
        if digest_invarlock(document) != file_digest:
            deferred.add(_CANONICAL, role, _fail("not_canonical", role))
        return None
    if run.digest != file_digest:
        deferred.add(_CANONICAL, role, _fail("not_canonical", role))
    return run


def _typed_policy(document: dict[str, Any], deferred: _Deferred) -> ComparisonPolicy | None:
    try:
        return ComparisonPolicy(document)
    except ComparisonPolicyError:
        deferred.add(_SCHEMA, "policy", _fail("invalid_payload", "policy"))
        return None


def _typed_report(
    document: dict[str, Any],
    deferred: _Deferred,
    validate_report: ReportValidator | None,
    decision_order: str,
) -> Mapping[str, Any] | None:
    try:
        check_report_document(document, decision_order=decision_order)
        frozen: Mapping[str, Any] = freeze_json(document, "report", error=CapturedRunError)  # type: ignore[assignment]
        if validate_report is not None:
            validate_report(frozen)
    except SealevalError as error:
        field_name = error.field if isinstance(error, EvidencePackError) else "report"
        deferred.add(_SCHEMA, "report", _fail("invalid_payload", field_name))
        return None
    return frozen


def _typed_payload(
    role: str,
    document: dict[str, Any],
    file_digest: str,
    deferred: _Deferred,
    *,
    validate_report: ReportValidator | None,
    limits: PackLimits,
    decision_order: str,
) -> Any:
    """Build the typed value of a payload; defer contract failures (5.3/5.4 order)."""
    if role in ("baseline", "subject"):
        return _typed_run(role, document, file_digest, deferred, limits.run_limits())
    if digest_invarlock(document) != file_digest:
        deferred.add(_CANONICAL, role, _fail("not_canonical", role))
    if role == "policy":
        return _typed_policy(document, deferred)
    if role == "report":
        return _typed_report(document, deferred, validate_report, decision_order)
    return document  # the request: validated at step 5.7


def _check_signature(
    scanner: _Scanner, snapshot: PackSnapshot, manifest: PackManifest, manifest_bytes: bytes
) -> tuple[SignatureEnvelope, VerifyKey]:
    """Step 5.1: envelope contract (4), then signature and fingerprints (6)."""
    data = scanner.read(SIGNATURE_NAME, snapshot)
    document = _strict_object(data, MAX_CONTROL_BYTES, "signature")
    if encode_invarlock(document) != data:
        raise _fail("not_canonical", "signature")
    try:
        envelope = parse_signature_envelope(document)
    except SigningKeyError as error:
        code = {"unknown_field": "unknown_field", "missing_field": "missing_field"}.get(
            error.code, "invalid_field"
        )
        raise _fail(code, "signature") from None
    try:
        key = verify_signature_envelope(
            envelope, manifest_bytes, manifest_fingerprint=manifest.signing_key_fingerprint
        )
    except SigningKeyError as error:
        code = "signer_mismatch" if error.code == "fingerprint_mismatch" else "signature_invalid"
        raise _fail(code, "signature") from None
    return envelope, key


def _examine(
    path: Path,
    root_fd: int,
    *,
    validate_report: ReportValidator | None,
    limits: PackLimits,
    decision_order: str,
    authenticate: Authenticator | None,
    runs: str,
) -> EvidencePack:
    manifest_bytes, manifest_document, manifest_identity = _identify(root_fd)
    with _identified(digest_bytes(manifest_bytes)):
        return _examine_identified(
            path,
            root_fd,
            manifest_bytes,
            manifest_document,
            manifest_identity=manifest_identity,
            validate_report=validate_report,
            limits=limits,
            decision_order=decision_order,
            authenticate=authenticate,
            runs=runs,
        )


#: A recipient's authentication check (``verify``): called once the signature
#: envelope is checked (step 5.1) and *before any payload is read or decoded*,
#: with the manifest, its digest and the verified signer key (``None`` when
#: unsigned). It raises to refuse; the refusal propagates unchanged, so an
#: unsigned or wrongly signed pack costs no payload work however large it is.
Authenticator = Callable[[PackManifest, str, "VerifyKey | None"], None]


@dataclass(frozen=True, slots=True)
class _Read:
    """What step 4 read: control files checked, payloads typed."""

    ledger: bytes
    envelope: SignatureEnvelope | None
    signer: VerifyKey | None
    values: Mapping[str, Any]
    hexes: Mapping[str, str]
    snapshot: PackSnapshot


def _read_all(
    root_fd: int,
    manifest: PackManifest,
    manifest_bytes: bytes,
    manifest_identity: _Identity,
    *,
    validate_report: ReportValidator | None,
    limits: PackLimits,
    decision_order: str,
    authenticate: Authenticator | None,
    runs: str,
) -> _Read:
    """Run steps 3-5.4: inventory, every file read once, signature, digests, typed payloads."""
    scanner = _Scanner(root_fd, manifest.signed, limits)
    try:
        snapshot = scanner.scan()
        if snapshot.entries[MANIFEST_NAME] != manifest_identity:  # pragma: no cover - race
            raise _fail("file_changed", MANIFEST_NAME)
        ledger = scanner.read(CHECKSUMS_NAME, snapshot)
        envelope: SignatureEnvelope | None = None
        signer: VerifyKey | None = None
        if manifest.signed:
            envelope, signer = _check_signature(scanner, snapshot, manifest, manifest_bytes)
        if authenticate is not None:
            authenticate(manifest, digest_bytes(manifest_bytes), signer)
        deferred = _Deferred()
        values: dict[str, Any] = {}
        hexes: dict[str, str] = {}
        for role in ROLES:
            name = ROLE_PATHS[role]
            if (
                role in ("baseline", "subject")
                and limits.max_records is None
                and snapshot.entries[name].size >= STREAM_MIN_BYTES
            ):
                outline = (
                    None
                    if runs == "full"
                    else _OutlineRequest(values.get("policy"), keep_ids=runs == "outline")
                )
                run = scanner.streamed_run(
                    name, snapshot, role, manifest.files[role].digest, outline
                )
                if run is not None:
                    hexes[role] = run.digest
                    values[role] = run
                    continue
            data = scanner.read(name, snapshot)
            file_digest = digest_bytes(data)
            if file_digest != manifest.files[role].digest:
                raise _fail("digest_mismatch", role)
            document = _strict_object(data, limits.role_limit(role), role)
            del data
            hexes[role] = file_digest
            values[role] = _typed_payload(
                role,
                document,
                file_digest,
                deferred,
                validate_report=validate_report,
                limits=limits,
                decision_order=decision_order,
            )
            del document
        deferred.raise_first()
    finally:
        scanner.close()
    return _Read(ledger, envelope, signer, values, hexes, snapshot)


def _check_bindings(manifest: PackManifest, read: _Read) -> NormalizedRequest:
    """Run steps 5.5-5.9: ledger, digests, request, re-normalization, report bindings."""
    hexes = read.hexes
    if hashlib.sha256(read.ledger).hexdigest() != manifest.checksums_sha256_digest:
        raise _fail("ledger_mismatch", CHECKSUMS_NAME)
    if read.ledger != checksum_ledger(hexes):
        raise _fail("ledger_mismatch", CHECKSUMS_NAME)
    if manifest.request_digest != hexes["request"]:
        raise _fail("request_digest_mismatch", "manifest.request_digest")
    recomputed = comparison_id(
        request_digest=hexes["request"],
        baseline_run_digest=hexes["baseline"],
        subject_run_digest=hexes["subject"],
        policy_digest=hexes["policy"],
    )
    if manifest.comparison_id != recomputed:
        raise _fail("comparison_id_mismatch", "manifest.comparison_id")
    try:
        request = parse_normalized_request(read.values["request"])
    except CapturedRequestError:
        raise _fail("invalid_payload", "request") from None
    try:
        authored = authored_from_normalized(
            request,
            baseline_path=ROLE_PATHS["baseline"],
            subject_path=ROLE_PATHS["subject"],
            policy_path=ROLE_PATHS["policy"],
            evidence="evidence",
        )
        renormalized = normalize_captured_request(
            authored, read.values["baseline"], read.values["subject"], read.values["policy"]
        )
    except SealevalError:
        raise _fail("request_binding_mismatch", "request") from None
    if renormalized.canonical_bytes != request.canonical_bytes:
        raise _fail("request_binding_mismatch", "request")
    bindings = read.values["report"]["bindings"]
    if any(bindings[role] != hexes[role] for role in ("baseline", "subject", "policy")):
        raise _fail("report_binding_mismatch", "report.bindings")
    return request


def _examine_identified(
    path: Path,
    root_fd: int,
    manifest_bytes: bytes,
    manifest_document: dict[str, Any],
    *,
    manifest_identity: _Identity,
    validate_report: ReportValidator | None,
    limits: PackLimits,
    decision_order: str,
    authenticate: Authenticator | None,
    runs: str,
) -> EvidencePack:
    # Step 2: canonical bytes, five roles, closed schema.
    if encode_invarlock(manifest_document) != manifest_bytes:
        raise _fail("not_canonical", MANIFEST_NAME)
    manifest = parse_manifest(manifest_document)
    read = _read_all(
        root_fd,
        manifest,
        manifest_bytes,
        manifest_identity,
        validate_report=validate_report,
        limits=limits,
        decision_order=decision_order,
        authenticate=authenticate,
        runs=runs,
    )
    request = _check_bindings(manifest, read)
    return EvidencePack(
        path=path,
        manifest=manifest,
        signature=read.envelope,
        signer=read.signer,
        request=request,
        policy=read.values["policy"],
        baseline=read.values["baseline"],
        subject=read.values["subject"],
        report=read.values["report"],
        snapshot=read.snapshot,
        limits=limits,
    )


def read_evidence_pack(
    path: str | os.PathLike[str],
    *,
    validate_report: ReportValidator | None = None,
    limits: PackLimits = REFERENCE_PACK_LIMITS,
    decision_order: str = "reference",
    authenticate: Authenticator | None = None,
    runs: str = "full",
) -> EvidencePack:
    """Examine a directory evidence pack and return its typed, validated content.

    Order (32-verify.md §3): identify the manifest (regular file, ≤256 KiB,
    strict JSON object, format and kind, ≤64 KiB); canonical manifest, five
    roles, closed schema; inventory scan (unknown → unsafe → missing →
    sizes); every file read once with identity checks; signature envelope
    (contract, then signature and fingerprints); per role: file digest and
    strict JSON object; record counts; canonical bytes and schemas; ledger;
    request digest and comparison id; the normalized request; re-normalization
    against the pack's runs and policy; report bindings; finally a re-scan
    proving nothing changed while reading.

    Memory: files are read one at a time; each file's bytes are released
    once decoded, and each decoded document once its typed value is built.

    Args:
        path: the pack directory (a real directory, not a symlink).
        validate_report: the comparison engine's full report-schema check.
        limits: the size envelope; :data:`UNCAPPED_PACK_LIMITS` reads packs
            beyond the reference's caps, streaming run files of at least
            :data:`STREAM_MIN_BYTES` (see :meth:`_Scanner.streamed_run`).
        decision_order: the decision order the report must have been made
            with: ``"reference"`` (invarlock's closed report) or sealeval's
            opt-in ``"width_first"`` (the report carries ``decision_rule``).
        authenticate: the recipient's authentication check (see
            :data:`Authenticator`), run after the signature envelope and
            before any payload is read; whatever it raises propagates.
        runs: how streamed run files (see ``limits``) are kept: ``"full"``
            (a :class:`~sealeval.captured.run.Run`), ``"outline"`` (a
            :class:`~sealeval.captured.run_outline.RunOutline`: header,
            digest, counts, ids, case-set digest; no record content) or
            ``"outline_no_ids"`` (the same without the ids). Every check and
            refusal is the same; smaller run files are always read whole.

    Raises:
        EvidencePackError: see the class for ``status`` and ``manifest_digest``.
    """
    if not isinstance(limits, PackLimits):
        raise _fail("invalid_field", "limits")
    if decision_order not in DECISION_ORDERS:
        raise _fail("invalid_field", "decision_order")
    if runs not in RUN_FORMS:
        raise _fail("invalid_field", "runs")
    pack_path = Path(path)
    root_fd = _open_root(pack_path)
    try:
        pack = _examine(
            pack_path,
            root_fd,
            validate_report=validate_report,
            limits=limits,
            decision_order=decision_order,
            authenticate=authenticate,
            runs=runs,
        )
    finally:
        os.close(root_fd)
    pack.check_unchanged()
    return pack
