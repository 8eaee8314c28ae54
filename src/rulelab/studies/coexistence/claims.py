"""Study M's headline claims read at every scale the user holds (``rulelab scale-map``, issue 11).

Both claims are read at the largest label-noise share α a lab holds (the paper: up to 0.8), on
the modular runs (ReLU, AdamW and the smallest weight decay where a lab holds several), from
each run's final accuracies; every curve carries its seed range [min, max].

- **M1**, coexistence: the trained network memorizes the noisy labels and still generalizes,
  and better with width in the over-parameterized regime, even at α = 0.8 (Liu & Lu 2026,
  abstract). Read on the widths that interpolate the noisy labels (mean noisy-train accuracy
  against the corrupted labels ≥ 99%): it shows when the widest of them has mean test accuracy
  ≥ 50% and its seed range lies above the range at the interpolation width (the narrowest).
- **M2**, frequency filtering: FF's G network is near-perfect on test at α = 0.8 while the
  trained network is not. Read from the lab's ``ff`` table (``rulelab analyze ff``, or stored
  by ``rulelab reproduce coexistence``): it shows when, at some width, every seed's G scores
  ≥ 95% on test.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from rulelab.analysis.calibration import MAX_FPR
from rulelab.analysis.stats import format_range
from rulelab.report.figures import data_ticks, empty_panel, new_figure
from rulelab.report.scale_map import (
    ABSENT,
    DIRECTION,
    NOT_READ,
    SHOWS,
    ClaimReading,
    ScaleReading,
)
from rulelab.studies.coexistence.analyses.claim_null import seeds_needed

INTERP_ACC = 0.99  # "fits the noisy labels": mean noisy-train accuracy ≥ 99%
COEXIST_ACC = 0.5  # "still generalizes": a majority of the held-out pairs right
NEAR_PERFECT = 0.95  # every seed's G at least this on test
PREFERRED = {"activation": "relu", "optimizer": "adamw", "op": "add"}


def modular_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The finished modular runs of one setting: ReLU / AdamW / add where a lab varies them,
    the smallest weight decay where it holds several."""
    out = runs[runs["task"] == "modular"] if "task" in runs.columns else runs
    if "status" in out.columns:
        out = out[out["status"].astype(str) == "done"]
    for col, value in PREFERRED.items():
        if col in out.columns and out[col].nunique() > 1 and (out[col] == value).any():
            out = out[out[col] == value]
    if "weight_decay" in out.columns and len(out):
        out = out[np.isclose(out["weight_decay"].astype(float), out["weight_decay"].min())]
    return out


