"""Planning inputs shared by the planning and CLI tests.

Moved out of ``test_captured_planning.py`` so that no test module imports another."""

from __future__ import annotations

from typing import Any

import numpy as np

from sealeval.captured import Run, make_run


def _metric(kind: str, **changes: Any) -> dict[str, Any]:
    metric: dict[str, Any] = {
        "name": kind,
        "kind": kind,
        "configuration": {},
        "direction": "higher",
        "unit": "score",
        "aggregation": "mean",
        "minimum_count": 1,
        "maximum_regression": 0.05,
        "maximum_interval_width": 0.1,
    }
    metric.update(changes)
    return metric


def _policy() -> dict[str, Any]:
    return {
        "format": "invarlock/comparison-policy-v1",
        "metrics": [_metric("exact_match")],
        "slices": [{"name": "hard", "where": {"level": "hard"}}],
    }


def _baseline(pairs: int = 400) -> Run:
    rng = np.random.default_rng(7)
    records = []
    for index in range(pairs):
        hard = index % 4 == 0
        right = rng.uniform() < (0.6 if hard else 0.9)
        records.append(
            {
                "id": f"case-{index:04d}",
                "input": f"question {index}",
                "expected": "yes",
                "output": "yes" if right else "no",
                "metadata": {"level": "hard" if hard else "easy"},
            }
        )
    return make_run(
        records,
        source={"name": "plan", "version": "1"},
        run_id="plan",
        artifact_digest="sha256:" + "1" * 64,
    )
