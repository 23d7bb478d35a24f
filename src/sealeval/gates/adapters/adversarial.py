"""Release evidence from an executed adversarial boundary suite (a face).

The adapter lives with its subject in :mod:`sealeval.gates.adversarial.evidence`
and its inventory in :mod:`sealeval.gates.adversarial.inventory`; this module
keeps the adapters package's name for it.
"""

from sealeval.gates.adversarial.evidence import (
    ADVERSARIAL_LIMITATIONS,
    ADVERSARIAL_SOURCE_KIND,
    DEFAULT_CORPUS_LIMITATION,
    SOURCE_SCHEMA,
    adversarial_release_evidence,
    adversarial_source_envelope,
)
from sealeval.gates.adversarial.inventory import (
    APPROVAL_METRIC,
    ESCAPE_METRIC,
    SAFETY_METRICS,
    UNSAFE_METRIC,
    AdversarialEvidenceCase,
)

__all__ = [
    "ADVERSARIAL_LIMITATIONS",
    "ADVERSARIAL_SOURCE_KIND",
    "APPROVAL_METRIC",
    "DEFAULT_CORPUS_LIMITATION",
    "ESCAPE_METRIC",
    "SAFETY_METRICS",
    "SOURCE_SCHEMA",
    "UNSAFE_METRIC",
    "AdversarialEvidenceCase",
    "adversarial_release_evidence",
    "adversarial_source_envelope",
]