def network_curve(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (noise, width): test accuracy mean/min/max over seeds and the mean noisy-train
    accuracy against the corrupted labels (``noisy``)."""
    runs = modular_runs(runs)
    cols = {"final_test_acc": "test", "final_noisy_acc": "noisy"}
    if runs.empty or "final_test_acc" not in runs.columns:
        return pd.DataFrame(columns=["noise", "width", "mean", "min", "max", "seeds", "noisy"])
    frame = runs[["noise", "width"]].assign(**{v: pd.to_numeric(runs.get(k), errors="coerce")
                                               for k, v in cols.items() if k in runs.columns})
    g = frame.groupby(["noise", "width"], sort=True)
    out = g["test"].agg(["mean", "min", "max", "count"]).rename(columns={"count": "seeds"})
    out["noisy"] = g["noisy"].mean() if "noisy" in frame.columns else np.nan
    return out.reset_index()


def g_curve(lab) -> pd.DataFrame:
    """Per (noise, width): FF's G test accuracy mean/min/max over seeds, from the lab's ``ff``
    table at each run's last analysed epoch (empty when FF was not run)."""
    ff = lab.table("ff")
    keep = set(modular_runs(lab.runs)["run_id"])
    if ff.empty or not {"network", "subset", "acc"} <= set(ff.columns):
        return pd.DataFrame(columns=["noise", "width", "mean", "min", "max"])
    ff = ff[(ff["network"] == "G") & (ff["subset"] == "test") & ff["run_id"].isin(keep)]
    ff = ff[ff["epoch"] == ff.groupby("run_id")["epoch"].transform("max")]
    ff = ff.drop_duplicates("run_id", keep="last")
    return ff.groupby(["noise", "width"], sort=True)["acc"].agg(["mean", "min", "max"]) \
        .reset_index()


def _range(row: pd.Series) -> str:
    """``"59.0% [40.1%, 80.2%]"``: mean over seeds and the seed range."""
    return format_range(row["mean"], row["min"], row["max"])


def _band(ax, t: pd.DataFrame, colour: str, label: str, ls: str = "-", marker: str = "o"):
    t = t.sort_values("width")
    x, y = t["width"].to_numpy(float), t["mean"].to_numpy(float)
    # clipped at 0: the mean of equal seeds can round a hair past their min or max
    err = np.clip(np.vstack([y - t["min"].to_numpy(float), t["max"].to_numpy(float) - y]), 0, None)
    ax.errorbar(x, y, yerr=err, ls=ls, marker=marker, capsize=3, color=colour, label=label)


def width_figure(scales: dict, title: str, *, with_g: bool):
    """Test accuracy vs width, one panel per α, one colour per scale: the trained network
    (solid) and, ``with_g``, FF's G (dashed); bars are the seed range."""
    curves = {s: (network_curve(lab.runs), g_curve(lab) if with_g else None)
              for s, lab in scales.items()}
    alphas = sorted({float(a) for net, _ in curves.values() for a in net["noise"]})
    fig = new_figure(max(4.2 * len(alphas), 6.0), 4.2)
    axes = fig.subplots(1, max(len(alphas), 1), sharey=True, squeeze=False)[0]
    if not alphas:
        empty_panel(axes[0], "no finished modular runs at any scale")
    for ax, alpha in zip(axes, alphas, strict=False):
        widths = []
        for i, (scale, (net, g)) in enumerate(curves.items()):
            n = net[np.isclose(net["noise"].astype(float), alpha)]
            if len(n):
                _band(ax, n, f"C{i}", f"{scale}: network")
                widths += list(n["width"])
            if g is not None and len(gg := g[np.isclose(g["noise"].astype(float), alpha)]):
                _band(ax, gg, f"C{i}", f"{scale}: FF's G", ls="--", marker="s")
        ax.set_xscale("log", base=2)
        data_ticks(ax.xaxis, widths)
        ax.set_title(f"α = {alpha:g}", fontsize=10)
        ax.set_xlabel("width M")
        ax.set_ylim(-0.03, 1.03)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    axes[0].set_ylabel("test accuracy (seed range)")
    fig.suptitle(title, fontsize=11)
    return fig, curves


def coexistence(scales: dict) -> ClaimReading:
    """M1 (see the module docstring)."""
    fig, curves = width_figure(scales, "M1 coexistence: the trained network's test accuracy "
                               "vs width at every scale", with_g=False)
    return ClaimReading(fig, {s: _read_m1(net) for s, (net, _) in curves.items()})


def _read_m1(net: pd.DataFrame) -> ScaleReading:
    noisy = net[net["noise"] > 0]
    if noisy.empty:
        return ScaleReading(NOT_READ, "no finished run with label noise α > 0")
    alpha = float(noisy["noise"].max())
    c = noisy[np.isclose(noisy["noise"], alpha)].sort_values("width")
    fit = c[c["noisy"] >= INTERP_ACC]
    best = c.loc[c["mean"].idxmax()]
    head = f"α = {alpha:g}: best test accuracy {_range(best)} at M = {int(best['width'])}"
    if fit.empty:
        return ScaleReading(ABSENT, f"{head}; no width fits the noisy labels (best mean "
                            f"noisy-train {c['noisy'].max():.1%}), so no coexistence to read")
    first, last = fit.iloc[0], fit.iloc[-1]
    text = (f"{head}; the noisy labels are fitted from M = {int(first['width'])} "
            f"(test {_range(first)}) to M = "
            f"{int(last['width'])} (test {_range(last)})")
    rises = last["width"] > first["width"] and last["min"] > first["max"]
    seeds, need = int(min(first["seeds"], last["seeds"])), seeds_needed()
    if rises and last["mean"] >= COEXIST_ACC and seeds < need:
        # two seed ranges are disjoint by chance with probability 1/C(2s, s): 17% at 2 seeds
        return ScaleReading(NOT_READ, f"{text} — in the paper's direction, but too few seeds "
                            f"to call: {seeds} a width leave disjoint ranges by chance "
                            f"{1 / math.comb(2 * seeds, seeds):.0%} of the time; {need} would "
                            f"hold it to {MAX_FPR:.0%}")
    if rises and last["mean"] >= COEXIST_ACC:
        return ScaleReading(SHOWS, f"{text} — it memorizes and generalizes, better with width")
    if last["mean"] > first["mean"] or last["mean"] >= COEXIST_ACC:
        return ScaleReading(DIRECTION, f"{text} — in the paper's direction, but not beyond the "
                            f"seed ranges or below {COEXIST_ACC:.0%} test")
    return ScaleReading(ABSENT, f"{text} — memorizing without generalizing")


def frequency_filtering(scales: dict) -> ClaimReading:
    """M2 (see the module docstring)."""
    fig, curves = width_figure(scales, "M2 FF's G (dashed) vs the trained network (solid): "
                               "test accuracy vs width at every scale", with_g=True)
    return ClaimReading(fig, {s: _read_m2(net, g, scales[s].path)
                              for s, (net, g) in curves.items()})


def _read_m2(net: pd.DataFrame, g: pd.DataFrame, path) -> ScaleReading:
    noisy = g[g["noise"] > 0] if len(g) else g
    if noisy.empty:
        return ScaleReading(NOT_READ, f"no FF table with α > 0: run `rulelab analyze ff --lab "
                            f"{path}`")
    alpha = float(noisy["noise"].max())
    c = noisy[np.isclose(noisy["noise"], alpha)]
    best = c.loc[c["min"].idxmax()]
    n = net[np.isclose(net["noise"].astype(float), alpha)]
    network = f"; the trained network's best {_range(n.loc[n['mean'].idxmax()])}" if len(n) else ""
    text = f"α = {alpha:g}: G's test accuracy {_range(best)} at M = {int(best['width'])}{network}"
    if best["min"] >= NEAR_PERFECT:
        return ScaleReading(SHOWS, f"{text} — G is near-perfect at every seed")
    if len(n) and best["mean"] > n["max"].max():
        return ScaleReading(DIRECTION, f"{text} — G beats the network but is not near-perfect")
    return ScaleReading(ABSENT, f"{text} — G does not recover the rule")
