"""pytest plugin: assert that a candidate run does not regress from a baseline under a policy.

Installed with sealeval (entry point ``pytest11``: ``sealeval``), so any test
suite can write::

    def test_no_regression(sealeval_compare):
        sealeval_compare("runs/baseline.run.json", "runs/candidate.run.json", "policy.json")

or, without the fixture::

    from sealeval.pytest_plugin import assert_no_regression

    def test_no_regression(record_property):
        assert_no_regression(baseline_run, candidate_run, policy, record_property=record_property)

A decision other than ``pass`` (``regression`` or ``insufficient_evidence``)
fails the test with the readable reason
(:func:`sealeval.integrations.describe_outcome`): the entries that did not
pass, their counts, means, intervals and reasons, and the digests. Every
comparison records the digests and the decision as JUnit properties
(``sealeval.decision``, ``sealeval.report_digest``,
``sealeval.baseline_run_digest``, ``sealeval.candidate_run_digest``,
``sealeval.policy_digest``), so ``pytest --junitxml`` carries them.

The plugin imports nothing from sealeval until a comparison is made: it adds
no cost to test sessions that do not use it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import pytest

if TYPE_CHECKING:
    from sealeval.captured.comparison import ComparisonReport
    from sealeval.captured.policy import ComparisonPolicy
    from sealeval.captured.run import Run

__all__ = ["RegressionError", "assert_no_regression", "sealeval_compare"]

#: JUnit property names, in the order they are recorded.
PROPERTIES = (
    "sealeval.decision",
    "sealeval.report_digest",
    "sealeval.baseline_run_digest",
    "sealeval.candidate_run_digest",
    "sealeval.policy_digest",
)


class RegressionError(AssertionError):
    """The comparison did not pass (the message is the readable reason)."""


class _RecordProperty(Protocol):
    def __call__(self, name: str, value: object) -> None: ...


def assert_no_regression(
    baseline: Run | str | os.PathLike[str],
    candidate: Run | str | os.PathLike[str],
    policy: ComparisonPolicy | Mapping[str, Any] | str | os.PathLike[str],
    *,
    record_property: _RecordProperty | None = None,
    decision_order: str = "reference",
    allow_insufficient_evidence: bool = False,
) -> ComparisonReport:
    """Compare and raise :class:`RegressionError` unless the decision is ``pass``.

    Args:
        baseline: the baseline run (a ``Run`` or a canonical run file).
        candidate: the candidate run, compared as the subject.
        policy: a ``ComparisonPolicy``, its document or its file.
        record_property: pytest's ``record_property`` fixture: the decision and
            digests become JUnit properties.
        decision_order: ``"reference"`` or ``"width_first"``.
        allow_insufficient_evidence: pass on ``insufficient_evidence`` too
            (only a ``regression`` fails); off by default: too little evidence
            is not evidence of no regression.

    Returns:
        The comparison report (when it passed).
    """
    from sealeval.integrations.gate import (  # noqa: PLC0415 - imported when first used
        compare_for_gate,
        describe_outcome,
    )

    report = compare_for_gate(baseline, candidate, policy, decision_order=decision_order)
    if record_property is not None:
        values = (
            report.decision,
            report.digest,
            report.bindings.baseline,
            report.bindings.subject,
            report.bindings.policy,
        )
        for name, value in zip(PROPERTIES, values, strict=True):
            record_property(name, value)
    accepted = ("pass", "insufficient_evidence") if allow_insufficient_evidence else ("pass",)
    if report.decision not in accepted:
        raise RegressionError(describe_outcome(report))
    return report


@pytest.fixture
def sealeval_compare(record_property: _RecordProperty) -> Callable[..., ComparisonReport]:
    """Return :func:`assert_no_regression` bound to this test's ``record_property``."""

    def compare(
        baseline: Run | str | os.PathLike[str],
        candidate: Run | str | os.PathLike[str],
        policy: ComparisonPolicy | Mapping[str, Any] | str | os.PathLike[str],
        **options: Any,
    ) -> ComparisonReport:
        return assert_no_regression(
            baseline, candidate, policy, record_property=record_property, **options
        )

    return compare
