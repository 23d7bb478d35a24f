"""Offline verification of a captured evidence pack against recipient-owned inputs.

Wire contract: ``32-verify.md`` §3-§5 of the invarlock specification. See
``docs/verification.md``.

:func:`verify_evidence_pack` is pure: it reads the pack (never writes), takes
the policy, anchors and budget from :class:`~sealeval.captured.trust.RecipientInputs`
only — nothing the pack says about itself selects what it is checked
against — and returns a :class:`VerificationOutcome`. In order:

1. **Examination** (:func:`~sealeval.captured.pack_reader.read_evidence_pack`):
   identification, inventory, signature, then — before any payload is read —
   the recipient's authentication (the pack is signed, by the expected
   signer: 6), then canonical bytes, schemas, digests, ledger, request
   re-normalization, report bindings. A refusal is a
   contract (4) or integrity (6) outcome; before the manifest was identified
   no receipt may be written (:attr:`VerificationOutcome.identified`).
2. **Recipient checks**: the baseline, subject and request digests equal the anchors
   and the pack's policy digest equals the **recipient's** policy digest,
   in this order (6, the first mismatching anchor is named); the recipient
   policy's canonical bytes equal ``inputs/policy.json`` (6).
3. **Scoring environment**: every Unicode version the recipient policy pins
   must be available (else :class:`VerificationError`
   ``unsupported_scoring_environment``, exit 2, no receipt).
4. **Work budget** from the pack's baseline rows and the recipient policy
   (else ``local_work_budget_exceeded``, exit 2, no receipt).
5. **Replay** of the comparison on the pack's runs with the recipient
   policy (a comparison error is integrity, ``replay_status`` ``failed``);
   the replayed report's canonical bytes must equal the stored report byte
   for byte (6, ``replay_status`` ``completed``).
6. **Re-scan**: any change of the pack since it was examined is integrity (6).

Outcomes map to verification statuses exactly as the reference's:
0 (replayed, ``pass``), 7 (replayed, ``regression`` or
``insufficient_evidence``), 4 (contract), 6 (integrity). Exit-2 situations
(scoring environment, budget) are raised, not returned: they are not
verification results.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from sealeval._progress import PLANNED_DRAWS, Progress, notify, phases_only
from sealeval.canonical import encode_invarlock
from sealeval.captured.comparison import (
    ComparisonReport,
    MetricSummary,
    compare_run_files,
    compare_runs,
)
from sealeval.captured.intervals import required_bootstrap_draws
from sealeval.captured.pack_reader import (
    DECISION_ORDERS,
    REFERENCE_PACK_LIMITS,
    Authenticator,
    EvidencePack,
    EvidencePackError,
    PackLimits,
    PackManifest,
    ReportValidator,
    read_evidence_pack,
)
from sealeval.captured.policy import ComparisonPolicy, ComparisonPolicyError, check_runtime
from sealeval.captured.run import Run
from sealeval.captured.run_facts import RunFacts
from sealeval.captured.signing import VerifyKey
from sealeval.captured.trust import RecipientInputs
from sealeval.errors import CanonicalError, CapturedError, SealevalError

__all__ = [
    "REPLAY_COMPLETED",
    "REPLAY_FAILED",
    "REPLAY_NOT_STARTED",
    "REPLAY_STATUSES",
    "STATUS_CONTRACT",
    "STATUS_INTEGRITY",
    "STATUS_PASS",
    "STATUS_POLICY_FAIL",
    "ScoringAssurance",
    "VerificationError",
    "VerificationOutcome",
    "required_draws",
    "scoring_assurance",
    "verify_evidence_pack",
]

#: ``replay_status`` values.
REPLAY_NOT_STARTED: Final = "not_started"
REPLAY_FAILED: Final = "failed"
REPLAY_COMPLETED: Final = "completed"
REPLAY_STATUSES: Final = (REPLAY_NOT_STARTED, REPLAY_FAILED, REPLAY_COMPLETED)
#: Verification statuses (= ``verify`` exit codes).
STATUS_PASS: Final = 0
STATUS_CONTRACT: Final = 4
STATUS_INTEGRITY: Final = 6
STATUS_POLICY_FAIL: Final = 7

_PASS: Final = "pass"  # noqa: S105 - a decision, not a secret


class VerificationError(CapturedError):
    """A recipient check, replay or local refusal of verification.

    ``status`` is 6 (integrity: the outcome carries it and a rejection
    receipt is written) or 2 (incomplete: raised, no receipt).
    """

    module = "sealeval.captured.verify"
    codes = frozenset(
        {
            # integrity (status 6)
            "unsigned_evidence",
            "signer_mismatch",
            "anchor_mismatch",
            "policy_mismatch",
            "replay_failed",
            "replay_mismatch",
            # incomplete (status 2, no receipt)
            "unsupported_scoring_environment",
            "local_work_budget_exceeded",
            "invalid_recipient_policy",
            "invalid_type",
        }
    )
    #: Codes that are incomplete verifications (exit 2, no receipt).
    incomplete_codes: ClassVar[frozenset[str]] = frozenset(
        {
            "unsupported_scoring_environment",
            "local_work_budget_exceeded",
            "invalid_recipient_policy",
            "invalid_type",
        }
    )

    @property
    def status(self) -> int:
        """2 for incomplete verifications, else 6 (integrity)."""
        return 2 if self.code in type(self).incomplete_codes else STATUS_INTEGRITY


def _fail(code: str, where: str | None = None) -> VerificationError:
    return VerificationError(code, where)


@dataclass(frozen=True, slots=True)
class ScoringAssurance:
    """One receipt ``scoring_assurance`` entry (one scope x one metric)."""

    name: str
    slice: str
    kind: str
    scoring_assurance: str

    def to_dict(self) -> dict[str, str]:
        """Return ``{name, slice, kind, scoring_assurance}``."""
        return {
            "name": self.name,
            "slice": self.slice,
            "kind": self.kind,
            "scoring_assurance": self.scoring_assurance,
        }


def scoring_assurance(policy: ComparisonPolicy) -> tuple[ScoringAssurance, ...]:
    """Return the assurance entries a policy implies, in report order.

    Scopes ``overall`` then each slice in policy order; within a scope the
    metrics in policy order; ``recorded`` for recorded metrics, else
    ``recomputed``.
    """
    return tuple(
        ScoringAssurance(metric.name, scope, metric.kind, metric.scoring_assurance)
        for scope in policy.scope_names
        for metric in policy.metrics
    )


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class VerificationOutcome:
    """The result of verifying one pack (statuses 0, 4, 6, 7).

    Attributes:
        status: the verification status (= ``verify`` exit code).
        replay_status: ``not_started``, ``failed`` or ``completed``.
        pack_manifest_digest: ``sha256:`` of the examined ``manifest.json``,
            or ``None`` when the pack was never identified (no receipt).
        decision: the replayed decision (statuses 0 and 7), else ``None``.
        assurance: the scoring assurance (statuses 0 and 7), else ``None``.
        error: the refusal (statuses 4 and 6), else ``None``.
        report: the replayed report (statuses 0 and 7), else ``None``.
    """

    status: int
    replay_status: str
    pack_manifest_digest: str | None
    decision: str | None = None
    assurance: tuple[ScoringAssurance, ...] | None = None
    error: SealevalError | None = None
    report: ComparisonReport | None = None

    def __repr__(self) -> str:
        """Show the status, the replay status and the refusal code only."""
        code = None if self.error is None else self.error.code
        return (
            f"VerificationOutcome(status={self.status!r}, "
            f"replay_status={self.replay_status!r}, error={code!r})"
        )

    @property
    def ok(self) -> bool:
        """Integrity verified and the policy passed (status 0)."""
        return self.status == STATUS_PASS

    @property
    def integrity_ok(self) -> bool:
        """Authenticated, anchored and replayed byte for byte (status 0 or 7)."""
        return self.status in (STATUS_PASS, STATUS_POLICY_FAIL)

    @property
    def policy_verdict(self) -> str | None:
        """``pass`` (0), ``fail`` (7), or ``None`` when integrity failed."""
        if not self.integrity_ok:
            return None
        return "pass" if self.ok else "fail"

    @property
    def identified(self) -> bool:
        """Whether the manifest was identified (a receipt is written)."""
        return self.pack_manifest_digest is not None

    def verdict(self) -> dict[str, Any]:
        """Return the receipt's ``verdict`` members for this outcome."""
        return {
            "ok": self.ok,
            "integrity_ok": self.integrity_ok,
            "decision": self.decision,
            "policy_verdict": self.policy_verdict,
            "verification_status": self.status,
        }

    @property
    def metric_summaries(self) -> tuple[MetricSummary, ...]:
        """Per-entry summaries of the replayed report (empty on rejection)."""
        return () if self.report is None else self.report.metric_summaries()


