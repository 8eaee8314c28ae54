"""Sparse-parity figures (matplotlib ``Figure`` + Agg, never pyplot), with seed spread (SPEC
"Cross-cutting": curves carry seed spread, not just means):

- :func:`steps_vs_n_figure` — steps-to-learn vs n on log–log axes: every seed, the median per n,
  the fitted power law with its exponent, and runs that did not learn marked at the top;
- :func:`hidden_progress_figure` — for one n: the support mass's rise over its init (log), the
  Fourier gap, and evaluation loss and accuracy vs step, one thin line per seed, with the
  median hidden-progress and learning steps marked.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

from rulelab.report.figures import data_ticks
from rulelab.studies.sparse_parity.steps_tables import (
    fit_slope,
    progress_curves,
    steps_per_epoch,
    steps_table,
)
from rulelab.studies.sparse_parity.summary import MASS_FACTOR


def steps_vs_n_figure(runs: pd.DataFrame) -> Figure:
    fig = Figure(figsize=(5.2, 3.8), layout="constrained")
    ax = fig.add_subplot()
    runs = runs[runs["status"] == "done"] if "status" in runs.columns else runs
    ok = runs[runs["learned"].astype(bool)]
    ax.scatter(ok["n_bits"], ok["steps_to_learn"], s=14, color="0.55", alpha=0.7,
               label="one seed", zorder=2)
    table = steps_table(runs)
    by_k = "k" in runs.columns and runs["k"].nunique() > 1  # one median and fit per k
    groups = runs.groupby("k", sort=True) if by_k else [(None, runs)]
    for i, (k, g) in enumerate(groups):
        rows, tag = (table[table["k"] == k], f"k = {k}: ") if by_k else (table, "")
        if len(rows):
            ax.plot(rows["n_bits"], rows["median_steps"], "o-", color=f"C{2 * i}",
                    label=f"{tag}median", zorder=3)
        fit = fit_slope(g)
        if not math.isnan(fit["slope"]):
            n = np.geomspace(min(fit["n_values"]), max(fit["n_values"]), 50)
            ax.plot(n, np.exp(fit["intercept"]) * n ** fit["slope"], "--",
                    color=f"C{2 * i + 1}", label=f"{tag}fit n^{fit['slope']:.2f} "
                    f"[{fit['slope_lo']:.2f}, {fit['slope_hi']:.2f}]")
    failed = runs[~runs["learned"].astype(bool)]
    if len(failed):
        top = int((runs["epochs"] * runs["run_id"].map(steps_per_epoch(runs)).values).max())
        ax.scatter(failed["n_bits"], np.full(len(failed), top), marker="^", color="C3",
                   s=18, label=f"not learned by step {int(top):,}", zorder=3)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))  # 20, 50, 100, … plainly
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.yaxis.set_minor_locator(NullLocator())  # no "4 × 10¹" labels between them
    data_ticks(ax.xaxis, runs["n_bits"].unique())  # at the n trained (8, 12, …), not 10^k
    ax.set_xlabel("n (input bits)")
    ax.set_ylabel("steps to learn (eval acc ≥ 99%)")
    ks = sorted(runs["k"].unique()) if "k" in runs.columns else []
    ax.set_title(f"Sparse parity, k = {', '.join(str(k) for k in ks)}", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    return fig


def hidden_progress_figure(runs: pd.DataFrame, metrics: pd.DataFrame,
                           n_bits: int | None = None) -> Figure:
    """Curves of the runs at ``n_bits`` (default: the largest n with a learned run), up to a
    little past the last of them learned. The support mass is drawn as its rise over init,
    ``m/m₀ − 1``, on a log axis (floored at 10⁻³): the slow growth during the plateau is the
    hidden progress; the dotted line is the +10% and the dash-dotted one the median null band
    (:mod:`.hidden_null`) that both must be passed for :mod:`.summary` to call it."""
    fig = Figure(figsize=(6.0, 6.4), layout="constrained")
    mass_ax, gap_ax, loss_ax = fig.subplots(3, 1, sharex=True)
    if "k" in runs.columns and runs["k"].nunique() > 1:  # one k: the paper's 3, or the largest
        ks = set(runs["k"].astype(int))
        runs = runs[runs["k"] == (3 if 3 in ks else max(ks))]
    if n_bits is None:
        learned = runs[runs["learned"].astype(bool)]
        n_bits = int((learned if len(learned) else runs)["n_bits"].max())
    sel = runs[runs["n_bits"] == n_bits]
    curves = progress_curves(sel, metrics)
    learned_steps = sel["steps_to_learn"].dropna().astype(float)
    shown = 1.25 * learned_steps.max() if len(learned_steps) else np.inf  # curves end there
    for i, (_, c) in enumerate(curves.groupby("run_id")):
        c = c.sort_values("epoch")
        rise = (c["support_mass"] / c["support_mass"].iloc[0] - 1).clip(lower=1e-3)
        c, rise = c[c["step"] <= shown], rise[c["step"] <= shown]  # none drawn past the axes
        first = i == 0
        mass_ax.plot(c["step"], rise, color="C0", lw=0.9, alpha=0.7)
        gap_ax.plot(c["step"], c["fourier_gap"], color="C2", lw=0.9, alpha=0.7)
        loss_ax.plot(c["step"], c["loss"], color="C3", lw=0.9, alpha=0.7,
                     label="eval loss" if first else None)
        loss_ax.plot(c["step"], c["acc"], color="C1", lw=0.9, alpha=0.7,
                     label="eval accuracy" if first else None)
    mass_ax.set_yscale("log")
    mass_ax.axhline(MASS_FACTOR - 1, color="C0", ls=":", lw=0.8)
    band = pd.to_numeric(sel.get("hidden_band", pd.Series(dtype=float)), errors="coerce")
    if band.notna().any():  # the null band: off-support subsets' 95% (issue 21)
        mass_ax.axhline(max(float(band.median()), 1e-3), color="0.5", ls="-.", lw=0.8)
    gap_ax.axhline(0, color="C2", ls=":", lw=0.8)
    for ax in (mass_ax, gap_ax, loss_ax):
        for col, style, name in (("hidden_progress_step", ":", "hidden progress (median)"),
                                 ("steps_to_learn", "--", "learned (median)")):
            vals = sel[col].dropna().astype(float)
            if len(vals):
                ax.axvline(float(np.median(vals)), color="k", ls=style, lw=0.9,
                           label=name if ax is loss_ax else None)
        ax.grid(alpha=0.3)
    if len(learned_steps):
        loss_ax.set_xlim(0, shown)
    mass_ax.set_ylabel("support mass / init − 1")
    # what is measured: |corr_S| − max |corr_T| over the other k-subsets, all of them when
    # C(n, k) − 1 ≤ 2,048, else a fixed sample of 2,048 (metrics.correlations; issue 21)
    gap_ax.set_ylabel("output's χ_S lead over\nother k-subsets (sampled)")
    loss_ax.set_ylabel("loss, accuracy")
    loss_ax.set_xlabel("optimizer step")
    k = f"k = {int(sel['k'].iloc[0])}, " if "k" in sel.columns and len(sel) else ""
    mass_ax.set_title(f"Hidden progress, {k}n = {n_bits} ({len(sel)} seeds, one line each)",
                      fontsize=10)
    loss_ax.legend(fontsize=7, loc="center left")
    return fig


def write_figures(runs: pd.DataFrame, metrics: pd.DataFrame, out: str | Path) -> list[Path]:
    """Both figures as PNG files in ``out``; returns their paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, fig in (("steps_vs_n.png", steps_vs_n_figure(runs)),
                      ("hidden_progress.png", hidden_progress_figure(runs, metrics))):
        fig.savefig(out / name, dpi=130)
        paths.append(out / name)
    return paths
