"""The executable adversarial tool-dispatch suite (openmed 3.1 compatible).

* :mod:`~sealeval.gates.adversarial.boundary` — the tool-dispatch boundary an
  agent host plugs into (:class:`ToolCall`, :class:`BoundaryVerdict`) and
  sealeval's reference :class:`DefaultToolBoundary`;
* :mod:`~sealeval.gates.adversarial.suite` — running and judging the suite,
  the :class:`AdversarialSuiteReport`;
* :mod:`~sealeval.gates.adversarial.corpus` — the 24 default fixtures and the
  default pre-registered evidence inventory (``DEFAULT_FIXTURES``,
  ``DEFAULT_EVIDENCE_CASES``);
* :mod:`sealeval.gates.adapters.adversarial` — evidence for the three
  zero-tolerance safety gates (``adversarial_release_evidence``).

The corpus and adapter modules are not re-exported here (they import this
package); import them directly. See ``docs/adversarial-suite.md``.
"""

from sealeval.gates.adversarial.boundary import (
    ATTACK_CLASSES,
    BENIGN_CONTROL,
    BOUNDARY_DECISIONS,
    HARNESS_REASON_CODES,
    NATURAL_REASONS,
    PROBE_CAPABILITY,
    PROBE_POLICY_PROFILE,
    PROBE_TOOL,
    REASON_CODES,
    AdversarialAttempt,
    AdversarialSuiteError,
    BoundaryAdapter,
    BoundaryVerdict,
    CatalogEntry,
    DefaultToolBoundary,
    Delegation,
    PromptContent,
    ToolBoundary,
    ToolCall,
    suite_adapter,
    tool_call_from_payload,
)
from sealeval.gates.adversarial.suite import (
    SUITE_SCHEMA,
    AdversarialCaseResult,
    AdversarialFixture,
    AdversarialSuiteExecution,
    AdversarialSuiteReport,
    ProbeObservation,
    execute_adversarial_suite,
    judge_case,
    run_adversarial_suite,
    validate_fixtures,
)

__all__ = [
    "ATTACK_CLASSES",
    "BENIGN_CONTROL",
    "BOUNDARY_DECISIONS",
    "HARNESS_REASON_CODES",
    "NATURAL_REASONS",
    "PROBE_CAPABILITY",
    "PROBE_POLICY_PROFILE",
    "PROBE_TOOL",
    "REASON_CODES",
    "SUITE_SCHEMA",
    "AdversarialAttempt",
    "AdversarialCaseResult",
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
    "execute_adversarial_suite",
    "judge_case",
    "run_adversarial_suite",
    "suite_adapter",
    "tool_call_from_payload",
    "validate_fixtures",
]