def required_draws(pack: EvidencePack, policy: ComparisonPolicy) -> int:
    """Return the work a replay of ``pack`` under ``policy`` is charged (22-comparison.md §7).

    Scopes are counted on the baseline rows (``overall`` = every row; a
    slice = rows whose metadata matches it). A baseline read as facts
    carries its slice counts (counted under the pack's policy, which a
    verification has checked is the recipient's).
    """
    baseline = pack.baseline
    if isinstance(baseline, RunFacts):
        counts = [baseline.record_count, *baseline.slice_counts]
        return required_bootstrap_draws(counts, policy.bootstrap_metric_count)
    records = baseline.records
    counts = [len(records)]
    counts.extend(
        sum(1 for record in records if item.matches(record.metadata)) for item in policy.slices
    )
    return required_bootstrap_draws(counts, policy.bootstrap_metric_count)


class _UnauthenticatedError(Exception):
    """Steps 4.1-4.2 refused during examination: the refusal and the manifest digest."""

    def __init__(self, error: VerificationError, manifest_digest: str) -> None:
        super().__init__(error.code)
        self.error = error
        self.manifest_digest = manifest_digest


def _authenticator(recipient: RecipientInputs) -> Authenticator:
    """Return steps 4.1-4.2 (signed, expected signer) for the reader to run before payloads.

    The reader calls it right after the signature envelope is verified, so an
    unsigned or wrongly signed pack is refused before any payload is read or
    decoded (hostile-input rule: authenticate before spending memory).
    """
    expected = recipient.anchors.signer_fingerprint

    def authenticate(manifest: PackManifest, digest: str, signer: VerifyKey | None) -> None:
        if not manifest.signed or signer is None:
            raise _UnauthenticatedError(
                _fail("unsigned_evidence", "manifest.authentication"), digest
            )
        if manifest.signing_key_fingerprint != expected:
            raise _UnauthenticatedError(
                _fail("signer_mismatch", "anchors.signer_fingerprint"), digest
            )

    return authenticate


