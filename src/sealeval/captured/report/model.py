"""The checked model of a report: verification status, typed entries, consistency.

The checks of ``33-report.md`` §1 run here (:func:`check_consistency`) before
any renderer shows anything; :class:`ReportError` is the closed refusal.
"""

from __future__ import annotations

import math
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sealeval.captured.comparison import WIDTH_FIRST_RULE
from sealeval.captured.pack_reader import DECISIONS, EvidencePack
from sealeval.captured.policy import PolicyMetric
from sealeval.captured.run import Run
from sealeval.captured.scorers import BINARY_KINDS, NLL_KIND
from sealeval.errors import CapturedError

#: ``format_version`` of the ``--json`` result.
RESULT_FORMAT: Final = "invarlock/evidence-report-v2"
#: Human label of each decision.
DECISION_LABELS: Final[Mapping[str, str]] = {
    "pass": "Policy satisfied",
    "regression": "Policy not met",
    "insufficient_evidence": "More evidence needed",
}
#: How many missing ids of one entry a report shows.
MISSING_IDS_PREVIEW: Final = 20
#: Verification statuses (32-verify.md §5) by name -> ``verification_status``.
VERIFICATION_STATUSES: Final[Mapping[str, int]] = {
    "pass": 0,
    "policy_fail": 7,
    "contract_failure": 4,
    "integrity_failure": 6,
}
_STATUS_LABELS: Final[Mapping[str, str]] = {
    "pass": "Verified: evidence integrity confirmed and the replayed decision is pass",
    "policy_fail": "Verified integrity, but the replayed decision does not satisfy the policy",
    "contract_failure": "Rejected: the pack does not meet the evidence-pack contract",
    "integrity_failure": "Rejected: evidence integrity could not be established",
}
DISPLAY_RANK: Final[Mapping[str, int]] = {"regression": 0, "insufficient_evidence": 1, "pass": 2}
UNAVAILABLE: Final = "Unavailable in recorded context"
PASSED, NOT_MET, NOT_EVALUATED = "Passed", "Not met", "Unavailable"


class ReportError(CapturedError):
    """Refusal to render a report (the CLI exits with status 2)."""

    module = "sealeval.captured.report"
    codes = frozenset(
        {
            # consistency checks (33-report.md §1)
            "invalid_entry",
            "invalid_decision",
            "unknown_scope",
            "duplicate_entry",
            "policy_mismatch",
            "incomplete_grid",
            "unknown_missing_id",
            "contradictory_decision",
            "decision_mismatch",
            "unsupported_decision_rule",
            # the opt-in extended statistics (docs/statistics.md)
            "extended_mismatch",
            # the caller's verification status
            "invalid_verification_status",
            "verification_mismatch",
            # output destinations (33-report.md §2)
            "invalid_destination",
            "destination_exists",
            "destination_inside_pack",
            "destination_collision",
            "unsafe_destination",
            "write_failed",
        }
    )


def _fail(code: str, where: str | None = None) -> ReportError:
    return ReportError(code, where)


# ---------------------------------------------------------------------------
# The caller's verification status


@dataclass(frozen=True, slots=True)
class VerificationStatus:
    """A verification outcome obtained by the caller (never by the renderer).

    Attributes:
        status: one of :data:`VERIFICATION_STATUSES` — ``"pass"`` (status 0),
            ``"policy_fail"`` (7), ``"contract_failure"`` (4) or
            ``"integrity_failure"`` (6), the closed set of 32-verify.md §5.
        receipt_checked: whether the caller checked a signed verification
            receipt (32-verify.md §6) for this pack.
    """

    status: str
    receipt_checked: bool = False

    def __post_init__(self) -> None:
        """Refuse a status outside the closed set and a non-boolean flag."""
        if type(self.status) is not str or self.status not in VERIFICATION_STATUSES:
            raise _fail("invalid_verification_status", "verification.status")
        if type(self.receipt_checked) is not bool:
            raise _fail("invalid_verification_status", "verification.receipt_checked")

    @classmethod
    def from_code(cls, code: int, *, receipt_checked: bool = False) -> VerificationStatus:
        """Build from a receipt's ``verdict.verification_status`` (0, 7, 4 or 6)."""
        for name, value in VERIFICATION_STATUSES.items():
            if type(code) is int and code == value:
                return cls(name, receipt_checked)
        raise _fail("invalid_verification_status", "verification.status")

    @property
    def code(self) -> int:
        """The ``verification_status`` / exit code of this outcome."""
        return VERIFICATION_STATUSES[self.status]

    @property
    def label(self) -> str:
        """A human label of the outcome."""
        return _STATUS_LABELS[self.status]


