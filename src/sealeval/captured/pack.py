"""Construction and publication of the directory evidence pack ``invarlock/evidence-pack-v2``.

Wire contract: ``31-pack.md`` of the invarlock specification. See
``docs/evidence-pack.md``; the format's constants and the reader live in
:mod:`sealeval.captured.pack_reader`.

Two steps, so that the expensive comparison sits between loading and
packing and nothing is loaded twice:

1. :func:`prepare_pack` takes the normalized request, both runs, the policy
   and the **already computed** comparison report (its canonical bytes), checks
   that they bind to each other exactly as a reader will check them (sizes,
   record counts, canonical report, report envelope and bindings,
   re-normalization of the request against the runs and policy, manifest
   schema), and computes the checksum ledger, the manifest and — in signed
   mode — the Ed25519 signature envelope. Nothing is written.
2. :func:`publish_pack` writes a :class:`StagedPack` into a private staging
   directory beside the destination (files created exclusively, mode 0600,
   written, chmod 0444, fsynced; directories 0700, fsynced), verifies every
   written file's SHA-256 and the staged inventory, and renames the staging
   directory onto the destination with a **no-replace** rename. An existing
   destination is refused; on any failure the staging directory is removed,
   so a partial pack is never visible under the destination name.

:func:`build_evidence_pack` does both for a
:class:`~sealeval.captured.request.CapturedRequest`.

No-clobber rename: Linux ``renameat2(RENAME_NOREPLACE)`` or macOS
``renameatx_np(RENAME_EXCL)``, called through :mod:`ctypes`. Where neither
exists (or the file system refuses the flag), the destination name is first
claimed with an exclusive ``mkdir`` and the staging directory is then renamed
onto that empty directory (POSIX ``rename`` replaces an empty directory
atomically and fails on a non-empty one); a concurrent writer can therefore
never be overwritten, and readers see either nothing, an empty directory for
an instant, or the complete pack.

Refusals are :class:`EvidencePackBuildError` (message ``<field>: <code>``).
"""

from __future__ import annotations

import hashlib
import os
import stat
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from sealeval._fs import (
    create_directory,
    create_exclusive,
    fsync_directory,
    list_names,
    open_destination_parent,
    translated,
)
from sealeval._validate import freeze_json
from sealeval.canonical import decode, digest_bytes, encode_invarlock
from sealeval.captured.errors import CapturedRunError
from sealeval.captured.pack_layout import ManifestFacts
from sealeval.captured.pack_reader import (
    CHECKSUMS_NAME,
    DECISION_ORDERS,
    DIRECTORIES,
    MANIFEST_NAME,
    MAX_CONTROL_BYTES,
    PACK_FORMAT,
    PACK_KIND,
    REFERENCE_PACK_LIMITS,
    ROLE_PATHS,
    ROLES,
    SIGNATURE_NAME,
    SIGNED,
    UNSIGNED,
    EvidencePackError,
    PackLimits,
    PackManifest,
    ReportValidator,
    check_report_document,
    checksum_ledger,
    parse_manifest,
)
from sealeval.captured.policy import ComparisonPolicy
from sealeval.captured.request import (
    CapturedRequest,
    NormalizedRequest,
    RunFacts,
    authored_from_normalized,
    normalize_captured_request,
)
from sealeval.captured.run import Run
from sealeval.captured.signing import SigningKey, signature_envelope
from sealeval.captured.staging import STAGING_PREFIX, staged_publication
from sealeval.errors import CanonicalError, CapturedError, SealevalError

__all__ = [
    "STAGING_PREFIX",
    "EvidencePackBuildError",
    "PublishedPack",
    "StagedPack",
    "build_evidence_pack",
    "prepare_pack",
    "publish_pack",
]

_FILE_MODE: Final = 0o444
_DIR_MODE: Final = 0o700
_CHUNK: Final = 1_048_576


class EvidencePackBuildError(CapturedError):
    """Refusal to build or publish an evidence pack (``evaluate`` exits with status 2)."""

    module = "sealeval.captured.pack"
    codes = frozenset(
        {
            # inputs
            "signing_mode",
            "invalid_type",
            "request_mismatch",
            "too_many_records",
            "too_large",
            "invalid_report",
            "report_not_canonical",
            "report_binding_mismatch",
            "self_check_failed",
            # publication
            "unsafe_destination",
            "output_exists",
            "output_unwritable",
        }
    )


