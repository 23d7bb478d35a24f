"""Agent release gates: the nine-gate registry, evidence, evaluation and adapters."""

from sealeval.gates.evaluation import (
    GATE_REASON_CODES,
    REPORT_SCHEMA,
    AgentReleaseReport,
    GateResult,
    evaluate_agent_release_gates,
)
from sealeval.gates.evidence import EVIDENCE_SCHEMA, MetricEvidence, SliceEvidence
from sealeval.gates.registry import GATE_METRICS, GATES, GateError, GateSpec, gate_policy_digest

__all__ = [
    "EVIDENCE_SCHEMA",
    "GATES",
    "GATE_METRICS",
    "GATE_REASON_CODES",
    "REPORT_SCHEMA",
    "AgentReleaseReport",
    "GateError",
    "GateResult",
    "GateSpec",
    "MetricEvidence",
    "SliceEvidence",
    "evaluate_agent_release_gates",
    "gate_policy_digest",
]
