"""Paired intervals: vectors, a plain reference implementation, refusals, metamorphic checks."""

from __future__ import annotations

import hashlib
import json
import math
import re
import struct
import types
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sealeval.canonical import digest_invarlock
from sealeval.captured import intervals as interval_module
from sealeval.captured.intervals import (
    MASS,
    NEWCOMBE_METHOD,
    NLL_METHOD,
    REPLICATES,
    SHAKE_METHOD,
    Interval,
    IntervalError,
    PairedCounts,
    bootstrap_draws,
    effect_size_pp,
    mcnemar_exact_p_value,
    newcombe_interval,
    nll_ratio,
    nll_ratio_interval,
    nll_replicate_indices,
    required_bootstrap_draws,
    scope_seed,
    seed_row,
    shake256_bootstrap_interval,
    shake256_replicate_indices,
)
from sealeval.captured.policy import parse_comparison_policy
from support.vectors import cases, load, vectors_dir

SEED = "sha256:" + "5e" * 32


def _bits(value: float) -> bytes:
    """Compare floats bit for bit (the sign of zero included)."""
    return struct.pack("<d", value)


# ---------------------------------------------------------------------------
# Straightforward reference implementation of 22-comparison.md §5.2 / §5.3


def reference_shake(
    baseline: Sequence[float], subject: Sequence[float], seed: str
) -> tuple[float, float]:
    differences = [s - b for b, s in zip(baseline, subject, strict=True)]
    n = len(differences)
    if min(differences) == max(differences):
        return differences[0], differences[0]
    ceiling = (2**64 // n) * n
    means = []
    for replicate in range(2048):
        values: list[float] = []
        block = 0
        while len(values) < n:
            stream = hashlib.shake_256(f"{seed}:{replicate}:{block}".encode("ascii")).digest(8 * n)
            for i in range(n):
                word = int.from_bytes(stream[8 * i : 8 * i + 8], "little")
                if word < ceiling:
                    values.append(differences[word % n])
            block += 1
        means.append(math.fsum(values[:n]) / n)
    draws = sorted(means)

    def percentile(q: float) -> float:
        position = 2047 * q
        low = math.floor(position)
        return draws[low] + (draws[min(low + 1, 2047)] - draws[low]) * (position - low)

    return percentile(0.025), percentile(0.975)


def reference_nll(
    baseline: Sequence[float], subject: Sequence[float], seed: str
) -> tuple[float, float, float]:
    def value(x: Sequence[float], y: Sequence[float]) -> float:
        baseline_mean = math.fsum(x) / len(x)
        if baseline_mean <= 0:
            raise ArithmeticError("baseline mean must be greater than zero")
        return (math.fsum(y) / len(y)) / baseline_mean

    m = len(baseline)
    ratio = value(baseline, subject)
    if m == 1:
        return ratio, ratio, ratio
    key = bytes.fromhex(seed[7:])
    values = []
    for replicate in range(2048):
        indices = [
            int.from_bytes(
                hashlib.sha256(key + replicate.to_bytes(8, "big") + j.to_bytes(8, "big")).digest()[
                    :8
                ],
                "big",
            )
            % m
            for j in range(m)
        ]
        values.append(value([baseline[i] for i in indices], [subject[i] for i in indices]))
    values.sort()
    alpha = (1.0 - 0.95) / 2.0

    def percentile(q: float) -> float:
        position = 2047 * q
        low, high = math.floor(position), math.ceil(position)
        if low == high:
            return values[low]
        return values[low] + (values[high] - values[low]) * (position - low)

    return ratio, percentile(alpha), percentile(1.0 - alpha)


def _outcome(action: Any) -> tuple[Any, ...]:
    """A result as bits, or ``("error",)`` for any refusal / non-finite result."""
    try:
        result = action()
    except (IntervalError, ArithmeticError, ValueError):
        return ("error",)
    if not all(math.isfinite(item) for item in result):
        return ("error",)
    return tuple(_bits(item) for item in result)


# ---------------------------------------------------------------------------
# Golden vectors


_VECTOR_MESSAGES = {
    "captured normalized NLL: normalized NLL baseline mean must be greater than zero": (
        "non_positive_baseline_mean"
    ),
}


def _check_traces(case: dict[str, Any], indices: Any) -> None:
    n = len(case["input"].get("baseline") or case["input"]["baseline_nll"])
    for replicate in (0, 2047):
        trace = case["expected"].get(f"trace_replicate_{replicate}_indices")
        if trace is not None:
            assert indices(case["input"]["seed"], n, replicate)[:64].tolist() == trace


@pytest.mark.parametrize("case", cases("invarlock/bootstrap_interval.json"))
def test_bootstrap_vector(case: dict[str, Any]) -> None:
    given_input = case["input"]
    expected = case["expected"]
    method = given_input["method"]
    if method == NLL_METHOD and set(given_input) == {
        "method",
        "seed",
        "baseline_nll",
        "subject_nll",
    }:
        arguments = (given_input["baseline_nll"], given_input["subject_nll"], given_input["seed"])
        if set(expected) == {"error"}:
            with pytest.raises(IntervalError) as caught:
                nll_ratio_interval(*arguments)
            assert caught.value.code == _VECTOR_MESSAGES[expected["error"]["message"]]
            return
        result = nll_ratio_interval(*arguments)
        got: dict[str, Any] = {"ratio": result.ratio, **result.interval.to_dict()}
        _check_traces(case, nll_replicate_indices)
    elif set(given_input) == {"method", "seed", "baseline", "subject"}:
        arguments = (given_input["baseline"], given_input["subject"], given_input["seed"])
        if method == SHAKE_METHOD:
            got = shake256_bootstrap_interval(*arguments).to_dict()
            _check_traces(case, shake256_replicate_indices)
        elif method == NEWCOMBE_METHOD:
            counts = PairedCounts.from_values(given_input["baseline"], given_input["subject"])
            got = newcombe_interval(counts).interval.to_dict()
        else:
            pytest.fail("vector case shape not understood")
    else:
        pytest.fail("vector case shape not understood")
    wanted = {key: value for key, value in expected.items() if not key.startswith("trace_")}
    assert set(got) == set(wanted)
    for key, value in wanted.items():
        assert type(got[key]) is type(value), key
        if isinstance(value, float):
            assert _bits(got[key]) == _bits(value), key
        else:
            assert got[key] == value, key


@pytest.mark.parametrize("case", cases("invarlock/newcombe_interval.json"))
def test_newcombe_vector(case: dict[str, Any]) -> None:
    given_input = case["input"]
    expected = case["expected"]
    names = ("both_pass", "baseline_pass_subject_fail", "baseline_fail_subject_pass", "both_fail")
    if set(given_input) != {"n", *names} or "error" in expected:
        pytest.fail("vector case shape not understood")
    counts = PairedCounts(*(given_input[name] for name in names))
    assert counts.n == given_input["n"]
    result = newcombe_interval(counts)
    got = {
        "method": result.interval.method,
        "lower_pp": result.lower_pp,
        "upper_pp": result.upper_pp,
        "report_lower": result.interval.lower,
        "report_upper": result.interval.upper,
        "mcnemar_exact_two_sided_p_value": mcnemar_exact_p_value(counts),
        "effect_size_pp": effect_size_pp(counts),
    }
    assert set(got) == set(expected)
    assert got["method"] == expected["method"]
    for key in set(expected) - {"method"}:
        assert _bits(got[key]) == _bits(expected[key]), key
    assert (result.interval.mass, result.interval.replicates) == (0.95, 0)


# ---------------------------------------------------------------------------
# Fast implementation == reference implementation, bit for bit

_SPECIAL = st.sampled_from(
    [0.0, -0.0, 1.0, 0.5, 0.1, 0.3, 1 / 3, 1e-300, -1e-300, 5e-324, 1e300, -1e300, 87.0]
)
_VALUE = st.one_of(
    _SPECIAL,
    st.integers(-1000, 1000).map(float),
    st.floats(min_value=-1.0, max_value=1.0, allow_nan=False),
    st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=True),
)


