"""The pre-registered case inventory rule shared by the recovery and JSON source adapters."""

from __future__ import annotations

from sealeval.canonical import is_digest
from sealeval.gates.adapters.errors import AgentReleaseAdapterError

__all__ = ["case_inventory"]


def case_inventory(digests: object) -> frozenset[str]:
    """Apply the inventory rules: a non-empty list/tuple of unique case digests.

    Raises:
        AgentReleaseAdapterError: ``missing_inventory`` (not a non-empty
            list/tuple), ``invalid_case_digest`` (an item is not a digest) or
            ``duplicate_case`` (an item repeats), checked in that order.
    """
    if not isinstance(digests, list | tuple) or not digests:
        raise AgentReleaseAdapterError("missing_inventory")
    if not all(is_digest(item) for item in digests):
        raise AgentReleaseAdapterError("invalid_case_digest")
    unique = frozenset(digests)
    if len(unique) != len(digests):
        raise AgentReleaseAdapterError("duplicate_case")
    return unique
