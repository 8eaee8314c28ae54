"""The null of the scale map's S1 verdict (issue 21): how often "shows" is printed when depth
and imbalance do not interact.

S1 reads "shows" when, over the four headline cells, the 2L rate at r = 0.9 lies above the 2L
rate at r = 0.5 *and* the 1L rate at r = 0.5 above the 1L rate at r = 0.9, each with disjoint
95% Wilson intervals (:mod:`.claims`). Under the null every cell of a depth has the same true
rate p; seeds are independent Bernoulli trials. The false-positive rate is the largest over
p ∈ {0.05, 0.1, …, 0.95} (the worst case: the null does not say what p is), with the lab's
seeds per cell; the power is at the paper's headline (2L 0% → 77%, 1L 33% → 0%), simulated for
the whole verdict and summed exactly over the binomial counts for each half
(:func:`half_power`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from rulelab.analysis.calibration import NullCheck
from rulelab.analysis.stats import wilson_arrays
from rulelab.studies.shortcut_saturation.paper import PAPER_S

RATES = np.round(np.arange(0.05, 0.96, 0.05), 2)


def _seeds_per_cell(configs: Sequence) -> int | None:
    cells: dict[tuple, int] = {}
    for c in configs:
        if (c.label_mod == 2 and c.shortcut == "max" and c.ratio in (0.5, 0.9)
                and c.layers in (1, 2)):
            cells[c.layers, c.ratio] = cells.get((c.layers, c.ratio), 0) + 1
    return min(cells.values()) if len(cells) == 4 else None


def _above(k_hi, k_lo, n: int) -> np.ndarray:
    """Whether the interval of ``k_hi`` of n lies entirely above that of ``k_lo`` of n."""
    lo_hi, _ = wilson_arrays(k_hi, np.full_like(k_hi, n))
    _, hi_lo = wilson_arrays(k_lo, np.full_like(k_lo, n))
    return lo_hi > hi_lo


def shows(rng: np.random.Generator, p: dict, n: int, sims: int, half: str = "both") -> int:
    """How many of ``sims`` simulated labs (n seeds a cell, true rates ``p[(layers, r)]``) the
    S1 verdict reads "shows" — or only its 2L rise (``half="2L"``) or 1L fall (``"1L"``)."""
    k = {cell: rng.binomial(n, rate, size=sims) for cell, rate in p.items()}
    rise, fall = _above(k[2, 0.9], k[2, 0.5], n), _above(k[1, 0.5], k[1, 0.9], n)
    return int({"both": rise & fall, "2L": rise, "1L": fall}[half].sum())


def half_power(half: str, n: int, rates: dict | None = None) -> float:
    """Exactly (binomial sums, no simulation) the probability that ``half`` of S1 ("2L" or
    "1L"; "both" is their product, the cells being independent) reads "shows" with ``n``
    seeds a cell at true rates ``rates`` (default the paper's headline)."""
    if half == "both":
        return half_power("2L", n, rates) * half_power("1L", n, rates)
    p = rates or {(layers, r): PAPER_S[f"{layers}L"][r] for layers in (1, 2) for r in (0.5, 0.9)}
    high, low = ((2, 0.9), (2, 0.5)) if half == "2L" else ((1, 0.5), (1, 0.9))
    k = np.arange(n + 1)
    pmf = {c: np.array([math.comb(n, i) * p[c] ** i * (1 - p[c]) ** (n - i) for i in k])
           for c in (high, low)}
    ci_low, ci_high = wilson_arrays(k, np.full_like(k, n))
    above = ci_low[:, None] > ci_high[None, :]  # [k_high, k_low]
    return float(pmf[high] @ above @ pmf[low])


def seeds_for_power(half: str, power: float = 0.8, most: int = 200) -> int | None:
    """The fewest seeds per cell at which ``half`` of S1 ("2L", "1L" or "both") reads "shows"
    with at least ``power`` when the paper's headline is true (None: more than ``most``).
    Power is not monotone in n (Wilson intervals move in steps), so more seeds than this may
    still fall short at a few n."""
    return next((n for n in range(2, most + 1) if half_power(half, n) >= power), None)


def s1_check(configs: Sequence, n_sims: int = 400, seed: int = 0) -> NullCheck | None:
    """S1's false-positive rate (worst case over the common rate) and power at the paper's
    headline, at the seeds per cell of ``configs`` (module docstring)."""
    n = _seeds_per_cell(configs)
    if n is None:
        return None
    rng = np.random.default_rng(seed)
    worst, at = 0, None
    for p2 in RATES:  # 2L cells share p2, 1L cells share p1: the worst of both
        fp = shows(rng, {(2, 0.5): p2, (2, 0.9): p2, (1, 0.5): p2, (1, 0.9): p2}, n, n_sims)
        if fp >= worst:
            worst, at = fp, p2
    # one null that the intervals can be fooled by: each depth on its own at its worst, the
    # other with the paper's effect (then only one half of the verdict must be a false call)
    half = max(shows(rng, {(2, 0.5): p, (2, 0.9): p, (1, 0.5): 0.33, (1, 0.9): 0.0}, n, n_sims)
               for p in RATES)
    paper = {(layers, r): PAPER_S[f"{layers}L"][r] for layers in (1, 2) for r in (0.5, 0.9)}
    hits = shows(rng, paper, n, n_sims)
    halves = {h: half_power(h, n) for h in ("2L", "1L")}
    need = {h: seeds_for_power(h) for h in ("2L", "1L", "both")}
    return NullCheck(
        null="no interaction: each depth's two cells share one true rate (worst over 5%–95%; "
             "also with only the 2L half null and 1L at the paper's fall)",
        setting=f"{n} seeds per headline cell", n_null=n_sims,
        false_positives=max(worst, half), effect="the paper's headline (2L 0% → 77%, "
        "1L 33% → 0%)", n_effect=n_sims, detected=hits,
        note=f"worst common rate {at:.0%}; power of each half at the paper's effect: 2L rise "
             f"{halves['2L']:.0%}, 1L fall {halves['1L']:.0%}; 80% power needs "
             f"{need['2L']} seeds a cell for the 2L rise, {need['1L']} for the 1L fall, "
             f"{need['both']} for both")
