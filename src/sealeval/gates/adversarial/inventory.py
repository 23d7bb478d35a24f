"""The pre-registered adversarial evidence inventory (21-adapters.md §2.4).

The three safety metrics and one case's expectation
(:class:`AdversarialEvidenceCase`): case id, attack class, expected reason and
the metrics the case counts toward. The default corpus derives its inventory
from these (:mod:`~sealeval.gates.adversarial.corpus`); the evidence adapter
(:mod:`~sealeval.gates.adversarial.evidence`) checks a run against one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from sealeval.gates.adapters.errors import AgentReleaseAdapterError
from sealeval.gates.adversarial.vocabulary import (
    ATTACK_CLASSES,
    BENIGN_CONTROL,
    HARNESS_REASON_CODES,
    REASON_CODES,
    is_adversarial_case_id,
)

__all__ = [
    "APPROVAL_METRIC",
    "ESCAPE_METRIC",
    "SAFETY_METRICS",
    "UNSAFE_METRIC",
    "AdversarialEvidenceCase",
]

ESCAPE_METRIC: Final = "unauthorized_action_escape_rate"
APPROVAL_METRIC: Final = "approval_bypass_rate"
UNSAFE_METRIC: Final = "unsafe_side_effect_rate"
#: The three safety metrics, in emission order.
SAFETY_METRICS: Final[tuple[str, ...]] = (ESCAPE_METRIC, APPROVAL_METRIC, UNSAFE_METRIC)


def refuse(code: str) -> AgentReleaseAdapterError:
    """Return the adapter error for an evidence-inventory refusal ``code``."""
    return AgentReleaseAdapterError(code)


@dataclass(frozen=True, slots=True)
class AdversarialEvidenceCase:
    """One pre-registered case of the evidence inventory.

    Checks, in order (bare codes): case id grammar (``invalid_case_id``);
    class and reason from the vocabularies (``invalid_expectation``); reason
    not ``boundary_error`` / ``invalid_verdict`` (``invalid_expectation``);
    ``metrics`` a tuple of distinct safety metrics (``invalid_metrics``);
    benign ⇔ reason ``allowed`` (``invalid_expectation``); a benign case with
    a metric, or an attack without the escape metric (``invalid_metrics``).

    ``metrics`` keeps the given order (equality, and so the
    ``default_corpus`` test, is order-sensitive); :meth:`to_dict` sorts it.
    """

    case_id: str
    attack_class: str
    expected_reason: str
    metrics: tuple[str, ...]

    def __post_init__(self) -> None:
        """Validate in the specified order."""
        if not is_adversarial_case_id(self.case_id):
            raise refuse("invalid_case_id")
        if (
            type(self.attack_class) is not str
            or self.attack_class not in ATTACK_CLASSES
            or type(self.expected_reason) is not str
            or self.expected_reason not in REASON_CODES
        ):
            raise refuse("invalid_expectation")
        if self.expected_reason in HARNESS_REASON_CODES:
            raise refuse("invalid_expectation")
        metrics = self.metrics
        if (
            type(metrics) is not tuple
            or not all(type(item) is str and item in SAFETY_METRICS for item in metrics)
            or len(set(metrics)) != len(metrics)
        ):
            raise refuse("invalid_metrics")
        benign = self.attack_class == BENIGN_CONTROL
        if benign != (self.expected_reason == "allowed"):
            raise refuse("invalid_expectation")
        if (benign and metrics) or (not benign and ESCAPE_METRIC not in metrics):
            raise refuse("invalid_metrics")

    def to_dict(self) -> dict[str, Any]:
        """Return the case document (``metrics`` sorted)."""
        return {
            "attack_class": self.attack_class,
            "case_id": self.case_id,
            "expected_reason": self.expected_reason,
            "metrics": sorted(self.metrics),
        }
