"""The pure core: ``(policy, usage, request) -> (document, new usage)``.

:func:`decide_official_attempt`, :func:`decide_failure_approval` and
:func:`budget_snapshot` touch no state, so a durable store can run them inside
its own transaction. :func:`record_official_attempt` is the one implementation
of recording an attempt: every ledger (in memory, durable) delegates to it.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Container

from sealeval.session.budget.documents import (
    FailureApproval,
    FeedbackBudgetDecision,
    FeedbackBudgetSnapshot,
)
from sealeval.session.budget.policy import (
    FeedbackBudgetPolicy,
)
from sealeval.session.budget.usage import (
    SubmissionUsage,
)
from sealeval.session.budget.vocabulary import (
    FeedbackBudgetError,
    check_digest,
    check_score,
)

__all__ = [
    "attempt_limit",
    "budget_snapshot",
    "decide_failure_approval",
    "decide_official_attempt",
    "record_official_attempt",
]

# ---------------------------------------------------------------------------
# Pure core: (policy, usage, request) -> (document, new usage)


def attempt_limit(policy: FeedbackBudgetPolicy, usage: SubmissionUsage) -> int:
    """Return 1 + rerun limit + number of approved failures."""
    return 1 + policy.rerun_limit + usage.approved_failure_replacements


def _attempts_remaining(policy: FeedbackBudgetPolicy, usage: SubmissionUsage) -> int:
    return max(0, attempt_limit(policy, usage) - usage.official_attempts)


def _detail_remaining(policy: FeedbackBudgetPolicy, usage: SubmissionUsage) -> int:
    return max(0, policy.detailed_feedback_limit - usage.detailed_feedback_used)


def check_state(policy: object, usage: object) -> None:
    """Refuse a foreign policy/usage object or a usage no policy run could produce."""
    if not isinstance(policy, FeedbackBudgetPolicy):
        raise FeedbackBudgetError("invalid_policy", "policy")
    if not isinstance(usage, SubmissionUsage):
        raise FeedbackBudgetError("invalid_document", "usage")
    # Detail is spent on the first scored attempts, so the count is determined,
    # and the attempt limit only ever grows.
    if usage.detailed_feedback_used != min(
        usage.scored_attempts, policy.detailed_feedback_limit
    ) or usage.official_attempts > attempt_limit(policy, usage):
        raise FeedbackBudgetError("policy_mismatch", "usage")


def budget_snapshot(policy: FeedbackBudgetPolicy, usage: SubmissionUsage) -> FeedbackBudgetSnapshot:
    """Return the snapshot document of ``usage`` under ``policy`` (pure)."""
    check_state(policy, usage)
    return FeedbackBudgetSnapshot(
        official_attempts=usage.official_attempts,
        scored_attempts=usage.scored_attempts,
        detailed_feedback_used=usage.detailed_feedback_used,
        detailed_feedback_remaining=_detail_remaining(policy, usage),
        attempts_remaining=_attempts_remaining(policy, usage),
        infrastructure_failures=usage.infrastructure_failures,
        approved_failure_replacements=usage.approved_failure_replacements,
    )


def decide_official_attempt(
    policy: FeedbackBudgetPolicy,
    usage: SubmissionUsage,
    *,
    score: object = None,
    infrastructure_failure_digest: object = None,
) -> tuple[FeedbackBudgetDecision, SubmissionUsage]:
    """Decide one official attempt (pure): return the decision and the new usage.

    Exactly one of ``score`` (an int/float in [0, 1]) and
    ``infrastructure_failure_digest`` must be given. A denial
    (``rerun_budget_exhausted``) is a decision, not an error, and returns
    ``usage`` unchanged.

    Raises:
        FeedbackBudgetError: ``attempt_outcome: require_exactly_one``,
            ``score: invalid``, ``infrastructure_failure_digest:
            invalid_digest`` or ``...: already_recorded`` (this order), and
            ``policy: invalid_policy`` / ``usage: invalid_document`` /
            ``usage: policy_mismatch`` for a state no ledger could hold.
    """
    check_state(policy, usage)
    if (score is None) == (infrastructure_failure_digest is None):
        raise FeedbackBudgetError("require_exactly_one", "attempt_outcome")
    exact = check_score(score) if score is not None else None
    failure = (
        check_digest(infrastructure_failure_digest, "infrastructure_failure_digest")
        if exact is None
        else None
    )
    if _attempts_remaining(policy, usage) == 0:
        denial = FeedbackBudgetDecision(
            accepted=False,
            reason_code="rerun_budget_exhausted",
            feedback_level="none",
            official_attempt_number=None,
            detailed_score=None,
            coarse_band=None,
            official_attempts=usage.official_attempts,
            scored_attempts=usage.scored_attempts,
            attempts_remaining=0,
            detailed_feedback_remaining=_detail_remaining(policy, usage),
        )
        return denial, usage
    level, detailed_score, band = "none", None, None
    scored, detailed, failures = (
        usage.scored_attempts,
        usage.detailed_feedback_used,
        usage.infrastructure_failure_digests,
    )
    if failure is not None:
        if failure in failures:
            raise FeedbackBudgetError("already_recorded", "infrastructure_failure_digest")
        failures = (*failures, failure)
    else:
        assert exact is not None  # exactly one outcome was given
        scored += 1
        if detailed < policy.detailed_feedback_limit:
            detailed += 1
            level, detailed_score = "detailed", exact
        else:
            level, band = "coarse", bisect.bisect_right(policy.coarse_score_boundaries, exact)
    new_usage = SubmissionUsage(
        official_attempts=usage.official_attempts + 1,
        scored_attempts=scored,
        detailed_feedback_used=detailed,
        infrastructure_failure_digests=failures,
        approved_failures=usage.approved_failures,
    )
    decision = FeedbackBudgetDecision(
        accepted=True,
        reason_code="attempt_recorded",
        feedback_level=level,
        official_attempt_number=new_usage.official_attempts,
        detailed_score=detailed_score,
        coarse_band=band,
        official_attempts=new_usage.official_attempts,
        scored_attempts=new_usage.scored_attempts,
        attempts_remaining=_attempts_remaining(policy, new_usage),
        detailed_feedback_remaining=_detail_remaining(policy, new_usage),
    )
    return decision, new_usage


def decide_failure_approval(
    policy: FeedbackBudgetPolicy,
    usage: SubmissionUsage,
    *,
    failure_digest: object,
    operator_approval_digest: object,
    used_approval_digests: Container[str],
) -> tuple[FailureApproval, SubmissionUsage]:
    """Approve one recorded infrastructure failure (pure).

    ``used_approval_digests`` answers "was this approval digest already used
    anywhere in the ledger?" (a set, or a store-backed container). The
    caller must add ``operator_approval_digest`` to it when it commits the
    returned usage.

    Raises:
        FeedbackBudgetError: ``failure_digest: invalid_digest``,
            ``operator_approval_digest: invalid_digest``,
            ``failure_digest: not_recorded``, ``failure_digest:
            already_approved``, ``operator_approval_digest: already_used``
            (this order), or the state refusals of
            :func:`decide_official_attempt`.
    """
    check_state(policy, usage)
    failure = check_digest(failure_digest, "failure_digest")
    approval = check_digest(operator_approval_digest, "operator_approval_digest")
    if failure not in usage.infrastructure_failure_digests:
        raise FeedbackBudgetError("not_recorded", "failure_digest")
    if failure in usage.approved_failures:
        raise FeedbackBudgetError("already_approved", "failure_digest")
    if approval in used_approval_digests or approval in usage.approved_failures.values():
        raise FeedbackBudgetError("already_used", "operator_approval_digest")
    new_usage = SubmissionUsage(
        official_attempts=usage.official_attempts,
        scored_attempts=usage.scored_attempts,
        detailed_feedback_used=usage.detailed_feedback_used,
        infrastructure_failure_digests=usage.infrastructure_failure_digests,
        approved_failures={**usage.approved_failures, failure: approval},
    )
    result = FailureApproval(
        approved_failure_replacements=new_usage.approved_failure_replacements,
        attempts_remaining=_attempts_remaining(policy, new_usage),
    )
    return result, new_usage


def record_official_attempt(
    policy: FeedbackBudgetPolicy,
    usage: SubmissionUsage,
    *,
    score: object = None,
    infrastructure_failure_digest: object = None,
    write: Callable[[SubmissionUsage], object],
) -> FeedbackBudgetDecision:
    """Record one official attempt: the one implementation every ledger delegates to.

    Decides with :func:`decide_official_attempt` and hands the new usage to
    ``write`` only when the attempt is accepted: a denial
    (``rerun_budget_exhausted``) changes nothing. The caller holds whatever
    makes the read of ``usage`` and the ``write`` atomic (the in-memory
    ledger's lock, the durable ledger's database transaction).

    Raises:
        FeedbackBudgetError: the refusals of :func:`decide_official_attempt`
            (then nothing is written).
    """
    decision, new_usage = decide_official_attempt(
        policy,
        usage,
        score=score,
        infrastructure_failure_digest=infrastructure_failure_digest,
    )
    if decision.accepted:
        write(new_usage)
    return decision
