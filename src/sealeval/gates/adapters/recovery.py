"""Release evidence from executed recovery cases (a face).

The adapter lives with its subject in :mod:`sealeval.gates.recovery.evidence`;
this module keeps the adapters package's name for it.
"""

from sealeval.gates.recovery.evidence import (
    RECOVERY_METRIC,
    RECOVERY_SOURCE_KIND,
    RECOVERY_SOURCE_SCHEMA,
    RecoveryEvidenceCase,
    recovery_release_evidence,
    recovery_source_envelope,
)

__all__ = [
    "RECOVERY_METRIC",
    "RECOVERY_SOURCE_KIND",
    "RECOVERY_SOURCE_SCHEMA",
    "RecoveryEvidenceCase",
    "recovery_release_evidence",
    "recovery_source_envelope",
]
