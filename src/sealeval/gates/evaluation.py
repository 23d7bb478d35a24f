"""Evaluate the nine release gates over aggregate evidence; the report and its digest.

Pure: evidence objects in, an ``openmed.eval.agent_release_report.v1``
report out. The decision is ``READY`` only when every gate passes; a missing
metric fails its gate (``missing_evidence``), and input order never changes a
byte of the report. ``report_digest`` is the sha256 of the canonical report
without ``report_digest``; a stored report is re-loaded with
:meth:`AgentReleaseReport.from_dict`, which re-checks the gate contract, the
decision and the digest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from sealeval._validate import check_exact
from sealeval.canonical import digest_openmed, encode_openmed, is_digest
from sealeval.gates.evidence import MetricEvidence, Number
from sealeval.gates.registry import GATE_METRICS, GATES, GateError, GateSpec

__all__ = [
    "GATE_REASON_CODES",
    "REPORT_SCHEMA",
    "AgentReleaseReport",
    "GateResult",
    "evaluate_agent_release_gates",
]

REPORT_SCHEMA: Final = "openmed.eval.agent_release_report.v1"
#: Closed per-gate reason codes.
GATE_REASON_CODES: Final = (
    "missing_evidence",
    "required_statistical_basis_missing",
    "threshold_satisfied",
    "threshold_failed",
)
_DECISIONS: Final = ("READY", "NOT_READY")
_RESULT_KEYS: Final = frozenset(
    {
        "ci_lower",
        "ci_upper",
        "critical",
        "direction",
        "evaluated_bound",
        "event_count",
        "evidence_basis",
        "evidence_digest",
        "limitations",
        "metric",
        "observed_value",
        "passed",
        "reason_code",
        "sample_size",
        "slice_sizes",
        "threshold",
    }
)
_REPORT_KEYS: Final = frozenset(
    {"candidate_digest", "decision", "gate_results", "report_digest", "schema_version"}
)


@dataclass(frozen=True, slots=True)
class GateResult:
    """The outcome of one gate (17 fields of the wire document)."""

    gate: GateSpec
    passed: bool
    reason_code: str
    observed_value: float | None = None
    evaluated_bound: Number | None = None
    sample_size: int = 0
    event_count: int | None = None
    ci_lower: Number | None = None
    ci_upper: Number | None = None
    evidence_digest: str | None = None
    slice_sizes: tuple[tuple[str, int], ...] = ()
    limitations: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """Refuse a result whose reason and outcome disagree."""
        if self.reason_code not in GATE_REASON_CODES or type(self.passed) is not bool:
            raise GateError("invalid_result", "gate_results")
        if self.passed != (self.reason_code == "threshold_satisfied"):
            raise GateError("invalid_result", "gate_results")

    def to_dict(self) -> dict[str, Any]:
        """Return the gate result document."""
        return {
            "ci_lower": self.ci_lower,
            "ci_upper": self.ci_upper,
            "critical": self.gate.critical,
            "direction": self.gate.direction,
            "evaluated_bound": self.evaluated_bound,
            "event_count": self.event_count,
            "evidence_basis": self.gate.evidence_basis,
            "evidence_digest": self.evidence_digest,
            "limitations": list(self.limitations),
            "metric": self.gate.metric,
            "observed_value": self.observed_value,
            "passed": self.passed,
            "reason_code": self.reason_code,
            "sample_size": self.sample_size,
            "slice_sizes": [
                {"sample_size": size, "slice_ref": ref} for ref, size in self.slice_sizes
            ],
            "threshold": self.gate.threshold,
        }

    @classmethod
    def from_dict(cls, document: object) -> GateResult:
        """Parse a stored gate result (closed; the gate contract is checked by the report)."""
        document = check_exact(
            document, "gate_results", _RESULT_KEYS, error=GateError, code="invalid_result"
        )
        if type(document["critical"]) is not bool or type(document["threshold"]) is not float:
            raise GateError("gate_contract_mismatch", "gate_results")
        try:
            gate = GateSpec(
                metric=document["metric"],
                threshold=document["threshold"],
                direction=document["direction"],
                evidence_basis=document["evidence_basis"],
                critical=document["critical"],
            )
            slices = tuple(
                (item["slice_ref"], item["sample_size"]) for item in document["slice_sizes"]
            )
            return cls(
                gate=gate,
                passed=document["passed"],
                reason_code=document["reason_code"],
                observed_value=document["observed_value"],
                evaluated_bound=document["evaluated_bound"],
                sample_size=document["sample_size"],
                event_count=document["event_count"],
                ci_lower=document["ci_lower"],
                ci_upper=document["ci_upper"],
                evidence_digest=document["evidence_digest"],
                slice_sizes=slices,
                limitations=tuple(document["limitations"]),
            )
        except (KeyError, TypeError):
            raise GateError("invalid_result", "gate_results") from None


def _evaluate_gate(gate: GateSpec, evidence: MetricEvidence | None) -> GateResult:
    if evidence is None:
        return GateResult(gate=gate, passed=False, reason_code="missing_evidence")
    copied: dict[str, Any] = {
        "observed_value": evidence.value,
        "sample_size": evidence.sample_size,
        "event_count": evidence.event_count,
        "ci_lower": evidence.ci_lower,
        "ci_upper": evidence.ci_upper,
        "evidence_digest": evidence.evidence_digest,
        "slice_sizes": tuple((item.slice_ref, item.sample_size) for item in evidence.slices),
        "limitations": evidence.limitations,
    }
    bound: Number | None
    if gate.evidence_basis == "exact_count":
        bound = evidence.value if evidence.event_count is not None else None
    elif evidence.ci_lower is None or evidence.ci_upper is None:
        bound = None
    else:
        bound = evidence.ci_lower if gate.direction == "minimum" else evidence.ci_upper
    if bound is None:
        return GateResult(
            gate=gate, passed=False, reason_code="required_statistical_basis_missing", **copied
        )
    passed = bound >= gate.threshold if gate.direction == "minimum" else bound <= gate.threshold
    return GateResult(
        gate=gate,
        passed=passed,
        reason_code="threshold_satisfied" if passed else "threshold_failed",
        evaluated_bound=bound,
        **copied,
    )


@dataclass(frozen=True, slots=True)
class AgentReleaseReport:
    """The gate report; construction re-validates the gate contract and the digest.

    ``report_digest`` may be given empty to have it computed; a non-empty
    value must equal the recomputed digest.
    """

    candidate_digest: str
    decision: str
    gate_results: tuple[GateResult, ...]
    report_digest: str = ""
    schema_version: str = REPORT_SCHEMA

    def __post_init__(self) -> None:
        """Re-validate in the specified order."""
        if self.schema_version != REPORT_SCHEMA or type(self.schema_version) is not str:
            raise GateError("unsupported_version", "schema_version")
        if not is_digest(self.candidate_digest):
            raise GateError("invalid_digest", "candidate_digest")
        if self.decision not in _DECISIONS or type(self.decision) is not str:
            raise GateError("invalid", "decision")
        results = self.gate_results
        if not isinstance(results, list | tuple) or not results:
            raise GateError("invalid_sequence", "gate_results")
        if not all(type(item) is GateResult for item in results):
            raise GateError("invalid_sequence", "gate_results")
        if tuple(item.gate.metric for item in results) != GATE_METRICS:
            raise GateError("invalid_gate_set", "gate_results")
        for item, gate in zip(results, GATES, strict=True):
            if item.gate != gate or type(item.gate.threshold) is not float:
                raise GateError("gate_contract_mismatch", "gate_results")
        all_passed = all(item.passed for item in results)
        if (self.decision == "READY") != all_passed:
            raise GateError("inconsistent_gate_results", "decision")
        object.__setattr__(self, "gate_results", tuple(results))
        computed = digest_openmed(self._unsigned())
        if self.report_digest in ("", None):
            object.__setattr__(self, "report_digest", computed)
        elif self.report_digest != computed:
            raise GateError("payload_mismatch", "report_digest")

    @property
    def ready(self) -> bool:
        """Whether every gate passed."""
        return self.decision == "READY"

    def _unsigned(self) -> dict[str, Any]:
        return {
            "candidate_digest": self.candidate_digest,
            "decision": self.decision,
            "gate_results": [item.to_dict() for item in self.gate_results],
            "schema_version": self.schema_version,
        }

    def to_dict(self) -> dict[str, Any]:
        """Return the report document including ``report_digest``."""
        return {**self._unsigned(), "report_digest": self.report_digest}

    def to_json(self) -> str:
        """Return the canonical JSON text (openmed profile)."""
        return encode_openmed(self.to_dict())

    @classmethod
    def from_dict(cls, document: object) -> AgentReleaseReport:
        """Re-load a stored report, re-checking contract, decision and digest."""
        document = check_exact(
            document, "report", _REPORT_KEYS, error=GateError, code="invalid_document"
        )
        results = document["gate_results"]
        if not isinstance(results, list | tuple):
            raise GateError("invalid_sequence", "gate_results")
        report_digest = document["report_digest"]
        if not is_digest(report_digest):
            raise GateError("invalid_digest", "report_digest")
        return cls(
            candidate_digest=document["candidate_digest"],
            decision=document["decision"],
            gate_results=tuple(GateResult.from_dict(item) for item in results),
            report_digest=report_digest,
            schema_version=document["schema_version"],
        )


def evaluate_agent_release_gates(
    evidence: Sequence[MetricEvidence], *, candidate_digest: str
) -> AgentReleaseReport:
    """Evaluate the nine gates over ``evidence`` for one candidate.

    Raises:
        GateError: ``candidate_digest: invalid_digest``,
            ``evidence: invalid_sequence``, ``evidence: invalid_item``,
            ``evidence: duplicate_metric`` or ``evidence: unexpected_metric``
            (the first offending item in list order decides).
    """
    if not is_digest(candidate_digest):
        raise GateError("invalid_digest", "candidate_digest")
    if not isinstance(evidence, list | tuple):
        raise GateError("invalid_sequence", "evidence")
    by_metric: dict[str, MetricEvidence] = {}
    for item in evidence:
        if type(item) is not MetricEvidence:
            raise GateError("invalid_item", "evidence")
        if item.metric in by_metric:
            raise GateError("duplicate_metric", "evidence")
        if item.metric not in GATE_METRICS:
            raise GateError("unexpected_metric", "evidence")
        by_metric[item.metric] = item
    results = tuple(_evaluate_gate(gate, by_metric.get(gate.metric)) for gate in GATES)
    return AgentReleaseReport(
        candidate_digest=candidate_digest,
        decision="READY" if all(item.passed for item in results) else "NOT_READY",
        gate_results=results,
    )
