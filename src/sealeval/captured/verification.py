"""The captured verification pipeline: recipient inputs, verification, signed receipt.

:func:`verify_with_receipt` is ``sealeval verify`` as a library function: it
checks the recipient's inputs
(:func:`~sealeval.captured.trust.check_verification_inputs`), refuses an
existing receipt destination, verifies the pack
(:func:`~sealeval.captured.verify.verify_evidence_pack`, which never writes)
and, once the manifest was identified, publishes the verifier-signed receipt
(:func:`~sealeval.captured.receipt.issue_receipt`,
:func:`~sealeval.captured.receipt.publish_receipt`) — for rejections too.

Example::

    from sealeval.captured.trust import read_trust_profile
    from sealeval.captured.verification import verify_with_receipt

    done = verify_with_receipt(
        "evidence", read_trust_profile("trust-inputs.json"), receipt="receipt.json"
    )
    print(done.status)  # 0, 7, 6, 4 -- or 2 (incomplete: done.reason says why)

An *incomplete* verification (exit 2: invalid inputs, unsupported scoring
environment, work budget, receipt publication) is returned, not raised:
:attr:`ReceiptedVerification.error` carries the refusal (closed code, field)
and :attr:`~ReceiptedVerification.reason` one of :data:`REASONS`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from sealeval._progress import Progress
from sealeval.captured.comparison import DEFAULT_MAX_BOOTSTRAP_DRAWS
from sealeval.captured.pack_reader import REFERENCE_PACK_LIMITS, UNCAPPED_PACK_LIMITS
from sealeval.captured.receipt import ReceiptError, issue_receipt, publish_receipt
from sealeval.captured.trust import TrustInputs, check_verification_inputs
from sealeval.captured.verify import VerificationError, VerificationOutcome, verify_evidence_pack
from sealeval.errors import SealevalError

__all__ = [
    "REASONS",
    "ReceiptedVerification",
    "incomplete",
    "verify_with_receipt",
]

#: ``reason`` values of an incomplete verification (exit 2).
REASONS: Final = (
    "invalid_verification_inputs",
    "unsupported_scoring_environment",
    "local_work_budget_exceeded",
    "receipt_publication_failed",
)
#: Exit status of an incomplete verification.
STATUS_INCOMPLETE: Final = 2


@dataclass(frozen=True, slots=True)
class ReceiptedVerification:
    """What :func:`verify_with_receipt` established.

    Attributes:
        outcome: the verification outcome (``None`` when incomplete).
        receipt: the receipt written (``None`` when none was: incomplete, or
            the manifest could not be identified).
        error: the refusal of an incomplete verification, else ``None``.
        reason: one of :data:`REASONS` when incomplete, else ``None``.
    """

    outcome: VerificationOutcome | None
    receipt: Path | None
    error: SealevalError | None = None
    reason: str | None = None

    @property
    def status(self) -> int:
        """The exit status: the outcome's (0, 4, 6, 7) or 2 when incomplete."""
        return STATUS_INCOMPLETE if self.outcome is None else self.outcome.status


def incomplete(error: SealevalError, reason: str) -> ReceiptedVerification:
    """Return an incomplete verification (exit 2, no receipt) for ``error``."""
    return ReceiptedVerification(None, None, error, reason)


def verify_with_receipt(
    evidence: str | os.PathLike[str],
    trust: TrustInputs,
    *,
    receipt: str | os.PathLike[str] | None,
    max_bootstrap_draws: int | None = DEFAULT_MAX_BOOTSTRAP_DRAWS,
    uncapped: bool = False,
    decision_order: str = "reference",
    progress: Progress | None = None,
) -> ReceiptedVerification:
    """Verify a captured evidence pack against recipient-owned inputs; publish the receipt.

    Args:
        evidence: the pack directory.
        trust: the recipient's trust inputs (a read trust profile, or
            :func:`~sealeval.captured.trust.explicit_trust_inputs`).
        receipt: where the receipt goes (must not exist; outside the pack).
        max_bootstrap_draws: the local work budget (``None``: unbounded).
        uncapped: read a pack built beyond the reference's caps.
        decision_order: ``"reference"`` or sealeval's opt-in ``"width_first"``.
        progress: optional :data:`sealeval._progress.Progress` callback (as
            :func:`~sealeval.captured.verify.verify_evidence_pack`).

    Returns:
        The :class:`ReceiptedVerification` (never raises a refusal).
    """
    try:
        recipient = check_verification_inputs(
            trust, evidence=evidence, receipt=receipt, max_bootstrap_draws=max_bootstrap_draws
        )
    except SealevalError as error:
        return incomplete(error, "invalid_verification_inputs")
    destination = recipient.receipt
    assert destination is not None  # check_verification_inputs requires one
    if destination.exists() or destination.is_symlink():
        return incomplete(
            ReceiptError("publication_failed", "receipt"), "receipt_publication_failed"
        )
    try:
        outcome = verify_evidence_pack(
            evidence,
            recipient,
            limits=UNCAPPED_PACK_LIMITS if uncapped else REFERENCE_PACK_LIMITS,
            decision_order=decision_order,
            progress=progress,
        )
    except VerificationError as error:
        reason = error.code if error.code in REASONS else "invalid_verification_inputs"
        return incomplete(error, reason)
    if not outcome.identified:
        return ReceiptedVerification(outcome, None)
    try:
        publish_receipt(destination, issue_receipt(outcome, recipient))
    except ReceiptError as error:
        return incomplete(error, "receipt_publication_failed")
    return ReceiptedVerification(outcome, destination)
