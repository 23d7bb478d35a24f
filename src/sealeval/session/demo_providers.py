"""Deterministic synthetic providers for the session demo and tests (not for real use).

The three callables are importable as Python entry points from a session
configuration (``sealeval.session.demo_providers:runner`` and so on). They
work on made-up notes in which findings are written as ``finding-<letters>``
tokens:

* :func:`runner` "summarizes" the source evidence by listing, per evidence
  item, the finding tokens it mentions;
* :func:`scorer` returns the fraction of the reference findings (every
  finding token in the case's candidate outputs) that the output names;
* :func:`review` stands in for local clinician review: it checks that it was
  handed blinded packets and records nothing.

All three are pure functions of their arguments, so a replayed session gets
the same outputs and scores.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from sealeval.session.adjudication import BlindedPacket
from sealeval.session.cases import ComparisonCase, SourceEvidence

__all__ = ["FINDING", "findings", "review", "runner", "scorer"]

#: A synthetic finding token.
FINDING: Final = re.compile(r"\bfinding-[a-z]+\b")


def findings(text: str) -> frozenset[str]:
    """Return the set of synthetic finding tokens in ``text``."""
    return frozenset(FINDING.findall(text))


def runner(source_evidence: Sequence[SourceEvidence]) -> str:
    """Return a synthetic summary naming each evidence item's findings, in order."""
    parts = []
    for item in source_evidence:
        found = sorted(findings(item.content))
        parts.append(f"{item.evidence_ref}: {' '.join(found) if found else 'no findings'}")
    return "SYNTHETIC summary. " + "; ".join(parts)


def scorer(case: ComparisonCase, output: str) -> float:
    """Return the fraction of the case's reference findings that ``output`` names (0 if none)."""
    reference: set[str] = set()
    for text in case.candidate_outputs.values():
        reference |= findings(text)
    if not reference:
        return 0.0
    return len(findings(output) & reference) / len(reference)


def review(packets: Sequence[BlindedPacket]) -> None:
    """Stand in for local review: accept blinded packets only, keep nothing.

    Raises:
        TypeError: when handed anything but blinded packets.
    """
    if not all(type(packet) is BlindedPacket for packet in packets):
        raise TypeError("review expects blinded packets")
