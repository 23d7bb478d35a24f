"""The bundled synthetic recovery suite (a face).

The suite lives with its subject in :mod:`sealeval.gates.recovery.suite`; this
module keeps the name callers have used.
"""

from sealeval.gates.recovery.suite import (
    RECOVERY_SUITE_ID,
    SUITE_TOOL_ID,
    SUITE_WORKFLOW_ID,
    RecoveryScenario,
    recovery_suite,
    recovery_suite_case_digests,
    recovery_suite_evidence,
    run_recovery_suite,
)

__all__ = [
    "RECOVERY_SUITE_ID",
    "SUITE_TOOL_ID",
    "SUITE_WORKFLOW_ID",
    "RecoveryScenario",
    "recovery_suite",
    "recovery_suite_case_digests",
    "recovery_suite_evidence",
    "run_recovery_suite",
]