def check_verification(pack: EvidencePack, verification: VerificationStatus | None) -> None:
    """Refuse a caller-supplied outcome that the pack itself contradicts."""
    if verification is None:
        return
    if not isinstance(verification, VerificationStatus):
        raise _fail("invalid_verification_status", "verification")
    if verification.status in ("pass", "policy_fail"):
        # 32-verify.md §4-5: only a signed pack can verify, with the stored decision.
        wanted_pass = verification.status == "pass"
        if not pack.signed or (pack.decision == "pass") != wanted_pass:
            raise _fail("verification_mismatch", "verification.status")


# ---------------------------------------------------------------------------
# Typed, checked view of the report's metric entries


def _number(value: object) -> bool:
    """Whether ``value`` is an ``int`` or ``float`` representable as a finite binary64."""
    if type(value) not in (int, float):
        return False
    try:
        return math.isfinite(value)  # type: ignore[arg-type]
    except OverflowError:  # an integer beyond binary64
        return False


def display_float(value: float) -> float:
    """``float(value)``, with integers beyond binary64 as infinities (display only)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


@dataclass(frozen=True, slots=True)
class ReportInterval:
    """The stored confidence interval of a metric entry (bounds, method, mass, replicates)."""

    lower: float
    upper: float
    method: str
    mass: float
    replicates: int


@dataclass(frozen=True, slots=True)
class CheckRow:
    """One row of an entry's "Decision checks" table.

    Attributes:
        label: the check (``Complete paired results``, ``Allowed change``, …).
        observed: the observed value as displayed.
        required: the requirement as displayed.
        result: ``Passed``, ``Not met`` or ``Unavailable``.
        detail: a short explanation (HTML only), or ``""``.
    """

    label: str
    observed: str
    required: str
    result: str
    detail: str = ""


@dataclass(frozen=True, slots=True, repr=False)
class ReportEntry:
    """One checked metric entry of the stored report, with its policy metric.

    Attributes:
        position: the entry's index in the stored report.
        name: the metric name.
        slice: the scope (``overall`` or a slice name).
        decision: ``pass``, ``regression`` or ``insufficient_evidence``.
        reasons: the recorded reasons.
        count: pairs in the scope (missing included).
        missing_ids: the ids of the missing pairs (record ids of both runs).
        baseline_mean: the baseline mean, or ``None`` when not evaluated.
        subject_mean: the subject mean, or ``None``.
        delta: subject minus baseline mean, or ``None``.
        ratio: the NLL ratio (NLL entries), or ``None``.
        interval: the interval (lower, upper, method, mass, replicates), or ``None``.
        metric: the policy metric the entry belongs to.
    """

    position: int
    name: str
    slice: str
    decision: str
    reasons: tuple[str, ...]
    count: int
    missing_ids: tuple[str, ...]
    baseline_mean: float | None
    subject_mean: float | None
    delta: float | None
    ratio: float | None
    interval: ReportInterval | None
    metric: PolicyMetric

    def __repr__(self) -> str:
        """Show the position and decision only."""
        return f"ReportEntry(position={self.position}, decision={self.decision!r})"

    @property
    def usable(self) -> int:
        """Pairs with both results (``count`` minus the missing ones)."""
        return self.count - len(self.missing_ids)

    @property
    def evaluated(self) -> bool:
        """Whether means and an interval were computed."""
        return self.interval is not None

    @property
    def binary(self) -> bool:
        """Whether the metric is a binary kind (percentages, Newcombe interval)."""
        return self.metric.kind in BINARY_KINDS

    @property
    def nll(self) -> bool:
        """Whether the metric is the normalized-NLL ratio metric."""
        return self.metric.kind == NLL_KIND


def _text_member(document: Mapping[str, Any], member: str, where: str) -> str:
    value = document.get(member)
    if type(value) is not str:
        raise _fail("invalid_entry", f"{where}.{member}")
    return value


def _optional_number(document: Mapping[str, Any], member: str, where: str) -> float | None:
    value = document.get(member)
    if value is None:
        return None
    if not _number(value):
        raise _fail("invalid_entry", f"{where}.{member}")
    return float(value)


def _interval(value: object, where: str) -> ReportInterval | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise _fail("invalid_entry", f"{where}.interval")
    lower, upper, mass = value.get("lower"), value.get("upper"), value.get("mass")
    method, replicates = value.get("method"), value.get("replicates")
    if not (_number(lower) and _number(upper) and _number(mass)) or type(method) is not str:
        raise _fail("invalid_entry", f"{where}.interval")
    if type(replicates) is not int or replicates < 0 or lower > upper:  # type: ignore[operator]
        raise _fail("invalid_entry", f"{where}.interval")
    return ReportInterval(float(lower), float(upper), method, float(mass), replicates)  # type: ignore[arg-type]


def _string_list(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(type(item) is str for item in value):
        raise _fail("invalid_entry", where)
    return tuple(value)


def _entry(
    position: int,
    document: object,
    metrics: Mapping[str, PolicyMetric],
    scopes: Sequence[str],
    run_ids: Container[str],
    *,
    width_first: bool,
) -> ReportEntry:
    where = f"report.metrics[{position}]"
    if not isinstance(document, Mapping):
        raise _fail("invalid_entry", where)
    name = _text_member(document, "name", where)
    decision = document.get("decision")
    if type(decision) is not str or decision not in DECISIONS:
        raise _fail("invalid_decision", f"{where}.decision")
    scope = _text_member(document, "slice", where)
    metric = metrics.get(name)
    if metric is None or scope not in scopes:
        raise _fail("unknown_scope", where)
    for member, expected in (
        ("kind", metric.kind),
        ("direction", metric.direction),
        ("unit", metric.unit),
        ("aggregation", metric.aggregation),
        ("scoring_assurance", metric.scoring_assurance),
    ):
        value = document.get(member)
        if type(value) is not str or value != expected:
            raise _fail("policy_mismatch", f"{where}.{member}")
    missing = _string_list(document.get("missing_ids"), f"{where}.missing_ids")
    if len(set(missing)) != len(missing):
        raise _fail("invalid_entry", f"{where}.missing_ids")
    if any(item not in run_ids for item in missing):
        raise _fail("unknown_missing_id", f"{where}.missing_ids")
    count = document.get("count")
    if type(count) is not int or count < len(missing):
        raise _fail("invalid_entry", f"{where}.count")
    entry = ReportEntry(
        position=position,
        name=name,
        slice=scope,
        decision=decision,
        reasons=_string_list(document.get("reasons"), f"{where}.reasons"),
        count=count,
        missing_ids=missing,
        baseline_mean=_optional_number(document, "baseline_mean", where),
        subject_mean=_optional_number(document, "subject_mean", where),
        delta=_optional_number(document, "delta", where),
        ratio=_optional_number(document, "ratio", where),
        interval=_interval(document.get("interval"), where),
        metric=metric,
    )
    means = (entry.baseline_mean, entry.subject_mean, entry.delta)
    if entry.evaluated:
        if None in means or (entry.nll and entry.ratio is None):
            raise _fail("invalid_entry", where)
    elif any(value is not None for value in (*means, entry.ratio)):
        raise _fail("invalid_entry", where)
    _check_decision(entry, where, width_first=width_first)
    return entry


def bound_ok(entry: ReportEntry) -> bool:
    """Whether the interval satisfies the policy bound (ratio or regression)."""
    assert entry.interval is not None
    metric = entry.metric
    if entry.nll:
        return entry.interval.upper <= metric.ratio_max  # type: ignore[operator]
    limit = metric.maximum_regression
    if metric.direction == "higher":
        return entry.interval.lower >= -limit  # type: ignore[operator]
    return entry.interval.upper <= limit  # type: ignore[operator]


def estimate_ok(entry: ReportEntry) -> bool:
    """Whether the point estimate itself is on the allowed side of the bound."""
    metric = entry.metric
    if entry.nll:
        return entry.ratio <= metric.ratio_max  # type: ignore[operator]
    limit = metric.maximum_regression
    if metric.direction == "higher":
        return entry.delta >= -limit  # type: ignore[operator]
    return entry.delta <= limit  # type: ignore[operator]


def width_ok(entry: ReportEntry) -> bool:
    """Whether the interval is no wider than the policy allows."""
    assert entry.interval is not None
    width = entry.interval.upper - entry.interval.lower
    return width <= entry.metric.maximum_interval_width


def absolute_ok(entry: ReportEntry) -> tuple[bool, bool]:
    """(minimum met, maximum met) for the subject mean; ``True`` when not configured."""
    metric, mean = entry.metric, entry.subject_mean
    assert mean is not None
    low = metric.subject_minimum is None or mean >= metric.subject_minimum
    high = metric.subject_maximum is None or mean <= metric.subject_maximum
    return low, high


def _check_decision(entry: ReportEntry, where: str, *, width_first: bool) -> None:
    """Refuse a recorded decision that a displayed check contradicts (22-comparison.md §6).

    ``width_first``: the report declares sealeval's opt-in rule (width checked
    before the regression bounds).
    """
    if not entry.evaluated:
        blocked = bool(entry.missing_ids) or entry.count < entry.metric.minimum_count
        if entry.decision != "insufficient_evidence" or not blocked:
            raise _fail("contradictory_decision", f"{where}.decision")
        return
    if entry.missing_ids or entry.count < entry.metric.minimum_count:
        raise _fail("contradictory_decision", f"{where}.decision")
    if width_first and not width_ok(entry):
        expected = "insufficient_evidence"
    elif not (bound_ok(entry) and all(absolute_ok(entry))):
        expected = "regression"
    elif not width_ok(entry):
        expected = "insufficient_evidence"
    else:
        expected = "pass"
    if entry.decision != expected:
        raise _fail("contradictory_decision", f"{where}.decision")


def overall_decision(decisions: Iterable[str]) -> str:
    """Return the worst decision: ``regression``, then ``insufficient_evidence``, else ``pass``."""
    seen = set(decisions)
    for decision in ("regression", "insufficient_evidence"):
        if decision in seen:
            return decision
    return "pass"


def check_consistency(pack: EvidencePack) -> tuple[ReportEntry, ...]:
    """Run the consistency checks of 33-report.md §1 and return the entries in report order.

    Every entry must be an object with a string ``name``, a decision in
    {pass, regression, insufficient_evidence}, a ``(name, slice)`` of the
    policy's metric x scope grid (``overall`` + slice names) appearing once,
    the policy metric's ``kind``, ``direction``, ``unit``, ``aggregation`` and
    ``scoring_assurance``, and a list ``missing_ids`` of distinct record ids of
    the runs; the entries must cover the whole grid. No decision may
    contradict a displayed check (e.g. a "pass" whose bound is not met), and
    the report's overall decision must be the one its entries imply.

    Raises:
        ReportError: ``invalid_entry``, ``invalid_decision``, ``unknown_scope``,
            ``duplicate_entry``, ``policy_mismatch``, ``incomplete_grid``,
            ``unknown_missing_id``, ``contradictory_decision``,
            ``decision_mismatch`` (field ``report.…``).
    """
    policy = pack.policy
    metrics = {metric.name: metric for metric in policy.metrics}
    scopes = ("overall", *(piece.name for piece in policy.slices))
    rule = pack.report.get("decision_rule")
    if rule is not None and rule != WIDTH_FIRST_RULE:
        raise _fail("unsupported_decision_rule", "report.decision_rule")
    documents = pack.report["metrics"]
    baseline = pack.baseline
    known: Container[str] = baseline.index if isinstance(baseline, Run) else baseline
    entries: list[ReportEntry] = []
    seen: set[tuple[str, str]] = set()
    for position, document in enumerate(documents):
        entry = _entry(position, document, metrics, scopes, known, width_first=rule is not None)
        key = (entry.name, entry.slice)
        if key in seen:
            raise _fail("duplicate_entry", f"report.metrics[{position}]")
        seen.add(key)
        entries.append(entry)
    if len(seen) != len(metrics) * len(scopes):
        raise _fail("incomplete_grid", "report.metrics")
    if pack.report["decision"] != overall_decision(entry.decision for entry in entries):
        raise _fail("decision_mismatch", "report.decision")
    return tuple(entries)


def display_order(entries: Iterable[ReportEntry]) -> tuple[ReportEntry, ...]:
    """Group entries by decision (regression, insufficient_evidence, pass), keeping report order."""
    return tuple(sorted(entries, key=lambda entry: (DISPLAY_RANK[entry.decision], entry.position)))
