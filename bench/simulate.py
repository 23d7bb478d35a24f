"""Planning and multiplicity at full size, through the comparison's own intervals.

The unit suite keeps these simulations small (fixed seeds, a stated margin);
this script runs them at the sizes docs/statistics.md quotes and prints every
rate against its target:

* **Planning, bootstrap metrics** — for each design, ``plan_continuous`` gives
  the width and power pairs; ``--runs`` simulated runs (default 100) at each
  planned n go through ``shake256_bootstrap_interval`` (2,048 SHAKE-256
  replicates, exactly as ``compare_runs`` calls it). Target: each rate >= 94 %.
* **Planning, likelihood ratio** — the same through ``nll_ratio_interval``
  (default 60 runs).
* **Planning, pass/fail** — ``plan_binary`` for both binary intervals,
  ``--binary-runs`` multinomial tables (default 10,000) at each planned n.
* **Multiplicity** — ``--families`` (default 20,000) null families of 12
  McNemar p-values: family-wise error of Holm <= alpha, false discovery rate
  of Benjamini-Hochberg <= q (no margin: the rates themselves are printed).

Exit status 1 when a rate misses its target. Seeds are fixed: the same run
prints the same numbers.

Usage: python bench/simulate.py [--runs 100] [--nll-runs 60]
       [--binary-runs 10000] [--families 20000]
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time

import numpy as np

from sealeval.captured.inference import (
    METHOD10,
    adjust_p_values,
    mcnemar_p_value,
    newcombe_method10_interval,
)
from sealeval.captured.intervals import (
    PairedCounts,
    newcombe_interval,
    nll_ratio_interval,
    shake256_bootstrap_interval,
)
from sealeval.captured.planning import plan_binary, plan_continuous

TARGET = 0.94


def _seed(label: str) -> str:
    return "sha256:" + hashlib.sha256(label.encode("ascii")).hexdigest()


def _report(label: str, rate: float, target: float, *, at_most: bool = False) -> bool:
    ok = rate <= target if at_most else rate >= target
    sign = "<=" if at_most else ">="
    print(f"{label:<58} {rate:7.2%}  (target {sign} {target:.0%})  {'ok' if ok else 'MISSED'}")
    return ok


def continuous(runs: int) -> bool:
    ok = True
    for sigma, width, regression in ((0.3, 0.12, 0.06), (1.0, 0.5, 0.3)):
        pairs = plan_continuous(
            sigma, maximum_interval_width=width, maximum_regression=regression, power=0.95
        )
        rng = np.random.default_rng(2635)
        for n, target in zip(pairs, ("width", "power"), strict=True):
            assert n is not None
            reached = 0
            for run in range(runs):
                baseline = rng.uniform(0, 1, n)
                subject = baseline + rng.normal(0.0, sigma, n)
                interval = shake256_bootstrap_interval(baseline, subject, _seed(f"{target}-{run}"))
                if target == "width":
                    reached += interval.upper - interval.lower <= width
                else:
                    reached += interval.lower >= -regression
            label = f"bootstrap sd={sigma} {target} at n={n} ({runs} runs)"
            ok &= _report(label, reached / runs, TARGET)
    return ok


def likelihood(runs: int) -> bool:
    width, ratio_max, relative = 0.07, 1.04, 0.1
    pairs = plan_continuous(
        relative, maximum_interval_width=width, maximum_regression=ratio_max - 1, power=0.95
    )
    rng = np.random.default_rng(2650)
    ok = True
    for n, target in zip(pairs, ("width", "power"), strict=True):
        assert n is not None
        reached = 0
        for run in range(runs):
            baseline = rng.uniform(0.5, 1.5, n)
            subject = baseline + rng.normal(0.0, relative, n)
            interval = nll_ratio_interval(baseline, subject, _seed(f"nll-{target}-{run}")).interval
            if target == "width":
                reached += interval.upper - interval.lower <= width
            else:
                reached += interval.upper <= ratio_max
        ok &= _report(f"NLL ratio {target} at n={n} ({runs} runs)", reached / runs, TARGET)
    return ok


def binary(runs: int) -> bool:
    designs = (
        (0.8, 0.2, 0.1, 0.05, 0.0),
        (0.6, 0.3, 0.15, 0.05, 0.0),
        (0.9, 0.08, 0.06, 0.03, 0.0),
        (0.7, 0.42, 0.2, 0.1, 0.02),
    )
    ok = True
    for method in ("reference", METHOD10):
        interval_of = (
            newcombe_method10_interval
            if method == METHOD10
            else (lambda counts: newcombe_interval(counts).interval)
        )
        for p, psi, width, regression, delta in designs:
            pairs = plan_binary(
                p,
                maximum_interval_width=width,
                maximum_regression=regression,
                discordance=psi,
                assumed_difference=delta,
                power=0.95,
                method=method,
            )
            cells = [p - (psi - delta) / 2, (psi - delta) / 2, (psi + delta) / 2]
            cells.append(1.0 - sum(cells))
            rng = np.random.default_rng(20_201_998)
            for n, target in zip(pairs, ("width", "power"), strict=True):
                assert n is not None
                reached = 0
                for a, b, c, d in rng.multinomial(n, cells, size=runs):
                    interval = interval_of(PairedCounts(int(a), int(b), int(c), int(d)))
                    if target == "width":
                        reached += interval.upper - interval.lower <= width
                    else:
                        reached += interval.lower >= -regression
                label = f"{method} p={p} psi={psi} {target} at n={n}"
                ok &= _report(label, reached / runs, TARGET)
    return ok


def multiplicity(families: int) -> bool:
    rng = np.random.default_rng(1998)
    alpha = 0.05
    rejected = {"none": 0, "holm": 0, "benjamini_hochberg": 0}
    for _ in range(families):
        p_values = []
        for _ in range(12):
            discordant = int(rng.binomial(60, 0.3))
            b = int(rng.binomial(discordant, 0.5))
            p_values.append(mcnemar_p_value(PairedCounts(60 - discordant, b, discordant - b, 0)))
        for method in rejected:
            rejected[method] += any(p <= alpha for p in adjust_p_values(p_values, method))
    ok = _report(
        "Holm family-wise error, 12 null entries", rejected["holm"] / families, alpha, at_most=True
    )
    ok &= _report(
        "BH false discovery rate, 12 null entries",
        rejected["benjamini_hochberg"] / families,
        alpha,
        at_most=True,
    )
    print(
        f"{'uncorrected family-wise error (for contrast)':<58} {rejected['none'] / families:7.2%}"
    )
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--nll-runs", type=int, default=60)
    parser.add_argument("--binary-runs", type=int, default=10_000)
    parser.add_argument("--families", type=int, default=20_000)
    arguments = parser.parse_args()
    started = time.perf_counter()
    ok = binary(arguments.binary_runs)
    ok &= multiplicity(arguments.families)
    ok &= continuous(arguments.runs)
    ok &= likelihood(arguments.nll_runs)
    print(f"elapsed {time.perf_counter() - started:.1f} s; {'all targets met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
