"""Sparse-parity tables over a runs frame and a long metrics frame (the store's shapes:
``rulelab.load(lab)``: runs with config and summary columns, metrics ``run_id, epoch, split,
metric, value``).

- :func:`steps_table` — steps-to-learn vs n (per k, model, optimizer, …): runs, fraction
  learned with its 95% Wilson interval (SPEC "Cross-cutting": rates carry Wilson intervals and
  counts), median and range of steps-to-learn over the seeds that learned, every seed's value,
  the median hidden-progress, Fourier and visible steps, the median lead (visible − hidden),
  the median null band, and how many runs had hidden progress called (before visible
  progress, above the band) among those where it can be: an MLP's support mass exists
  (``hidden_measurable``) and there are enough off-support subsets for a 5% band
  (``hidden_callable``).
- :func:`fit_slope` — the exponent a of ``steps ≈ c · n^a`` (Barak et al. 2022: n^{O(k)}), by
  least squares on log steps vs log n: pooled over every learned run with its t interval, and
  per seed (one slope per seed index across n) with a t interval over seeds. Runs that did not
  learn are left out and counted (censored: they would raise the slope).
- :func:`progress_steps` — per run, hidden progress re-read from the stored support-mass and
  null-band curves at any factor (:func:`.hidden_null.hidden_reading`: called only above the
  band of the run's off-support k-subsets), beside the visible and learned steps and the lead
  between them.
- :func:`slope_line` — the fit as one line of text.
- :func:`progress_curves` — support mass, Fourier gap, loss and accuracy vs step, one row per
  (run, evaluation), for the figures.

Steps are optimizer steps: the stored curves count epochs, converted with each run's
``steps_per_epoch`` (1 for fresh samples, ⌈N/B⌉ for a fixed set; :mod:`.config`).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats as sstats

from rulelab.analysis.stats import wilson
from rulelab.studies.sparse_parity.config import epoch_steps
from rulelab.studies.sparse_parity.hidden_null import hidden_reading
from rulelab.studies.sparse_parity.summary import (
    LEARNED_ACC,
    MASS_FACTOR,
    VISIBLE_ACC,
    first_crossing,
)

GROUP = ("k", "model", "optimizer", "samples", "width", "batch_size", "lr")
CURVE_METRICS = {("weights", "support_mass"): "support_mass", ("eval", "fourier_gap"):
                 "fourier_gap", ("eval", "loss"): "loss", ("eval", "acc"): "acc",
                 ("eval", "corr_s"): "corr_s", ("weights", "null_band"): "null_band"}


def _group_cols(runs: pd.DataFrame) -> list[str]:
    """The grouping columns present that actually vary or name the setting."""
    return [c for c in GROUP if c in runs.columns]


def _median(values) -> float:
    v = [x for x in values if x is not None and not (isinstance(x, float) and math.isnan(x))]
    return float(np.median(v)) if v else math.nan


def _numbers(g: pd.DataFrame, column: str) -> pd.Series:
    """``g[column]`` as floats (NaN where absent or not a number)."""
    if column not in g:
        return pd.Series(math.nan, index=g.index)
    return pd.to_numeric(g[column], errors="coerce")


def _finished(runs: pd.DataFrame) -> pd.DataFrame:
    return runs[runs["status"] == "done"] if "status" in runs.columns else runs


def steps_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (setting, n_bits), sorted by n: see the module docstring."""
    runs = _finished(runs)
    rows = []
    keys = [*_group_cols(runs), "n_bits"]
    for key, g in runs.groupby(keys, sort=True, dropna=False):
        learned = g[g["learned"].astype(bool)]
        steps = learned["steps_to_learn"].astype(float)
        lo, hi = wilson(len(learned), len(g))
        per_seed = ", ".join("—" if not ok else str(int(s)) for ok, s in
                             zip(g.sort_values("seed")["learned"].astype(bool),
                                 g.sort_values("seed")["steps_to_learn"], strict=True))
        rows.append({
            **dict(zip(keys, key, strict=True)), "runs": len(g), "learned": len(learned),
            "rate": len(learned) / len(g), "rate_lo": lo, "rate_hi": hi,
            "median_steps": _median(steps), "min_steps": steps.min() if len(steps) else math.nan,
            "max_steps": steps.max() if len(steps) else math.nan, "steps_per_seed": per_seed,
            # optional columns: a report drops a column no run fills (e.g. nothing called)
            "median_hidden": _median(_numbers(g, "hidden_progress_step")),
            "median_visible": _median(_numbers(g, "visible_step")),
            "median_fourier": _median(_numbers(g, "fourier_step")),
            "median_lead": _median(_numbers(g, "visible_step")
                                   - _numbers(g, "hidden_progress_step")),
            "median_band": _median(_numbers(g, "hidden_band")),
            # called: above the null band before visible progress (issue 21; .hidden_null)
            "hidden_first": int(g["hidden_called"].fillna(False).astype(bool).sum())
            if "hidden_called" in g else 0,
            # runs whose support mass exists (an MLP's first layer; a transformer has none, so
            # "hidden first" is not measurable there, not 0 of n: issue 21) …
            "hidden_measurable": int(_numbers(g, "support_mass_init").notna().sum())
            if "support_mass_init" in g else int((g["model"] != "transformer").sum())
            if "model" in g else len(g),
            # … and whose band exists (≥ 19 off-support k-subsets; runs stored before the
            # band have none: their hidden progress is not called)
            "hidden_callable": int(_numbers(g, "hidden_band").notna().sum()),
        })
    return pd.DataFrame(rows)


