"""Sample-size planning for captured comparisons: how many paired cases each entry needs.

For every metric x scope of a comparison policy, :func:`plan_pairs` answers
two questions (``docs/statistics.md`` "Planning"):

* **width** — the number of pairs ``n`` for which the entry's interval is no
  wider than the policy's ``maximum_interval_width`` in at least
  ``assurance`` (default 95%) of runs;
* **power** — the number of pairs for which, if the true paired difference
  is ``assumed_difference`` (default 0: no change), the interval clears the
  policy's ``maximum_regression`` with probability at least ``power``
  (default 80%); i.e. a regression of exactly the allowed size is told apart
  from no change.

``required`` is the larger of the two. Inputs are rates: for binary kinds the
baseline pass rate ``p`` and the discordance rate ``psi`` (share of pairs whose
outcome differs; default ``2 p (1 - p)``, the independence value, which is
conservative when the runs agree more than chance); for bootstrap kinds the
standard deviation of the paired differences (default ``sqrt(2)`` times the
baseline's). Normal approximations give a first ``n``; for binary kinds the
answer is then refined against the actual interval (the reference's, or
Newcombe method 10) evaluated on an adverse table (upper ``assurance``
quantile of the discordant count, and for power the ``power`` quantile of the
difference). The tests validate the answers by simulation.

:func:`plan_from_run` derives the rates from a baseline run (scope by scope)
and :func:`more_pairs_hint` turns an ``insufficient_evidence`` entry into
"about N more paired cases in slice X" from the comparison's own data.
The work budget: :func:`plan_draws` states the bootstrap draws a comparison
will charge (from scope sizes alone), and :data:`DEFAULT_WORK_BUDGET` is
sealeval's default cap, sized for a 1,000,000-record comparison.
Normalized-NLL ratio metrics are planned on the relative scale: with
``r = sd(subject - baseline) / mean(baseline)`` (default ``sqrt(2)`` times the
baseline's coefficient of variation) the ratio's interval behaves like a
mean difference of spread ``r`` (delta method at a ratio of 1), its
"regression" is ``ratio_max - 1``, and :func:`plan_continuous` applies.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Final

import numpy as np

from sealeval.captured.comparison import ScopeValues, scope_values
from sealeval.captured.inference import METHOD10, newcombe_method10_interval
from sealeval.captured.intervals import (
    PairedCounts,
    Z,
    newcombe_interval,
    required_bootstrap_draws,
)
from sealeval.captured.policy import ComparisonPolicy, PolicyMetric, parse_comparison_policy
from sealeval.captured.run import Run
from sealeval.errors import CapturedError

__all__ = [
    "DEFAULT_WORK_BUDGET",
    "MAX_PLANNED_PAIRS",
    "PLAN_FORMAT",
    "EntryPlan",
    "PlanningError",
    "more_pairs_hint",
    "plan_binary",
    "plan_continuous",
    "plan_draws",
    "plan_from_run",
    "plan_pairs",
]

#: ``format`` of the plan document.
PLAN_FORMAT: Final = "sealeval/sample-size-plan-v1"
#: Largest planned number of pairs; beyond it an entry is ``unreachable``.
MAX_PLANNED_PAIRS: Final = 100_000_000
_NORMAL: Final = NormalDist()

#: sealeval's default local work budget in bootstrap draws (``compare``,
#: ``verify``, ``evaluate --uncapped``). It admits a 1,000,000-record comparison
#: of the usual metrics -- ``exact_match`` (binary: no draws), ``token_f1`` and a
#: recorded ``accuracy`` (two resampled metrics) over ``overall`` plus slices
#: that partition the run: 2 x 2,000,000 pairs x 2,048 replicates =
#: 8,192,000,000 draws (:func:`plan_draws`). Hosts that want a cap pass their
#: own (``--max-bootstrap-draws N`` / ``max_bootstrap_draws=N``): the comparison
#: is then refused with ``work_budget_exceeded`` before any scoring.
DEFAULT_WORK_BUDGET: Final = 10_000_000_000


class PlanningError(CapturedError):
    """Refusal of a planning input (fields are argument or policy positions, never values)."""

    module = "sealeval.captured.planning"
    field_in_message = True
    codes = frozenset({"invalid_rate", "invalid_power", "invalid_method"})


def plan_draws(
    policy: ComparisonPolicy | Mapping[str, Any], scope_pair_counts: Sequence[int]
) -> int:
    """Return the bootstrap draws a comparison will charge, without reading any run.

    ``scope_pair_counts`` gives the pairs of each scope in report order
    (``overall`` first, then the policy's slices); the result is what
    :func:`~sealeval.captured.comparison.compare_runs` charges against its
    budget (``Σ pairs x resampled metrics x``
    :data:`~sealeval.captured.intervals.REPLICATES`). Compare it with
    :data:`DEFAULT_WORK_BUDGET` or a host's own cap.

    Raises:
        PlanningError: ``invalid_rate`` (field ``scope_pair_counts``) when the
            counts do not match the policy's scopes or are not counts.
    """
    approved = _policy(policy)
    counts = list(scope_pair_counts)
    if len(counts) != len(approved.scope_names) or any(
        type(count) is not int or count < 0 for count in counts
    ):
        raise PlanningError("invalid_rate", "scope_pair_counts")
    return required_bootstrap_draws(counts, approved.bootstrap_metric_count)


def _probability(value: object, where: str, *, open_interval: bool = True) -> float:
    if type(value) not in (int, float):
        raise PlanningError("invalid_rate", where)
    number = float(value)  # type: ignore[arg-type]
    low_ok = number > 0.0 if open_interval else number >= 0.0
    if not (math.isfinite(number) and low_ok and number < 1.0):
        raise PlanningError("invalid_rate", where)
    return number


def _check_power(power: object, assurance: object) -> tuple[float, float]:
    values = []
    for name, value in (("power", power), ("assurance", assurance)):
        if type(value) is not float or not 0.5 <= value < 1.0:
            raise PlanningError("invalid_power", name)
        values.append(value)
    return values[0], values[1]


def _width(counts: PairedCounts, method: str) -> tuple[float, float]:
    if method == METHOD10:
        interval = newcombe_method10_interval(counts)
    else:
        interval = newcombe_interval(counts).interval
    return interval.lower, interval.upper


def _table(n: int, p: float, discordant: int, change: int) -> PairedCounts | None:
    """Build a table with ``b + c = discordant``, ``c - b = change``, baseline pass rate ~ p."""
    discordant = min(max(discordant, abs(change)), n)
    if (discordant - change) % 2:
        discordant += 1 if discordant < n else -1
    b = (discordant - change) // 2
    c = discordant - b
    if b < 0 or c < 0 or b + c > n:
        return None
    a = min(max(round(n * p) - b, 0), n - b - c)
    return PairedCounts(a, b, c, n - a - b - c)


def _smallest(start: int, good: Any) -> int | None:
    """Smallest n >= 2 with ``good(n)`` (doubling, then bisection), or None."""
    low, high = 1, max(2, start // 2)
    while not good(high):
        low, high = high, high * 2
        if high > MAX_PLANNED_PAIRS:
            return None
    while high - low > 1:
        middle = (low + high) // 2
        if good(middle):
            high = middle
        else:
            low = middle
    return high


def plan_binary(
    p: float,
    *,
    maximum_interval_width: float,
    maximum_regression: float,
    discordance: float | None = None,
    assumed_difference: float = 0.0,
    power: float = 0.8,
    assurance: float = 0.95,
    method: str = "reference",
) -> tuple[int | None, int | None]:
    """Return ``(width pairs, power pairs)`` for a binary metric (``None``: unreachable).

    ``p`` is the baseline pass rate, ``discordance`` the share of discordant
    pairs, ``assumed_difference`` the true subject-minus-baseline pass rate.
    """
    rate = _probability(p, "p")
    psi = 2.0 * rate * (1.0 - rate) if discordance is None else _probability(discordance, "psi")
    power, assurance = _check_power(power, assurance)
    if method not in ("reference", METHOD10):
        raise PlanningError("invalid_method", "method")
    delta = float(assumed_difference)
    if not (math.isfinite(delta) and abs(delta) <= psi):
        raise PlanningError("invalid_rate", "assumed_difference")
    z_assure = _NORMAL.inv_cdf(assurance)
    z_power = _NORMAL.inv_cdf(power)
    width = float(maximum_interval_width)
    regression = float(maximum_regression)

    def width_ok(n: int) -> bool:
        high = psi + z_assure * math.sqrt(psi * (1.0 - psi) / n)
        table = _table(n, rate, math.ceil(n * min(high, 1.0)), 0)
        if table is None:
            return False
        lower, upper = _width(table, method)
        return upper - lower <= width

    def power_ok(n: int) -> bool:
        se = math.sqrt(max(psi - delta * delta, 1e-12) / n)
        observed = delta - z_power * se
        table = _table(n, rate, round(n * psi), math.floor(n * observed))
        if table is None:
            return False
        lower, _upper = _width(table, method)
        return lower >= -regression

    first = math.ceil((2.0 * Z) ** 2 * psi / width**2) if width > 0 else MAX_PLANNED_PAIRS
    width_pairs = _smallest(first, width_ok) if width > 0 else None
    power_pairs: int | None = None
    if regression + delta > 0:
        guess = (Z + z_power) ** 2 * (psi - delta * delta) / (regression + delta) ** 2
        power_pairs = _smallest(math.ceil(guess), power_ok)
    return width_pairs, power_pairs


def plan_continuous(
    sd_difference: float,
    *,
    maximum_interval_width: float,
    maximum_regression: float,
    assumed_difference: float = 0.0,
    power: float = 0.8,
    assurance: float = 0.95,
) -> tuple[int | None, int | None]:
    """Return ``(width pairs, power pairs)`` for a bootstrap metric (``None``: unreachable).

    ``sd_difference`` is the standard deviation of the paired differences,
    ``assumed_difference`` the true change in the *better* direction (>= 0
    means no worse). Both targets use the upper ``assurance`` quantile of the
    sample standard deviation (chi-square, Wilson-Hilferty), so the interval's
    own estimate of the spread is covered; power then follows the normal test.
    """
    sigma = float(sd_difference)
    if not (math.isfinite(sigma) and sigma >= 0.0):
        raise PlanningError("invalid_rate", "sd_difference")
    power, assurance = _check_power(power, assurance)
    width = float(maximum_interval_width)
    regression = float(maximum_regression)
    delta = float(assumed_difference)
    if sigma == 0.0:
        return 2, 2
    z_assure = _NORMAL.inv_cdf(assurance)
    z_power = _NORMAL.inv_cdf(power)

    def high(n: int) -> float:
        k = max(n - 1, 1)
        cube = 1.0 - 2.0 / (9.0 * k) + z_assure * math.sqrt(2.0 / (9.0 * k))
        return sigma * math.sqrt(cube**3)

    def width_ok(n: int) -> bool:
        return 2.0 * Z * high(n) / math.sqrt(n) <= width

    def power_ok(n: int) -> bool:
        return (regression + delta) * math.sqrt(n) / high(n) >= Z + z_power

    width_pairs = (
        _smallest(math.ceil((2.0 * Z * sigma / width) ** 2), width_ok) if width > 0 else None
    )
    power_pairs: int | None = None
    if regression + delta > 0:
        power_pairs = _smallest(
            math.ceil(((Z + z_power) * sigma / (regression + delta)) ** 2), power_ok
        )
    return width_pairs, power_pairs


@dataclass(frozen=True, slots=True)
class EntryPlan:
    """The plan of one metric x scope.

    Attributes:
        metric: the metric name.
        scope: ``"overall"`` or the slice name.
        status: ``"planned"`` or ``"not_planned"``.
        reason: why not planned (``unreachable``, ``degenerate_rate``), else None.
        width_pairs: pairs for the width target (None when unreachable).
        power_pairs: pairs for the power target (None when unreachable).
        required_pairs: the larger of the two (None when either is unreachable).
        current_pairs: usable pairs of the scope in the run planned from (None for stated rates).
        scope_share: the scope's share of the run's pairs (1 for overall).
    """

    metric: str
    scope: str
    status: str
    reason: str | None
    width_pairs: int | None
    power_pairs: int | None
    required_pairs: int | None
    current_pairs: int | None
    scope_share: float

    @property
    def more_pairs(self) -> int | None:
        """Pairs still needed in this scope (0 when enough; None when unknown)."""
        if self.required_pairs is None or self.current_pairs is None:
            return None
        return max(0, self.required_pairs - self.current_pairs)

    @property
    def total_cases(self) -> int | None:
        """Cases of the whole run needed so this scope holds ``required_pairs`` pairs."""
        if self.required_pairs is None or self.scope_share <= 0.0:
            return None
        return math.ceil(self.required_pairs / self.scope_share - 1e-9)

    def to_dict(self) -> dict[str, Any]:
        """Return the plan document's entry."""
        return {
            "metric": self.metric,
            "slice": self.scope,
            "status": self.status,
            "reason": self.reason,
            "width_pairs": self.width_pairs,
            "power_pairs": self.power_pairs,
            "required_pairs": self.required_pairs,
            "current_pairs": self.current_pairs,
            "more_pairs": self.more_pairs,
            "total_cases": self.total_cases,
        }


def _entry_plan(
    metric: PolicyMetric,
    scope: str,
    *,
    rate: float | None,
    spread: float | None,
    current: int | None,
    share: float,
    options: Mapping[str, Any],
) -> EntryPlan:
    def result(status: str, reason: str | None, pairs: tuple[int | None, int | None]) -> EntryPlan:
        width_pairs, power_pairs = pairs
        required = (
            None if width_pairs is None or power_pairs is None else max(width_pairs, power_pairs)
        )
        if status == "planned" and required is None:
            status, reason = "not_planned", "unreachable"
        return EntryPlan(
            metric.name, scope, status, reason, width_pairs, power_pairs, required, current, share
        )

    width = float(metric.maximum_interval_width)
    if metric.is_nll:
        assert metric.ratio_max is not None
        regression = float(metric.ratio_max) - 1.0
    else:
        assert metric.maximum_regression is not None
        regression = float(metric.maximum_regression)
    if metric.is_binary:
        if rate is None or not 0.0 < rate < 1.0:
            return result("not_planned", "degenerate_rate", (None, None))
        pairs = plan_binary(
            rate,
            maximum_interval_width=width,
            maximum_regression=regression,
            discordance=options.get("discordance"),
            assumed_difference=options.get("assumed_difference", 0.0),
            power=options.get("power", 0.8),
            assurance=options.get("assurance", 0.95),
            method=options.get("method", "reference"),
        )
        return result("planned", None, pairs)
    if spread is None:
        return result("not_planned", "degenerate_rate", (None, None))
    pairs = plan_continuous(
        spread,
        maximum_interval_width=width,
        maximum_regression=regression,
        assumed_difference=options.get("assumed_difference", 0.0),
        power=options.get("power", 0.8),
        assurance=options.get("assurance", 0.95),
    )
    return result("planned", None, pairs)


def _policy(policy: ComparisonPolicy | Mapping[str, Any]) -> ComparisonPolicy:
    return policy if isinstance(policy, ComparisonPolicy) else parse_comparison_policy(policy)


def plan_pairs(
    policy: ComparisonPolicy | Mapping[str, Any],
    rates: Mapping[str, float],
    *,
    power: float = 0.8,
    assurance: float = 0.95,
    assumed_difference: float = 0.0,
    discordance: float | None = None,
    method: str = "reference",
) -> tuple[EntryPlan, ...]:
    """Plan every metric x scope from stated rates (one per metric name).

    ``rates[name]`` is the baseline pass rate of a binary metric, or the
    standard deviation of the paired differences of a bootstrap metric (for
    normalized NLL: that standard deviation over the baseline mean); the
    same rate applies to every scope (slice shares unknown: ``total_cases``
    equals ``required_pairs``). A metric without a rate is refused.
    """
    approved = _policy(policy)
    options = {
        "power": power,
        "assurance": assurance,
        "assumed_difference": assumed_difference,
        "discordance": discordance,
        "method": method,
    }
    plans: list[EntryPlan] = []
    scopes = ["overall", *(item.name for item in approved.slices)]
    for scope in scopes:
        for metric in approved.metrics:
            value = rates.get(metric.name)
            if type(value) not in (int, float) or not math.isfinite(float(value)):  # type: ignore[arg-type]
                raise PlanningError("invalid_rate", f"rates[{metric.index}]")
            number = float(value)  # type: ignore[arg-type]
            if (metric.is_binary and not 0.0 < number < 1.0) or number < 0.0:
                raise PlanningError("invalid_rate", f"rates[{metric.index}]")
            plans.append(
                _entry_plan(
                    metric,
                    scope,
                    rate=number if metric.is_binary else None,
                    spread=None if metric.is_binary else number,
                    current=None,
                    share=1.0,
                    options=options,
                )
            )
    return tuple(plans)


def _observed(values: ScopeValues, *, paired: bool) -> tuple[float | None, float | None, int]:
    """(pass rate or None, sd of differences or None, usable pairs) of one scope."""
    usable = ~values.missing
    left = values.baseline[usable]
    right = values.subject[usable]
    count = int(left.size)
    if count == 0:
        return None, None, 0
    if values.metric.is_binary:
        return float(np.count_nonzero(left != 0.0)) / count, None, count
    if count < 2:
        return None, None, count
    spread = float(np.std(right - left, ddof=1)) if paired else float(np.std(left, ddof=1))
    if not paired:
        spread *= math.sqrt(2.0)
    if values.metric.is_nll:
        mean = float(np.mean(left))
        if not mean > 0.0:
            return None, None, count
        spread /= mean
    return None, spread, count


def _self_paired(policy: ComparisonPolicy) -> ComparisonPolicy:
    """Return the policy for pairing a run with itself (NLL: baseline tokenizer both sides)."""
    if not policy.has_nll:
        return policy
    document = policy.to_dict()
    for metric in document["metrics"]:
        configuration = metric.get("configuration")
        if metric["kind"] == "normalized_nll_per_utf8_byte" and isinstance(configuration, dict):
            baseline_tokenizer = configuration.get("baseline_tokenizer_digest")
            if baseline_tokenizer is not None:
                configuration["subject_tokenizer_digest"] = baseline_tokenizer
    return parse_comparison_policy(document)


def plan_from_run(
    baseline: Run | Mapping[str, Any],
    policy: ComparisonPolicy | Mapping[str, Any],
    *,
    power: float = 0.8,
    assurance: float = 0.95,
    assumed_difference: float = 0.0,
    discordance: float | None = None,
    method: str = "reference",
) -> tuple[EntryPlan, ...]:
    """Plan every metric x scope from a baseline run (rates and slice shares per scope).

    The run is paired with itself under the policy (same checks as
    :func:`~sealeval.captured.comparison.compare_runs`; a likelihood metric
    expects the baseline's tokenizer on both sides), so each scope's pass
    rate or spread and its share of the run's pairs are the baseline's.
    """
    approved = _policy(policy)
    options = {
        "power": power,
        "assurance": assurance,
        "assumed_difference": assumed_difference,
        "discordance": discordance,
        "method": method,
    }
    everything = scope_values(baseline=baseline, subject=baseline, policy=_self_paired(approved))
    total = max(len(everything[0].ids), 1) if everything else 1
    plans = []
    for values in everything:
        rate, spread, count = _observed(values, paired=False)
        plans.append(
            _entry_plan(
                values.metric,
                values.scope,
                rate=rate,
                spread=spread,
                current=count,
                share=len(values.ids) / total,
                options=options,
            )
        )
    return tuple(plans)


def more_pairs_hint(values: ScopeValues, *, method: str = "reference") -> int | None:
    """About how many more paired cases (in this scope) it needs to meet the width target.

    Uses the comparison's own data (observed pass rate and discordance, or the
    observed spread of the differences), the policy's width target, and a
    95% assurance; ``None`` when it cannot be estimated.
    """
    metric = values.metric
    usable = ~values.missing
    left = values.baseline[usable]
    right = values.subject[usable]
    count = int(left.size)
    if count < 2:
        return None
    width = float(metric.maximum_interval_width)
    if metric.is_binary:
        rate = float(np.count_nonzero(left != 0.0)) / count
        discordant = float(np.count_nonzero((left != 0.0) != (right != 0.0))) / count
        if not 0.0 < rate < 1.0 or not 0.0 < discordant < 1.0:
            return None
        pairs, _ = plan_binary(
            rate,
            maximum_interval_width=width,
            maximum_regression=float(metric.maximum_regression or 0.0),
            discordance=discordant,
            method=method,
        )
    else:
        spread = float(np.std(right - left, ddof=1))
        regression = float(metric.maximum_regression or 0.0)
        if metric.is_nll:
            mean = float(np.mean(left))
            if not mean > 0.0:
                return None
            ratio = float(np.mean(right)) / mean
            spread = float(np.std(right - ratio * left, ddof=1)) / mean
            regression = float(metric.ratio_max or 1.0) - 1.0
        pairs, _ = plan_continuous(
            spread,
            maximum_interval_width=width,
            maximum_regression=regression,
        )
    return None if pairs is None else max(0, pairs - count)