@st.composite
def _pairs(draw: Any, value: Any = _VALUE, max_size: int = 9) -> tuple[list[float], list[float]]:
    n = draw(st.integers(1, max_size))
    baseline = draw(st.lists(value, min_size=n, max_size=n))
    subject = draw(st.lists(value, min_size=n, max_size=n))
    return baseline, subject


_SEEDS = st.binary(min_size=32, max_size=32).map(lambda raw: "sha256:" + raw.hex())


@settings(max_examples=40, deadline=None)
@given(_pairs(), _SEEDS)
def test_shake_bootstrap_equals_reference(pairs: Any, seed: str) -> None:
    baseline, subject = pairs

    def fast() -> tuple[float, float]:
        interval = shake256_bootstrap_interval(baseline, subject, seed)
        return interval.lower, interval.upper

    assert _outcome(fast) == _outcome(lambda: reference_shake(baseline, subject, seed))


_NLL_VALUE = st.one_of(
    st.sampled_from([0.0, -0.0, 0.5, 1.25, 1e-300, 1e300, 1.7e308]),
    st.floats(min_value=0.0, max_value=5.0),
    st.floats(min_value=-0.5, max_value=5.0),
)


@settings(max_examples=40, deadline=None)
@given(_pairs(_NLL_VALUE, max_size=8), _SEEDS)
def test_nll_resampler_equals_reference(pairs: Any, seed: str) -> None:
    baseline, subject = pairs

    def fast() -> tuple[float, float, float]:
        result = nll_ratio_interval(baseline, subject, seed)
        return result.ratio, result.interval.lower, result.interval.upper

    assert _outcome(fast) == _outcome(lambda: reference_nll(baseline, subject, seed))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_VALUE, min_size=1, max_size=12),
    st.lists(st.integers(0, 40), min_size=12, max_size=12),
)
def test_exact_sum_is_fsum(values: list[float], weights: list[int]) -> None:
    array = np.array(values, dtype=np.float64)
    counts = np.array(weights[: len(values)], dtype=np.int64)
    total_count = int(counts.sum()) or 1
    if float(np.abs(array).max()) * (2 * total_count + 2) >= 2.0**1022:
        return  # fsum could overflow: the comparison uses fsum itself (test above)
    summer = interval_module._ExactSum(array, total_count)
    multiset = [value for value, count in zip(values, weights, strict=False) for _ in range(count)]
    assert _bits(summer.total(counts)) == _bits(math.fsum(multiset))


