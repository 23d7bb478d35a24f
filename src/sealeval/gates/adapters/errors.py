"""The one error type of every release-evidence adapter (message: the bare code)."""

from __future__ import annotations

from typing import Final

from sealeval.gates.registry import GateError

__all__ = ["ADAPTER_CODES", "AgentReleaseAdapterError"]

#: The 24 codes of the openmed adapters (21-adapters.md §5), plus the two that
#: only sealeval's own ``sealeval.gate_source.v1`` kinds raise
#: (``insufficient_sample``, ``invalid_latency``; docs/gate-sources.md).
ADAPTER_CODES: Final = frozenset(
    {
        "checkpoint_mismatch",
        "duplicate_case",
        "duplicate_field",
        "duplicate_run",
        "failed_run",
        "incomplete_run",
        "insufficient_sample",
        "invalid_case_digest",
        "invalid_case_id",
        "invalid_cases",
        "invalid_expectation",
        "invalid_fields",
        "invalid_interval",
        "invalid_inventory",
        "invalid_json",
        "invalid_kind",
        "invalid_latency",
        "invalid_metrics",
        "invalid_outcome",
        "invalid_provenance",
        "invalid_recovery_case",
        "invalid_slice",
        "invalid_statistical_method",
        "missing_inventory",
        "unexpected_statistics",
        "unsupported_source",
    }
)


class AgentReleaseAdapterError(GateError):
    """Refusal of an evidence adapter; ``str(error)`` is the bare code."""

    module = "sealeval.gates.adapters"
    field_in_message = False
    codes = ADAPTER_CODES
