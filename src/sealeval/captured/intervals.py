"""Paired intervals of captured comparisons, bit-identical to invarlock 0.17.1.

Wire contract: ``22-comparison.md`` §5 (intervals) and §7 (work budget) of the
invarlock specification. Every formula is evaluated in IEEE-754 binary64 in
the written operation order; the golden vectors are the oracle.

* :func:`newcombe_interval` — binary kinds: Newcombe hybrid-score interval for
  a paired difference of proportions with continuity-corrected phi
  (``newcombe_hybrid_score_paired_v2``, no resampling).
* :func:`shake256_bootstrap_interval` — ``token_f1``, ``json_fields``,
  ``recorded``: percentile bootstrap of the paired mean difference, indices
  drawn from a SHAKE-256 stream by rejection sampling
  (``paired_mean_shake256_percentile_v1``, 2048 replicates).
* :func:`nll_ratio_interval` — normalized NLL: ratio of means (subject /
  baseline) with a SHA-256 index resampler (modulo reduction)
  (``paired_percentile_bootstrap_sha256_v1``, 2048 replicates).

Speed without changing a bit: each replicate's sum is ``fsum`` of the drawn
values, i.e. the exactly rounded sum of a multiset of the n input values. It is
computed from the draw counts (``numpy.bincount``) against a fixed-point
integer image of the inputs split into int64 limbs, so every partial sum is an
exact integer and the one rounding to binary64 is Python's correctly rounded
``int / int``. Inputs so large that ``math.fsum`` could raise its
intermediate-overflow error use ``math.fsum`` itself, in draw order.

Work budget (§7): each bootstrap or NLL interval over n pairs costs
``n * REPLICATES`` draws (:func:`bootstrap_draws`); the comparison charges
:func:`required_bootstrap_draws` before scoring anything.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import numpy as np
import numpy.typing as npt

from sealeval.canonical import encode_invarlock, is_digest
from sealeval.errors import CanonicalError, CapturedError

__all__ = [
    "MASS",
    "NEWCOMBE_METHOD",
    "NLL_METHOD",
    "REPLICATES",
    "SHAKE_METHOD",
    "Interval",
    "IntervalError",
    "NewcombeResult",
    "NllRatioResult",
    "PairedCounts",
    "Z",
    "bootstrap_draws",
    "effect_size_pp",
    "mcnemar_exact_p_value",
    "newcombe_interval",
    "nll_ratio",
    "nll_ratio_interval",
    "nll_replicate_indices",
    "required_bootstrap_draws",
    "scope_seed",
    "seed_row",
    "shake256_bootstrap_interval",
    "shake256_replicate_indices",
]

NEWCOMBE_METHOD: Final = "newcombe_hybrid_score_paired_v2"
SHAKE_METHOD: Final = "paired_mean_shake256_percentile_v1"
NLL_METHOD: Final = "paired_percentile_bootstrap_sha256_v1"
MASS: Final = 0.95
REPLICATES: Final = 2048
#: The two-sided 95 % normal quantile as written by the reference.
Z: Final = 1.959963984540054

_TWO_64: Final = 1 << 64
_ABSENT: Final = object()
# fsum can only hit its intermediate-overflow error when some running value
# reaches ~2**1024; with (2n + 2) * max|value| below this it cannot.
_OVERFLOW_SAFE: Final = 2.0**1022

Values: TypeAlias = Sequence[float] | npt.NDArray[np.float64]
_IntArray: TypeAlias = npt.NDArray[np.int64]
_FloatArray: TypeAlias = npt.NDArray[np.float64]


class IntervalError(CapturedError):
    """Refusal to compute an interval (the comparison fails)."""

    module = "sealeval.captured.intervals"
    field_in_message = True
    codes = frozenset(
        {
            "invalid_values",
            "empty",
            "length_mismatch",
            "non_finite_value",
            "overflow",
            "invalid_seed",
            "invalid_counts",
            "non_positive_baseline_mean",
        }
    )


@dataclass(frozen=True, slots=True)
class Interval:
    """One report interval: ``{lower, upper, method, mass, replicates}``."""

    lower: float
    upper: float
    method: str
    mass: float
    replicates: int

    def to_dict(self) -> dict[str, Any]:
        """Return the report member ``interval`` (canonical encoding sorts the keys)."""
        return {
            "lower": self.lower,
            "upper": self.upper,
            "method": self.method,
            "mass": self.mass,
            "replicates": self.replicates,
        }


# ---------------------------------------------------------------------------
# Input checks


def _values(values: object, field: str) -> _FloatArray:
    """Return a finite float64 vector; only ``float`` items (or a float64 array) are accepted."""
    if isinstance(values, np.ndarray):
        if values.dtype != np.float64 or values.ndim != 1:
            raise IntervalError("invalid_values", field)
        array: _FloatArray = values
    elif isinstance(values, Sequence) and not isinstance(values, str | bytes):
        if any(type(item) is not float for item in values):
            raise IntervalError("invalid_values", field)
        array = np.array(values, dtype=np.float64)
    else:
        raise IntervalError("invalid_values", field)
    if not array.size:
        raise IntervalError("empty", field)
    if not np.isfinite(array).all():
        raise IntervalError("non_finite_value", field)
    return array


def _paired(baseline: object, subject: object) -> tuple[_FloatArray, _FloatArray]:
    left = _values(baseline, "baseline")
    right = _values(subject, "subject")
    if left.size != right.size:
        raise IntervalError("length_mismatch", "subject")
    return left, right


def _seed(seed: object) -> str:
    if not is_digest(seed):
        raise IntervalError("invalid_seed", "seed")
    assert isinstance(seed, str)
    return seed


def _fsum(values: Iterable[float]) -> float:
    try:
        return math.fsum(values)
    except OverflowError:
        raise IntervalError("overflow", "values") from None


def _max(first: float, second: float) -> float:
    """Python's ``max(first, second)``: the first argument unless the second is greater."""
    return second if second > first else first


