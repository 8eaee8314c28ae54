"""The null of the scale map's M1 verdict (issue 21): how often "better with width" is printed
when test accuracy does not change with width.

M1 reads "shows" (:func:`..claims._read_m1`) when, at the largest label-noise share α, the
widest width that fits the noisy labels has mean test accuracy ≥ 50% and its seed range lies
entirely above the seed range at the narrowest such width. Under the null test accuracy is
flat in width (at a level above 50%, where the level half of the reading passes): each seed's
accuracy is the test set's binomial draw around the level plus a seed SD of 2 points
(:mod:`.dip_null`'s noise model). The worst case is taken for which widths fit: all of them,
so the reading compares the narrowest and the widest. With s seeds per width the two seed
ranges are disjoint in the called direction with probability about 1/C(2s, s) — 17% at 2
seeds, 5% at 3 — whatever the noise, so at 2 seeds the reading cannot reach the bar
(:func:`seeds_needed`). Power: the widest width 10 points above the narrowest.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from rulelab.analysis.calibration import MAX_FPR, NullCheck

LEVEL, SEED_SD, GAIN = 0.6, 0.02, 0.10


def m1_calls(acc: np.ndarray, coexist: float = 0.5) -> np.ndarray:
    """``acc [curves, widths, seeds]`` (narrowest first) → ``[curves]`` bool: the widest width's
    seed range above the narrowest's, and its mean ≥ ``coexist``."""
    first, last = acc[:, 0], acc[:, -1]
    return (last.min(-1) > first.max(-1)) & (last.mean(-1) >= coexist)


def simulate(widths: int, seeds: int, curves: int, n_test: int, gain: float = 0.0,
             rng: np.random.Generator | None = None) -> np.ndarray:
    """Per-seed test accuracies ``[curves, widths, seeds]``: :data:`LEVEL` rising linearly by
    ``gain`` from the narrowest to the widest width, seed SD :data:`SEED_SD`, binomial test
    noise on ``n_test`` pairs."""
    rng = np.random.default_rng(0) if rng is None else rng
    truth = LEVEL + gain * np.linspace(0.0, 1.0, widths)
    p = np.clip(truth[:, None] + SEED_SD * rng.standard_normal((curves, widths, seeds)), 0, 1)
    return rng.binomial(n_test, p) / n_test


def seeds_needed(bar: float = MAX_FPR) -> int:
    """The fewest seeds per width at which two exchangeable seed ranges are disjoint in one
    direction with probability ≤ ``bar`` (1/C(2s, s))."""
    return next(s for s in range(1, 50) if 1 / math.comb(2 * s, s) <= bar)


def m1_check(configs: Sequence, n_sims: int = 400, seed: int = 0) -> NullCheck | None:
    """M1's false-positive rate on flat width curves at the configs' widths and seeds at their
    largest α, and its power at a 10-point gain (module docstring)."""
    noisy = [c for c in configs if getattr(c, "task", None) == "modular" and c.noise > 0]
    if not noisy:
        return None
    alpha = max(c.noise for c in noisy)
    runs = [c for c in noisy if c.noise == alpha]
    widths = sorted({c.width for c in runs})
    if len(widths) < 2:
        return None
    seeds = min(sum(c.width == w for c in runs) for w in widths)
    c0 = runs[0]
    n_test = max(1, c0.p ** 2 - int(round(c0.train_frac * c0.p ** 2)))
    rng = np.random.default_rng(seed)
    null = m1_calls(simulate(len(widths), seeds, n_sims, n_test, rng=rng))
    hit = m1_calls(simulate(len(widths), seeds, n_sims, n_test, gain=GAIN, rng=rng))
    need = seeds_needed()
    return NullCheck(
        null=f"test accuracy flat in width at {LEVEL:.0%} (seed SD {SEED_SD * 100:.0f} points + "
             "the test set's binomial noise), every width fitting the noisy labels",
        setting=f"α = {alpha:g}: {len(widths)} widths ({widths[0]}…{widths[-1]}) × {seeds} "
                f"seeds, {n_test:,} test pairs", n_null=n_sims,
        false_positives=int(null.sum()), effect=f"the widest width {GAIN * 100:.0f} points above "
        "the narrowest", n_effect=n_sims, detected=int(hit.sum()),
        note=(f"too few seeds to call: {seeds} a width give 1/C({2 * seeds}, {seeds}) = "
              f"{1 / math.comb(2 * seeds, seeds):.0%} by chance; {need} would reach "
              f"{MAX_FPR:.0%}" if seeds < need else
              f"chance of disjoint ranges at {seeds} seeds: "
              f"{1 / math.comb(2 * seeds, seeds):.1%}"))
