"""Evidence adapters: turn executed, content-free source reports into MetricEvidence.

Every adapter refusal raises :class:`AgentReleaseAdapterError` with a bare
closed code. An absent input yields no evidence, so its gate fails closed as
``missing_evidence``; a refused input never becomes zero-event evidence.
"""

from sealeval.gates.adapters.counting import count_evidence
from sealeval.gates.adapters.errors import ADAPTER_CODES, AgentReleaseAdapterError
from sealeval.gates.adapters.json_source import (
    SOURCE_KINDS,
    json_release_evidence,
    json_release_evidence_with_source_digest,
    release_evidence_from_source,
    release_evidence_from_source_with_source_digest,
)

__all__ = [
    "ADAPTER_CODES",
    "SOURCE_KINDS",
    "AgentReleaseAdapterError",
    "count_evidence",
    "json_release_evidence",
    "json_release_evidence_with_source_digest",
    "release_evidence_from_source",
    "release_evidence_from_source_with_source_digest",
]
