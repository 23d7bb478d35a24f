"""The evidence pack's layout: constants, limits, the error, ledger, manifest, report envelope.

Wire contract: ``31-pack.md`` of the invarlock specification. Construction
(:mod:`sealeval.captured.pack`) and reading (:mod:`sealeval.captured.pack_reader`,
which re-exports every name here) share these rules, so a pack is built with
exactly the checks it is read with.
"""

from __future__ import annotations

import re
import types
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from sealeval._validate import check_closed, freeze_json, thaw_json
from sealeval.canonical import (
    digest_bytes,
    encode_invarlock,
    is_digest,
)
from sealeval.captured.comparison import DECISION_ORDERS, WIDTH_FIRST_RULE
from sealeval.captured.errors import CapturedRunError
from sealeval.captured.run import (
    INVARLOCK_LIMITS,
    UNLIMITED,
    Limits,
)
from sealeval.errors import CapturedError

#: ``format`` of the manifest.
PACK_FORMAT: Final = "invarlock/evidence-pack-v2"
#: ``kind`` of the manifest.
PACK_KIND: Final = "captured"
#: ``authentication`` values.
SIGNED: Final = "signed"
UNSIGNED: Final = "unsigned_local"
AUTHENTICATIONS: Final = (SIGNED, UNSIGNED)
#: Control file names.
MANIFEST_NAME: Final = "manifest.json"
SIGNATURE_NAME: Final = "manifest.signature.json"
CHECKSUMS_NAME: Final = "checksums.sha256"
#: Payload roles in the order they are checked.
ROLES: Final = ("request", "policy", "baseline", "subject", "report")
#: The fixed path of each payload role.
ROLE_PATHS: Final[Mapping[str, str]] = types.MappingProxyType(
    {
        "request": "request.json",
        "policy": "inputs/policy.json",
        "baseline": "records/baseline.json",
        "subject": "records/subject.json",
        "report": "reports/evaluation.report.json",
    }
)
#: The only directories of a pack.
DIRECTORIES: Final = ("inputs", "records", "reports")
_MIB: Final = 1_048_576
#: Largest payload file per role, in bytes.
MAX_ROLE_BYTES: Final[Mapping[str, int]] = types.MappingProxyType(
    {
        "request": _MIB,
        "policy": 128 * _MIB,
        "baseline": 128 * _MIB,
        "subject": 128 * _MIB,
        "report": 128 * _MIB,
    }
)
#: Largest control file (manifest, ledger, signature), in bytes.
MAX_CONTROL_BYTES: Final = 65_536
#: Largest manifest read to identify the pack, in bytes.
MAX_MANIFEST_DETECT_BYTES: Final = 262_144
#: Largest total of all files of a pack, in bytes.
MAX_TOTAL_BYTES: Final = 384 * _MIB


@dataclass(frozen=True, slots=True)
class PackLimits:
    """The size envelope packs are built and read within.

    Attributes:
        max_records: most records per run (``None``: no cap).
        role_bytes: largest payload file per role (``None``: no cap).
        max_total_bytes: largest total of all files (``None``: no cap).

    :data:`REFERENCE_PACK_LIMITS` (the default everywhere) is the reference's
    envelope: a pack within it verifies in invarlock 0.17 too.
    :data:`UNCAPPED_PACK_LIMITS` lifts the record cap and the run and total
    byte caps (request, policy and report keep theirs); such a pack has the
    same layout and bytes but only sealeval reads it (the reference refuses
    ``too_many_records`` / ``too_large``).
    """

    max_records: int | None
    role_bytes: Mapping[str, int | None]
    max_total_bytes: int | None

    def role_limit(self, role: str) -> int | None:
        """Return the byte cap of one role's file (``None``: no cap)."""
        return self.role_bytes[role]

    def run_limits(self) -> Limits:
        """Return the run limits of the baseline and subject files."""
        if self.max_records is None:
            return UNLIMITED
        return Limits(
            max_records=self.max_records,
            max_canonical_bytes=INVARLOCK_LIMITS.max_canonical_bytes,
            max_file_bytes=INVARLOCK_LIMITS.max_file_bytes,
        )