def test_huge_values_use_fsum_in_draw_order() -> None:
    """Magnitudes where fsum could overflow bypass the fast path; outcomes stay the reference's."""
    for baseline, subject in (
        ([0.0, 0.0, 0.0], [4e307, 1.0, -4e307]),  # fallback path, no overflow
        ([0.0, 0.0, 0.0, 0.0], [1.7e308, 1.7e308, -1.7e308, 1.0]),  # fsum overflows
    ):
        assert not interval_module._overflow_safe(np.array(subject))

        def fast(baseline: Any = baseline, subject: Any = subject) -> tuple[float, float]:
            interval = shake256_bootstrap_interval(baseline, subject, SEED)
            return interval.lower, interval.upper

        expected = _outcome(lambda b=baseline, s=subject: reference_shake(b, s, SEED))
        assert _outcome(fast) == expected
    for nll_baseline in ([4e307, 1.0, 2.0], [1.7e308, 1.0, 2.0]):

        def fast_nll(nll_baseline: Any = nll_baseline) -> tuple[float, float, float]:
            result = nll_ratio_interval(nll_baseline, [1.0, 1.0, 1.0], SEED)
            return result.ratio, result.interval.lower, result.interval.upper

        expected = _outcome(lambda b=nll_baseline: reference_nll(b, [1.0, 1.0, 1.0], SEED))
        assert _outcome(fast_nll) == expected
    assert _outcome(fast_nll) == ("error",)


