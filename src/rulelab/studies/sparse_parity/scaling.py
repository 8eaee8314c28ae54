"""How the exponent of steps-to-learn grows with k (Barak et al. 2022: SGD learns k-sparse
parities in ``n^{O(k)}`` steps; issue 21: a recipe with k ∈ {2, 3, 4} so this is read).

- :func:`fits_by_k` — :func:`.analyses.fit_slope` per k: the exponent ``a_k`` of
  ``steps ≈ c_k · n^{a_k}`` with its 95% t interval, pooled over the learned runs of that k.
- :func:`k_dependence` — two least-squares fits over every learned run, each k with its own
  intercept ``log c_k``:
  *growth*: ``log steps = log c_k + (b₀ + b₁ k) log n`` — ``b₁`` is how much the exponent
  grows per unit of k, with its 95% t interval (``n^{O(k)}`` reads as ``b₁ > 0``; an
  exponent that does not depend on k as ``b₁ ≈ 0``);
  *proportional*: ``log steps = log c_k + a · k · log n`` — the ``a`` of ``n^{a k}``, with
  its interval. Both need learned runs at two k or more, each at two n or more.
- :func:`scaling_lines` — the readings as text: one exponent per k and the growth with k.

Runs that did not learn are left out and counted (censored: they would raise the exponents).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats as sstats

from rulelab.studies.sparse_parity.steps_tables import fit_slope, slope_line


def _learned(runs: pd.DataFrame) -> pd.DataFrame:
    runs = runs[runs["status"] == "done"] if "status" in runs.columns else runs
    return runs[runs["learned"].astype(bool)]


def fits_by_k(runs: pd.DataFrame) -> dict[int, dict]:
    """``{k: fit_slope(runs of that k)}``, by increasing k."""
    return {int(k): fit_slope(g) for k, g in runs.groupby("k", sort=True)}


def _ols(X: np.ndarray, y: np.ndarray, column: int) -> tuple[float, float, float]:
    """The coefficient of ``X[:, column]`` and its 95% t interval (NaN without residual
    degrees of freedom)."""
    beta, *_ = np.linalg.lstsq(X, y, rcond=None)
    dof = len(y) - X.shape[1]
    if dof <= 0:
        return float(beta[column]), math.nan, math.nan
    resid = y - X @ beta
    cov = (resid @ resid / dof) * np.linalg.pinv(X.T @ X)
    half = sstats.t.ppf(0.975, dof) * math.sqrt(max(cov[column, column], 0.0))
    return float(beta[column]), float(beta[column] - half), float(beta[column] + half)


def k_dependence(runs: pd.DataFrame) -> dict:
    """The growth ``b₁`` and the proportional ``a`` (module docstring) over learned runs."""
    ok = _learned(runs)
    usable = [k for k, g in ok.groupby("k") if g["n_bits"].nunique() >= 2]
    ok = ok[ok["k"].isin(usable)]
    out = {"ks": sorted(int(k) for k in usable), "runs": len(ok), "growth": math.nan,
           "growth_lo": math.nan, "growth_hi": math.nan, "a": math.nan, "a_lo": math.nan,
           "a_hi": math.nan}
    if len(usable) < 2:
        return out
    k = ok["k"].to_numpy(float)
    logn = np.log(ok["n_bits"].to_numpy(float))
    y = np.log(ok["steps_to_learn"].to_numpy(float))
    dummies = (k[:, None] == np.asarray(out["ks"], float)[None, :]).astype(float)  # log c_k
    growth = np.column_stack([dummies, logn, k * logn])
    out["growth"], out["growth_lo"], out["growth_hi"] = _ols(growth, y, growth.shape[1] - 1)
    prop = np.column_stack([dummies, k * logn])
    out["a"], out["a_lo"], out["a_hi"] = _ols(prop, y, prop.shape[1] - 1)
    return out


def k_line(dep: dict) -> str:
    if math.isnan(dep["growth"]):
        return ("exponent vs k: needs learned runs at two k or more, each at two n or more "
                f"(k = {', '.join(map(str, dep['ks'])) or 'none'})")
    grows = ("grows with k" if dep["growth_lo"] > 0 else "falls with k" if dep["growth_hi"] < 0
             else "does not change measurably with k")
    return (f"exponent vs k over {dep['runs']} learned runs at k = "
            f"{', '.join(map(str, dep['ks']))}: it {grows} — {dep['growth']:+.2f} per unit k "
            f"[95% CI {dep['growth_lo']:+.2f}, {dep['growth_hi']:+.2f}]; as n^(a·k), a = "
            f"{dep['a']:.2f} [{dep['a_lo']:.2f}, {dep['a_hi']:.2f}]")


def scaling_lines(runs: pd.DataFrame) -> list[str]:
    """One exponent line per k (the pooled line alone for one k), then the growth with k."""
    if "k" not in runs.columns or runs["k"].nunique() < 2:
        return [slope_line(fit_slope(runs))]
    lines = [f"k = {k}: {slope_line(fit)}" for k, fit in fits_by_k(runs).items()]
    return [*lines, k_line(k_dependence(runs))]