def _recipient_checks(pack: EvidencePack, recipient: RecipientInputs) -> None:
    """Run steps 4.3-4.4: anchors in order, recipient policy bytes (4.1-4.2 ran in the reader)."""
    anchors = recipient.anchors
    for role, expected, where in (
        ("baseline", anchors.baseline_run_digest, "anchors.baseline_run_digest"),
        ("subject", anchors.subject_run_digest, "anchors.subject_run_digest"),
        ("request", anchors.request_digest, "anchors.request_digest"),
        ("policy", recipient.policy_digest, "anchors.policy_digest"),
    ):
        if pack.digest(role) != expected:
            raise _fail("anchor_mismatch", where)
    if recipient.policy.canonical_bytes != pack.policy.canonical_bytes:
        raise _fail("policy_mismatch", "policy")  # pragma: no cover - equal digests


def _check_environment(policy: ComparisonPolicy) -> None:
    """Step 4.5: every pinned Unicode version is available here (exit 2 otherwise)."""
    try:
        check_runtime(policy)
    except ComparisonPolicyError as error:
        if error.code == "unsupported_unicode_version":
            raise _fail("unsupported_scoring_environment", error.field) from None
        # Portable validation already checked every configuration.
        raise _fail("invalid_recipient_policy", error.field) from None  # pragma: no cover


def _stored_report_bytes(pack: EvidencePack) -> bytes:
    try:
        return encode_invarlock(pack.report)
    except CanonicalError:  # pragma: no cover - the reader checked the report's canonical bytes
        return b""


def _compare(
    pack: EvidencePack,
    policy: ComparisonPolicy,
    workers: int | None,
    decision_order: str,
    progress: Progress | None,
) -> ComparisonReport:
    """Recompute the comparison: in memory, or streamed from the pack's run files.

    Runs read as facts are replayed by :func:`compare_run_files` over the
    examined files (opened again with their identities checked), so memory is
    bounded by the number of records, not their content; the report bytes
    are the same either way.
    """
    baseline, subject = pack.baseline, pack.subject
    if isinstance(baseline, Run) and isinstance(subject, Run):
        return compare_runs(
            baseline=baseline,
            subject=subject,
            policy=policy,
            max_bootstrap_draws=None,
            decision_order=decision_order,
            workers=workers,
            progress=progress,
        )
    with pack.open_run("baseline") as left, pack.open_run("subject") as right:
        return compare_run_files(
            baseline=left,
            subject=right,
            policy=policy,
            max_bootstrap_draws=None,
            decision_order=decision_order,
            workers=workers,
            progress=progress,
        )


