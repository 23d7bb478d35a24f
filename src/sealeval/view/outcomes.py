"""Per-record paired outcomes of a comparison: which cases went right to wrong, and back.

The comparison report holds aggregates; this module recomputes, for display,
each pair's per-record value of every policy metric with the policy's own
scorers (:func:`sealeval.captured.policy.check_runtime`): the recomputed
value for deterministic kinds, the recorded score for ``recorded``, the
normalized NLL for the likelihood metric. Pairs are matched by record id;
scopes are ``overall`` plus every slice whose ``where`` the **baseline**
record's metadata satisfies (the comparison's rule). Errored records and
values a scorer cannot produce are ``missing``.

A pair *regressed* when the subject's value is worse in the metric's
direction (for 0/1 kinds: right -> wrong), *improved* when better
(wrong -> right), else *unchanged*. This is presentation, not evidence: the
decision is the report's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from sealeval.captured.policy import ComparisonPolicy, PolicyMetric, check_runtime
from sealeval.captured.run import Record, Run
from sealeval.captured.scorers import NormalizedNll, RecordedScore
from sealeval.errors import SealevalError

__all__ = ["CHANGES", "PairedOutcome", "counts", "paired_outcomes"]

#: Change classes, in display order.
CHANGES: Final = ("regressed", "improved", "missing", "unchanged")


@dataclass(frozen=True, slots=True)
class PairedOutcome:
    """One pair under one metric (values are ``None`` when missing)."""

    record_id: str
    metric: str
    binary: bool
    scopes: tuple[str, ...]
    baseline_value: float | None
    subject_value: float | None
    change: str
    baseline: Record
    subject: Record

    @property
    def transition(self) -> str:
        """``right → wrong`` / ``wrong → right`` for 0/1 values, else the change class."""
        if self.binary and self.change in ("regressed", "improved"):
            return "right → wrong" if self.change == "regressed" else "wrong → right"
        return self.change


def _values(  # noqa: PLR0911 - one return per missing rule
    scorer: Any, left: Record, right: Record
) -> tuple[float | None, float | None]:
    """Both sides' per-record values, or ``None`` where the comparison counts the pair missing."""
    if left.error is not None or right.error is not None:
        return None, None
    try:
        if isinstance(scorer, RecordedScore):
            key = scorer.score_key
            if key not in left.scores or key not in right.scores:
                return None, None
            return float(scorer.value(left.scores)), float(scorer.value(right.scores))
        if isinstance(scorer, NormalizedNll):
            if left.likelihood is None or right.likelihood is None:
                return None, None
            return float(scorer.value(left.likelihood)), float(scorer.value(right.likelihood))
        if not (scorer.is_available(left.output) and scorer.is_available(right.output)):
            return None, None
        # both outputs are scored against the baseline's expected answer (pairing requires
        # equal canonical expected values on both sides)
        reference = scorer.prepare(left.expected)
        return float(reference.score(left.output)), float(reference.score(right.output))
    except SealevalError:
        return None, None


def _change(metric: PolicyMetric, baseline: float | None, subject: float | None) -> str:
    if baseline is None or subject is None:
        return "missing"
    if subject == baseline:
        return "unchanged"
    lower_is_better = metric.is_nll or metric.direction != "higher"
    worse = subject > baseline if lower_is_better else subject < baseline
    return "regressed" if worse else "improved"


def paired_outcomes(
    baseline: Run, subject: Run, policy: ComparisonPolicy
) -> tuple[PairedOutcome, ...]:
    """Return every pair's outcome under every policy metric (baseline record order).

    Records present on one side only are not pairs and are not listed (the
    comparison itself refuses such runs).
    """
    scorers = check_runtime(policy)
    by_id = {record.id: record for record in subject.records}
    outcomes: list[PairedOutcome] = []
    for left in baseline.records:
        right = by_id.get(left.id)
        if right is None:
            continue
        scopes = ("overall", *(item.name for item in policy.slices if item.matches(left.metadata)))
        for metric, scorer in zip(policy.metrics, scorers, strict=True):
            before, after = _values(scorer, left, right)
            outcomes.append(
                PairedOutcome(
                    record_id=left.id,
                    metric=metric.name,
                    binary=metric.is_binary or {before, after} <= {0.0, 1.0},
                    scopes=scopes,
                    baseline_value=before,
                    subject_value=after,
                    change=_change(metric, before, after),
                    baseline=left,
                    subject=right,
                )
            )
    return tuple(outcomes)


def counts(outcomes: Sequence[PairedOutcome]) -> dict[str, int]:
    """Return the number of outcomes per change class."""
    found = dict.fromkeys(CHANGES, 0)
    for outcome in outcomes:
        found[outcome.change] += 1
    return found