def _min(first: float, second: float) -> float:
    """Python's ``min(first, second)``: the first argument unless the second is smaller."""
    return second if second < first else first


# ---------------------------------------------------------------------------
# 5.1 Newcombe hybrid-score paired interval with continuity-corrected phi


@dataclass(frozen=True, slots=True)
class PairedCounts:
    """The 2x2 table of paired binary outcomes over n usable pairs.

    Attributes:
        both_pass: ``a`` — baseline and subject pass.
        baseline_pass_subject_fail: ``b``.
        baseline_fail_subject_pass: ``c``.
        both_fail: ``d``.
    """

    both_pass: int
    baseline_pass_subject_fail: int
    baseline_fail_subject_pass: int
    both_fail: int

    def __post_init__(self) -> None:
        """Require exact non-negative integers and at least one pair."""
        for name in (
            "both_pass",
            "baseline_pass_subject_fail",
            "baseline_fail_subject_pass",
            "both_fail",
        ):
            value = getattr(self, name)
            if type(value) is not int or value < 0:
                raise IntervalError("invalid_counts", name)
        if self.n < 1:
            raise IntervalError("empty", "counts")

    @property
    def n(self) -> int:
        """The number of pairs."""
        return (
            self.both_pass
            + self.baseline_pass_subject_fail
            + self.baseline_fail_subject_pass
            + self.both_fail
        )

    @classmethod
    def from_values(cls, baseline: Values, subject: Values) -> PairedCounts:
        """Count paired outcomes ``bool(value)`` of per-record binary scores."""
        left, right = _paired(baseline, subject)
        passed_left = left != 0.0
        passed_right = right != 0.0
        both = int(np.count_nonzero(passed_left & passed_right))
        only_left = int(np.count_nonzero(passed_left & ~passed_right))
        only_right = int(np.count_nonzero(~passed_left & passed_right))
        return cls(both, only_left, only_right, left.size - both - only_left - only_right)


@dataclass(frozen=True, slots=True)
class NewcombeResult:
    """The Newcombe interval and its internal percentage-point values.

    Attributes:
        counts: the 2x2 table.
        lower_pp: ``L * 100.0`` (the reference's internal percentage-point value).
        upper_pp: ``U * 100.0``.
        interval: the report interval, ``lower = lower_pp / 100`` (the double
            rounding is part of the wire contract).
    """

    counts: PairedCounts
    lower_pp: float
    upper_pp: float
    interval: Interval


def _wilson(successes: int, n: int) -> tuple[float, float]:
    p = successes / n
    z2 = Z * Z
    den = 1.0 + z2 / n
    center = (p + z2 / (2.0 * n)) / den
    radius = (Z * math.sqrt((p * (1.0 - p)) / n + z2 / ((4.0 * n) * n))) / den
    return _max(0.0, center - radius), _min(1.0, center + radius)