def _fail(code: str, where: str | None = None) -> EvidencePackBuildError:
    return EvidencePackBuildError(code, where)


# ---------------------------------------------------------------------------
# Construction


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class StagedPack(ManifestFacts):
    """A checked, complete pack held in memory, ready for :func:`publish_pack`.

    The runs are kept as :class:`~sealeval.captured.run.Run` objects (or, for
    large canonical runs, as :class:`~sealeval.captured.request.RunFacts` over
    their open files) and streamed to disk at publication (their canonical bytes are never held);
    ``report_bytes`` is the caller's object, not a copy.

    Attributes:
        request: the normalized request (``request.json``).
        policy: the policy (``inputs/policy.json``).
        baseline: the baseline run (``records/baseline.json``).
        subject: the subject run (``records/subject.json``).
        report_bytes: the comparison report's canonical bytes.
        decision: the report's overall decision.
        manifest: the manifest (its digest is ``pack_manifest_digest``).
        checksums_bytes: the checksum ledger.
        signature_bytes: the signature envelope, or ``None`` when unsigned.
        copies: by role, the open file of a held run whose bytes are exactly
            its canonical bytes: published by copying that file (1 MiB
            chunks) instead of re-encoding the run; the written digest is
            checked as for every file (a file changed since it was read is
            ``self_check_failed``).
    """

    request: NormalizedRequest
    policy: ComparisonPolicy
    baseline: Run | RunFacts
    subject: Run | RunFacts
    report_bytes: bytes
    decision: str
    manifest: PackManifest
    checksums_bytes: bytes
    signature_bytes: bytes | None
    copies: Mapping[str, RunFacts] = field(default_factory=lambda: types.MappingProxyType({}))

    def __repr__(self) -> str:
        """Show the manifest digest and the authentication mode only."""
        return (
            f"StagedPack(pack_manifest_digest={self.pack_manifest_digest!r}, "
            f"authentication={self.authentication!r})"
        )

    def files(self) -> tuple[tuple[str, Callable[[], Iterable[bytes]], int], ...]:
        """Every file as ``(pack-relative path, chunk source, size)``, payloads first."""
        report = self.report_bytes
        request = self.request.canonical_bytes
        policy = self.policy.canonical_bytes
        entries: list[tuple[str, Callable[[], Iterable[bytes]], int]] = [
            (ROLE_PATHS["request"], lambda: (request,), len(request)),
            (ROLE_PATHS["policy"], lambda: (policy,), len(policy)),
            (ROLE_PATHS["baseline"], self._run_chunks("baseline"), self.baseline.canonical_size),
            (ROLE_PATHS["subject"], self._run_chunks("subject"), self.subject.canonical_size),
            (ROLE_PATHS["report"], lambda: (report,), len(report)),
            (CHECKSUMS_NAME, lambda: (self.checksums_bytes,), len(self.checksums_bytes)),
            (
                MANIFEST_NAME,
                lambda: (self.manifest.canonical_bytes,),
                len(self.manifest.canonical_bytes),
            ),
        ]
        signature = self.signature_bytes
        if signature is not None:
            entries.append((SIGNATURE_NAME, lambda: (signature,), len(signature)))
        return tuple(entries)

    def _run_chunks(self, role: str) -> Callable[[], Iterable[bytes]]:
        """Return a run's chunk source: its checked file when still open, else its encoding."""
        copy = self.copies.get(role)
        if copy is not None and copy.rereadable:
            return copy.iter_canonical
        run: Run | RunFacts = self.baseline if role == "baseline" else self.subject
        return run.iter_canonical


def _check_report(
    report: bytes,
    hexes: Mapping[str, str],
    validate_report: ReportValidator | None,
    decision_order: str,
) -> str:
    """Check the report as a reader checks it; return its decision."""
    try:
        document = decode(report)
    except CanonicalError:
        raise _fail("invalid_report", "report") from None
    if not isinstance(document, dict):
        raise _fail("invalid_report", "report")
    if encode_invarlock(document) != report:
        raise _fail("report_not_canonical", "report")
    try:
        check_report_document(document, decision_order=decision_order)
        if validate_report is not None:
            validate_report(freeze_json(document, "report", error=CapturedRunError))  # type: ignore[arg-type]
    except SealevalError:
        raise _fail("invalid_report", "report") from None
    bindings = document["bindings"]
    for role in ("baseline", "subject", "policy"):
        if bindings[role] != hexes[role]:
            raise _fail("report_binding_mismatch", f"report.bindings.{role}")
    return str(document["decision"])


