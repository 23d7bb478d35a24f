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

:func:`paired_outcomes` pairs two runs held in memory;
:func:`iter_pack_outcomes` yields the same outcomes, in the same order, from
a pack's run files without holding either run (a streamed pass over each
file; see its docstring for the memory bound).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import IO, Any, Final

from sealeval._validate import MAX_VALUE_DEPTH
from sealeval.canonical import DecodeLimits, decode
from sealeval.captured.comparison.table import RowSpill
from sealeval.captured.pack_reader import EvidencePack, EvidencePackError
from sealeval.captured.policy import ComparisonPolicy, PolicyMetric, check_runtime
from sealeval.captured.run import Limits, Record, Run, RunReader
from sealeval.captured.run.document import paused_full_collections
from sealeval.captured.scorers import NormalizedNll, RecordedScore
from sealeval.errors import SealevalError

__all__ = ["CHANGES", "PairedOutcome", "counts", "iter_pack_outcomes", "paired_outcomes"]

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


def _pair(
    left: Record, right: Record, policy: ComparisonPolicy, scorers: Sequence[Any]
) -> Iterator[PairedOutcome]:
    """Yield one pair's outcome under every policy metric (policy order)."""
    scopes = ("overall", *(item.name for item in policy.slices if item.matches(left.metadata)))
    for metric, scorer in zip(policy.metrics, scorers, strict=True):
        before, after = _values(scorer, left, right)
        yield PairedOutcome(
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
        if right is not None:
            outcomes.extend(_pair(left, right, policy, scorers))
    return tuple(outcomes)


def _spilled(row: bytes) -> Record:
    """Rebuild a subject record from its spilled canonical bytes (our own, already valid)."""
    size = len(row)
    limits = DecodeLimits(
        max_bytes=size,
        max_depth=MAX_VALUE_DEPTH + 2,
        max_string_length=size,
        max_containers=size,
        max_items=size,
    )
    return Record.from_document(decode(row, limits=limits))


def _streamed(
    handle: IO[bytes], limits: Limits, expected_digest: str, changed: EvidencePackError
) -> Iterator[Record]:
    """Yield a canonical run's records; refuse with ``changed`` unless its digest is expected."""
    reader = RunReader(handle, limits=limits)
    with paused_full_collections():
        yield from reader
    if reader.summary.run_digest != expected_digest:
        raise changed


def iter_pack_outcomes(pack: EvidencePack) -> Iterator[PairedOutcome]:
    """Yield :func:`paired_outcomes` of a pack's runs, same order, never holding a run.

    Works alike whether the pack was read with its runs held or as
    :class:`~sealeval.captured.run_facts.RunFacts` (``runs="outline"``): both
    run files are re-opened with :meth:`EvidencePack.open_run` (identities
    checked against the examination) and streamed once each. The subject's
    records are spilled, as canonical bytes, to an unlinked temporary file
    indexed by id; then the baseline streams past and each pair is rebuilt
    from the spill. Memory: the subject's ids and spill positions, plus one
    record per side (and whatever the caller keeps of the yielded outcomes).

    Outcomes are provisional until the iterator is exhausted: a run file
    whose bytes are no longer the examined run's digest is refused at the
    end of its pass.

    Raises:
        EvidencePackError: ``file_changed`` (status 6) when a run file is not
            the one examined (opened or read).
        CapturedRunError: a run file no longer reads as a canonical run.
    """
    policy = pack.policy
    scorers = check_runtime(policy)
    limits = pack.limits.run_limits()
    changed = EvidencePackError("file_changed", "pack", manifest_digest=pack.manifest_digest)
    with ExitStack() as stack:
        baseline = stack.enter_context(pack.open_run("baseline"))
        subject = stack.enter_context(pack.open_run("subject"))
        spill = RowSpill()
        stack.callback(spill.close)
        positions: dict[str, int] = {}
        for record in _streamed(subject, limits, pack.subject.digest, changed):
            positions[record.id] = len(positions)
            spill.add(record.to_canonical())
        for left in _streamed(baseline, limits, pack.baseline.digest, changed):
            position = positions.get(left.id)
            if position is not None:
                right = _spilled(next(spill.rows((position,))))
                yield from _pair(left, right, policy, scorers)


def counts(outcomes: Iterable[PairedOutcome]) -> dict[str, int]:
    """Return the number of outcomes per change class."""
    found = dict.fromkeys(CHANGES, 0)
    for outcome in outcomes:
        found[outcome.change] += 1
    return found