# ---------------------------------------------------------------------------
# Metamorphic properties


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 60), st.integers(0, 60), st.integers(0, 60), st.integers(0, 60))
def test_newcombe_swap_negates_the_interval(a: int, b: int, c: int, d: int) -> None:
    """Swapping baseline and subject (b <-> c) negates the interval.

    The formula is symmetric in exact arithmetic only: ``((2 phi) ls) ub`` and
    ``((2 phi) ub) ls`` may round differently, and the stored value passes
    through ``* 100 / 100``, so the check allows a few ulps.
    """
    if a + b + c + d == 0:
        return
    forward = newcombe_interval(PairedCounts(a, b, c, d)).interval
    swapped = newcombe_interval(PairedCounts(a, c, b, d)).interval
    assert swapped.lower == pytest.approx(-forward.upper, abs=1e-14)
    assert swapped.upper == pytest.approx(-forward.lower, abs=1e-14)
    assert -1.0 <= forward.lower <= forward.upper <= 1.0


@settings(max_examples=25, deadline=None)
@given(_pairs(st.floats(min_value=0.0, max_value=1.0), max_size=30), _SEEDS)
def test_shake_swap_negates_the_interval(pairs: Any, seed: str) -> None:
    """Swapping sides negates every difference and replicate mean exactly; only the
    percentile interpolation (fractions 0.175000000000004 vs 0.825) rounds differently."""
    baseline, subject = pairs
    forward = shake256_bootstrap_interval(baseline, subject, seed)
    swapped = shake256_bootstrap_interval(subject, baseline, seed)
    assert swapped.lower == pytest.approx(-forward.upper, abs=1e-12)
    assert swapped.upper == pytest.approx(-forward.lower, abs=1e-12)


@settings(max_examples=20, deadline=None)
@given(_pairs(st.floats(min_value=0.1, max_value=3.0), max_size=12), _SEEDS)
def test_nll_swap_inverts_the_ratio(pairs: Any, seed: str) -> None:
    """The ratio inverts; the interval only approximately (percentiles of reciprocals)."""
    baseline, subject = pairs
    forward = nll_ratio_interval(baseline, subject, seed)
    swapped = nll_ratio_interval(subject, baseline, seed)
    assert swapped.ratio == pytest.approx(1.0 / forward.ratio, rel=1e-12)
    assert forward.interval.lower <= forward.interval.upper


def test_degenerate_differences_skip_resampling() -> None:
    interval = shake256_bootstrap_interval([0.5, 0.25, -0.0], [0.75, 0.5, 0.25], SEED)
    assert (interval.lower, interval.upper) == (0.25, 0.25)
    negative_zero = shake256_bootstrap_interval([0.0], [-0.0], SEED)
    assert str(negative_zero.lower) == "-0.0"
    assert interval.to_dict() == {
        "lower": 0.25,
        "upper": 0.25,
        "method": SHAKE_METHOD,
        "mass": MASS,
        "replicates": REPLICATES,
    }