def _phi(a: int, b: int, c: int, d: int, n: int) -> float:
    denominator = math.sqrt(float((a + b) * (c + d) * (a + c) * (b + d)))
    if denominator == 0.0:
        return 0.0
    numerator: float = a * d - b * c
    if numerator > 0:
        numerator = _max(numerator - n / 2.0, 0.0)
    elif numerator < 0:
        numerator = _min(numerator + n / 2.0, 0.0)
    return _max(-1.0, _min(1.0, numerator / denominator))


def newcombe_interval(counts: PairedCounts) -> NewcombeResult:
    """Return the paired Newcombe interval of the subject-minus-baseline pass rate (§5.1)."""
    if not isinstance(counts, PairedCounts):
        raise IntervalError("invalid_counts", "counts")
    a = counts.both_pass
    b = counts.baseline_pass_subject_fail
    c = counts.baseline_fail_subject_pass
    d = counts.both_fail
    n = counts.n
    p1 = (a + b) / n
    p2 = (a + c) / n
    effect = p2 - p1
    l2, u2 = _wilson(a + c, n)
    l1, u1 = _wilson(a + b, n)
    phi = _phi(a, b, c, d, n)
    ls = p2 - l2
    ub = u1 - p1
    us = u2 - p2
    lb = p1 - l1
    rl = (ls * ls + ub * ub) - ((2.0 * phi) * ls) * ub
    ru = (us * us + lb * lb) - ((2.0 * phi) * us) * lb
    lower = _max(-1.0, effect - math.sqrt(_max(0.0, rl)))
    upper = _min(1.0, effect + math.sqrt(_max(0.0, ru)))
    lower_pp = lower * 100.0
    upper_pp = upper * 100.0
    interval = Interval(lower_pp / 100, upper_pp / 100, NEWCOMBE_METHOD, MASS, 0)
    return NewcombeResult(counts, lower_pp, upper_pp, interval)


def mcnemar_exact_p_value(counts: PairedCounts) -> float:
    """Exact two-sided McNemar p-value (informational; not used by any decision).

    ``min(1, 2 * P(X <= min(b, c)))`` for ``X ~ Binomial(b + c, 1/2)``,
    computed exactly in integers and rounded once (as the reference's
    newcombe vectors report it). The cost grows with ``(b + c) * min(b, c)``
    (about a minute for a million discordant pairs); the comparison never
    calls it.
    """
    b = counts.baseline_pass_subject_fail
    c = counts.baseline_fail_subject_pass
    if b == c:  # includes b + c == 0: the lower tail holds at least half the mass
        return 1.0
    discordant = b + c
    term = 1  # C(discordant, 0)
    tail = 1
    for k in range(min(b, c)):
        term = term * (discordant - k) // (k + 1)
        tail += term
    numerator = 2 * tail
    denominator = 1 << discordant
    return 1.0 if numerator >= denominator else numerator / denominator


def effect_size_pp(counts: PairedCounts) -> float:
    """Subject-minus-baseline pass rate in percentage points (informational).

    Computed as ``(c - b) / n * 100.0``.
    """
    return (
        (counts.baseline_fail_subject_pass - counts.baseline_pass_subject_fail) / counts.n * 100.0
    )


# ---------------------------------------------------------------------------
# Exact sums of drawn multisets