#: The reference's envelope (50,000 records per run, 128 MiB per payload, 384 MiB in all).
REFERENCE_PACK_LIMITS: Final = PackLimits(
    max_records=INVARLOCK_LIMITS.max_records,
    role_bytes=MAX_ROLE_BYTES,
    max_total_bytes=MAX_TOTAL_BYTES,
)
#: No record cap and no byte cap on the runs or the total (sealeval only; opt-in).
UNCAPPED_PACK_LIMITS: Final = PackLimits(
    max_records=None,
    role_bytes=types.MappingProxyType({**MAX_ROLE_BYTES, "baseline": None, "subject": None}),
    max_total_bytes=None,
)
#: ``format`` of the comparison report.
REPORT_FORMAT: Final = "invarlock/multi-metric-comparison-v1"
#: Report decisions.
DECISIONS: Final = ("pass", "regression", "insufficient_evidence")
#: Most metric entries in a report (16 metrics x 17 scopes).
MAX_REPORT_METRICS: Final = 272

#: A full report-schema check (the comparison engine's); raise a SealevalError to refuse.
ReportValidator = Callable[[Mapping[str, Any]], object]

_LEDGER_ORDER: Final = tuple(sorted(ROLES, key=lambda role: ROLE_PATHS[role].encode()))
_MANIFEST_REQUIRED: Final = (
    "format",
    "kind",
    "authentication",
    "comparison_id",
    "request_digest",
    "signing_key_fingerprint",
    "files",
    "checksums",
    "checksums_sha256_digest",
)
_REPORT_MEMBERS: Final = frozenset({"format", "decision", "bindings", "metrics", "limitations"})
_WIDTH_FIRST_MEMBERS: Final = _REPORT_MEMBERS | {"decision_rule"}
_HEX64: Final = re.compile(r"[0-9a-f]{64}")
#: The strict decoder's codes as a pack's files report them (anything else: ``invalid_json``).
PACK_JSON_CODES: Final[Mapping[str, str]] = types.MappingProxyType(
    {
        "too_large": "too_large",
        "byte_order_mark": "not_utf8",
        "not_utf8": "not_utf8",
        "invalid_json": "invalid_json",
        "duplicate_key": "duplicate_key",
        "non_standard_constant": "non_finite_number",
        "non_finite_number": "non_finite_number",
        "too_deep": "too_deep",
        "integer_too_long": "integer_too_long",
        "string_too_long": "too_large",
    }
)


class EvidencePackError(CapturedError):
    """Refusal of an evidence pack being read (``status`` 4 = contract, 6 = integrity).

    Attributes:
        manifest_digest: ``sha256:`` of the examined ``manifest.json`` once the
            pack was identified (a rejection receipt may then be written), else
            ``None``.
    """

    module = "sealeval.captured.pack_reader"
    codes = frozenset(
        {
            # contract (status 4)
            "not_directory",
            "manifest_missing",
            "unsupported_format",
            "unknown_entry",
            "unsafe_entry",
            "missing_entry",
            "too_large",
            "unreadable",
            "not_utf8",
            "invalid_json",
            "duplicate_key",
            "non_finite_number",
            "too_deep",
            "integer_too_long",
            "not_object",
            "not_canonical",
            "unknown_field",
            "missing_field",
            "invalid_field",
            "path_traversal",
            "too_many_records",
            "invalid_payload",
            # integrity (status 6)
            "signature_invalid",
            "signer_mismatch",
            "digest_mismatch",
            "ledger_mismatch",
            "request_digest_mismatch",
            "comparison_id_mismatch",
            "request_binding_mismatch",
            "report_binding_mismatch",
            "file_changed",
        }
    )
    #: Codes that are integrity failures (verification status 6).
    integrity_codes: ClassVar[frozenset[str]] = frozenset(
        {
            "signature_invalid",
            "signer_mismatch",
            "digest_mismatch",
            "ledger_mismatch",
            "request_digest_mismatch",
            "comparison_id_mismatch",
            "request_binding_mismatch",
            "report_binding_mismatch",
            "file_changed",
        }
    )

    manifest_digest: str | None

    def __init__(
        self, code: str, field: str | None = None, *, manifest_digest: str | None = None
    ) -> None:
        """Build from a closed code, a fixed field name and the examined manifest digest."""
        super().__init__(code, field)
        self.manifest_digest = manifest_digest

    @property
    def status(self) -> int:
        """The verification status / exit code: 6 for integrity failures, else 4."""
        return 6 if self.code in type(self).integrity_codes else 4

    @property
    def identified(self) -> bool:
        """Whether the manifest was identified before the refusal (receipt-worthy)."""
        return self.manifest_digest is not None


