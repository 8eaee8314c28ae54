"""The null band of hidden progress (Barak et al. 2022's "hidden progress"; issue 21).

"Support mass +10% before visible progress" alone is no evidence: SGD noise moves every
coordinate's share, and random k-subsets other than S cross +10% before visible progress too
(issue 21: 1–33%; most of those share bits with S — disjoint from S, 2% at the quick preset,
but the off-support 95% quantile grows with n to +12% at n = 48). The call is made against the
subsets disjoint from S, in the same run:

- the **statistic** of a k-subset ``T``: its share of the first layer's squared weights,
  ``s_T(t) = Σ_{i∈T} mass_i(t) / Σ_i mass_i(t)`` (:func:`.metrics.support_mass` for ``T = S``),
  as a rise over init, ``r_T(t) = s_T(t)/s_T(0) − 1``, and its running maximum ``M_T(t) =
  max_{τ≤t} r_T(τ)`` — the largest rise up to an evaluation;
- the **null family**: up to :data:`MAX_NULL_SUBSETS` k-subsets disjoint from S (all of them
  when there are fewer: :func:`null_subsets`), fixed per run from its data seed;
- the **band** at an evaluation: the conformal 95% quantile of ``M_T`` over the null family
  (:func:`conformal_band`: the ⌈0.95 (N+1)⌉-th smallest of N values), so that a subset
  exchangeable with the family exceeds it with probability ≤ 5%; NaN with fewer than
  :data:`MIN_NULL_SUBSETS` subsets (then no rise can be called at 5%);
- the **call**: over the evaluations before visible progress (eval acc < 60%), the support's
  largest rise exceeds the band at the last of them and its mass reached the +10% threshold
  (:func:`.summary.mass_threshold`); the **step** is the first of those evaluations at which
  its mass had reached +10% and its rise stood above the band as it was then.

:class:`NullBand` keeps the running state during training (``[E, N]``; the trainer stores
``weights null_band`` per evaluation and checkpoints the state); :func:`hidden_reading`
makes the call from stored curves (``support_mass``, ``null_band``, ``acc``), the same call
the run summary makes online (:mod:`.summary`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
import torch

from rulelab.studies.sparse_parity.summary import MASS_FACTOR, VISIBLE_ACC, mass_threshold

MAX_NULL_SUBSETS = 256  # the null family's size when there are more disjoint k-subsets
MIN_NULL_SUBSETS = 19  # fewer: the 95% band is the maximum of fewer than 19, ≥ 5% exceed it
LEVEL = 0.95  # the band's quantile: ≤ 5% of null subsets are called
NULL_STREAM = 5  # random stream of the null family (data seed, stream)


def null_subsets(n_bits: int, k: int, support: Sequence[int], seed: int = 0,
                 limit: int = MAX_NULL_SUBSETS) -> np.ndarray:
    """``[N, k]`` int64 k-subsets disjoint from ``support``: all of them when there are at most
    ``limit``, else ``limit`` distinct uniform draws (from ``seed``)."""
    off = sorted(set(range(n_bits)) - {int(i) for i in support})
    if math.comb(len(off), k) <= limit:
        return np.asarray(list(itertools.combinations(off, k)), dtype=np.int64).reshape(-1, k)
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), NULL_STREAM]))
    rows: set[tuple[int, ...]] = set()
    while len(rows) < limit:
        rows.add(tuple(sorted(rng.choice(off, size=k, replace=False).tolist())))
    return np.asarray(sorted(rows), dtype=np.int64)


def subset_shares(mass: torch.Tensor, subsets: torch.Tensor) -> torch.Tensor:
    """``mass [..., n]`` per-coordinate squared weight and ``subsets [..., N, k]`` (broadcast
    over the leading axes) → ``[..., N]`` share of the total on each subset."""
    mass = mass.double()
    total = mass.sum(-1, keepdim=True)
    idx = subsets.expand(*mass.shape[:-1], *subsets.shape[-2:])
    on = torch.gather(mass.unsqueeze(-2).expand(*idx.shape[:-1], mass.shape[-1]), -1, idx)
    return on.sum(-1) / total.clamp(min=1e-300)


def conformal_band(values: torch.Tensor, level: float = LEVEL) -> torch.Tensor:
    """``values [..., N]`` → ``[...]``: the ⌈level·(N+1)⌉-th smallest (a fresh exchangeable
    value exceeds it with probability ≤ 1 − level); NaN when N < :data:`MIN_NULL_SUBSETS` or
    a value is NaN."""
    N = values.shape[-1]
    rank = math.ceil(level * (N + 1))
    if N < MIN_NULL_SUBSETS or rank > N:
        return torch.full(values.shape[:-1], float("nan"), dtype=torch.float64)
    band = values.double().sort(-1).values[..., rank - 1]
    return torch.where(values.isnan().any(-1), float("nan"), band)


class NullBand:
    """Per member, the null family's shares at init and running maximum rise (``[E, N]``)."""

    def __init__(self, subsets: torch.Tensor) -> None:
        self.subsets = subsets  # [E, N, k] int64
        self.init: torch.Tensor | None = None  # [E, N] shares at the first evaluation
        self.max_rise: torch.Tensor | None = None  # [E, N]

    def update(self, mass: torch.Tensor) -> torch.Tensor:
        """``mass [E, n]`` at an evaluation → ``[E]`` band (the running maxima's 95% quantile)."""
        shares = subset_shares(mass.cpu(), self.subsets)
        if self.init is None:
            self.init = shares
            self.max_rise = torch.zeros_like(shares)
        rise = shares / self.init - 1.0
        self.max_rise = torch.fmax(self.max_rise, rise)
        return conformal_band(self.max_rise)

    def state(self, e: int) -> dict | None:
        if self.init is None:
            return None
        return {"init": self.init[e].clone(), "max_rise": self.max_rise[e].clone()}

    def load(self, e: int, state: dict | None) -> None:
        """Member ``e``'s state from a checkpoint; a checkpoint without one (written before the
        band existed) leaves the member's band NaN: its init is gone."""
        if self.init is None:
            self.init = torch.full(self.subsets.shape[:2], float("nan"), dtype=torch.float64)
            self.max_rise = torch.zeros_like(self.init)
        if state is None:
            self.init[e] = float("nan")
            return
        self.init[e], self.max_rise[e] = state["init"], state["max_rise"]


