"""Compare two runs under a policy for a gate, and describe a decision that did not pass.

The comparison itself is :func:`sealeval.captured.comparison.compare_runs`;
this module only accepts the forms a test or a CI script has at hand (a
:class:`~sealeval.captured.run.Run`, a canonical run file, a policy object,
document or file) and turns the report into a readable reason. Reasons name
metrics, slices, counts, means and the policy's reason texts, never record
content or paths.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from sealeval.captured.comparison import (
    DEFAULT_MAX_BOOTSTRAP_DRAWS,
    ComparisonReport,
    MetricEntry,
    compare_runs,
)
from sealeval.captured.policy import (
    MAX_CANONICAL_BYTES,
    ComparisonPolicy,
    load_comparison_policy,
    parse_comparison_policy,
)
from sealeval.captured.run import Run, read_file_bytes, read_run
from sealeval.errors import CapturedError

__all__ = ["GateInputError", "RunLike", "compare_for_gate", "describe_outcome"]

#: What a gate accepts for a run: a run object or the path of a canonical run file.
RunLike = Run | str | os.PathLike[str]
_SHOWN: Final = 20


class GateInputError(CapturedError):
    """An argument of :func:`compare_for_gate` of the wrong kind (message ``<field>: <code>``)."""

    module = "sealeval.integrations"
    codes = frozenset({"invalid_type"})


def _run(value: object, side: str) -> Run:
    if isinstance(value, Run):
        return value
    if isinstance(value, str | os.PathLike):
        return read_run(Path(value))
    raise GateInputError("invalid_type", side)


def _policy(value: object) -> ComparisonPolicy:
    if isinstance(value, ComparisonPolicy):
        return value
    if isinstance(value, Mapping):
        return parse_comparison_policy(value)
    if isinstance(value, str | os.PathLike):
        return load_comparison_policy(read_file_bytes(Path(value), MAX_CANONICAL_BYTES, "policy"))
    raise GateInputError("invalid_type", "policy")


def compare_for_gate(
    baseline: RunLike,
    candidate: RunLike,
    policy: ComparisonPolicy | Mapping[str, Any] | str | os.PathLike[str],
    *,
    max_bootstrap_draws: int | None = DEFAULT_MAX_BOOTSTRAP_DRAWS,
    decision_order: str = "reference",
) -> ComparisonReport:
    """Compare ``candidate`` (the subject) with ``baseline`` under ``policy``.

    Runs are :class:`Run` objects or canonical run files (``sealeval import``
    output); the policy is a :class:`ComparisonPolicy`, its document, or its
    file. Returns the report whatever the decision; refusals raise the
    owning layer's :class:`~sealeval.errors.SealevalError` (run, policy,
    comparison) or :class:`GateInputError` (``invalid_type``).
    """
    return compare_runs(
        baseline=_run(baseline, "baseline"),
        subject=_run(candidate, "candidate"),
        policy=_policy(policy),
        max_bootstrap_draws=max_bootstrap_draws,
        decision_order=decision_order,
    )


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _entry_line(entry: MetricEntry) -> str:
    parts = [f"{entry.name} [{entry.slice}]: {entry.decision}"]
    parts.append(f"usable {entry.usable_count}/{entry.count}")
    if entry.baseline_mean is not None:
        parts.append(
            f"baseline {_number(entry.baseline_mean)} -> candidate {_number(entry.subject_mean)}"
        )
    if entry.interval is not None:
        parts.append(f"interval [{_number(entry.interval.lower)}, {_number(entry.interval.upper)}]")
    if entry.reasons:
        parts.append("; ".join(entry.reasons))
    return " | ".join(parts)


def describe_outcome(report: ComparisonReport) -> str:
    """Return a readable account of the decision: the entries that did not pass, worst first."""
    lines = [f"sealeval: decision {report.decision}"]
    failing = [entry for entry in report.metrics if entry.decision == "regression"]
    failing += [entry for entry in report.metrics if entry.decision == "insufficient_evidence"]
    lines += [f"  {_entry_line(entry)}" for entry in failing[:_SHOWN]]
    if len(failing) > _SHOWN:
        lines.append(f"  ... and {len(failing) - _SHOWN} more entries")
    lines.append(f"  report digest {report.digest}")
    lines.append(
        f"  baseline {report.bindings.baseline}, candidate {report.bindings.subject}, "
        f"policy {report.bindings.policy}"
    )
    return "\n".join(lines)