def _check_bindings(
    request: NormalizedRequest,
    baseline: Run | RunFacts,
    subject: Run | RunFacts,
    policy: ComparisonPolicy,
) -> None:
    """Require the request to be exactly the normalization of these runs and this policy."""
    if (
        request.baseline_run_digest != baseline.digest
        or request.subject_run_digest != subject.digest
        or request.policy_digest != policy.digest
    ):
        raise _fail("request_mismatch", "request")
    try:
        authored = authored_from_normalized(
            request,
            baseline_path=ROLE_PATHS["baseline"],
            subject_path=ROLE_PATHS["subject"],
            policy_path=ROLE_PATHS["policy"],
            evidence="evidence",
        )
        renormalized = normalize_captured_request(authored, baseline, subject, policy)
    except SealevalError:
        raise _fail("request_mismatch", "request") from None
    if renormalized.canonical_bytes != request.canonical_bytes:  # pragma: no cover - defensive
        raise _fail("request_mismatch", "request")


def _check_inputs(
    *,
    request: object,
    baseline: object,
    subject: object,
    policy: object,
    report: object,
    signing_key: object,
    unsigned: bool,
    limits: object,
) -> None:
    """Check the signing mode, the argument types, record counts and per-file sizes."""
    if not isinstance(limits, PackLimits):
        raise _fail("invalid_type", "limits")
    if (signing_key is None) == (not unsigned):
        raise _fail("signing_mode", "signing_key")
    if signing_key is not None and not isinstance(signing_key, SigningKey):
        raise _fail("invalid_type", "signing_key")
    for value, kind, where in (
        (request, NormalizedRequest, "request"),
        (baseline, Run | RunFacts, "baseline"),
        (subject, Run | RunFacts, "subject"),
        (policy, ComparisonPolicy, "policy"),
        (report, bytes, "report"),
    ):
        if not isinstance(value, kind):
            raise _fail("invalid_type", where)
    assert isinstance(baseline, Run | RunFacts)
    assert isinstance(subject, Run | RunFacts)
    max_records = limits.max_records
    for role, run in (("baseline", baseline), ("subject", subject)):
        count = run.record_count if isinstance(run, RunFacts) else len(run.records)
        if max_records is not None and count > max_records:
            raise _fail("too_many_records", role)
    for role, size in _sizes(request, baseline, subject, policy, report).items():  # type: ignore[arg-type]
        limit = limits.role_limit(role)
        if limit is not None and size > limit:
            raise _fail("too_large", role)


def _checked_copies(copies: object, runs: Mapping[str, Run | RunFacts]) -> Mapping[str, RunFacts]:
    """Require each copy source to be a run's open file of the same digest and size."""
    if copies is None:
        return types.MappingProxyType({})
    if not isinstance(copies, Mapping):
        raise _fail("invalid_type", "copies")
    checked: dict[str, RunFacts] = {}
    for role, copy in copies.items():
        run = runs.get(role) if isinstance(role, str) else None
        if (
            run is None
            or not isinstance(copy, RunFacts)
            or copy.digest != run.digest
            or copy.canonical_size != run.canonical_size
        ):
            raise _fail("invalid_type", "copies")
        checked[role] = copy
    return types.MappingProxyType(checked)


def _sizes(
    request: NormalizedRequest,
    baseline: Run | RunFacts,
    subject: Run | RunFacts,
    policy: ComparisonPolicy,
    report: bytes,
) -> dict[str, int]:
    return {
        "request": len(request.canonical_bytes),
        "policy": len(policy.canonical_bytes),
        "baseline": baseline.canonical_size,
        "subject": subject.canonical_size,
        "report": len(report),
    }