def hidden_reading(steps: Sequence[int], support_mass: Sequence[float],
                   band: Sequence[float], acc: Sequence[float],
                   factor: float = MASS_FACTOR) -> dict:
    """The call from one run's curves (one value per evaluation, in order): ``called``,
    ``step`` (None unless called), ``band`` (at the last evaluation before visible progress),
    ``rise`` (the support's largest rise there) and ``mass_rise_step`` (the first +10%
    crossing at any evaluation, the uncalibrated reading before issue 21)."""
    out = {"called": False, "step": None, "band": math.nan, "rise": math.nan,
           "mass_rise_step": None}
    if not len(steps):
        return out
    m0 = float(support_mass[0])
    level = mass_threshold(m0, factor)
    first = None
    for s, m, b, a in zip(steps, support_mass, band, acc, strict=True):
        if a >= VISIBLE_ACC:
            break
        rise = m / m0 - 1.0
        out["band"] = float(b)
        out["rise"] = rise if math.isnan(out["rise"]) else max(out["rise"], rise)
        if first is None and m >= level and rise > b:
            first = int(s)
    # given rise > band, `first` exists iff the largest rise reached the +10% threshold
    if out["rise"] > out["band"] and first is not None:  # False for a NaN band
        out["called"], out["step"] = True, first
    out["mass_rise_step"] = next((int(s) for s, m in zip(steps, support_mass, strict=True)
                                  if m >= level), None)  # at any evaluation, as before
    return out