def _ols(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float, float]:
    """Slope, intercept and the 95% t interval of the slope (NaN interval for 2 points)."""
    fit = sstats.linregress(x, y)
    dof = len(x) - 2
    half = sstats.t.ppf(0.975, dof) * fit.stderr if dof > 0 else math.nan
    return float(fit.slope), float(fit.intercept), fit.slope - half, fit.slope + half


def fit_slope(runs: pd.DataFrame) -> dict:
    """Exponent of steps-to-learn vs n over learned runs (see the module docstring)."""
    runs = _finished(runs)
    ok = runs[runs["learned"].astype(bool)]
    out = {"runs": len(runs), "learned": len(ok), "censored": len(runs) - len(ok),
           "n_values": sorted(int(n) for n in ok["n_bits"].unique()),
           "slope": math.nan, "slope_lo": math.nan, "slope_hi": math.nan, "intercept": math.nan,
           "seed_slopes": [], "seed_mean": math.nan, "seed_lo": math.nan, "seed_hi": math.nan}
    if ok["n_bits"].nunique() < 2:
        return out
    x = np.log(ok["n_bits"].to_numpy(float))
    y = np.log(ok["steps_to_learn"].to_numpy(float))
    out["slope"], out["intercept"], out["slope_lo"], out["slope_hi"] = _ols(x, y)
    slopes = []
    for _, g in ok.groupby("seed"):
        if g["n_bits"].nunique() >= 2:
            slopes.append(_ols(np.log(g["n_bits"].to_numpy(float)),
                               np.log(g["steps_to_learn"].to_numpy(float)))[0])
    out["seed_slopes"] = slopes
    if slopes:
        out["seed_mean"] = float(np.mean(slopes))
    if len(slopes) >= 2:
        half = sstats.t.ppf(0.975, len(slopes) - 1) * np.std(slopes, ddof=1) / math.sqrt(
            len(slopes))
        out["seed_lo"], out["seed_hi"] = out["seed_mean"] - half, out["seed_mean"] + half
    return out


def steps_per_epoch(runs: pd.DataFrame) -> pd.Series:
    """Optimizer steps per epoch of every run (indexed by ``run_id``)."""
    def one(r) -> int:
        n_train = r.get("n_train")
        fixed = r.get("samples") == "fixed" and n_train is not None and not pd.isna(n_train)
        return epoch_steps("fixed", n_train, r["batch_size"]) if fixed else 1

    return pd.Series([one(r) for _, r in runs.iterrows()], index=runs["run_id"], dtype="int64")


