"""Parallel SHAKE-256 bootstrap, bit-identical to ``shake256_bootstrap_interval``.

Used only for scopes of at least :data:`PARALLEL_MIN_PAIRS` pairs when the
caller asks for workers; any failure to run workers falls back to the serial
primitive.
"""

from __future__ import annotations

import gc
import math
import multiprocessing
import os
import sys
import threading
from collections.abc import Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, Final

import numpy as np

from sealeval.captured.comparison.model import ComparisonError, FloatArray, IndexArray
from sealeval.captured.intervals import (
    MASS,
    REPLICATES,
    SHAKE_METHOD,
    Interval,
    shake256_bootstrap_interval,
    shake256_replicate_indices,
)

# Parallel SHAKE-256 replicates: only for scopes at least this large, at most this many
# worker processes, and differences with at most this many distinct values.
PARALLEL_MIN_PAIRS: Final = 10_000
_MAX_WORKERS: Final = 8
_MAX_DISTINCT: Final = 4096
# Exact totals stay far from binary64 overflow below this bound on n * max|d|.
_SAFE_TOTAL: Final = 2.0**1000


# ---------------------------------------------------------------------------
# Parallel SHAKE-256 bootstrap (bit-identical to shake256_bootstrap_interval)
#
# Each replicate's draws depend only on (seed, n, replicate), so replicates can
# be computed in any process. A worker draws the indices with the public
# shake256_replicate_indices, counts how often each *distinct* difference was
# drawn, and forms the exact sum as an integer over a common power-of-two
# denominator; Python's int / int division rounds it once, correctly, which is
# exactly math.fsum of the drawn values (the definition the primitive
# implements). The percentile step below is 22-comparison.md §5.2 verbatim.
# Any failure to run workers falls back to the serial primitive.


@dataclass(frozen=True, slots=True)
class _Grouped:
    """Differences as codes into their distinct values, each an integer over ``denominator``."""

    codes: IndexArray
    numerators: tuple[int, ...]
    denominator: int


def _grouped(differences: FloatArray) -> _Grouped | None:
    distinct = np.unique(differences)
    if distinct.size > _MAX_DISTINCT:
        return None
    codes: IndexArray = np.searchsorted(distinct, differences).astype(np.intp, copy=False)
    ratios = [value.as_integer_ratio() for value in distinct.tolist()]
    denominator = max(den for _, den in ratios)  # powers of two: a common multiple
    numerators = tuple(num * (denominator // den) for num, den in ratios)
    return _Grouped(codes, numerators, denominator)


_WORKER_STATE: dict[str, Any] = {}


def _start_worker(seed: str, size: int, grouped: _Grouped) -> None:
    """Process-pool initializer: keep one bootstrap's inputs in the worker.

    A forked worker shares the parent's heap (the runs) copy-on-write; the
    cyclic collector would walk, and so copy, all of it. The worker creates
    no reference cycles, so collection is switched off for its short life.
    """
    gc.disable()
    _WORKER_STATE.clear()
    _WORKER_STATE.update(seed=seed, size=size, grouped=grouped)


def _replicate_means(replicates: range) -> list[float]:
    """Return the means of the given replicates (runs in a worker process)."""
    seed: str = _WORKER_STATE["seed"]
    size: int = _WORKER_STATE["size"]
    grouped: _Grouped = _WORKER_STATE["grouped"]
    codes = grouped.codes
    numerators = grouped.numerators
    groups = len(numerators)
    means = []
    for replicate in replicates:
        drawn = np.bincount(
            codes[shake256_replicate_indices(seed, size, replicate)], minlength=groups
        )
        exact = sum(
            count * numerator
            for count, numerator in zip(drawn.tolist(), numerators, strict=True)
            if count
        )
        means.append((exact / grouped.denominator) / size)
    return means


def _percentile(draws: Sequence[float], q: float) -> float:
    position = (REPLICATES - 1) * q
    low = math.floor(position)
    high = min(low + 1, REPLICATES - 1)
    return draws[low] + (draws[high] - draws[low]) * (position - low)


def _pool_context() -> Any:
    methods = multiprocessing.get_all_start_methods()
    # fork is instant and the workers only hash and count; it is used on Linux when no
    # other Python thread could hold a lock at fork time. Elsewhere: fresh interpreters.
    if sys.platform == "linux" and "fork" in methods and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


def _parallel_shake(
    differences: FloatArray, seed: str, grouped: _Grouped, workers: int
) -> Interval | None:
    size = int(differences.size)
    step = -(-REPLICATES // (4 * workers))
    chunks = [range(start, min(start + step, REPLICATES)) for start in range(0, REPLICATES, step)]
    # Forked workers share this process's heap copy-on-write; freezing the tracked
    # objects keeps any collection (here or in a worker) from walking, and so
    # copying, all of it. Collection of the frozen objects resumes afterwards.
    frozen = gc.get_freeze_count() == 0  # never thaw objects a caller froze
    if frozen:
        gc.freeze()
    try:
        pool: Executor = ProcessPoolExecutor(
            max_workers=workers,
            mp_context=_pool_context(),
            initializer=_start_worker,
            initargs=(seed, size, grouped),
        )
        with pool:
            means = [mean for chunk in pool.map(_replicate_means, chunks) for mean in chunk]
    except (OSError, RuntimeError, ValueError, ImportError, Warning):
        # No processes here (sandbox, limits, a warning raised as an error, a broken
        # pool): the serial primitive gives the same interval.
        return None
    finally:
        if frozen:
            gc.unfreeze()
    if len(means) != REPLICATES:  # pragma: no cover - defensive
        return None
    draws = sorted(means)
    return Interval(
        _percentile(draws, 0.025), _percentile(draws, 0.975), SHAKE_METHOD, MASS, REPLICATES
    )


def shake_interval(left: FloatArray, right: FloatArray, seed: str, workers: int) -> Interval:
    """``shake256_bootstrap_interval``, with the replicates spread over processes when it pays."""
    if workers > 1 and left.size >= PARALLEL_MIN_PAIRS:
        with np.errstate(over="ignore", invalid="ignore"):
            differences = right - left
        if np.isfinite(differences).all():
            magnitude = max(-float(differences.min()), float(differences.max()))
            if (
                differences.min() != differences.max()
                and magnitude * (differences.size + 1) < _SAFE_TOTAL
            ):
                grouped = _grouped(differences)
                if grouped is not None:
                    interval = _parallel_shake(differences, seed, grouped, workers)
                    if interval is not None:
                        return interval
    return shake256_bootstrap_interval(left, right, seed)


def worker_count(requested: object) -> int:
    """Return the worker processes to use: ``requested`` (>= 1), or the available CPUs capped at 8.

    Raises:
        ComparisonError: ``invalid_workers`` (field ``workers``).
    """
    if requested is None:
        try:
            available = len(os.sched_getaffinity(0))
        except AttributeError:  # pragma: no cover - not Linux
            available = os.cpu_count() or 1
        return max(1, min(available, _MAX_WORKERS))
    if type(requested) is not int:
        raise ComparisonError("invalid_workers", "workers")
    assert isinstance(requested, int)
    if requested < 1:
        raise ComparisonError("invalid_workers", "workers")
    return requested