def _fail(code: str, where: str | None = None) -> EvidencePackError:
    return EvidencePackError(code, where)


@contextmanager
def identified(manifest_digest: str) -> Iterator[None]:
    """Attach the examined manifest's digest to every refusal raised inside."""
    try:
        yield
    except EvidencePackError as error:
        digest = error.manifest_digest or manifest_digest
        raise EvidencePackError(error.code, error.field, manifest_digest=digest) from None


# ---------------------------------------------------------------------------
# Format pieces shared with construction


def checksum_ledger(digests: Mapping[str, str]) -> bytes:
    """Return ``checksums.sha256`` for the five payload digests (``sha256:<hex>`` by role).

    One line per payload, sorted by path (byte order):
    ``<64 lowercase hex>`` + two spaces + path + LF.
    """
    lines = []
    for role in _LEDGER_ORDER:
        value = digests.get(role)
        if not is_digest(value):
            raise _fail("invalid_field", f"files.{role}.digest")
        lines.append(f"{str(value)[7:]}  {ROLE_PATHS[role]}\n")
    return "".join(lines).encode("ascii")


@dataclass(frozen=True, slots=True)
class PackFile:
    """One ``files`` entry of the manifest: fixed path and ``sha256:`` digest."""

    path: str
    digest: str


def _traverses(value: object) -> bool:
    if type(value) is not str:
        return False
    return value.startswith(("/", "\\")) or ".." in re.split(r"[/\\]", value)


def _fixed_name(document: Mapping[str, Any], member: str, expected: str, where: str) -> None:
    value = document[member]
    if value != expected or type(value) is not str:
        raise _fail("path_traversal" if _traverses(value) else "invalid_field", where)