def progress_curves(runs: pd.DataFrame, metrics: pd.DataFrame) -> pd.DataFrame:
    """``run_id, epoch, step`` and one column per curve of :data:`CURVE_METRICS`, for the
    runs in ``runs``."""
    m = metrics[metrics["run_id"].isin(list(runs["run_id"]))]
    keys = pd.Series(list(zip(m["split"], m["metric"], strict=True)), index=m.index)
    m = m[keys.isin(list(CURVE_METRICS))].copy()
    m["name"] = [CURVE_METRICS[s, k] for s, k in zip(m["split"], m["metric"], strict=True)]
    wide = m.pivot_table(index=["run_id", "epoch"], columns="name", values="value",
                         aggfunc="first").reset_index()
    wide.columns.name = None
    wide.insert(2, "step", wide["epoch"] * wide["run_id"].map(steps_per_epoch(runs)))
    return wide.sort_values(["run_id", "epoch"]).reset_index(drop=True)


def progress_steps(runs: pd.DataFrame, metrics: pd.DataFrame,
                   factor: float = MASS_FACTOR) -> pd.DataFrame:
    """Per run: hidden progress at ``factor`` (support mass ≥ ``mass_threshold`` and its rise
    above the null band, before visible progress: ``hidden_called``, ``hidden_progress_step``,
    ``hidden_band``; ``mass_rise_step``, the crossing alone), the Fourier step (gap > 0), the
    visible step (acc ≥ 60%), steps-to-learn (acc ≥ 99%), and ``lead`` = visible − hidden
    (positive: progress was there before the metrics showed it)."""
    curves = progress_curves(runs, metrics)
    if "null_band" not in curves:  # runs stored before the band: nothing is called
        curves["null_band"] = math.nan
    rows = []
    for rid, c in curves.groupby("run_id", sort=False):
        c = c.sort_values("epoch")
        steps = c["step"].tolist()
        m0 = float(c["support_mass"].iloc[0]) if len(c) else math.nan
        call = hidden_reading(steps, c["support_mass"].tolist(), c["null_band"].tolist(),
                              c["acc"].tolist(), factor)
        hidden = call["step"]
        fourier = first_crossing(steps, (c["fourier_gap"] > 0).astype(float).tolist(), 1.0)
        visible = first_crossing(steps, c["acc"].tolist(), VISIBLE_ACC)
        learned = first_crossing(steps, c["acc"].tolist(), LEARNED_ACC)
        lead = (visible - hidden) if visible is not None and hidden is not None else None
        rows.append({"run_id": rid, "support_mass_init": m0, "hidden_progress_step": hidden,
                     "hidden_called": call["called"], "hidden_band": call["band"],
                     "mass_rise_step": call["mass_rise_step"], "fourier_step": fourier,
                     "visible_step": visible, "steps_to_learn": learned, "lead": lead})
    table = pd.DataFrame(rows)
    cols = [c for c in ("run_id", "n_bits", "k", "seed") if c in runs.columns]
    return runs[cols].merge(table, on="run_id", how="inner")


def slope_line(fit: dict) -> str:
    if math.isnan(fit["slope"]):
        return (f"log-log slope: needs learned runs at two n or more ({fit['learned']} of "
                f"{fit['runs']} learned)")
    seeds = (f"; per seed {fit['seed_mean']:.2f} [{fit['seed_lo']:.2f}, {fit['seed_hi']:.2f}] "
             f"over {len(fit['seed_slopes'])} seeds") if fit["seed_slopes"] else ""
    return (f"steps-to-learn ∝ n^a: a = {fit['slope']:.2f} [95% CI {fit['slope_lo']:.2f}, "
            f"{fit['slope_hi']:.2f}] pooled over {fit['learned']} learned runs at n = "
            f"{', '.join(map(str, fit['n_values']))}{seeds}; {fit['censored']} run(s) that did "
            "not learn left out")
