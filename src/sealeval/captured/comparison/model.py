"""The comparison report's objects, constants and closed refusal (22-comparison.md §8).

:class:`ComparisonReport` and its parts are frozen; their ``to_dict`` is the
wire document whose canonical bytes the reference reproduces.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeAlias

import numpy as np
import numpy.typing as npt

from sealeval.captured.intervals import (
    Interval,
)
from sealeval.errors import CapturedError

REPORT_FORMAT: Final = "invarlock/multi-metric-comparison-v1"
#: The reference's default local work budget (draws), 22-comparison.md §7.
DEFAULT_MAX_BOOTSTRAP_DRAWS: Final = 102_400_000
#: Largest total of the missing-ID arrays (§7.1) and of the report's canonical bytes.
MAX_MISSING_ID_BYTES: Final = 134_217_728
MAX_REPORT_BYTES: Final = 134_217_728
#: ``reference`` (invarlock: bounds before width) or ``width_first`` (sealeval opt-in).
DECISION_ORDERS: Final = ("reference", "width_first")
#: Report member that marks a width-first report (absent from reference reports).
WIDTH_FIRST_RULE: Final = "sealeval/width-first-v1"
PASS: Final = "pass"  # noqa: S105 - a decision, not a secret
REGRESSION: Final = "regression"
INSUFFICIENT: Final = "insufficient_evidence"
DECISIONS: Final = (PASS, REGRESSION, INSUFFICIENT)

#: The four fixed limitations every report carries, in order.
LIMITATIONS: Final = (
    "Recorded scores retain source judgments; only their aggregation is recomputed.",
    "Intervals describe the paired schedule under the stated method; representativeness "
    "requires an external sampling design.",
    "Metric and slice intervals are marginal, not a simultaneous family-wide confidence guarantee.",
    "A policy pass does not establish truthful model execution, general quality, safety or "
    "compliance.",
)
HOSTED_LIMITATION: Final = (
    "Hosted identity digests authenticate declared service descriptors and observation "
    "windows; they do not identify underlying weights or establish hidden configuration or "
    "later service behavior."
)
NLL_LIMITATION: Final = (
    "Normalized NLL replays captured reference-continuation likelihood facts; their model "
    "execution, tokenizer and configuration claims are source assertions, not independently "
    "established runtime facts."
)

REASON_LOWER: Final = "lower interval bound exceeds allowed regression"
REASON_UPPER: Final = "upper interval bound exceeds allowed regression"
REASON_RATIO: Final = "upper ratio interval bound exceeds ratio_max"
REASON_BOUNDS: Final = "subject mean fails absolute bounds"
REASON_WIDE: Final = "interval is too wide"
REASON_MISSING: Final = "missing results"
REASON_MISSING_NLL: Final = (
    "missing reference-continuation likelihood facts or errored results; supply typed "
    "likelihood for every pair"
)
REASON_MINIMUM: Final = "minimum record count not met"

FloatArray: TypeAlias = npt.NDArray[np.float64]
IndexArray: TypeAlias = npt.NDArray[np.intp]
BoolArray: TypeAlias = npt.NDArray[np.bool_]
# Scope hashing: buffer canonical rows and hash them in chunks of about this size.
HASH_CHUNK: Final = 1 << 20


class ComparisonError(CapturedError):
    """Refusal of a comparison (the report is not produced)."""

    module = "sealeval.captured.comparison"
    field_in_message = True
    codes = frozenset(
        {
            # arguments
            "invalid_type",
            "invalid_budget",
            "invalid_decision_order",
            "invalid_workers",
            # pairing and the planned schedule
            "case_set_mismatch",
            "record_ids_differ",
            "projection_mismatch",
            "input_changed",
            "expected_changed",
            "metadata_changed",
            # capacity
            "work_budget_exceeded",
            "missing_id_capacity_exceeded",
            "report_too_large",
            # attributed values
            "provenance_mismatch",
            "likelihood_configuration_mismatch",
            "likelihood_tokenizer_mismatch",
            "invalid_score",
            "invalid_likelihood",
            # invalid references (abort the comparison)
            "reference_not_text",
            "reference_not_numeric",
            "reference_not_json",
            "reference_missing_field",
            # arithmetic
            "non_finite_value",
            "overflow",
            "non_positive_baseline_mean",
        }
    )


# ---------------------------------------------------------------------------
# Report objects


@dataclass(frozen=True, slots=True)
class Bindings:
    """The report's ``bindings``: digests of the baseline run, the subject run and the policy."""

    baseline: str
    subject: str
    policy: str

    def to_dict(self) -> dict[str, str]:
        """Return the report member ``bindings``."""
        return {"baseline": self.baseline, "subject": self.subject, "policy": self.policy}


@dataclass(frozen=True, slots=True)
class MetricSummary:
    """One CLI metric summary (22-comparison.md §9): counts and reasons, no id lists."""

    name: str = field(repr=False)
    slice: str = field(repr=False)
    decision: str
    usable_count: int
    missing_count: int
    reasons: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """Return ``{name, slice, decision, usable_count, missing_count, reasons}``."""
        return {
            "name": self.name,
            "slice": self.slice,
            "decision": self.decision,
            "usable_count": self.usable_count,
            "missing_count": self.missing_count,
            "reasons": list(self.reasons),
        }