@dataclass(frozen=True, slots=True, repr=False)
class PackManifest:
    """A validated ``manifest.json`` (closed schema; see :func:`parse_manifest`).

    Attributes:
        document: the manifest (read-only JSON value).
        canonical_bytes: its canonical bytes (what is signed and hashed).
        digest: ``pack_manifest_digest`` = ``sha256:`` of :attr:`canonical_bytes`.
        authentication: ``"signed"`` or ``"unsigned_local"``.
        comparison_id: the comparison id.
        request_digest: the request digest.
        signing_key_fingerprint: the signer's fingerprint, or ``None`` when unsigned.
        files: role -> :class:`PackFile`.
        checksums_sha256_digest: bare hex SHA-256 of the ledger.
    """

    document: Mapping[str, Any]
    canonical_bytes: bytes = field(init=False)
    digest: str = field(init=False)
    authentication: str = field(init=False)
    comparison_id: str = field(init=False)
    request_digest: str = field(init=False)
    signing_key_fingerprint: str | None = field(init=False)
    files: Mapping[str, PackFile] = field(init=False)
    checksums_sha256_digest: str = field(init=False)

    def __post_init__(self) -> None:
        """Validate the closed manifest schema."""
        document = self.document
        if not isinstance(document, Mapping):
            raise _fail("not_object", "manifest")
        try:
            frozen: Mapping[str, Any] = freeze_json(document, "manifest", error=CapturedRunError)  # type: ignore[assignment]
        except CapturedRunError:
            raise _fail("invalid_field", "manifest") from None
        _check_manifest(frozen)
        data = encode_invarlock(frozen)
        files = {
            role: PackFile(
                path=frozen["files"][role]["path"], digest=frozen["files"][role]["digest"]
            )
            for role in ROLES
        }
        object.__setattr__(self, "document", frozen)
        object.__setattr__(self, "canonical_bytes", data)
        object.__setattr__(self, "digest", digest_bytes(data))
        object.__setattr__(self, "authentication", frozen["authentication"])
        object.__setattr__(self, "comparison_id", frozen["comparison_id"])
        object.__setattr__(self, "request_digest", frozen["request_digest"])
        object.__setattr__(self, "signing_key_fingerprint", frozen["signing_key_fingerprint"])
        object.__setattr__(self, "files", types.MappingProxyType(files))
        object.__setattr__(self, "checksums_sha256_digest", frozen["checksums_sha256_digest"])

    def __repr__(self) -> str:
        """Show the manifest digest and the authentication mode only."""
        return f"PackManifest(digest={self.digest!r}, authentication={self.authentication!r})"

    @property
    def signed(self) -> bool:
        """Whether the pack is signed."""
        return self.authentication == SIGNED

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh plain copy of the manifest."""
        result: dict[str, Any] = thaw_json(self.document)
        return result


def _check_files(files: Mapping[str, Any]) -> None:
    """Check each ``files`` entry: closed ``{path, digest}``, the fixed path, a digest."""
    for role in ROLES:
        where = f"manifest.files.{role}"
        entry = check_closed(
            files[role],
            where,
            ("path", "digest"),
            error=EvidencePackError,
            type_code="invalid_field",
        )
        _fixed_name(entry, "path", ROLE_PATHS[role], f"{where}.path")
        if not is_digest(entry["digest"]):
            raise _fail("invalid_field", f"{where}.digest")


def _check_authentication(document: Mapping[str, Any]) -> None:
    """Check the coupling: signed ⇔ ``signature`` member ⇔ non-null fingerprint."""
    fingerprint = document["signing_key_fingerprint"]
    if fingerprint is not None and not is_digest(fingerprint):
        raise _fail("invalid_field", "manifest.signing_key_fingerprint")
    if document["authentication"] == SIGNED:
        if "signature" not in document:
            raise _fail("missing_field", "manifest.signature")
        _fixed_name(document, "signature", SIGNATURE_NAME, "manifest.signature")
        if fingerprint is None:
            raise _fail("invalid_field", "manifest.signing_key_fingerprint")
    else:
        if "signature" in document:
            raise _fail("unknown_field", "manifest")
        if fingerprint is not None:
            raise _fail("invalid_field", "manifest.signing_key_fingerprint")


def _check_manifest(document: Mapping[str, Any]) -> None:
    """Check the manifest's closed schema: five roles first, then every member, then coupling."""
    if "files" in document:
        files = document["files"]
        if not isinstance(files, Mapping):
            raise _fail("invalid_field", "manifest.files")
        check_closed(
            files, "manifest.files", ROLES, error=EvidencePackError, type_code="invalid_field"
        )
    check_closed(
        document,
        "manifest",
        _MANIFEST_REQUIRED,
        ("signature",),
        error=EvidencePackError,
        type_code="invalid_field",
    )
    for member in ("format", "kind"):
        expected = PACK_FORMAT if member == "format" else PACK_KIND
        if document[member] != expected or type(document[member]) is not str:
            raise _fail("unsupported_format", f"manifest.{member}")
    authentication = document["authentication"]
    if type(authentication) is not str or authentication not in AUTHENTICATIONS:
        raise _fail("invalid_field", "manifest.authentication")
    for member in ("comparison_id", "request_digest"):
        if not is_digest(document[member]):
            raise _fail("invalid_field", f"manifest.{member}")
    _check_files(document["files"])
    _fixed_name(document, "checksums", CHECKSUMS_NAME, "manifest.checksums")
    ledger_digest = document["checksums_sha256_digest"]
    if type(ledger_digest) is not str or _HEX64.fullmatch(ledger_digest) is None:
        raise _fail("invalid_field", "manifest.checksums_sha256_digest")
    _check_authentication(document)


