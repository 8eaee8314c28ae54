"""A test for a dip in a curve of means over a grid (SPEC M.4.1; issue 21, item 1).

A dip is an interior width ``i`` whose mean test accuracy is below a width before it *and* a
width after it. Looking for one at every interior width, against the highest mean on each side,
is a search over the grid: on a flat curve some width is always lowest, and with 7 widths the
old rule (seed ranges that do not overlap) called a dip on about half of flat curves. This
module tests the search itself:

- **statistic** (the depth searched for, in standard errors): with ``m_w`` the mean over
  ``n_w`` seeds at width ``w`` and ``s`` the pooled within-width seed SD,
  ``t(a, b) = (m_a − m_b) / (s·√(1/n_a + 1/n_b))`` and

      T = max over interior i of  min( max_{j<i} t(j, i),  max_{k>i} t(k, i) ).

- **null**: a flat curve, every seed's value drawn from one normal distribution. ``T`` is then
  pivotal — it does not depend on the level or the SD — so its distribution depends only on
  the seed counts ``n_w``, and is simulated once per grid (:func:`null_statistics`, a fixed
  RNG seed, :data:`N_NULL` draws). Since ``T`` is the maximum over every triple the detector
  could have picked, its null quantile accounts for the multiple comparison: the p-value is
  that of the deepest dip found, not of one chosen in advance.
- **pooled SD**: with 2 seeds a width's own SD has one degree of freedom (a t-test on it needs
  t > 12.7 to reach 5%); pooling over the ``W`` widths of the curve gives ``Σ(n_w − 1)``
  degrees of freedom (7 for the quick grid, 18 for the paper's) under the assumption that the
  seed SD is the same at every width — which a flat null satisfies, and which the second
  condition of :mod:`.analyses.dd_dip` (the depth beyond the test set's binomial noise at the
  dip) backs up where it is not.

A flat curve (or any curve without a dip whose seed noise is normal and equal across widths)
gets ``p < α`` with probability ``α``; a dip is called at ``α =`` :data:`ALPHA` ``= 2.5%``, half
the 5% the issue allows, as margin for seed SDs that differ across widths. The measured rates
are in :mod:`.analyses.dip_null`.
"""

from __future__ import annotations

import functools
import math

import numpy as np

# The level of the test. Issue 21 asks that ≤ 5% of flat curves be called; at a level of 5% the
# rate would be 5% exactly for normal seeds of one SD, and above it where the seed SD differs
# across widths (twice as large at one width: 6–8% at the presets' grids). Half of it keeps
# the measured rate ≤ 5% there too (2.7%, 4.0% and 4.3% at the quick, medium and paper grids:
# dip_null's table and tests).
ALPHA = 0.025
N_NULL = 20_000  # null draws per grid: the p-value's Monte Carlo SE at 5% is 0.15 points
NULL_SEED = 20_240_521  # fixed, so a reading is reproducible


def dip_statistic(means: np.ndarray, n: np.ndarray, sd: np.ndarray | float
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(T, i, j, k)`` of curves ``means [..., W]`` with seed counts ``n [W]`` and pooled SD
    ``sd [...]`` (module docstring): the statistic and the dip, the peak before and the peak
    after it, as indices. Where no interior width lies below both sides, ``T ≤ 0``."""
    means = np.asarray(means, float)
    n = np.asarray(n, float)
    W = means.shape[-1]
    shape = means.shape[:-1]
    best = np.full(shape, -np.inf)
    at = [np.zeros(shape, int) for _ in range(3)]
    for i in range(1, W - 1):
        # scaled differences to every width on each side; the best of each side
        diff = (means - means[..., i:i + 1]) / np.sqrt(1.0 / n + 1.0 / n[i])
        j = np.argmax(diff[..., :i], axis=-1)
        k = i + 1 + np.argmax(diff[..., i + 1:], axis=-1)
        t = np.minimum(np.take_along_axis(diff, j[..., None], -1)[..., 0],
                       np.take_along_axis(diff, k[..., None], -1)[..., 0])
        better = t > best
        best = np.where(better, t, best)
        for arr, v in zip(at, (i, j, k), strict=True):
            arr[...] = np.where(better, v, arr)
    sd = np.asarray(sd, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        T = np.where(best > 0, best / sd, best)  # sd 0 with a real dip: T = inf
    return (T, *at)


def pooled_sd(std: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, int]:
    """``(pooled within-width SD, degrees of freedom)`` from per-width sample SDs ``std
    [..., W]`` (NaN at one seed) and seed counts ``n [W]``."""
    n = np.asarray(n, float)
    dof = np.where(n > 1, n - 1, 0.0)
    df = int(dof.sum())
    if df == 0:
        return np.full(np.shape(std)[:-1], math.nan), 0
    var = np.nansum(np.where(n > 1, np.asarray(std, float) ** 2, 0.0) * dof, axis=-1) / df
    return np.sqrt(var), df


@functools.lru_cache(maxsize=64)
def null_statistics(n: tuple[int, ...], draws: int = N_NULL) -> np.ndarray:
    """Sorted null draws of ``T`` for seed counts ``n`` (one per width): flat curves of
    standard-normal seeds, each studentized by its own pooled SD."""
    rng = np.random.default_rng(NULL_SEED)
    counts = np.asarray(n)
    x = rng.standard_normal((draws, len(n), int(counts.max())))
    mask = np.arange(x.shape[-1]) < counts[:, None]  # [W, n_max]: the seeds each width has
    x = np.where(mask, x, 0.0)
    means = x.sum(-1) / counts
    dev2 = np.where(mask, (x - means[..., None]) ** 2, 0.0).sum(-1)
    std = np.sqrt(dev2 / np.maximum(counts - 1, 1))  # unused where n = 1 (no dof)
    sd, _ = pooled_sd(std, counts)
    T, *_ = dip_statistic(means, counts, sd)
    return np.sort(T)


def p_value(T: np.ndarray | float, n: tuple[int, ...]) -> np.ndarray:
    """Monte Carlo p-value ``(1 + #{T_null ≥ T}) / (1 + draws)`` of observed ``T`` (valid at
    any number of draws: the observation counts as one of them)."""
    null = null_statistics(tuple(int(v) for v in n))
    above = len(null) - np.searchsorted(null, np.asarray(T, float), side="left")
    return (1.0 + above) / (1.0 + len(null))


SEED_COUNTS = (2, 3, 4, 5, 6, 8, 10, 15, 20)  # seeds per width tried by seeds_needed


def seeds_needed(depth: float, sd: float, widths: int, *, alpha: float = ALPHA,
                 power: float = 0.8, draws: int = 400) -> int | None:
    """Fewest seeds per width (of :data:`SEED_COUNTS`) at which this test calls a one-width
    dip of ``depth`` in the middle of a ``widths``-point flat curve with seed SD ``sd`` with
    probability ≥ ``power`` (normal seeds, fixed RNG seed); None if 20 do not."""
    if not (depth > 0 and sd > 0 and widths >= 3):
        return None
    rng = np.random.default_rng(NULL_SEED + 1)
    shift = np.zeros(widths)
    shift[widths // 2] = -depth / sd
    for n in SEED_COUNTS:
        x = rng.standard_normal((draws, widths, n)) + shift[:, None]
        counts = np.full(widths, n)
        s, _ = pooled_sd(x.std(-1, ddof=1), counts)
        T, *_ = dip_statistic(x.mean(-1), counts, s)
        if np.mean((T > 0) & (p_value(T, tuple(counts)) < alpha)) >= power:
            return n
    return None
