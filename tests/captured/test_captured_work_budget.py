"""The work budget and progress of a comparison: the plan up front, the default, a host's cap."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

import sealeval
from sealeval._progress import PHASES, PLANNED_DRAWS
from sealeval.captured.comparison import (
    DEFAULT_MAX_BOOTSTRAP_DRAWS,
    ComparisonError,
    compare_runs,
)
from sealeval.captured.intervals import REPLICATES
from sealeval.captured.planning import DEFAULT_WORK_BUDGET, PlanningError, plan_draws
from sealeval.captured.policy import parse_comparison_policy
from support.captured_comparison import vector_run
from support.vectors import load, vectors_dir

VECTORS = "invarlock/comparisons.json"


def _case(name: str) -> dict[str, Any]:
    for case in load(VECTORS)["cases"]:
        if case["name"] == name:
            return case["input"]  # type: ignore[no-any-return]
    raise AssertionError(name)


def _usual_policy(slices: int) -> dict[str, Any]:
    """exact_match, token_f1 and a recorded score (accuracy), configured as a vector does."""
    policy = _case("text-20-multi-metric-slices")["policy"]
    metrics = [
        next(metric for metric in policy["metrics"] if metric["kind"] == kind)
        for kind in ("exact_match", "token_f1", "recorded")
    ]
    return {**policy, "metrics": metrics, "slices": policy["slices"][:slices]}


def test_default_budget_admits_a_million_record_comparison_of_the_usual_metrics() -> None:
    """exact_match, token_f1 and a recorded accuracy over overall + a partition of the run."""
    records = 1_000_000
    overall_only = plan_draws(_usual_policy(0), [records])
    # two slices that partition the run
    sliced = plan_draws(_usual_policy(2), [records, records // 2, records - records // 2])
    # two resampled metrics (binary exact_match draws nothing), the policy's replicates each
    assert overall_only == records * 2 * REPLICATES
    assert sliced == 2 * overall_only
    assert sliced <= DEFAULT_WORK_BUDGET
    # the reference's default would refuse it: the reason for sealeval's own default
    assert overall_only > DEFAULT_MAX_BOOTSTRAP_DRAWS


@pytest.mark.parametrize(
    "counts",
    [[], [10, 5], [-1], [1.5]],
    ids=["no-scope", "more-scopes-than-the-policy", "negative", "not-an-int"],
)
def test_plan_draws_refuses_counts_that_do_not_fit_the_policy(counts: list[Any]) -> None:
    with pytest.raises(PlanningError) as caught:
        plan_draws(_usual_policy(0), counts)
    assert (caught.value.code, caught.value.field) == ("invalid_rate", "scope_pair_counts")


@pytest.mark.parametrize(
    "name", ["text-20-multi-metric-slices", "json-200-structured", "missing-results-insufficient"]
)
def test_plan_draws_is_what_the_comparison_charges_and_announces(name: str) -> None:
    case = _case(name)
    heard: list[tuple[str, int, int]] = []
    report = compare_runs(
        baseline=vector_run(case["baseline"]),
        subject=vector_run(case["subject"]),
        policy=case["policy"],
        max_bootstrap_draws=None,
        progress=lambda *event: heard.append(event),
    )
    policy = parse_comparison_policy(case["policy"])
    first_metric = policy.metrics[0].name
    counts = [entry.count for entry in report.metrics if entry.name == first_metric]
    assert plan_draws(policy, counts) == report.required_bootstrap_draws
    # the plan is announced once, before any scoring, with the budget (-1: unlimited)
    plans = [event for event in heard if event[0] == PLANNED_DRAWS]
    assert plans == [(PLANNED_DRAWS, report.required_bootstrap_draws, -1)]
    phases = [event[0] for event in heard]
    assert phases.index(PLANNED_DRAWS) < phases.index("scoring")
    assert all(phase in PHASES for phase in phases if phase != PLANNED_DRAWS)
    assert {"pairing", "scoring", "intervals"} <= set(phases)
    # counts only, and the last intervals event counts every entry
    assert all(type(done) is int and type(total) is int for _, done, total in heard)
    assert heard[-1] == ("intervals", len(report.metrics), len(report.metrics))


def test_a_hosts_cap_is_enforced_after_the_plan_is_announced() -> None:
    case = _case("text-20-multi-metric-slices")
    baseline, subject = vector_run(case["baseline"]), vector_run(case["subject"])
    needed = compare_runs(
        baseline=baseline, subject=subject, policy=case["policy"], max_bootstrap_draws=None
    ).required_bootstrap_draws
    heard: list[tuple[str, int, int]] = []
    with pytest.raises(ComparisonError) as caught:
        compare_runs(
            baseline=baseline,
            subject=subject,
            policy=case["policy"],
            max_bootstrap_draws=needed - 1,
            progress=lambda *event: heard.append(event),
        )
    assert (caught.value.code, caught.value.field) == (
        "work_budget_exceeded",
        "max_bootstrap_draws",
    )
    assert (PLANNED_DRAWS, needed, needed - 1) in heard
    assert "scoring" not in [event[0] for event in heard]  # refused before any scoring


def test_the_library_face_takes_uncapped_progress_and_the_default_budget() -> None:
    """``sealeval.compare``: sealeval's default budget; uncapped and progress pass through."""
    default = inspect.signature(sealeval.compare).parameters["max_bootstrap_draws"].default
    assert default == DEFAULT_WORK_BUDGET
    case = _case("text-20-multi-metric-slices")
    root = vectors_dir() / "invarlock"
    heard: list[tuple[str, int, int]] = []
    report = sealeval.compare(
        root / case["baseline"],
        root / case["subject"],
        case["policy"],
        uncapped=True,
        progress=lambda *event: heard.append(event),
    )
    expected = compare_runs(
        baseline=vector_run(case["baseline"]),
        subject=vector_run(case["subject"]),
        policy=case["policy"],
    )
    assert report.canonical_bytes == expected.canonical_bytes
    assert (PLANNED_DRAWS, report.required_bootstrap_draws, DEFAULT_WORK_BUDGET) in heard
