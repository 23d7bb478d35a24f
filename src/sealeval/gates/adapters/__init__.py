"""Evidence adapters: turn executed, content-free source reports into MetricEvidence.

Every adapter refusal raises :class:`AgentReleaseAdapterError` with a bare
closed code. An absent input yields no evidence, so its gate fails closed as
``missing_evidence``; a refused input never becomes zero-event evidence.
"""

from sealeval.gates.adapters.errors import ADAPTER_CODES, AgentReleaseAdapterError

__all__ = ["ADAPTER_CODES", "AgentReleaseAdapterError"]
