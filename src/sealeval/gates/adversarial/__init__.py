"""The executable adversarial tool-dispatch suite (openmed 3.1 compatible).

This package is the face; its homes, from the bottom of the import graph up:

* :mod:`~sealeval.gates.adversarial.vocabulary` — the closed vocabulary
  (attack classes, reason codes, identifier grammars, frozen JSON values) and
  :class:`AdversarialSuiteError`;
* :mod:`~sealeval.gates.adversarial.calls` — what a boundary decides about
  (:class:`ToolCall`, :class:`BoundaryVerdict`, :class:`AdversarialAttempt`,
  :func:`tool_call_from_payload`);
* :mod:`~sealeval.gates.adversarial.detection` — the reference boundary's
  content-inspection and argument rules;
* :mod:`~sealeval.gates.adversarial.boundary` — sealeval's reference
  :class:`DefaultToolBoundary` and :func:`suite_adapter`;
* :mod:`~sealeval.gates.adversarial.fixture` — fixtures, the fixture-set check
  and the per-case judgement;
* :mod:`~sealeval.gates.adversarial.report` — the suite report;
* :mod:`~sealeval.gates.adversarial.inventory` — the pre-registered evidence
  inventory (:class:`AdversarialEvidenceCase`, the safety metrics);
* :mod:`~sealeval.gates.adversarial.corpus` — the 24 default fixtures and the
  default inventory (``DEFAULT_FIXTURES``, ``DEFAULT_EVIDENCE_CASES``);
* :mod:`~sealeval.gates.adversarial.suite` — running the suite with its
  mutating probes;
* :mod:`~sealeval.gates.adversarial.evidence` — evidence for the three
  zero-tolerance safety gates (``adversarial_release_evidence``; also reachable
  as :mod:`sealeval.gates.adapters.adversarial`).

See ``docs/adversarial-suite.md``.
"""

from sealeval.gates.adversarial.boundary import DefaultToolBoundary, suite_adapter
from sealeval.gates.adversarial.calls import (
    PROBE_CAPABILITY,
    PROBE_POLICY_PROFILE,
    PROBE_TOOL,
    AdversarialAttempt,
    BoundaryAdapter,
    BoundaryVerdict,
    CatalogEntry,
    Delegation,
    PromptContent,
    ToolBoundary,
    ToolCall,
    tool_call_from_payload,
)
from sealeval.gates.adversarial.corpus import DEFAULT_EVIDENCE_CASES, DEFAULT_FIXTURES
from sealeval.gates.adversarial.evidence import adversarial_release_evidence
from sealeval.gates.adversarial.fixture import AdversarialFixture, judge_case, validate_fixtures
from sealeval.gates.adversarial.inventory import SAFETY_METRICS, AdversarialEvidenceCase
from sealeval.gates.adversarial.report import (
    SUITE_SCHEMA,
    AdversarialCaseResult,
    AdversarialSuiteReport,
)
from sealeval.gates.adversarial.suite import (
    AdversarialSuiteExecution,
    ProbeObservation,
    execute_adversarial_suite,
    run_adversarial_suite,
)
from sealeval.gates.adversarial.vocabulary import (
    ATTACK_CLASSES,
    BENIGN_CONTROL,
    BOUNDARY_DECISIONS,
    HARNESS_REASON_CODES,
    NATURAL_REASONS,
    REASON_CODES,
    AdversarialSuiteError,
)

__all__ = [
    "ATTACK_CLASSES",
    "BENIGN_CONTROL",
    "BOUNDARY_DECISIONS",
    "DEFAULT_EVIDENCE_CASES",
    "DEFAULT_FIXTURES",
    "HARNESS_REASON_CODES",
    "NATURAL_REASONS",
    "PROBE_CAPABILITY",
    "PROBE_POLICY_PROFILE",
    "PROBE_TOOL",
    "REASON_CODES",
    "SAFETY_METRICS",
    "SUITE_SCHEMA",
    "AdversarialAttempt",
    "AdversarialCaseResult",
    "AdversarialEvidenceCase",
    "AdversarialFixture",
    "AdversarialSuiteError",
    "AdversarialSuiteExecution",
    "AdversarialSuiteReport",
    "BoundaryAdapter",
    "BoundaryVerdict",
    "CatalogEntry",
    "DefaultToolBoundary",
    "Delegation",
    "ProbeObservation",
    "PromptContent",
    "ToolBoundary",
    "ToolCall",
    "adversarial_release_evidence",
    "execute_adversarial_suite",
    "judge_case",
    "run_adversarial_suite",
    "suite_adapter",
    "tool_call_from_payload",
    "validate_fixtures",
]
