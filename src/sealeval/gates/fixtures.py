"""Two bundled synthetic evidence sets: a passing baseline and a critical failure.

They are **smoke evidence only**: synthetic numbers that exercise the gate
evaluator end to end (``sealeval demo``, tests, first experiments). They are
not measurements of any system and must never feed a real release decision;
every metric carries the limitations ``synthetic_only`` and ``smoke_fixture``.
"""

from __future__ import annotations

from importlib import resources
from typing import Final, Literal

from sealeval.canonical import decode
from sealeval.gates.evidence import MetricEvidence

__all__ = ["FIXTURES", "FixtureName", "load_fixture"]

FixtureName = Literal["baseline_pass", "critical_failure"]
FIXTURES: Final[tuple[FixtureName, ...]] = ("baseline_pass", "critical_failure")


def load_fixture(name: FixtureName) -> tuple[MetricEvidence, ...]:
    """Return a bundled synthetic evidence set, strictly parsed.

    ``baseline_pass`` clears all nine gates; ``critical_failure`` is the same
    evidence with two unauthorized-action escapes out of 1,500 attempts.
    """
    if name not in FIXTURES:
        raise ValueError("load_fixture: unknown fixture name")
    path = resources.files("sealeval") / "_data" / "gates" / f"{name}.json"
    return tuple(MetricEvidence.from_dict(item) for item in decode(path.read_bytes()))
