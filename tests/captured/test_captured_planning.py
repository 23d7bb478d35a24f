"""Sample-size planning (sealeval.captured.planning), validated by simulation.

Each planned N is simulated with fixed seeds: pass/fail plans through the
very interval the comparison uses (Newcombe, or method 10), bootstrap and
likelihood plans through the large-sample interval the planner models, tied
to the comparison's bootstraps on a few samples. The target width and the
power must be reached in at least 94 % of the simulated runs (less a stated
margin of two standard errors where the suite's run count is small). The same
simulations through the bootstraps themselves, at larger sizes, are
``bench/simulate.py``.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import numpy as np
import pytest

from sealeval.captured.inference import METHOD10, newcombe_method10_interval
from sealeval.captured.intervals import (
    PairedCounts,
    Z,
    newcombe_interval,
    nll_ratio_interval,
    shake256_bootstrap_interval,
)
from sealeval.captured.planning import (
    PlanningError,
    plan_binary,
    plan_continuous,
    plan_from_run,
    plan_pairs,
)
from support.captured_planning import (
    _baseline,
    _metric,
    _policy,
)
from support.vectors import pack_folder

# (baseline pass rate, discordance, width, allowed regression, true difference)
BINARY_DESIGNS = [
    pytest.param((0.8, 0.2, 0.1, 0.05, 0.0), id="p80-psi20"),
    pytest.param((0.6, 0.3, 0.15, 0.05, 0.0), id="p60-psi30"),
    pytest.param((0.9, 0.08, 0.06, 0.03, 0.0), id="p90-psi08"),
    pytest.param((0.7, 0.42, 0.2, 0.1, 0.02), id="p70-psi42-better"),
]


@pytest.mark.parametrize("method", ["reference", METHOD10])
@pytest.mark.parametrize("design", BINARY_DESIGNS)
def test_binary_plan_reaches_width_and_power_in_simulation(
    design: tuple[float, ...], method: str
) -> None:
    p, psi, width, regression, delta = design
    width_pairs, power_pairs = plan_binary(
        p,
        maximum_interval_width=width,
        maximum_regression=regression,
        discordance=psi,
        assumed_difference=delta,
        power=0.95,
        method=method,
    )
    assert width_pairs is not None
    assert power_pairs is not None
    interval_of = (
        newcombe_method10_interval
        if method == METHOD10
        else (lambda counts: newcombe_interval(counts).interval)
    )
    cells = [p - (psi - delta) / 2, (psi - delta) / 2, (psi + delta) / 2]
    cells.append(1.0 - sum(cells))
    rng = np.random.default_rng(20_201_998)
    runs = 1000
    for pairs, target in ((width_pairs, "width"), (power_pairs, "power")):
        reached = 0
        for a, b, c, d in rng.multinomial(pairs, cells, size=runs):
            interval = interval_of(PairedCounts(int(a), int(b), int(c), int(d)))
            if target == "width":
                reached += interval.upper - interval.lower <= width
            else:
                reached += interval.lower >= -regression
        assert reached / runs >= 0.94, (target, pairs, reached / runs)
    # and the answer is not wasteful: a third fewer pairs misses the width target
    smaller = int(width_pairs * 0.66)
    misses = 0
    for a, b, c, d in rng.multinomial(smaller, cells, size=300):
        interval = interval_of(PairedCounts(int(a), int(b), int(c), int(d)))
        misses += interval.upper - interval.lower > width
    assert misses / 300 > 0.5


def _seed(label: str) -> str:
    return "sha256:" + hashlib.sha256(label.encode("ascii")).hexdigest()


RUNS = 2000
#: Two standard errors of a 94 % rate over RUNS simulated runs: the stated margin.
MARGIN = 2 * math.sqrt(0.94 * 0.06 / RUNS)


def _normal_theory(differences: Any) -> tuple[Any, Any]:
    """Mean difference +- Z * s / sqrt(n) per row: the interval the planner models."""
    pairs = differences.shape[1]
    mean = differences.mean(axis=1)
    half = Z * differences.std(axis=1, ddof=1) / math.sqrt(pairs)
    return mean - half, mean + half


@pytest.mark.parametrize(("sigma", "width", "regression"), [(0.3, 0.12, 0.06), (1.0, 0.5, 0.3)])
def test_continuous_plan_reaches_width_and_power_in_simulation(
    sigma: float, width: float, regression: float
) -> None:
    """2,000 simulated runs per target at the planned n (fixed seed, margin 2 SE).

    The suite simulates the large-sample interval the planner models and ties
    it to the SHAKE-256 bootstrap on a few samples at the same n; the full
    simulation through the bootstrap itself (100 runs per target, each 2,048
    replicates) is ``bench/simulate.py``.
    """
    width_pairs, power_pairs = plan_continuous(
        sigma, maximum_interval_width=width, maximum_regression=regression, power=0.95
    )
    assert width_pairs is not None
    assert power_pairs is not None
    rng = np.random.default_rng(2635)
    for pairs, target in ((width_pairs, "width"), (power_pairs, "power")):
        lower, upper = _normal_theory(rng.normal(0.0, sigma, (RUNS, pairs)))
        reached = upper - lower <= width if target == "width" else lower >= -regression
        rate = float(np.mean(reached))
        assert rate >= 0.94 - MARGIN, (target, pairs, rate)
        # the comparison's bootstrap at this n is the same interval, up to resampling noise
        for run in range(3):
            baseline = rng.uniform(0, 1, pairs)
            subject = baseline + rng.normal(0.0, sigma, pairs)
            boot = shake256_bootstrap_interval(baseline, subject, _seed(f"{target}-{run}"))
            low, high = _normal_theory((subject - baseline)[np.newaxis, :])
            assert 0.85 <= (boot.upper - boot.lower) / float(high[0] - low[0]) <= 1.1
    # and the answer is not wasteful: two thirds of the width pairs miss the width target
    smaller = int(width_pairs * 0.66)
    lower, upper = _normal_theory(rng.normal(0.0, sigma, (RUNS, smaller)))
    assert float(np.mean(upper - lower > width)) > 0.5


def _ratio_delta_method(baseline: Any, subject: Any) -> tuple[Any, Any]:
    """Ratio of means +- Z * SE by the delta method, per row."""
    pairs = baseline.shape[1]
    ratio = subject.mean(axis=1) / baseline.mean(axis=1)
    residual = subject - ratio[:, np.newaxis] * baseline
    half = Z * residual.std(axis=1, ddof=1) / math.sqrt(pairs) / baseline.mean(axis=1)
    return ratio - half, ratio + half


def test_nll_ratio_plan_reaches_width_and_power_in_simulation() -> None:
    """Relative spread 0.1 (paired NLL differences / baseline mean), ratio_max 1.04.

    2,000 runs per target of the delta-method ratio interval the planner
    models, tied to the SHA-256 ratio bootstrap on a few samples; the full
    simulation through that bootstrap is ``bench/simulate.py``.
    """
    width, ratio_max, relative = 0.07, 1.04, 0.1
    width_pairs, power_pairs = plan_continuous(
        relative, maximum_interval_width=width, maximum_regression=ratio_max - 1, power=0.95
    )
    assert width_pairs is not None
    assert power_pairs is not None
    rng = np.random.default_rng(2650)
    for pairs, target in ((width_pairs, "width"), (power_pairs, "power")):
        baseline = rng.uniform(0.5, 1.5, (RUNS, pairs))  # mean 1: the spread is relative
        subject = baseline + rng.normal(0.0, relative, (RUNS, pairs))
        lower, upper = _ratio_delta_method(baseline, subject)
        reached = upper - lower <= width if target == "width" else upper <= ratio_max
        rate = float(np.mean(reached))
        assert rate >= 0.94 - MARGIN, (target, pairs, rate)
        for run in range(1):
            boot = nll_ratio_interval(baseline[run], subject[run], _seed(f"nll-{target}-{run}"))
            low, high = _ratio_delta_method(baseline[run : run + 1], subject[run : run + 1])
            ratio = (boot.interval.upper - boot.interval.lower) / float(high[0] - low[0])
            assert 0.85 <= ratio <= 1.1


def test_plan_from_run_answers_every_metric_and_slice() -> None:
    plans = plan_from_run(_baseline(), _policy())
    assert [(plan.metric, plan.scope) for plan in plans] == [
        ("exact_match", "overall"),
        ("exact_match", "hard"),
    ]
    overall, hard = plans
    assert overall.current_pairs == 400
    assert hard.current_pairs == 100
    assert hard.scope_share == pytest.approx(0.25)
    for plan in plans:
        assert plan.status == "planned"
        assert plan.required_pairs is not None
        assert plan.required_pairs == max(plan.width_pairs or 0, plan.power_pairs or 0)
        assert plan.more_pairs == max(0, plan.required_pairs - (plan.current_pairs or 0))
    # the hard slice has a rate near 0.6: more variance, more pairs, and 4x the cases overall
    assert hard.required_pairs > overall.required_pairs  # type: ignore[operator]
    assert hard.total_cases == pytest.approx(4 * hard.required_pairs, abs=1)  # type: ignore[operator]
    assert overall.to_dict()["slice"] == "overall"


def test_plan_from_stated_rates_and_unplannable_entries() -> None:
    policy = _policy()
    policy["metrics"].append(
        _metric("token_f1", configuration={"unicode_version": "15.0.0"}, maximum_regression=0)
    )
    plans = plan_pairs(policy, {"exact_match": 0.85, "token_f1": 0.2})
    assert len(plans) == 4
    binary, f1 = plans[0], plans[1]
    assert binary.status == "planned"
    assert binary.current_pairs is None
    assert f1.status == "not_planned"
    assert f1.reason == "unreachable"
    with pytest.raises(PlanningError) as refused:
        plan_pairs(policy, {"exact_match": 0.85})
    assert (refused.value.code, refused.value.field) == ("invalid_rate", "rates[1]")


@pytest.mark.parametrize(
    ("arguments", "code", "field"),
    [
        pytest.param({"p": 1.0}, "invalid_rate", "p", id="rate-one"),
        pytest.param({"p": "0.5"}, "invalid_rate", "p", id="rate-text"),
        pytest.param({"discordance": 0.0}, "invalid_rate", "psi", id="psi-zero"),
        pytest.param({"power": 0.3}, "invalid_power", "power", id="power-low"),
        pytest.param({"assurance": 1.0}, "invalid_power", "assurance", id="assurance-one"),
        pytest.param({"method": "wald"}, "invalid_method", "method", id="method"),
        pytest.param({"assumed_difference": 0.9}, "invalid_rate", "assumed_difference", id="delta"),
    ],
)
def test_planning_refusals(arguments: dict[str, Any], code: str, field: str) -> None:
    call: dict[str, Any] = {
        "p": 0.8,
        "maximum_interval_width": 0.1,
        "maximum_regression": 0.05,
    }
    call.update(arguments)
    p = call.pop("p")
    with pytest.raises(PlanningError) as refused:
        plan_binary(p, **call)
    assert (refused.value.code, refused.value.field) == (code, field)


def test_plan_from_a_real_pack_covers_every_kind_and_slice() -> None:
    """The reference's multi-metric vector: binary, token F1, recorded and NLL metrics."""
    from sealeval.captured.pack_reader import read_evidence_pack  # noqa: PLC0415

    pack = read_evidence_pack(pack_folder("text-200-multi-signed") / "evidence")
    plans = plan_from_run(pack.baseline, pack.policy)
    scopes = ["overall", *(item.name for item in pack.policy.slices)]
    assert [(plan.scope, plan.metric) for plan in plans] == [
        (scope, metric.name) for scope in scopes for metric in pack.policy.metrics
    ]
    kinds = {metric.name: metric for metric in pack.policy.metrics}
    for plan in plans:
        metric = kinds[plan.metric]
        if plan.status == "planned":
            assert plan.required_pairs == max(plan.width_pairs or 0, plan.power_pairs or 0)
        else:
            assert plan.reason in ("unreachable", "degenerate_rate")
        if metric.is_nll and metric.ratio_max is not None and metric.ratio_max > 1:
            assert plan.status == "planned"
    assert any(kinds[plan.metric].is_nll for plan in plans if plan.status == "planned")