class _ExactSum:
    """``math.fsum`` of a multiset of fixed values, from the multiset's counts.

    Every finite double is ``M * 2**E`` with an integer ``|M| < 2**53``; all
    values are scaled to integers on the common exponent ``E_min`` and split
    into signed ``width``-bit limbs, chosen so that ``count_total * 2**width``
    fits an int64: each limb's weighted sum is then exact in int64.
    """

    __slots__ = ("_exponent", "_limbs", "_width")

    def __init__(self, values: _FloatArray, count_total: int) -> None:
        mantissas, exponents = np.frexp(values)
        integers = np.ldexp(mantissas, 53).astype(np.int64)
        powers = exponents.astype(np.int64) - 53
        magnitudes = np.abs(integers).astype(np.uint64)
        nonzero = magnitudes != 0
        if not nonzero.any():
            self._exponent = 0
            self._width = 1
            self._limbs: list[_IntArray] = []
            return
        lowest_bits = magnitudes & (~magnitudes + np.uint64(1))
        trailing = np.frexp(lowest_bits.astype(np.float64))[1].astype(np.int64) - 1
        exponent = int((powers + trailing)[nonzero].min())
        shifts = np.where(nonzero, powers - exponent, 0)
        top = int(shifts.max()) + 53
        width = 62 - count_total.bit_length()
        signs = np.sign(integers)
        mask = np.uint64((1 << width) - 1)
        limbs = []
        for start in range(0, top, width):
            offset = shifts - start
            left = np.clip(offset, 0, 63).astype(np.uint64)
            right = np.clip(-offset, 0, 63).astype(np.uint64)
            part = np.where(
                offset >= 0,
                np.where(offset < width, (magnitudes << left) & mask, np.uint64(0)),
                (magnitudes >> right) & mask,
            )
            limbs.append(part.astype(np.int64) * signs)
        self._exponent = exponent
        self._width = width
        self._limbs = limbs

    def total(self, counts: _IntArray) -> float:
        """Return the exactly rounded sum of ``values[j]`` taken ``counts[j]`` times."""
        exact = 0
        for index, limb in enumerate(self._limbs):
            exact += int(np.dot(counts, limb)) << (index * self._width)
        try:
            if self._exponent >= 0:
                return float(exact << self._exponent)
            return exact / (1 << -self._exponent)
        except OverflowError:
            raise IntervalError("overflow", "values") from None


def _overflow_safe(values: _FloatArray) -> bool:
    return float(np.abs(values).max()) * (2 * values.size + 2) < _OVERFLOW_SAFE


class _ReplicateSum:
    """Replicate sums: exact limbs when safe, else ``math.fsum`` in draw order."""

    __slots__ = ("_exact", "_values")

    def __init__(self, values: _FloatArray) -> None:
        self._values = values
        self._exact = _ExactSum(values, values.size) if _overflow_safe(values) else None

    def total(self, indices: _IntArray, counts: _IntArray | None) -> float:
        if self._exact is not None and counts is not None:
            return self._exact.total(counts)
        return _fsum(self._values[indices].tolist())

    @property
    def needs_counts(self) -> bool:
        return self._exact is not None


# ---------------------------------------------------------------------------
# 5.2 SHAKE-256 paired mean-difference percentile bootstrap