def test_rejection_sampling_draws_further_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Force rejections (a stream of all-ones words) to exercise block 1 onwards."""
    real = hashlib.shake_256
    seen = []

    class _Stream:
        def __init__(self, message: bytes) -> None:
            self.message = message
            seen.append(message)

        def digest(self, length: int) -> bytes:
            if self.message.endswith(b":0"):
                return b"\xff" * 8 + real(self.message).digest(length)[8:]
            return real(self.message).digest(length)

    monkeypatch.setattr(interval_module.hashlib, "shake_256", _Stream)
    indices = shake256_replicate_indices(SEED, 3, 5)
    monkeypatch.setattr(interval_module.hashlib, "shake_256", real)
    block0 = np.frombuffer(real(f"{SEED}:5:0".encode()).digest(24), dtype="<u8")
    block1 = np.frombuffer(real(f"{SEED}:5:1".encode()).digest(24), dtype="<u8")
    expected = [int(block0[1]) % 3, int(block0[2]) % 3, int(block1[0]) % 3]
    assert indices.tolist() == expected
    assert seen == [f"{SEED}:5:0".encode(), f"{SEED}:5:1".encode()]


def test_power_of_two_sizes_never_reject() -> None:
    words = np.frombuffer(hashlib.shake_256(f"{SEED}:0:0".encode()).digest(64), dtype="<u8")
    assert shake256_replicate_indices(SEED, 8, 0).tolist() == (words % np.uint64(8)).tolist()


# ---------------------------------------------------------------------------
# Counts, seeds and the work budget


def test_paired_counts() -> None:
    counts = PairedCounts.from_values([1.0, 1.0, 0.0, 0.0, -0.0], [1.0, 0.0, 1.0, 0.0, 0.0])
    assert counts == PairedCounts(1, 1, 1, 2)
    assert counts.n == 5
    assert PairedCounts.from_values(np.array([1.0]), np.array([0.0])) == PairedCounts(0, 1, 0, 0)
    assert mcnemar_exact_p_value(PairedCounts(3, 0, 0, 1)) == 1.0
    assert mcnemar_exact_p_value(PairedCounts(0, 1, 1, 0)) == 1.0


def test_nll_ratio() -> None:
    assert nll_ratio([1.0, 3.0], [2.0, 2.0]) == 1.0
    assert nll_ratio([0.5], [0.25]) == 0.5
    # The NLL percentile takes v[lo] when the position is integral (never with alpha 0.025...).
    ordered = [float(value) for value in range(REPLICATES)]
    assert interval_module._nll_percentile(ordered, 0.0) == 0.0
    assert interval_module._nll_percentile(ordered, 0.5) == 1023.5


class _Record:
    def __init__(self, **members: Any) -> None:
        self.__dict__.update(members)


def test_scope_seed_matches_the_document_digest() -> None:
    records = [
        {"id": "q2", "input": {"b": [1, 2.0]}, "expected": "é", "metadata": {"k": "v"}, "x": 1},
        {"id": "q1", "input": None, "expected": 3, "metadata": {}},
    ]
    document = [
        {name: record[name] for name in ("id", "input", "expected", "metadata")}
        for record in records
    ]
    rows = [seed_row(record) for record in records]
    assert scope_seed(rows) == digest_invarlock(document)
    assert scope_seed([]) == digest_invarlock([])
    frozen = _Record(
        id="q1", input=None, expected=3, metadata=types.MappingProxyType({}), output="ignored"
    )
    assert seed_row(frozen) == rows[1]


def test_required_bootstrap_draws() -> None:
    assert bootstrap_draws(20) == 40960
    assert required_bootstrap_draws([20, 7, 0], 2) == 27 * 2 * 2048
    assert required_bootstrap_draws([20], 0) == 0


def _budget(case: dict[str, Any]) -> int:
    given_input = case["input"]
    policy = parse_comparison_policy(given_input["policy"])
    baseline = json.loads((vectors_dir() / "invarlock" / given_input["baseline"]).read_text())
    records = baseline["records"]
    scopes = [len(records)] + [
        sum(1 for record in records if item.matches(record["metadata"])) for item in policy.slices
    ]
    return required_bootstrap_draws(scopes, policy.bootstrap_metric_count)


def test_work_budget_matches_the_comparison_vectors() -> None:
    checked = 0
    for case in load("invarlock/comparisons.json")["cases"]:
        if "max_bootstrap_draws" not in case["input"]:
            continue
        limit = case["input"]["max_bootstrap_draws"]
        if type(limit) is int and limit < 0:
            continue  # refused by compare_runs before any planning
        required = _budget(case)
        error = case["expected"].get("error")
        if error is not None:
            planned = re.match(r"comparison plans (\d+) bootstrap draws", error["message"])
            if planned is None:
                continue  # refused for another reason than the budget
            assert required == int(planned.group(1))
            assert required > limit
        else:
            assert limit is None or required <= limit
        checked += 1
    assert checked > 0, "no budget case in the comparison vectors"


# ---------------------------------------------------------------------------
# Every refusal, with its code

_REFUSALS: list[tuple[str, Any]] = [
    ("invalid_values", lambda: shake256_bootstrap_interval([1], [1.0], SEED)),
    ("invalid_values", lambda: shake256_bootstrap_interval([True], [1.0], SEED)),
    ("invalid_values", lambda: shake256_bootstrap_interval("ab", [1.0], SEED)),
    ("invalid_values", lambda: shake256_bootstrap_interval(None, [1.0], SEED)),
    ("invalid_values", lambda: shake256_bootstrap_interval(np.array([1]), [1.0], SEED)),
    ("invalid_values", lambda: shake256_bootstrap_interval(np.ones((1, 1)), [1.0], SEED)),
    ("invalid_values", lambda: seed_row({"id": "x"})),
    ("invalid_values", lambda: seed_row(_Record(id="x", input=1, expected=1))),
    ("invalid_values", lambda: seed_row({"id": "x", "input": {1}, "expected": 1, "metadata": {}})),
    ("invalid_values", lambda: scope_seed(["row"])),
    ("empty", lambda: shake256_bootstrap_interval([], [], SEED)),
    ("empty", lambda: nll_ratio_interval([], [], SEED)),
    ("empty", lambda: PairedCounts(0, 0, 0, 0)),
    ("empty", lambda: shake256_replicate_indices(SEED, 0, 0)),
    ("empty", lambda: nll_replicate_indices(SEED, 0, 0)),
    ("length_mismatch", lambda: shake256_bootstrap_interval([1.0], [1.0, 2.0], SEED)),
    ("length_mismatch", lambda: PairedCounts.from_values([1.0], [1.0, 0.0])),
    ("non_finite_value", lambda: shake256_bootstrap_interval([math.nan], [1.0], SEED)),
    ("non_finite_value", lambda: nll_ratio([1.0], [math.inf])),
    ("non_finite_value", lambda: shake256_bootstrap_interval([-1.7e308], [1.7e308], SEED)),
    ("overflow", lambda: nll_ratio([1.7e308, 1.7e308], [1.0, 1.0])),
    ("overflow", lambda: shake256_bootstrap_interval([0.0] * 2, [1.7e308, 1.0e308], SEED)),
    (
        "overflow",
        lambda: interval_module._ExactSum(np.array([1.7e308]), 2).total(np.array([2])),
    ),
    ("invalid_seed", lambda: shake256_bootstrap_interval([1.0], [1.0], "seed")),
    ("invalid_seed", lambda: nll_ratio_interval([1.0], [1.0], SEED.upper())),
    ("invalid_seed", lambda: nll_replicate_indices(b"x", 1, 0)),  # type: ignore[arg-type]
    ("invalid_counts", lambda: PairedCounts(1, -1, 0, 0)),
    ("invalid_counts", lambda: PairedCounts(1.0, 0, 0, 0)),  # type: ignore[arg-type]
    ("invalid_counts", lambda: newcombe_interval((1, 0, 0, 0))),  # type: ignore[arg-type]
    ("invalid_counts", lambda: shake256_replicate_indices(SEED, 2, 2048)),
    ("invalid_counts", lambda: nll_replicate_indices(SEED, 2, -1)),
    ("invalid_counts", lambda: bootstrap_draws(-1)),
    ("invalid_counts", lambda: required_bootstrap_draws([1], True)),
    ("invalid_counts", lambda: required_bootstrap_draws([1.0], 1)),  # type: ignore[list-item]
    ("non_positive_baseline_mean", lambda: nll_ratio([0.0, -0.0], [1.0, 1.0])),
    ("non_positive_baseline_mean", lambda: nll_ratio_interval([-1.0, 0.5], [1.0, 1.0], SEED)),
    ("non_positive_baseline_mean", lambda: nll_ratio_interval([3.0, -1.0], [1.0, 1.0], SEED)),
]


@pytest.mark.parametrize(("code", "action"), _REFUSALS)
def test_every_refusal_has_its_code(code: str, action: Any) -> None:
    with pytest.raises(IntervalError) as caught:
        action()
    assert caught.value.code == code


def test_refusal_table_covers_every_code() -> None:
    assert {code for code, _ in _REFUSALS} == IntervalError.codes


def test_interval_is_a_plain_value() -> None:
    interval = Interval(-0.5, 0.5, NEWCOMBE_METHOD, MASS, 0)
    assert interval.to_dict()["method"] == NEWCOMBE_METHOD
    with pytest.raises(AttributeError):
        interval.lower = 0.0  # type: ignore[misc]
