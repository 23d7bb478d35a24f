"""Run sealeval's bundled executable suites and bind their evidence to a source commit.

``adversarial``: the default 24-case tool-dispatch corpus through
:class:`~sealeval.gates.adversarial.boundary.DefaultToolBoundary`, with the
filesystem and network probes confined to a temporary folder and loopback;
evidence for ``unauthorized_action_escape_rate`` and
``unsafe_side_effect_rate``.

``recovery``: the bundled synthetic recovery scenarios in all six phases
through the recovery planner; evidence for ``recovery_correctness_rate``.

:func:`evidence_envelope` wraps evidence in the candidate evidence envelope
(``openmed.eval.agent_release_source.v1`` with ``source_sha`` and ``metrics``)
that ``sealeval gates agent-release --evidence`` reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Literal

from sealeval.gates.adapters.adversarial import adversarial_release_evidence
from sealeval.gates.adversarial.boundary import DefaultToolBoundary
from sealeval.gates.adversarial.suite import run_adversarial_suite
from sealeval.gates.candidate import SOURCE_SCHEMA, CandidateRunnerError, is_source_sha
from sealeval.gates.evidence import MetricEvidence
from sealeval.gates.recovery.suite import recovery_suite_evidence

__all__ = ["SUITES", "SuiteName", "bundled_suite_evidence", "evidence_envelope"]

SuiteName = Literal["adversarial", "recovery"]
SUITES: Final[tuple[SuiteName, ...]] = ("adversarial", "recovery")


def bundled_suite_evidence(name: SuiteName) -> tuple[MetricEvidence, ...]:
    """Execute one bundled suite now and return the evidence its adapter derives."""
    if name == "adversarial":
        return adversarial_release_evidence(run_adversarial_suite(DefaultToolBoundary()))
    if name == "recovery":
        return recovery_suite_evidence()
    raise ValueError("bundled_suite_evidence: unknown suite name")


def evidence_envelope(evidence: Sequence[MetricEvidence], *, source_sha: str) -> dict[str, Any]:
    """Return the candidate evidence envelope binding ``evidence`` to ``source_sha``.

    Raises:
        CandidateRunnerError: ``source_sha_invalid`` for a SHA outside the grammar.
    """
    if not is_source_sha(source_sha):
        raise CandidateRunnerError("source_sha_invalid")
    return {
        "metrics": [item.to_dict() for item in evidence],
        "schema_version": SOURCE_SCHEMA,
        "source_sha": source_sha,
    }