def _replay(
    pack: EvidencePack,
    recipient: RecipientInputs,
    workers: int | None,
    decision_order: str,
    progress: Progress | None = None,
) -> VerificationOutcome:
    """Run steps 4.7-4.9: replay, byte-for-byte agreement, re-scan."""
    digest = pack.manifest_digest
    try:
        report = _compare(pack, recipient.policy, workers, decision_order, phases_only(progress))
    except EvidencePackError as error:  # a run file changed since it was examined
        return VerificationOutcome(STATUS_INTEGRITY, REPLAY_FAILED, digest, error=error)
    except SealevalError:
        return VerificationOutcome(
            STATUS_INTEGRITY, REPLAY_FAILED, digest, error=_fail("replay_failed", "comparison")
        )
    if report.digest != pack.digest("report") or report.canonical_bytes != _stored_report_bytes(
        pack
    ):
        return VerificationOutcome(
            STATUS_INTEGRITY, REPLAY_COMPLETED, digest, error=_fail("replay_mismatch", "report")
        )
    try:
        pack.check_unchanged()
    except EvidencePackError as error:
        return VerificationOutcome(STATUS_INTEGRITY, REPLAY_COMPLETED, digest, error=error)
    assurance = tuple(
        ScoringAssurance(entry.name, entry.slice, entry.kind, entry.scoring_assurance)
        for entry in report.metrics
    )
    return VerificationOutcome(
        STATUS_PASS if report.decision == _PASS else STATUS_POLICY_FAIL,
        REPLAY_COMPLETED,
        digest,
        decision=report.decision,
        assurance=assurance,
        report=report,
    )


def verify_evidence_pack(
    evidence: str | os.PathLike[str],
    recipient: RecipientInputs,
    *,
    workers: int | None = None,
    validate_report: ReportValidator | None = None,
    limits: PackLimits = REFERENCE_PACK_LIMITS,
    decision_order: str = "reference",
    progress: Progress | None = None,
) -> VerificationOutcome:
    """Verify a captured evidence pack against the recipient's inputs (32-verify.md §3-§5).

    Args:
        evidence: the pack directory (a real directory, not a symlink).
        recipient: the checked recipient inputs
            (:func:`~sealeval.captured.trust.check_verification_inputs`).
        workers: processes for large bootstrap scopes (the report is
            bit-identical for every value; ``None`` uses the available CPUs).
        validate_report: an optional full report-schema check passed to the reader.
        limits: the size envelope the pack is read within (default: the
            reference's; ``UNCAPPED_PACK_LIMITS`` for packs built beyond it).
        decision_order: the recipient's decision order: ``"reference"`` or
            sealeval's opt-in ``"width_first"``. The pack's report must have
            been made with it (``invalid_payload`` otherwise) and the replay
            uses it.
        progress: optional :data:`sealeval._progress.Progress` callback
            (``examining``, the planned draws against the recipient's budget,
            then the replay's phases); counts only.

    Returns:
        The outcome (statuses 0, 4, 6, 7). Nothing is written.

    Raises:
        VerificationError: ``unsupported_scoring_environment``,
            ``local_work_budget_exceeded``, ``invalid_recipient_policy`` or
            ``invalid_type`` — incomplete verifications (exit 2, no receipt).
    """
    if not isinstance(recipient, RecipientInputs):
        raise _fail("invalid_type", "recipient")
    if not isinstance(limits, PackLimits):
        raise _fail("invalid_type", "limits")
    if decision_order not in DECISION_ORDERS:
        raise _fail("invalid_type", "decision_order")
    notify(progress, "examining", 0, 1)
    try:
        pack = read_evidence_pack(
            evidence,
            validate_report=validate_report,
            limits=limits,
            decision_order=decision_order,
            authenticate=_authenticator(recipient),
            runs="outline_no_ids",
        )
    except EvidencePackError as error:
        return VerificationOutcome(
            error.status, REPLAY_NOT_STARTED, error.manifest_digest, error=error
        )
    except _UnauthenticatedError as refusal:
        return VerificationOutcome(
            STATUS_INTEGRITY, REPLAY_NOT_STARTED, refusal.manifest_digest, error=refusal.error
        )
    try:
        _recipient_checks(pack, recipient)
    except VerificationError as error:
        return VerificationOutcome(
            STATUS_INTEGRITY, REPLAY_NOT_STARTED, pack.manifest_digest, error=error
        )
    _check_environment(recipient.policy)
    budget = recipient.max_bootstrap_draws
    required = required_draws(pack, recipient.policy)
    notify(progress, PLANNED_DRAWS, required, -1 if budget is None else budget)
    if budget is not None and required > budget:
        raise _fail("local_work_budget_exceeded", "max_bootstrap_draws")
    return _replay(pack, recipient, workers, decision_order, progress)