class ManifestFacts:
    """Read-only facts of a pack's :class:`PackManifest`, shared by staged and read packs.

    A mixin for the frozen pack classes (:class:`~sealeval.captured.pack.StagedPack`,
    :class:`~sealeval.captured.pack_reader.EvidencePack`) that carry a
    ``manifest`` attribute: each property is the manifest's own value.
    """

    __slots__ = ()

    manifest: PackManifest

    @property
    def pack_manifest_digest(self) -> str:
        """``sha256:`` of the ``manifest.json`` bytes."""
        return self.manifest.digest

    @property
    def manifest_digest(self) -> str:
        """The same as :attr:`pack_manifest_digest`."""
        return self.manifest.digest

    @property
    def authentication(self) -> str:
        """``"signed"`` or ``"unsigned_local"``."""
        return self.manifest.authentication

    @property
    def signed(self) -> bool:
        """Whether the pack is signed (a read pack's signature was verified)."""
        return self.manifest.signed

    @property
    def signing_key_fingerprint(self) -> str | None:
        """The signer's fingerprint, or ``None`` when unsigned."""
        return self.manifest.signing_key_fingerprint

    @property
    def comparison_id(self) -> str:
        """The comparison id."""
        return self.manifest.comparison_id

    @property
    def request_digest(self) -> str:
        """The request digest."""
        return self.manifest.request_digest

    def digest(self, role: str) -> str:
        """Return the ``sha256:`` digest of a payload file by role."""
        return self.manifest.files[role].digest


def parse_manifest(document: object) -> PackManifest:
    """Validate a parsed manifest document (closed schema) and return it typed.

    Raises:
        EvidencePackError: ``not_object``, ``unknown_field``, ``missing_field``,
            ``unsupported_format``, ``invalid_field``, ``path_traversal``.
    """
    if isinstance(document, PackManifest):
        return document
    return PackManifest(document)  # type: ignore[arg-type]


def check_report_document(document: object, *, decision_order: str = "reference") -> None:
    """Check the comparison report's envelope (22-comparison.md §8).

    Closed top level ``{format, decision, bindings, metrics, limitations}``
    (with ``decision_order="width_first"``: plus ``decision_rule`` equal to
    :data:`WIDTH_FIRST_RULE`, and only then);
    ``format`` constant; ``decision`` one of :data:`DECISIONS`; ``bindings``
    exactly ``{baseline, subject, policy}`` digests; ``metrics`` an array of
    at most 272 objects; ``limitations`` an array of strings. The metric
    entries themselves are the comparison engine's schema (pass a
    :data:`ReportValidator`).

    Raises:
        EvidencePackError: ``invalid_payload`` (field ``report.<member>``).
    """
    if not isinstance(document, Mapping):
        raise _fail("not_object", "report")
    if decision_order not in DECISION_ORDERS:
        raise _fail("invalid_field", "decision_order")
    width_first = decision_order == "width_first"
    if set(document) != (_WIDTH_FIRST_MEMBERS if width_first else _REPORT_MEMBERS):
        raise _fail("invalid_payload", "report")
    if width_first and document["decision_rule"] != WIDTH_FIRST_RULE:
        raise _fail("invalid_payload", "report.decision_rule")
    if document["format"] != REPORT_FORMAT or type(document["format"]) is not str:
        raise _fail("invalid_payload", "report.format")
    if type(document["decision"]) is not str or document["decision"] not in DECISIONS:
        raise _fail("invalid_payload", "report.decision")
    bindings = document["bindings"]
    if (
        not isinstance(bindings, Mapping)
        or set(bindings) != {"baseline", "subject", "policy"}
        or not all(is_digest(value) for value in bindings.values())
    ):
        raise _fail("invalid_payload", "report.bindings")
    metrics = document["metrics"]
    if (
        not isinstance(metrics, list | tuple)
        or len(metrics) > MAX_REPORT_METRICS
        or not all(isinstance(entry, Mapping) for entry in metrics)
    ):
        raise _fail("invalid_payload", "report.metrics")
    limitations = document["limitations"]
    if not isinstance(limitations, list | tuple) or not all(
        type(item) is str for item in limitations
    ):
        raise _fail("invalid_payload", "report.limitations")
