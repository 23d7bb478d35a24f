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

This package is the face; its modules are the examination's steps:

* :mod:`~sealeval.captured.pack_reader.scan` — the inventory snapshot, the
  descriptor-based scanner (every file opened beneath the pack, identities
  checked) and the manifest's identification (step 1);
* :mod:`~sealeval.captured.pack_reader.typed` — the signature envelope (step
  5.1) and the typed payloads, contract failures deferred in the reference's
  order (steps 5.3-5.4);
* :mod:`~sealeval.captured.pack_reader.model` — :class:`EvidencePack`, the
  examined pack;
* this module — the order of the steps and the bindings (5.5-5.9).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from sealeval._validate import decode_object
from sealeval.canonical import digest_bytes, encode_invarlock
from sealeval.captured.comparison import DECISION_ORDERS, WIDTH_FIRST_RULE
from sealeval.captured.pack_layout import (
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
    PACK_JSON_CODES,
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
    check_report_document,
    checksum_ledger,
    identified,
    parse_manifest,
)
from sealeval.captured.pack_reader.model import EvidencePack
from sealeval.captured.pack_reader.scan import (
    Identity,
    OutlineRequest,
    PackSnapshot,
    Scanner,
    identify,
    open_root,
)
from sealeval.captured.pack_reader.typed import Deferred, check_signature, typed_payload
from sealeval.captured.request import (
    CapturedRequestError,
    NormalizedRequest,
    authored_from_normalized,
    comparison_id,
    normalize_captured_request,
    parse_normalized_request,
)
from sealeval.captured.run import STREAM_MIN_BYTES
from sealeval.captured.run_facts import RunFacts
from sealeval.captured.signing import SignatureEnvelope, VerifyKey
from sealeval.errors import SealevalError

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


#: Deprecated alias of :class:`~sealeval.captured.run_facts.RunFacts` (the one
#: type for the facts of a run that is not held); kept for existing imports.
RunOutline = RunFacts

#: How :func:`read_evidence_pack` keeps streamed run files (see its ``runs``).
RUN_FORMS: Final = ("full", "outline", "outline_no_ids")

# ---------------------------------------------------------------------------
# Examination


def _bound(limit: int | None, data: bytes) -> int:
    """Return a role's decoding bound: its size limit, or the file's own size when uncapped."""
    return max(len(data), 1) if limit is None else limit


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
    manifest_bytes, manifest_document, manifest_identity = identify(root_fd)
    with identified(digest_bytes(manifest_bytes)):
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
    manifest_identity: Identity,
    *,
    validate_report: ReportValidator | None,
    limits: PackLimits,
    decision_order: str,
    authenticate: Authenticator | None,
    runs: str,
) -> _Read:
    """Run steps 3-5.4: inventory, every file read once, signature, digests, typed payloads."""
    scanner = Scanner(root_fd, manifest.signed, limits)
    try:
        snapshot = scanner.scan()
        if snapshot.entries[MANIFEST_NAME] != manifest_identity:  # pragma: no cover - race
            raise EvidencePackError("file_changed", MANIFEST_NAME)
        ledger = scanner.read(CHECKSUMS_NAME, snapshot)
        envelope: SignatureEnvelope | None = None
        signer: VerifyKey | None = None
        if manifest.signed:
            envelope, signer = check_signature(scanner, snapshot, manifest, manifest_bytes)
        if authenticate is not None:
            authenticate(manifest, digest_bytes(manifest_bytes), signer)
        deferred = Deferred()
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
                    else OutlineRequest(values.get("policy"), keep_ids=runs == "outline")
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
                raise EvidencePackError("digest_mismatch", role)
            document = decode_object(
                data,
                role,
                error=EvidencePackError,
                limit=_bound(limits.role_limit(role), data),
                codes=PACK_JSON_CODES,
            )
            del data
            hexes[role] = file_digest
            values[role] = typed_payload(
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
        raise EvidencePackError("ledger_mismatch", CHECKSUMS_NAME)
    if read.ledger != checksum_ledger(hexes):
        raise EvidencePackError("ledger_mismatch", CHECKSUMS_NAME)
    if manifest.request_digest != hexes["request"]:
        raise EvidencePackError("request_digest_mismatch", "manifest.request_digest")
    recomputed = comparison_id(
        request_digest=hexes["request"],
        baseline_run_digest=hexes["baseline"],
        subject_run_digest=hexes["subject"],
        policy_digest=hexes["policy"],
    )
    if manifest.comparison_id != recomputed:
        raise EvidencePackError("comparison_id_mismatch", "manifest.comparison_id")
    try:
        request = parse_normalized_request(read.values["request"])
    except CapturedRequestError:
        raise EvidencePackError("invalid_payload", "request") from None
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
        raise EvidencePackError("request_binding_mismatch", "request") from None
    if renormalized.canonical_bytes != request.canonical_bytes:
        raise EvidencePackError("request_binding_mismatch", "request")
    bindings = read.values["report"]["bindings"]
    if any(bindings[role] != hexes[role] for role in ("baseline", "subject", "policy")):
        raise EvidencePackError("report_binding_mismatch", "report.bindings")
    return request


def _examine_identified(
    path: Path,
    root_fd: int,
    manifest_bytes: bytes,
    manifest_document: dict[str, Any],
    *,
    manifest_identity: Identity,
    validate_report: ReportValidator | None,
    limits: PackLimits,
    decision_order: str,
    authenticate: Authenticator | None,
    runs: str,
) -> EvidencePack:
    # Step 2: canonical bytes, five roles, closed schema.
    if encode_invarlock(manifest_document) != manifest_bytes:
        raise EvidencePackError("not_canonical", MANIFEST_NAME)
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
            :data:`STREAM_MIN_BYTES` (see
            :meth:`~sealeval.captured.pack_reader.scan.Scanner.streamed_run`).
        decision_order: the decision order the report must have been made
            with: ``"reference"`` (invarlock's closed report) or sealeval's
            opt-in ``"width_first"`` (the report carries ``decision_rule``).
        authenticate: the recipient's authentication check (see
            :data:`Authenticator`), run after the signature envelope and
            before any payload is read; whatever it raises propagates.
        runs: how streamed run files (see ``limits``) are kept: ``"full"``
            (a :class:`~sealeval.captured.run.Run`), ``"outline"`` (a
            :class:`~sealeval.captured.run_facts.RunFacts`: header,
            digest, counts, ids, case-set digest; no record content) or
            ``"outline_no_ids"`` (the same without the ids). Every check and
            refusal is the same; smaller run files are always read whole.

    Raises:
        EvidencePackError: see the class for ``status`` and ``manifest_digest``.
    """
    if not isinstance(limits, PackLimits):
        raise EvidencePackError("invalid_field", "limits")
    if decision_order not in DECISION_ORDERS:
        raise EvidencePackError("invalid_field", "decision_order")
    if runs not in RUN_FORMS:
        raise EvidencePackError("invalid_field", "runs")
    pack_path = Path(path)
    root_fd = open_root(pack_path)
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
