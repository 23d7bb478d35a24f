"""The common "count evidence" rule shared by the counting adapters (21-adapters.md §1).

Given a metric, an ordered list of ``(slice_ref, event)`` observations, the
source envelope the observations were derived from and a limitations tuple,
:func:`count_evidence` builds the one :class:`~sealeval.gates.MetricEvidence`
the rule defines:

* ``sample_size`` = number of observations, ``event_count`` = number of true
  events, ``value`` = ``event_count / sample_size`` (float division);
* one :class:`~sealeval.gates.SliceEvidence` per distinct ``slice_ref``, in
  ascending ``slice_ref`` order, with its own size, events and value;
* ``evidence_digest`` = sha256 of the openmed canonical JSON of the envelope;
* no interval bounds; limitations exactly as given (order matters).
"""

from __future__ import annotations

from collections.abc import Sequence

from sealeval.canonical import digest_openmed
from sealeval.gates.evidence import MetricEvidence, SliceEvidence
from sealeval.gates.registry import GateError

__all__ = ["count_evidence"]


def count_evidence(
    metric: str,
    observations: Sequence[tuple[str, bool]],
    *,
    envelope: object,
    limitations: Sequence[str],
) -> MetricEvidence:
    """Return the count evidence for ``metric`` over ``observations``.

    Args:
        metric: the gate metric the observations count (gate reference grammar).
        observations: ``(slice_ref, event)`` pairs in source order; at least one.
        envelope: the source document the observations were derived from; its
            openmed canonical JSON is hashed into ``evidence_digest``.
        limitations: limitation codes, kept in the given order.

    Returns:
        The MetricEvidence of the counting rule.

    Raises:
        GateError: ``sample_size: invalid_count`` for no observations,
            ``observations: invalid_item`` for an item that is not a
            ``(str, bool)`` pair, or any MetricEvidence/SliceEvidence refusal.
        CanonicalError: if the envelope cannot be canonically encoded.
    """
    if not observations:
        raise GateError("invalid_count", "sample_size")
    sizes: dict[str, int] = {}
    events: dict[str, int] = {}
    for item in observations:
        if (
            type(item) is not tuple
            or len(item) != 2
            or type(item[0]) is not str
            or type(item[1]) is not bool
        ):
            raise GateError("invalid_item", "observations")
        slice_ref, event = item
        sizes[slice_ref] = sizes.get(slice_ref, 0) + 1
        events[slice_ref] = events.get(slice_ref, 0) + int(event)
    slices = tuple(
        SliceEvidence(
            slice_ref=slice_ref,
            value=events[slice_ref] / sizes[slice_ref],
            sample_size=sizes[slice_ref],
            event_count=events[slice_ref],
        )
        for slice_ref in sorted(sizes)
    )
    sample_size = len(observations)
    event_count = sum(events.values())
    return MetricEvidence(
        metric=metric,
        value=event_count / sample_size,
        sample_size=sample_size,
        event_count=event_count,
        evidence_digest=digest_openmed(envelope),
        slices=slices,
        limitations=tuple(limitations),
    )
