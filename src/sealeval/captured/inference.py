"""Opt-in paired inference beside the reference's intervals (sealeval, not invarlock).

Nothing here changes a reference report: these functions feed the extended
comparison (``sealeval/extended-comparison-v1``, :mod:`sealeval.captured.extended`)
and the planner (:mod:`sealeval.captured.planning`). See ``docs/statistics.md``.

* :func:`newcombe_method10_interval` — Newcombe (1998) method 10 as published:
  the correlation term is continuity-corrected only when ``ad > bc``
  (``max(ad - bc - n/2, 0)``) and used as is when ``ad < bc``. The reference's
  ``newcombe_hybrid_score_paired_v2`` also pulls a negative term towards zero,
  which narrows the interval when no case is failed by both runs.
* :func:`mcnemar_p_value` — the exact two-sided McNemar p-value of
  :mod:`sealeval.captured.intervals` (reused, not copied).
* :func:`sign_flip_p_value` — paired sign-flip permutation p-value of the mean
  difference; the signs come from a SHAKE-256 stream keyed by the scope seed
  (the bootstrap's stream discipline, with its own domain label), so the same
  inputs give the same p-value on every platform.
* :func:`adjust_p_values` — none, Holm-Bonferroni (step-down, family-wise
  error) or Benjamini-Hochberg (step-up, false discovery rate).
* :func:`flips` — right-to-wrong and wrong-to-right pairs of a binary metric
  (counts and the first K ids, ids only).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, TypeAlias

import numpy as np
import numpy.typing as npt

from sealeval.captured.intervals import (
    MASS,
    Interval,
    PairedCounts,
    Z,
    mcnemar_exact_p_value,
)
from sealeval.errors import CapturedError

__all__ = [
    "EXACT_MCNEMAR_LIMIT",
    "MCNEMAR_METHOD",
    "METHOD10",
    "MULTIPLICITY_METHODS",
    "PERMUTATION_RESAMPLES",
    "SIGN_FLIP_METHOD",
    "Flips",
    "InferenceError",
    "adjust_p_values",
    "flips",
    "mcnemar_p_value",
    "newcombe_method10_interval",
    "sign_flip_p_value",
]

#: Method name of the published interval (never the reference's name).
METHOD10: Final = "newcombe_1998_method10"
#: Method name of the sign-flip permutation p-value.
SIGN_FLIP_METHOD: Final = "paired_sign_flip_shake256_v1"
#: Method name of the exact McNemar p-value.
MCNEMAR_METHOD: Final = "mcnemar_exact_two_sided"
#: Discordant pairs up to which the McNemar p-value is computed in exact integers.
EXACT_MCNEMAR_LIMIT: Final = 20_000
#: Default number of sign-flip resamples (p-values are multiples of 1/(R+1)).
PERMUTATION_RESAMPLES: Final = 9999
#: Multiplicity procedures, in documentation order.
MULTIPLICITY_METHODS: Final = ("none", "holm", "benjamini_hochberg")

_FloatArray: TypeAlias = npt.NDArray[np.float64]
# Work per chunk of the sign-flip matrix (elements), bounding memory to ~32 MiB.
_CHUNK_ELEMENTS: Final = 1 << 22


class InferenceError(CapturedError):
    """Refusal of an opt-in inference input (fields are argument names, never values)."""

    module = "sealeval.captured.inference"
    field_in_message = True
    codes = frozenset({"invalid_counts", "invalid_values", "invalid_seed", "invalid_method"})


def _wilson(successes: int, n: int) -> tuple[float, float]:
    p = successes / n
    z2 = Z * Z
    den = 1.0 + z2 / n
    center = (p + z2 / (2.0 * n)) / den
    radius = Z * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n)) / den
    return max(0.0, center - radius), min(1.0, center + radius)


def newcombe_method10_interval(counts: PairedCounts) -> Interval:
    """Return Newcombe (1998) method 10 for the subject-minus-baseline pass rate.

    ``a``/``d``: both pass/both fail; ``b``: right->wrong; ``c``: wrong->right.
    The correlation estimate is ``max(ad - bc - n/2, 0) / sqrt(...)`` when
    ``ad > bc``, ``(ad - bc) / sqrt(...)`` when ``ad < bc`` and 0 when equal or
    when a margin is empty (Newcombe 1998, section 2, method 10).
    """
    if not isinstance(counts, PairedCounts):
        raise InferenceError("invalid_counts", "counts")
    a = counts.both_pass
    b = counts.baseline_pass_subject_fail
    c = counts.baseline_fail_subject_pass
    d = counts.both_fail
    n = counts.n
    p1 = (a + b) / n
    p2 = (a + c) / n
    l1, u1 = _wilson(a + b, n)
    l2, u2 = _wilson(a + c, n)
    product = float((a + b) * (c + d) * (a + c) * (b + d))
    cross = a * d - b * c
    if product == 0.0 or cross == 0:
        phi = 0.0
    elif cross > 0:
        phi = max(cross - n / 2.0, 0.0) / math.sqrt(product)
    else:
        phi = cross / math.sqrt(product)
    effect = p2 - p1
    down = (p2 - l2) ** 2 - 2.0 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2
    up = (u2 - p2) ** 2 - 2.0 * phi * (u2 - p2) * (p1 - l1) + (p1 - l1) ** 2
    lower = max(-1.0, effect - math.sqrt(max(0.0, down)))
    upper = min(1.0, effect + math.sqrt(max(0.0, up)))
    return Interval(lower, upper, METHOD10, MASS, 0)


def mcnemar_p_value(counts: PairedCounts, *, exact_limit: int = EXACT_MCNEMAR_LIMIT) -> float:
    """Two-sided exact McNemar p-value, ``min(1, 2 P(X <= min(b, c)))``, X ~ Bin(b + c, 1/2).

    Up to ``exact_limit`` discordant pairs this is the integer computation of
    :func:`~sealeval.captured.intervals.mcnemar_exact_p_value` (reused); beyond
    it (whose cost grows with ``(b + c) * min(b, c)``) the same tail is summed
    in log space (``lgamma``, ``math.fsum``), linear in ``min(b, c)`` and
    within about 1e-12 relative of the exact value.
    """
    if not isinstance(counts, PairedCounts):
        raise InferenceError("invalid_counts", "counts")
    b = counts.baseline_pass_subject_fail
    c = counts.baseline_fail_subject_pass
    discordant = b + c
    if discordant <= exact_limit or b == c:
        return mcnemar_exact_p_value(counts)
    smaller = min(b, c)
    k = np.arange(smaller + 1, dtype=np.float64)
    log_terms = (
        math.lgamma(discordant + 1)
        - np.array([math.lgamma(x + 1) for x in k.tolist()])
        - np.array([math.lgamma(discordant - x + 1) for x in k.tolist()])
        - discordant * math.log(2.0)
    )
    peak = float(log_terms.max())
    tail = math.exp(peak) * math.fsum(np.exp(log_terms - peak).tolist())
    return min(1.0, 2.0 * tail)


def _sign_bits(seed: str, n: int, replicate: int) -> npt.NDArray[np.uint8]:
    message = f"sealeval/sign-flip-v1:{seed}:{replicate}".encode("ascii")
    raw = np.frombuffer(hashlib.shake_256(message).digest((n + 7) // 8), dtype=np.uint8)
    bits: npt.NDArray[np.uint8] = np.unpackbits(raw, bitorder="little")[:n]
    return bits


def sign_flip_p_value(
    differences: Sequence[float] | _FloatArray,
    seed: str,
    *,
    resamples: int = PERMUTATION_RESAMPLES,
) -> float:
    """Two-sided paired sign-flip permutation p-value of the mean difference.

    Resample ``r`` flips the sign of difference ``i`` when bit ``i`` of
    ``SHAKE-256("sealeval/sign-flip-v1:{seed}:{r}")`` (little-endian bit order)
    is 0. The p-value is ``(1 + #{r : |T_r| >= |T|}) / (resamples + 1)`` with
    ``T = sum(d)``; a relative tolerance of 1e-12 of ``sum(|d|)`` makes exact
    ties count whatever the summation order.
    """
    values = np.asarray(differences, dtype=np.float64)
    if values.ndim != 1 or values.size < 1 or not np.isfinite(values).all():
        raise InferenceError("invalid_values", "differences")
    if type(resamples) is not int or resamples < 1:
        raise InferenceError("invalid_counts", "resamples")
    if type(seed) is not str or not seed.isascii():
        raise InferenceError("invalid_seed", "seed")
    n = values.size
    total = math.fsum(values.tolist())
    scale = math.fsum(np.abs(values).tolist())
    if scale == 0.0:
        return 1.0
    observed = abs(total) - 1e-12 * scale
    rows = max(1, _CHUNK_ELEMENTS // n)
    extreme = 0
    for start in range(0, resamples, rows):
        stop = min(resamples, start + rows)
        bits = np.stack([_sign_bits(seed, n, r) for r in range(start, stop)])
        flipped = 2.0 * (bits.astype(np.float64) @ values) - total
        extreme += int(np.count_nonzero(np.abs(flipped) >= observed))
    return (1 + extreme) / (resamples + 1)


def adjust_p_values(p_values: Sequence[float], method: str) -> tuple[float, ...]:
    """Return multiplicity-adjusted p-values (reject ``i`` when ``adjusted[i] <= alpha``).

    * ``none``: unchanged.
    * ``holm``: sort ascending ``p(1) <= ... <= p(m)``; ``adj(k) = max over j <= k
      of min(1, (m - j + 1) p(j))`` (step-down; controls the family-wise error).
    * ``benjamini_hochberg``: ``adj(k) = min over j >= k of min(1, m p(j) / j)``
      (step-up; controls the false discovery rate under independence or
      positive dependence).

    Ties keep input order (a stable sort), so the result is deterministic.
    """
    if method not in MULTIPLICITY_METHODS:
        raise InferenceError("invalid_method", "multiplicity")
    values = [float(p) for p in p_values]
    for p in values:
        if not 0.0 <= p <= 1.0:
            raise InferenceError("invalid_values", "p_values")
    m = len(values)
    if method == "none" or m == 0:
        return tuple(values)
    order = sorted(range(m), key=lambda index: values[index])
    adjusted = [0.0] * m
    if method == "holm":
        running = 0.0
        for rank, index in enumerate(order):
            running = max(running, min(1.0, (m - rank) * values[index]))
            adjusted[index] = running
    else:
        running = 1.0
        for rank in range(m - 1, -1, -1):
            index = order[rank]
            running = min(running, 1.0, m * values[index] / (rank + 1))
            adjusted[index] = max(running, values[index])  # m p / m may round below p
    return tuple(adjusted)


@dataclass(frozen=True, slots=True)
class Flips:
    """Pairs whose binary outcome changed between the runs (ids only, never content).

    Attributes:
        right_to_wrong: pairs the baseline got right and the subject got wrong.
        wrong_to_right: pairs the baseline got wrong and the subject got right.
        right_to_wrong_ids: the first ``max_ids`` such ids in pair (id) order.
        wrong_to_right_ids: likewise.
    """

    right_to_wrong: int
    wrong_to_right: int
    right_to_wrong_ids: tuple[str, ...]
    wrong_to_right_ids: tuple[str, ...]

    def to_dict(self) -> dict[str, object]:
        """Return the extended report's ``flips`` member."""
        return {
            "right_to_wrong": self.right_to_wrong,
            "wrong_to_right": self.wrong_to_right,
            "right_to_wrong_ids": list(self.right_to_wrong_ids),
            "wrong_to_right_ids": list(self.wrong_to_right_ids),
        }


def flips(ids: Sequence[str], baseline: _FloatArray, subject: _FloatArray, max_ids: int) -> Flips:
    """Count and list (first ``max_ids``) flipped pairs; a value is right when nonzero."""
    left = np.asarray(baseline) != 0.0
    right = np.asarray(subject) != 0.0
    worse = np.flatnonzero(left & ~right)
    better = np.flatnonzero(~left & right)
    return Flips(
        right_to_wrong=int(worse.size),
        wrong_to_right=int(better.size),
        right_to_wrong_ids=tuple(ids[index] for index in worse[:max_ids].tolist()),
        wrong_to_right_ids=tuple(ids[index] for index in better[:max_ids].tolist()),
    )