@dataclass(frozen=True, slots=True)
class MetricEntry:
    """One report entry (one scope x one metric).

    ``baseline_mean``, ``subject_mean``, ``delta``, ``interval`` (and ``ratio``
    for the NLL metric) are ``None`` when the entry did not reach the
    interval (missing results or too few pairs). ``missing_ids`` lists the
    missing pairs in pair order.
    """

    name: str = field(repr=False)
    slice: str = field(repr=False)
    kind: str
    unit: str = field(repr=False)
    direction: str
    scoring_assurance: str
    count: int
    missing_ids: tuple[str, ...] = field(repr=False)
    baseline_mean: float | None
    subject_mean: float | None
    delta: float | None
    interval: Interval | None
    decision: str
    reasons: tuple[str, ...]
    ratio: float | None = None
    aggregation: str = "mean"

    @property
    def is_nll(self) -> bool:
        """Whether this is a normalized-NLL entry (``ratio``, ``interval_unit``)."""
        return self.kind == "normalized_nll_per_utf8_byte"

    @property
    def usable_count(self) -> int:
        """Pairs in the scope minus missing pairs."""
        return self.count - len(self.missing_ids)

    def summary(self) -> MetricSummary:
        """Return the CLI summary of this entry (§9)."""
        return MetricSummary(
            name=self.name,
            slice=self.slice,
            decision=self.decision,
            usable_count=self.usable_count,
            missing_count=len(self.missing_ids),
            reasons=self.reasons,
        )

    def to_dict(self) -> dict[str, Any]:
        """Return the report entry (canonical encoding sorts the members)."""
        document: dict[str, Any] = {
            "name": self.name,
            "slice": self.slice,
            "kind": self.kind,
            "unit": self.unit,
            "direction": self.direction,
            "aggregation": self.aggregation,
            "scoring_assurance": self.scoring_assurance,
            "count": self.count,
            "missing_ids": list(self.missing_ids),
            "baseline_mean": self.baseline_mean,
            "subject_mean": self.subject_mean,
            "delta": self.delta,
            "interval": None if self.interval is None else self.interval.to_dict(),
            "decision": self.decision,
            "reasons": list(self.reasons),
        }
        if self.is_nll:
            document["ratio"] = self.ratio
            document["interval_unit"] = "ratio"
        return document


@dataclass(frozen=True, slots=True, eq=False)
class ComparisonReport:
    """A comparison report and its canonical bytes (built by :func:`compare_runs` only).

    Attributes:
        decision: the overall decision (``pass``, ``regression``, ``insufficient_evidence``).
        bindings: digests of the baseline run, the subject run and the policy.
        metrics: the entries, scope-major (``overall`` first), metrics in policy order.
        limitations: the fixed limitation texts (4 to 6).
        decision_order: ``"reference"`` or ``"width_first"``.
        canonical_bytes: the invarlock canonical bytes (what a pack stores).
        digest: ``sha256:`` + hex SHA-256 of ``canonical_bytes``.
        required_bootstrap_draws: the work the policy was charged (§7).
        missing_id_bytes: the missing-ID capacity total (§7.1).
    """

    decision: str
    bindings: Bindings
    metrics: tuple[MetricEntry, ...] = field(repr=False)
    limitations: tuple[str, ...] = field(repr=False)
    decision_order: str
    canonical_bytes: bytes = field(repr=False)
    digest: str
    required_bootstrap_draws: int = field(repr=False)
    missing_id_bytes: int = field(repr=False)

    @property
    def format(self) -> str:
        """The report format string."""
        return REPORT_FORMAT

    @property
    def passed(self) -> bool:
        """Whether the overall decision is ``pass``."""
        return self.decision == PASS

    def __eq__(self, other: object) -> bool:
        """Compare canonical bytes."""
        if not isinstance(other, ComparisonReport):
            return NotImplemented
        return self.canonical_bytes == other.canonical_bytes

    def __hash__(self) -> int:
        """Hash the report digest."""
        return hash(self.digest)

    def metric_summaries(self) -> tuple[MetricSummary, ...]:
        """Return the per-entry summaries in report order (§9)."""
        return tuple(entry.summary() for entry in self.metrics)

    def to_dict(self) -> dict[str, Any]:
        """Return a fresh plain copy of the report document."""
        return report_document(
            self.decision, self.bindings, self.metrics, self.limitations, self.decision_order
        )

    def to_canonical(self) -> bytes:
        """Return the canonical bytes (final LF included)."""
        return self.canonical_bytes


def report_document(
    decision: str,
    bindings: Bindings,
    entries: Sequence[MetricEntry],
    limitations: Sequence[str],
    decision_order: str,
) -> dict[str, Any]:
    """Return the comparison report's document (members in the contract's order)."""
    document: dict[str, Any] = {
        "format": REPORT_FORMAT,
        "decision": decision,
        "bindings": bindings.to_dict(),
        "metrics": [entry.to_dict() for entry in entries],
        "limitations": list(limitations),
    }
    if decision_order == "width_first":
        document["decision_rule"] = WIDTH_FIRST_RULE
    return document
