"""Runs and policies shared by the extended comparison and CLI tests.

Moved out of ``test_captured_extended.py`` so that no test module imports another."""

from __future__ import annotations

from typing import Any

import numpy as np

from sealeval.captured import Run, make_run
from support.refusals import CANARY


def _run(outcomes: list[bool], artifact: str, hard_every: int = 3) -> Run:
    return make_run(
        [
            {
                "id": f"case-{index:04d}",
                "input": f"{CANARY} question {index}",
                "expected": "yes",
                "output": "yes" if right else "no",
                "metadata": {"level": "hard" if index % hard_every == 0 else "easy"},
            }
            for index, right in enumerate(outcomes)
        ],
        source={"name": "ext", "version": "1"},
        run_id="ext",
        artifact_digest=artifact,
    )


def _policy(maximum_regression: float = 0.05, width: float = 0.3) -> dict[str, Any]:
    metric = {
        "name": "exact",
        "kind": "exact_match",
        "configuration": {},
        "direction": "higher",
        "unit": "score",
        "aggregation": "mean",
        "minimum_count": 1,
        "maximum_regression": maximum_regression,
        "maximum_interval_width": width,
    }
    return {
        "format": "invarlock/comparison-policy-v1",
        "metrics": [metric],
        "slices": [{"name": "hard", "where": {"level": "hard"}}],
    }


def _runs(pairs: int = 90, seed: int = 4) -> tuple[Run, Run]:
    rng = np.random.default_rng(seed)
    baseline = (rng.uniform(size=pairs) < 0.8).tolist()
    subject = [(not right) if rng.uniform() < 0.15 else right for right in baseline]
    return _run(baseline, "sha256:" + "1" * 64), _run(subject, "sha256:" + "2" * 64)