def prepare_pack(
    *,
    request: NormalizedRequest,
    baseline: Run | RunFacts,
    subject: Run | RunFacts,
    policy: ComparisonPolicy,
    comparison_report: bytes,
    signing_key: SigningKey | None = None,
    unsigned: bool = False,
    validate_report: ReportValidator | None = None,
    limits: PackLimits = REFERENCE_PACK_LIMITS,
    decision_order: str = "reference",
    copies: Mapping[str, RunFacts] | None = None,
) -> StagedPack:
    """Check the pack's content and compute its ledger, manifest and signature.

    Args:
        request: the normalized request of these runs and this policy.
        baseline: the baseline run (or the facts of a streamed canonical run).
        subject: the subject run (likewise).
        policy: the policy.
        comparison_report: the comparison report's canonical bytes (final LF),
            as the comparison engine produced them.
        signing_key: the Ed25519 key (signed mode).
        unsigned: publish ``unsigned_local`` instead (exactly one of
            ``signing_key`` and ``unsigned`` is required).
        validate_report: the comparison engine's full report-schema check.
        limits: the size envelope (default: the reference's, so the pack
            verifies in invarlock too; ``UNCAPPED_PACK_LIMITS`` lifts the
            record and run-size caps).
        decision_order: the order the report was made with (``"reference"``
            or sealeval's opt-in ``"width_first"``, whose report carries
            ``decision_rule``; such a pack verifies in sealeval only).
        copies: by role (``baseline``, ``subject``), the facts of an open
            file holding exactly that run's canonical bytes
            (:meth:`RunFacts.of_canonical_file`
            <sealeval.captured.run_facts.RunFacts.of_canonical_file>): copied
            into the pack instead of re-encoding the run; same digest and size
            as the run, else ``invalid_type``.

    Raises:
        EvidencePackBuildError: ``signing_mode``, ``invalid_type``,
            ``request_mismatch``, ``too_many_records``, ``too_large``,
            ``invalid_report``, ``report_not_canonical``,
            ``report_binding_mismatch``, ``self_check_failed``.
    """
    _check_inputs(
        request=request,
        baseline=baseline,
        subject=subject,
        policy=policy,
        report=comparison_report,
        signing_key=signing_key,
        unsigned=unsigned,
        limits=limits,
    )
    _check_bindings(request, baseline, subject, policy)
    checked_copies = _checked_copies(copies, {"baseline": baseline, "subject": subject})
    hexes = {
        "request": request.digest,
        "policy": policy.digest,
        "baseline": baseline.digest,
        "subject": subject.digest,
        "report": digest_bytes(comparison_report),
    }
    if decision_order not in DECISION_ORDERS:
        raise _fail("invalid_type", "decision_order")
    decision = _check_report(comparison_report, hexes, validate_report, decision_order)
    ledger = checksum_ledger(hexes)
    document: dict[str, Any] = {
        "format": PACK_FORMAT,
        "kind": PACK_KIND,
        "authentication": UNSIGNED if signing_key is None else SIGNED,
        "comparison_id": request.comparison_id,
        "request_digest": request.digest,
        "signing_key_fingerprint": None,
        "files": {role: {"path": ROLE_PATHS[role], "digest": hexes[role]} for role in ROLES},
        "checksums": CHECKSUMS_NAME,
        "checksums_sha256_digest": hashlib.sha256(ledger).hexdigest(),
    }
    if signing_key is not None:
        document["signing_key_fingerprint"] = signing_key.fingerprint
        document["signature"] = SIGNATURE_NAME
    try:
        manifest = parse_manifest(document)
    except EvidencePackError:  # pragma: no cover - the document is built above
        raise _fail("self_check_failed", "manifest") from None
    signature = None
    if signing_key is not None:
        signature = signature_envelope(manifest.canonical_bytes, signing_key)
    control = len(ledger) + len(manifest.canonical_bytes) + len(signature or b"")
    if max(len(ledger), len(manifest.canonical_bytes), len(signature or b"")) > MAX_CONTROL_BYTES:
        raise _fail("self_check_failed", "manifest")  # pragma: no cover - fixed-size documents
    sizes = _sizes(request, baseline, subject, policy, comparison_report)
    maximum = limits.max_total_bytes
    if maximum is not None and sum(sizes.values()) + control > maximum:
        raise _fail("too_large", "pack")
    return StagedPack(
        request=request,
        policy=policy,
        baseline=baseline,
        subject=subject,
        report_bytes=comparison_report,
        decision=decision,
        manifest=manifest,
        checksums_bytes=ledger,
        signature_bytes=signature,
        copies=checked_copies,
    )


