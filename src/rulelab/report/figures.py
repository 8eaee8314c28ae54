"""Study-S figures: generalization rate vs spurious ratio, and per-seed training curves.

SPEC S.3 ("always report [a rate] with a 95% Wilson interval and n") and SPEC "Cross-cutting"
("curves carry seed spread, not just means"). Every function takes the two frames the store
returns — ``runs`` (one row per run: status, config columns, S.3 summaries) and ``metrics``
(long: run_id, epoch, split, metric, value) — and returns a :class:`~matplotlib.figure.Figure`.

Figures are built on ``Figure`` + the Agg canvas directly, never through pyplot: nothing opens
a window, no global figure registry grows in a long sweep, and importing this module does not
switch the backend of a notebook that imports it (matplotlib's advice for servers). A Figure
still renders inline in Jupyter.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import PercentFormatter

from rulelab.analysis.stats import ADV_ONLY, config_columns, rate_table, varying_columns

ARCH = ("layers", "heads")
# How a config value reads in a legend or title; other columns read "name=value".
_SHORT = {
    "ratio": "r={}",
    "weight_decay": "wd={}",
    "label_mod": "k={}",
    "shortcut": "{}",
    "seq_len": "n={}",
    "vocab": "V={}",
    "n_train": "N={}",
    "d_model": "d={}",
    "lr": "lr={}",
    "data_seed": "data={}",
}
VAL, ADV = "C0", "C3"  # one colour per split, the same in every panel


def _new_figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)  # headless rendering; savefig and Jupyter both use it
    return fig


def _fmt(v) -> str:
    if isinstance(v, float | np.floating):
        return "–" if math.isnan(v) else f"{v:g}"
    return str(v)


def config_label(row: pd.Series, cols: list[str]) -> str:
    """``"2L·2H r=0.9 wd=0.1"``: architecture first, then the given config columns."""
    parts = []
    if all(c in row.index for c in ARCH):
        parts.append(f"{_fmt(row['layers'])}L·{_fmt(row['heads'])}H")
    for c in cols:
        if c in ARCH or c not in row.index:
            continue
        parts.append(_SHORT.get(c, c + "={}").format(_fmt(row[c])))
    return " ".join(parts) or "all runs"


def _empty(ax, message: str) -> None:
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


def rate_vs_ratio(runs: pd.DataFrame, *, paper: dict | None = None) -> Figure:
    """Generalization rate vs spurious ratio r, one line per architecture (SPEC S.3).

    A seed generalizes when val and adv accuracy are both 100% at one evaluation. Where the
    paper's adv-only reading (``adv_generalized``) counts differently, its rate is drawn as a
    small cross of the line's colour. Error bars are 95% Wilson intervals; each point is
    annotated ``k/n``. Lines are split by
    ``layers``/``heads`` and by any other config column that varies (weight decay, k,
    shortcut, ...), which then appears in the legend. ``paper`` maps a layers label to
    reference rates, e.g. ``{"2L": {0.5: 0.0, 0.9: 0.77}, "1L": {0.5: 0.33, 0.9: 0.0}}``,
    drawn as hollow diamonds. The dashed vertical line is chance, r = b = 1/k (SPEC S.1).
    """
    fig = _new_figure(6.8, 4.4)
    ax = fig.add_subplot()
    if runs.empty or "ratio" not in runs.columns:
        _empty(ax, "no runs with a spurious ratio yet")
        return fig
    others = [c for c in varying_columns(runs) if c not in (*ARCH, "ratio")]
    line_cols = [c for c in ARCH if c in runs.columns] + others
    table = rate_table(runs, [*line_cols, "ratio"])
    if ADV_ONLY in runs.columns:
        table["rate_adv"] = rate_table(runs, [*line_cols, "ratio"], flag=ADV_ONLY)["rate"]
    table = table[table["n"] > 0]
    adv_differs = "rate_adv" in table.columns and bool((table["rate_adv"] != table["rate"]).any())
    if table.empty:
        _empty(ax, "no finished runs yet")
        return fig

    groups = list(table.groupby(line_cols, dropna=False, sort=True)) if line_cols else [
        ((), table)
    ]
    colour_of_layers: dict[str, str] = {}
    for i, (_, g) in enumerate(groups):
        g = g.sort_values("ratio")
        colour = f"C{i % 10}"
        # Small horizontal offsets so overlapping error bars stay readable.
        centred = i - (len(groups) - 1) / 2
        x = g["ratio"].to_numpy(float) + 0.012 * centred
        y = g["rate"].to_numpy(float)
        yerr = np.vstack([y - g["ci_low"].to_numpy(), g["ci_high"].to_numpy() - y])
        ax.errorbar(x, y, yerr=yerr, marker="o", ms=5, lw=1.5, capsize=3, color=colour,
                    label=config_label(g.iloc[0], others))
        # k/n beside each point, stacked by line so coinciding points stay legible.
        for xi, yi, k, n in zip(x, y, g["k"], g["n"], strict=True):
            ax.annotate(f"{k}/{n}", (xi, yi), xytext=(8, -9 * centred), va="center",
                        textcoords="offset points", fontsize=7, color=colour)
        if adv_differs:
            ax.plot(x, g["rate_adv"].to_numpy(float), ls="none", marker="x", ms=6, mew=1.3,
                    color=colour)
        if "layers" in g.columns:
            colour_of_layers.setdefault(f"{_fmt(g['layers'].iloc[0])}L", colour)

    for key, points in (paper or {}).items():
        xs, ys = zip(*sorted(points.items()), strict=True)
        ax.plot(xs, ys, ls="none", marker="D", ms=9, mfc="none", mew=1.6, zorder=5,
                color=colour_of_layers.get(key, "black"), label=f"paper {key}")

    if "label_mod" in runs.columns:
        for k in sorted(runs["label_mod"].dropna().unique()):
            ax.axvline(1 / k, ls="--", lw=1, color="0.5", label=f"chance b=1/{_fmt(k)}")

    ax.set_xlim(-0.03, 1.03)
    ax.set_ylim(-0.03, 1.03)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_xlabel("spurious ratio r (fraction of consistent training examples)")
    ax.set_ylabel("seeds generalizing (val and adv acc = 100%)")
    if adv_differs:
        ax.plot([], [], ls="none", marker="x", color="0.3", label="adv-only (paper text)")
    ax.set_title("Generalization rate vs spurious ratio — 95% Wilson CI, k/n", fontsize=10)
    ax.grid(alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    order = sorted(range(len(labels)), key=lambda j: (labels[j].startswith(("paper", "chance")), j))
    ax.legend([handles[j] for j in order], [labels[j] for j in order], fontsize=8, loc="best",
              framealpha=0.9)
    return fig


def _x_column(metrics: pd.DataFrame) -> str:
    return "epoch" if "epoch" in metrics.columns else "step"


def _curves(runs: pd.DataFrame, metrics: pd.DataFrame, series) -> tuple[str, dict]:
    """(x column, {(run_id, split, metric): rows sorted by x}) for the requested series."""
    xcol = _x_column(metrics)
    if metrics.empty or not {"run_id", "split", "metric", "value", xcol} <= set(metrics.columns):
        return xcol, {}
    wanted = np.zeros(len(metrics), dtype=bool)
    for split, metric, _, _ in series:
        wanted |= (metrics["split"] == split).to_numpy() & (metrics["metric"] == metric).to_numpy()
    mask = metrics["run_id"].isin(runs["run_id"]).to_numpy() & wanted
    groups = metrics[mask].groupby(["run_id", "split", "metric"], sort=False)
    return xcol, {key: g.sort_values(xcol) for key, g in groups}


def _config_groups(runs: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """Runs grouped by every config column but the seed, each with a readable title."""
    cols = config_columns(runs)
    title_cols = ["ratio", *(c for c in varying_columns(runs, cols) if c != "ratio")]
    groups = runs.groupby(cols, dropna=False, sort=True) if cols else [((), runs)]
    out = []
    for _, g in groups:
        title = config_label(g.iloc[0], [c for c in title_cols if c in g.columns])
        if "generalized" in g.columns and "status" in g.columns:
            row = rate_table(g, []).iloc[0]
            title += f"\n{int(row['k'])}/{int(row['n'])} generalized"
        out.append((title, g))
    return out


def _curve_grid(
    runs: pd.DataFrame,
    metrics: pd.DataFrame,
    series: list[tuple[str, str, str, str]],
    *,
    ylabel: str,
    logy: bool,
    max_configs: int,
    mark_first: bool,
) -> Figure:
    """One panel per configuration; ``series`` = (split, metric, colour, label), one thin
    line per seed plus the median over seeds."""
    groups = _config_groups(runs) if not runs.empty else []
    shown = groups[:max_configs]
    ncols = max(1, min(4, len(shown)))
    nrows = max(1, math.ceil(len(shown) / ncols))
    fig = _new_figure(3.4 * ncols, 2.6 * nrows + 0.7)
    if not shown:
        _empty(fig.add_subplot(), "no runs yet")
        return fig
    xcol, curves = _curves(runs, metrics, series)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for ax, (title, g) in zip(axes.flat, shown, strict=False):
        drawn = False
        for split, metric, colour, _ in series:
            seeds = [curves[key] for rid in g["run_id"] if (key := (rid, split, metric)) in curves]
            for c in seeds:
                ax.plot(c[xcol], c["value"], color=colour, lw=0.7, alpha=0.55)
            if len(seeds) >= 3:
                median = pd.concat(seeds).groupby(xcol)["value"].median()
                ax.plot(median.index, median.to_numpy(), color=colour, lw=1.8)
            drawn = drawn or bool(seeds)
        if mark_first and "first_epoch_generalized" in g.columns:
            first = pd.to_numeric(g["first_epoch_generalized"], errors="coerce").dropna()
            ax.plot(first, np.ones(len(first)), ls="none", marker="v", ms=5, color=ADV,
                    mec="black", mew=0.5, zorder=4)
        if not logy and "label_mod" in g.columns:
            ax.axhline(1 / g["label_mod"].iloc[0], ls=":", lw=0.8, color="0.5")
        if not drawn:
            ax.text(0.5, 0.5, "no metrics yet", ha="center", transform=ax.transAxes, color="0.4")
        ax.set_title(title, fontsize=8.5)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        if logy:
            ax.set_yscale("log")
        else:
            ax.set_ylim(-0.03, 1.03)
            ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    for ax in axes.flat[len(shown):]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel(xcol, fontsize=8)
    for ax in axes[:, 0]:
        ax.set_ylabel(ylabel, fontsize=8)

    handles = [Line2D([], [], color=c, lw=1.2, label=lab) for _, _, c, lab in series]
    handles.append(Line2D([], [], color="0.3", lw=0.7, label="thin: one seed; thick: median"))
    if not logy and "label_mod" in runs.columns:
        handles.append(Line2D([], [], ls=":", lw=0.8, color="0.5", label="chance 1/k"))
    if mark_first:
        handles.append(Line2D([], [], ls="none", marker="v", color=ADV, mec="black", mew=0.5,
                              label="first epoch with val and adv at 100%"))
    fig.legend(handles=handles, loc="outside upper center", ncols=len(handles), fontsize=8,
               frameon=False)
    if len(groups) > len(shown):
        fig.supxlabel(f"showing {len(shown)} of {len(groups)} configurations", fontsize=8)
    return fig


def accuracy_curves(runs: pd.DataFrame, metrics: pd.DataFrame, *, max_configs: int = 8) -> Figure:
    """Val (r = 1) and adversarial (r = 0) accuracy vs epoch, one panel per configuration
    and one thin line per seed, with each seed's first epoch at which val and adv are both
    100% marked (its generalization, SPEC S.3)."""
    series = [("val", "acc", VAL, "val acc"), ("adv", "acc", ADV, "adv acc")]
    return _curve_grid(runs, metrics, series, ylabel="accuracy", logy=False,
                       max_configs=max_configs, mark_first=True)


def loss_curves(runs: pd.DataFrame, metrics: pd.DataFrame, *, max_configs: int = 8) -> Figure:
    """Train-consistent vs train-anti loss per configuration, log scale (SPEC S.3, S.4.2)."""
    series = [
        ("train_consistent", "loss", "C2", "train consistent loss"),
        ("train_anti", "loss", "C1", "train anti loss"),
    ]
    return _curve_grid(runs, metrics, series, ylabel="loss", logy=True,
                       max_configs=max_configs, mark_first=False)