def _remainder(words: npt.NDArray[np.uint64], n: int) -> npt.NDArray[np.uint64]:
    """Return ``words % n`` bit for bit.

    NumPy divides an unsigned array by a scalar with a precomputed
    multiplier but computes ``%`` with one hardware division per item, so
    ``words - (words // n) * n`` gives the same values about four times faster.
    """
    divisor = np.uint64(n)
    remainder: npt.NDArray[np.uint64] = words - (words // divisor) * divisor
    return remainder


def _shake_indices(seed: str, n: int, replicate: int) -> _IntArray:
    """Draw ``n`` indices in ``[0, n)`` for one replicate (rejection sampling)."""
    ceiling = (_TWO_64 // n) * n
    parts = []
    collected = 0
    block = 0
    while collected < n:
        message = f"{seed}:{replicate}:{block}".encode("ascii")
        words = np.frombuffer(hashlib.shake_256(message).digest(8 * n), dtype="<u8")
        if ceiling < _TWO_64:
            accepted = words < np.uint64(ceiling)
            if not accepted.all():
                words = words[accepted]
        parts.append(words)
        collected += words.size
        block += 1
    drawn = parts[0] if len(parts) == 1 else np.concatenate(parts)[:n]
    indices: _IntArray = _remainder(drawn, n).astype(np.int64)
    return indices


def shake256_replicate_indices(seed: str, n: int, replicate: int) -> _IntArray:
    """Return the resampled indices of one SHAKE-256 bootstrap replicate (diagnostics)."""
    if type(n) is not int or n < 1:
        raise IntervalError("empty", "n")
    if type(replicate) is not int or not 0 <= replicate < REPLICATES:
        raise IntervalError("invalid_counts", "replicate")
    return _shake_indices(_seed(seed), n, replicate)


def _shake_percentile(draws: Sequence[float], q: float) -> float:
    position = (REPLICATES - 1) * q
    low = math.floor(position)
    high = min(low + 1, REPLICATES - 1)
    return draws[low] + (draws[high] - draws[low]) * (position - low)


def shake256_bootstrap_interval(baseline: Values, subject: Values, seed: str) -> Interval:
    """Paired mean-difference percentile bootstrap with SHAKE-256 draws (§5.2).

    Args:
        baseline: per-pair baseline values in scope order (``float`` items or
            a float64 array).
        subject: per-pair subject values, same length.
        seed: the scope seed ``sha256:<hex>`` (see :func:`scope_seed`), used
            verbatim in the SHAKE message.

    Returns:
        The interval; ``lower == upper == d[0]`` when every difference is equal
        (no resampling, no draws consumed).

    Raises:
        IntervalError: invalid, empty, mismatched or non-finite values (also a
            non-finite difference), an invalid seed, or ``overflow`` where
            ``math.fsum`` overflows.
    """
    left, right = _paired(baseline, subject)
    key = _seed(seed)
    with np.errstate(over="ignore"):
        differences = right - left
    if not np.isfinite(differences).all():
        raise IntervalError("non_finite_value", "differences")
    n = differences.size
    if differences.min() == differences.max():
        first = float(differences[0])
        return Interval(first, first, SHAKE_METHOD, MASS, REPLICATES)
    sums = _ReplicateSum(differences)
    means = np.empty(REPLICATES, dtype=np.float64)
    for replicate in range(REPLICATES):
        indices = _shake_indices(key, n, replicate)
        counts = np.bincount(indices, minlength=n) if sums.needs_counts else None
        means[replicate] = sums.total(indices, counts) / n
    draws = np.sort(means, kind="stable").tolist()
    return Interval(
        _shake_percentile(draws, 0.025),
        _shake_percentile(draws, 0.975),
        SHAKE_METHOD,
        MASS,
        REPLICATES,
    )


# ---------------------------------------------------------------------------
# 5.3 Normalized NLL: ratio of means and SHA-256 index resampler


@dataclass(frozen=True, slots=True)
class NllRatioResult:
    """The NLL report values: ``ratio`` (subject mean / baseline mean) and its interval."""

    ratio: float
    interval: Interval


def _ratio(baseline_total: float, subject_total: float, m: int) -> float:
    """``(subject_total / m) / (baseline_total / m)``; callers refuse a baseline mean ``<= 0``."""
    return (subject_total / m) / (baseline_total / m)


def nll_ratio(baseline: Values, subject: Values) -> float:
    """Return ``(fsum(subject) / m) / (fsum(baseline) / m)``.

    Raises:
        IntervalError: ``baseline: non_positive_baseline_mean`` when the
            baseline mean is ``<= 0``; ``overflow``; invalid values.
    """
    left, right = _paired(baseline, subject)
    m = left.size
    baseline_total = _fsum(left.tolist())
    if baseline_total / m <= 0:
        raise IntervalError("non_positive_baseline_mean", "baseline")
    return _ratio(baseline_total, _fsum(right.tolist()), m)


@functools.lru_cache(maxsize=2)
def _draw_suffixes(n: int) -> tuple[bytes, ...]:
    return tuple(j.to_bytes(8, "big") for j in range(n))


def _nll_indices(key: bytes, n: int, replicate: int) -> _IntArray:
    prefix = key + replicate.to_bytes(8, "big")
    sha256 = hashlib.sha256
    stream = b"".join([sha256(prefix + suffix).digest() for suffix in _draw_suffixes(n)])
    words = np.frombuffer(stream, dtype=">u8")[::4]
    indices: _IntArray = _remainder(words, n).astype(np.int64)
    return indices


def nll_replicate_indices(seed: str, n: int, replicate: int) -> _IntArray:
    """Return the resampled indices of one NLL replicate (diagnostics)."""
    if type(n) is not int or n < 1:
        raise IntervalError("empty", "n")
    if type(replicate) is not int or not 0 <= replicate < REPLICATES:
        raise IntervalError("invalid_counts", "replicate")
    return _nll_indices(bytes.fromhex(_seed(seed)[7:]), n, replicate)


def _nll_percentile(values: Sequence[float], q: float) -> float:
    position = (REPLICATES - 1) * q
    low = math.floor(position)
    high = math.ceil(position)
    if low == high:
        return values[low]
    return values[low] + (values[high] - values[low]) * (position - low)


def nll_ratio_interval(baseline: Values, subject: Values, seed: str) -> NllRatioResult:
    """Normalized-NLL ratio of means and its SHA-256 resampled percentile interval (§5.3).

    Args:
        baseline: per-pair baseline NLL values (``-logprob_sum / utf8_byte_count``).
        subject: per-pair subject NLL values, same length.
        seed: the scope seed ``sha256:<hex>``; its 32 digest bytes key the resampler.

    Raises:
        IntervalError: ``non_positive_baseline_mean`` for the full sample **or
            any replicate** (the reference aborts the comparison), ``overflow``,
            invalid values or seed.
    """
    left, right = _paired(baseline, subject)
    key = bytes.fromhex(_seed(seed)[7:])
    ratio = nll_ratio(left, right)
    n = left.size
    if n == 1:
        return NllRatioResult(ratio, Interval(ratio, ratio, NLL_METHOD, MASS, REPLICATES))
    baseline_sums = _ReplicateSum(left)
    subject_sums = _ReplicateSum(right)
    with_counts = baseline_sums.needs_counts and subject_sums.needs_counts
    values = np.empty(REPLICATES, dtype=np.float64)
    for replicate in range(REPLICATES):
        indices = _nll_indices(key, n, replicate)
        counts = np.bincount(indices, minlength=n) if with_counts else None
        baseline_total = baseline_sums.total(indices, counts)
        if baseline_total / n <= 0:
            raise IntervalError("non_positive_baseline_mean", "baseline")
        values[replicate] = _ratio(baseline_total, subject_sums.total(indices, counts), n)
    ordered = np.sort(values, kind="stable").tolist()
    alpha = (1.0 - MASS) / 2.0
    interval = Interval(
        _nll_percentile(ordered, alpha),
        _nll_percentile(ordered, 1.0 - alpha),
        NLL_METHOD,
        MASS,
        REPLICATES,
    )
    return NllRatioResult(ratio, interval)


# ---------------------------------------------------------------------------
# Seeds and the work budget (§4 step 7, §7)


def seed_row(record: object) -> bytes:
    """Return the canonical bytes (no final LF) of ``{id, input, expected, metadata}`` of a record.

    ``record`` is a mapping or an object with those attributes (the run
    core's ``Record``). Encode each baseline record once and reuse the bytes
    for every scope it belongs to (:func:`scope_seed`).
    """
    row = {}
    for name in ("id", "input", "expected", "metadata"):
        if isinstance(record, Mapping):
            value = record.get(name, _ABSENT)
        else:
            value = getattr(record, name, _ABSENT)
        if value is _ABSENT:
            raise IntervalError("invalid_values", "record")
        row[name] = value
    try:
        return encode_invarlock(row)[:-1]
    except CanonicalError:
        raise IntervalError("invalid_values", "record") from None


def scope_seed(rows: Iterable[bytes]) -> str:
    """Return ``digest([{id, input, expected, metadata} of each BASELINE record in scope order])``.

    ``rows`` are :func:`seed_row` bytes in scope (pair) order; the canonical
    array is streamed into SHA-256, so the result equals
    ``digest_invarlock([...])`` without building the document.
    """
    digest = hashlib.sha256(b"[")
    first = True
    for row in rows:
        if type(row) is not bytes:
            raise IntervalError("invalid_values", "rows")
        if not first:
            digest.update(b",")
        digest.update(row)
        first = False
    digest.update(b"]\n")
    return "sha256:" + digest.hexdigest()


def bootstrap_draws(pair_count: int) -> int:
    """Return the draws one bootstrap or NLL interval over ``pair_count`` pairs costs."""
    if type(pair_count) is not int or pair_count < 0:
        raise IntervalError("invalid_counts", "pair_count")
    return pair_count * REPLICATES


def required_bootstrap_draws(scope_pair_counts: Iterable[int], bootstrap_metric_count: int) -> int:
    """Return the work budget of a comparison (§7).

    ``(Σ pairs per scope) * (metrics whose kind is not binary, NLL included) * 2048``
    — overlapping slices and missing pairs are counted in full, and the
    budget is charged before any scoring. Compare with ``max_bootstrap_draws``
    (exceeding it is an error; equality is allowed).
    """
    if type(bootstrap_metric_count) is not int or bootstrap_metric_count < 0:
        raise IntervalError("invalid_counts", "bootstrap_metric_count")
    total = 0
    for count in scope_pair_counts:
        if type(count) is not int or count < 0:
            raise IntervalError("invalid_counts", "scope_pair_counts")
        total += count
    return total * bootstrap_metric_count * REPLICATES