# ---------------------------------------------------------------------------
# Publication


@dataclass(frozen=True, slots=True, repr=False)
class PublishedPack:
    """A pack published at :attr:`path` (what ``evaluate`` reports).

    Attributes:
        path: the pack directory.
        pack_manifest_digest: ``sha256:`` of ``manifest.json``.
        comparison_id: the comparison id.
        request_digest: the request digest.
        baseline_run_digest: the baseline run digest.
        subject_run_digest: the subject run digest.
        policy_digest: the policy digest.
        authentication: ``"signed"`` or ``"unsigned_local"``.
        signing_key_fingerprint: the signer's fingerprint, or ``None``.
        decision: the report's overall decision.
    """

    path: Path
    pack_manifest_digest: str
    comparison_id: str
    request_digest: str
    baseline_run_digest: str
    subject_run_digest: str
    policy_digest: str
    authentication: str
    signing_key_fingerprint: str | None
    decision: str

    def __repr__(self) -> str:
        """Show the manifest digest only."""
        return f"PublishedPack(pack_manifest_digest={self.pack_manifest_digest!r})"


def _open_parent(destination: Path, anchor: Path | None) -> tuple[int, str]:
    """Open the destination's parent below ``anchor`` without following symlinks.

    Missing ancestors are created with mode 0700; the final name must not
    exist. Returns ``(fd, final name)``. The walk is
    :func:`sealeval._fs.open_destination_parent` below the anchor (default:
    the file-system root for an absolute destination, the working directory
    otherwise), so a ``..`` component is refused.
    """
    if anchor is None:
        anchor = Path(destination.anchor or Path.cwd())
    with translated(EvidencePackBuildError, "output", default="output_unwritable"):
        return open_destination_parent(
            destination, anchor=anchor, create_parents=True, directory_mode=_DIR_MODE
        )


def _write_file(dir_fd: int, name: str, chunks: Iterable[bytes]) -> tuple[str, int]:
    """Create ``name`` exclusively (mode 0600), write, chmod 0444, fsync; return (digest, size)."""
    hasher = hashlib.sha256()

    def hashed() -> Iterable[bytes]:
        for chunk in chunks:
            hasher.update(chunk)
            yield chunk

    size = create_exclusive(dir_fd, name, hashed(), mode=_FILE_MODE)
    return "sha256:" + hasher.hexdigest(), size


def _stage(parent_fd: int, staging: str, staged: StagedPack) -> None:
    """Write every file into ``staging`` and verify what was written."""
    root_fd = create_directory(staging, dir_fd=parent_fd, mode=_DIR_MODE)
    dir_fds: dict[str, int] = {}
    try:
        for directory in DIRECTORIES:
            dir_fds[directory] = create_directory(directory, dir_fd=root_fd, mode=_DIR_MODE)
        expected: dict[str, str] = {}
        for relative, source, size in staged.files():
            directory, _, leaf = relative.rpartition("/")
            target = dir_fds[directory] if directory else root_fd
            digest, written = _write_file(target, leaf, source())
            if written != size:
                raise _fail("self_check_failed", "pack")
            expected[relative] = digest
        for role in ROLES:
            if expected[ROLE_PATHS[role]] != staged.digest(role):
                raise _fail("self_check_failed", role)
        if expected[MANIFEST_NAME] != staged.pack_manifest_digest:
            raise _fail("self_check_failed", "manifest")
        for fd in dir_fds.values():
            fsync_directory(fd)
        _check_staged_inventory(root_fd, dir_fds, set(expected))
        fsync_directory(root_fd)
    finally:
        for fd in dir_fds.values():
            os.close(fd)
        os.close(root_fd)


