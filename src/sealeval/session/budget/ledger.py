"""The in-memory feedback ledger: a thin, thread-safe wrapper around the pure core.

:class:`FeedbackBudgetLedger` looks up the policy, holds one
:class:`~sealeval.session.budget.usage.SubmissionUsage` per (epoch digest,
submission digest) and records attempts through
:func:`~sealeval.session.budget.core.record_official_attempt`.
"""

from __future__ import annotations

import functools
import threading
import types
from collections.abc import Mapping

from sealeval.session.budget.core import (
    budget_snapshot,
    check_state,
    decide_failure_approval,
    record_official_attempt,
)
from sealeval.session.budget.documents import (
    FailureApproval,
    FeedbackBudgetDecision,
    FeedbackBudgetSnapshot,
)
from sealeval.session.budget.policy import (
    FeedbackBudgetPolicy,
)
from sealeval.session.budget.usage import (
    EMPTY_USAGE,
    LedgerUsage,
    SubmissionUsage,
)
from sealeval.session.budget.vocabulary import (
    FeedbackBudgetError,
    check_digest,
    materialize,
)

__all__ = ["FeedbackBudgetLedger"]

# ---------------------------------------------------------------------------
# In-memory ledger: a thin, thread-safe wrapper around the pure core


class FeedbackBudgetLedger:
    """Thread-safe in-memory ledger of official attempts, keyed by digests only.

    Every operation looks up the epoch's policy, reads the pair's
    :class:`SubmissionUsage`, runs the pure core and stores the usage it
    returns, all under one lock. Usage lives only in memory: export it with
    :meth:`export_usage` and pass it back as ``usage`` to restore.
    """

    __slots__ = ("_lock", "_policies", "_usage", "_used_approvals")

    _policies: Mapping[str, FeedbackBudgetPolicy]
    _usage: dict[tuple[str, str], SubmissionUsage]
    _used_approvals: set[str]

    def __init__(self, policies: object, usage: LedgerUsage | None = None) -> None:
        """Build a ledger from a non-empty sequence of policies with distinct epochs.

        Raises:
            FeedbackBudgetError: ``policies: invalid_sequence``, ``policies:
                invalid_policy``, ``policies: duplicate_epoch``, ``policies:
                empty``; for ``usage``: ``usage: invalid_document``, ``usage:
                unknown_epoch``, ``usage: policy_mismatch``.
        """
        items = materialize(policies, "policies")
        by_epoch: dict[str, FeedbackBudgetPolicy] = {}
        for policy in items:
            if not isinstance(policy, FeedbackBudgetPolicy):
                raise FeedbackBudgetError("invalid_policy", "policies")
            if policy.epoch_digest in by_epoch:
                raise FeedbackBudgetError("duplicate_epoch", "policies")
            by_epoch[policy.epoch_digest] = policy
        if not by_epoch:
            raise FeedbackBudgetError("empty", "policies")
        restored = LedgerUsage() if usage is None else usage
        if not isinstance(restored, LedgerUsage):
            raise FeedbackBudgetError("invalid_document", "usage")
        for (epoch, _submission), entry in restored.entries.items():
            if epoch not in by_epoch:
                raise FeedbackBudgetError("unknown_epoch", "usage")
            check_state(by_epoch[epoch], entry)
        self._lock = threading.Lock()
        self._policies = types.MappingProxyType(by_epoch)
        self._usage = dict(restored.entries)
        self._used_approvals = set(restored.used_approval_digests())

    def __repr__(self) -> str:
        """Show counts only."""
        return f"FeedbackBudgetLedger(policies={len(self._policies)}, pairs={len(self._usage)})"

    @property
    def policies(self) -> tuple[FeedbackBudgetPolicy, ...]:
        """Return the policies in construction order."""
        return tuple(self._policies.values())

    def policy_for(self, epoch_digest: object) -> FeedbackBudgetPolicy:
        """Return the policy of an epoch.

        Raises:
            FeedbackBudgetError: ``epoch_digest: invalid_digest`` or
                ``epoch_digest: unknown``.
        """
        epoch = check_digest(epoch_digest, "epoch_digest")
        policy = self._policies.get(epoch)
        if policy is None:
            raise FeedbackBudgetError("unknown", "epoch_digest")
        return policy

    def _key(self, epoch_digest: object, submission_digest: object) -> tuple[str, str]:
        policy = self.policy_for(epoch_digest)
        submission = check_digest(submission_digest, "submission_digest")
        return policy.epoch_digest, submission

    def usage(self, epoch_digest: object, submission_digest: object) -> SubmissionUsage:
        """Return a pair's usage (all zero for an unknown submission)."""
        key = self._key(epoch_digest, submission_digest)
        with self._lock:
            return self._usage.get(key, EMPTY_USAGE)

    def snapshot(self, epoch_digest: object, submission_digest: object) -> FeedbackBudgetSnapshot:
        """Return the snapshot document of a pair.

        Raises:
            FeedbackBudgetError: epoch lookup errors, ``submission_digest:
                invalid_digest``.
        """
        key = self._key(epoch_digest, submission_digest)
        with self._lock:
            usage = self._usage.get(key, EMPTY_USAGE)
        return budget_snapshot(self._policies[key[0]], usage)

    def record_official_attempt(
        self,
        epoch_digest: object,
        submission_digest: object,
        *,
        score: object = None,
        infrastructure_failure_digest: object = None,
    ) -> FeedbackBudgetDecision:
        """Record one official attempt atomically and return its decision.

        Raises:
            FeedbackBudgetError: epoch lookup errors, ``submission_digest:
                invalid_digest``, then the refusals of
                :func:`decide_official_attempt`.
        """
        key = self._key(epoch_digest, submission_digest)
        policy = self._policies[key[0]]
        with self._lock:
            return record_official_attempt(
                policy,
                self._usage.get(key, EMPTY_USAGE),
                score=score,
                infrastructure_failure_digest=infrastructure_failure_digest,
                write=functools.partial(self._usage.__setitem__, key),
            )

    def approve_infrastructure_failure(
        self,
        epoch_digest: object,
        submission_digest: object,
        failure_digest: object,
        operator_approval_digest: object,
    ) -> FailureApproval:
        """Approve a recorded infrastructure failure: one more allowed attempt.

        Raises:
            FeedbackBudgetError: epoch lookup errors, ``submission_digest:
                invalid_digest``, then the refusals of
                :func:`decide_failure_approval`.
        """
        key = self._key(epoch_digest, submission_digest)
        policy = self._policies[key[0]]
        with self._lock:
            approval, usage = decide_failure_approval(
                policy,
                self._usage.get(key, EMPTY_USAGE),
                failure_digest=failure_digest,
                operator_approval_digest=operator_approval_digest,
                used_approval_digests=self._used_approvals,
            )
            self._usage[key] = usage
            self._used_approvals.update(usage.approved_failures.values())
        return approval

    def export_usage(self) -> LedgerUsage:
        """Return an immutable copy of every pair's usage (for persistence)."""
        with self._lock:
            return LedgerUsage(entries=dict(self._usage))
