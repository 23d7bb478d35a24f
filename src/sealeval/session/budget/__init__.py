"""Feedback budget: per-epoch policy, coarse banding and a ledger of official attempts.

Wire contracts (openmed canonical JSON): ``openmed.eval.feedback_budget_policy.v1``,
``openmed.eval.feedback_budget_decision.v1``,
``openmed.eval.feedback_budget_snapshot.v1`` and
``openmed.eval.failure_approval.v1``. Persistence documents (sealeval's own):
``sealeval.feedback_budget_usage.v1`` and
``sealeval.feedback_budget_ledger_usage.v1``.

The module is split in two layers (see ``docs/feedback-budget.md``):

* a **pure core** — :func:`decide_official_attempt`,
  :func:`decide_failure_approval` and :func:`budget_snapshot` map
  ``(policy, usage, request)`` to ``(document, new usage)`` without touching
  any state, so a durable store can run them inside its own transaction;
* :class:`FeedbackBudgetLedger`, a thin thread-safe in-memory wrapper that
  looks up the policy, holds one :class:`SubmissionUsage` per
  ``(epoch digest, submission digest)`` and swaps in the new usage the core
  returns. :class:`LedgerUsage` exports and restores its whole state.

Keys are digests only; no document or error ever carries a submitted value.

Homes: :mod:`~sealeval.session.budget.vocabulary` (schemas, the error, value
checks), :mod:`~sealeval.session.budget.policy`,
:mod:`~sealeval.session.budget.usage`, :mod:`~sealeval.session.budget.documents`,
:mod:`~sealeval.session.budget.core` (the pure core and the one
``record_official_attempt``) and :mod:`~sealeval.session.budget.ledger` (the
in-memory ledger). This package is their face.
"""

from sealeval.session.budget.core import (
    attempt_limit,
    budget_snapshot,
    decide_failure_approval,
    decide_official_attempt,
    record_official_attempt,
)
from sealeval.session.budget.documents import (
    FailureApproval,
    FeedbackBudgetDecision,
    FeedbackBudgetSnapshot,
)
from sealeval.session.budget.ledger import (
    FeedbackBudgetLedger,
)
from sealeval.session.budget.policy import (
    FeedbackBudgetPolicy,
)
from sealeval.session.budget.usage import (
    LedgerUsage,
    SubmissionUsage,
)
from sealeval.session.budget.vocabulary import (
    APPROVAL_SCHEMA,
    DECISION_SCHEMA,
    FEEDBACK_LEVELS,
    LEDGER_USAGE_SCHEMA,
    MAX_COUNT,
    MAX_LIMIT,
    POLICY_SCHEMA,
    REASON_CODES,
    SNAPSHOT_SCHEMA,
    USAGE_SCHEMA,
    FeedbackBudgetError,
    coarse_band,
)

__all__ = [
    "APPROVAL_SCHEMA",
    "DECISION_SCHEMA",
    "FEEDBACK_LEVELS",
    "LEDGER_USAGE_SCHEMA",
    "MAX_COUNT",
    "MAX_LIMIT",
    "POLICY_SCHEMA",
    "REASON_CODES",
    "SNAPSHOT_SCHEMA",
    "USAGE_SCHEMA",
    "FailureApproval",
    "FeedbackBudgetDecision",
    "FeedbackBudgetError",
    "FeedbackBudgetLedger",
    "FeedbackBudgetPolicy",
    "FeedbackBudgetSnapshot",
    "LedgerUsage",
    "SubmissionUsage",
    "attempt_limit",
    "budget_snapshot",
    "coarse_band",
    "decide_failure_approval",
    "decide_official_attempt",
    "record_official_attempt",
]