def _check_staged_inventory(root_fd: int, dir_fds: Mapping[str, int], names: set[str]) -> None:
    """Require exactly the pack's regular files (0444) and directories (0700) in the stage."""
    found: set[str] = set()
    for name in list_names(root_fd):
        info = os.stat(name, dir_fd=root_fd, follow_symlinks=False)
        if name in DIRECTORIES:
            if not stat.S_ISDIR(info.st_mode) or stat.S_IMODE(info.st_mode) != _DIR_MODE:
                raise _fail("self_check_failed", "pack")
            continue
        found.add(name)
        if not stat.S_ISREG(info.st_mode) or stat.S_IMODE(info.st_mode) != _FILE_MODE:
            raise _fail("self_check_failed", "pack")
    for directory, fd in dir_fds.items():
        for name in list_names(fd):
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if not stat.S_ISREG(info.st_mode) or stat.S_IMODE(info.st_mode) != _FILE_MODE:
                raise _fail("self_check_failed", "pack")
            found.add(f"{directory}/{name}")
    if found != names:
        raise _fail("self_check_failed", "pack")


def publish_pack(
    staged: StagedPack,
    destination: str | os.PathLike[str],
    *,
    anchor: str | os.PathLike[str] | None = None,
) -> PublishedPack:
    """Write a staged pack atomically at ``destination``, refusing an existing one.

    Args:
        staged: the output of :func:`prepare_pack`.
        destination: the pack directory to create (must not exist).
        anchor: a trusted existing directory the destination lies below; every
            component after it is opened without following symlinks and
            created (mode 0700) when missing. Default: the file-system root
            for an absolute destination, the working directory otherwise. A
            ``..`` component is refused.

    Layout and modes: pack root and ``inputs``/``records``/``reports`` 0700,
    every file 0444 (the reference publishes exactly these).

    Raises:
        EvidencePackBuildError: ``unsafe_destination``, ``output_exists``,
            ``output_unwritable``, ``self_check_failed``, ``invalid_type``.
    """
    if not isinstance(staged, StagedPack):
        raise _fail("invalid_type", "pack")
    target = Path(destination)
    base = None if anchor is None else Path(anchor)
    parent_fd, name = _open_parent(target, base)  # the name did not exist
    try:
        with staged_publication(parent_fd, name, EvidencePackBuildError) as staging:
            _stage(parent_fd, staging, staged)
        fsync_directory(parent_fd)
    finally:
        os.close(parent_fd)
    path = target if base is None or target.is_absolute() else base / target
    request = staged.request
    return PublishedPack(
        path=path,
        pack_manifest_digest=staged.pack_manifest_digest,
        comparison_id=staged.comparison_id,
        request_digest=request.digest,
        baseline_run_digest=request.baseline_run_digest,
        subject_run_digest=request.subject_run_digest,
        policy_digest=request.policy_digest,
        authentication=staged.authentication,
        signing_key_fingerprint=staged.signing_key_fingerprint,
        decision=staged.decision,
    )


def build_evidence_pack(
    request: CapturedRequest,
    *,
    comparison_report: bytes,
    signing_key: SigningKey | None = None,
    unsigned: bool = False,
    destination: str | os.PathLike[str] | None = None,
    anchor: str | os.PathLike[str] | None = None,
    validate_report: ReportValidator | None = None,
    limits: PackLimits = REFERENCE_PACK_LIMITS,
    decision_order: str = "reference",
) -> PublishedPack:
    """Build and publish the pack of a loaded request (``evaluate`` after the comparison).

    Args:
        request: the loaded request (:func:`~sealeval.captured.request.load_captured_request`).
        comparison_report: the comparison report's canonical bytes.
        signing_key: the Ed25519 key (signed mode).
        unsigned: publish ``unsigned_local`` instead.
        destination: where to publish; default ``output.evidence`` below the
            request root (components below the root opened without
            following symlinks).
        anchor: see :func:`publish_pack` (only with ``destination``).
        validate_report: the comparison engine's full report-schema check.
        limits: the size envelope (see :func:`prepare_pack`).
        decision_order: the report's decision order (see :func:`prepare_pack`).

    Raises:
        EvidencePackBuildError: see :func:`prepare_pack` and :func:`publish_pack`.
    """
    if not isinstance(request, CapturedRequest):
        raise _fail("invalid_type", "request")
    staged = prepare_pack(
        request=request.normalized,
        baseline=request.baseline,
        subject=request.subject,
        policy=request.policy,
        comparison_report=comparison_report,
        signing_key=signing_key,
        unsigned=unsigned,
        validate_report=validate_report,
        limits=limits,
        decision_order=decision_order,
        copies=request.copies,
    )
    if destination is None:
        return publish_pack(staged, request.authored.output, anchor=request.root)
    return publish_pack(staged, destination, anchor=anchor)
