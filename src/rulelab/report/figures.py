"""Generic figures: per-seed training curves, one panel per configuration (SPEC
"Cross-cutting": curves carry seed spread, not just means). What to draw — which splits, how a
configuration is named, which epoch to mark, a chance line — comes from the runs' task view
(:class:`rulelab.report.views.RunsView`); study-specific figures live in the studies.

Every function takes the two frames the store returns — ``runs`` (one row per run: status,
config columns, summaries) and ``metrics`` (long: run_id, epoch, split, metric, value) — and
returns a :class:`~matplotlib.figure.Figure`. Figures are built on ``Figure`` + the Agg canvas
directly, never through pyplot: nothing opens a window, no global figure registry grows in a
long sweep, and importing this module does not switch the backend of a notebook that imports it
(matplotlib's advice for servers). A Figure still renders inline in Jupyter.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import NullLocator, PercentFormatter

from rulelab.analysis.stats import config_columns, rate_table
from rulelab.report.views import RunsView, view_of

MARK = "C3"  # colour of the marker of each seed's marked epoch
THIN, THICK = 0.7, 1.8  # line widths: one seed, the median over seeds


def new_figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)  # headless rendering; savefig and Jupyter both use it
    return fig


def legend_columns(fig: Figure, labels, fontsize: float = 8) -> int:
    """How many legend columns of ``labels`` fit across ``fig`` (a legend above a narrow
    figure is otherwise cut at its edges): each column is as wide as the longest label, at
    about 0.55 em per character, plus the handle."""
    labels = [str(lab) for lab in labels] or [""]
    per_column = 0.7 + max(map(len, labels)) * 0.55 * fontsize / 72  # inches
    return max(1, min(len(labels), int(fig.get_figwidth() / per_column)))


def data_ticks(axis, values) -> None:
    """Major ticks of a log ``axis`` at the data's own ``values`` (e.g. widths 9, 33), labelled
    plainly, minor ticks off: ``2^4, 2^5`` between points at 9 and 33 read as wrong data."""
    values = sorted({float(v) for v in values if v == v and v > 0})
    if not values:
        return
    axis.set_ticks(values, [f"{v:g}" for v in values])
    axis.set_minor_locator(NullLocator())


NO_DATA = "no-data"  # gid of the message a panel shows where it has no data


def empty_panel(ax, message: str) -> None:
    """``message`` in place of data; :func:`no_data_messages` lists it (the report marks it)."""
    ax.text(0.5, 0.5, message, ha="center", va="center", transform=ax.transAxes, color="0.4",
            gid=NO_DATA)
    ax.set_xticks([])
    ax.set_yticks([])


def no_data_messages(fig: Figure) -> list[str]:
    """The messages the figure shows in place of data ("no metrics yet", …)."""
    return [t.get_text() for ax in fig.axes for t in ax.texts if t.get_gid() == NO_DATA]


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


def _config_groups(runs: pd.DataFrame, view: RunsView) -> list[tuple[str, pd.DataFrame]]:
    """Runs grouped by every config column but the seed, each with a readable title."""
    cols = config_columns(runs)
    title_cols = view.title_columns(runs)
    groups = runs.groupby(cols, dropna=False, sort=True) if cols else [((), runs)]
    out = []
    for _, g in groups:
        title = view.label(g.iloc[0], [c for c in title_cols if c in g.columns])
        if "generalized" in g.columns and "status" in g.columns:
            row = rate_table(g, []).iloc[0]
            title += f"\n{int(row['k'])}/{int(row['n'])} {view.word}"
        out.append((title, g))
    return out


def _grid_shape(n: int) -> tuple[int, int, float, float]:
    """(rows, columns, panel width, panel height) in inches of ``n`` small multiples: up to
    4 across, smaller panels (down to 2.3 × 1.8 in) and 6 across once there are more than 8."""
    ncols = max(1, min(4 if n <= 8 else 6, n))
    nrows = max(1, math.ceil(n / ncols))
    return (nrows, ncols, 3.4, 2.6) if n <= 8 else (nrows, ncols, 2.3, 1.9)


def _curve_grid(
    runs: pd.DataFrame,
    metrics: pd.DataFrame,
    series: list[tuple[str, str, str, str]],
    *,
    view: RunsView,
    ylabel: str,
    logy: bool,
    max_configs: int | None,
    mark: tuple[str, str] | None,
) -> Figure:
    """One panel per configuration (every one, as small multiples sharing both axes, unless
    ``max_configs`` caps them); ``series`` = (split, metric, colour, label), one thin line per
    seed plus the median over seeds where a configuration has 3 or more; ``mark`` = (summary
    column, legend): each seed's epoch in that column marked at 100%. On a log axis a value
    ≤ 0 (a loss of exactly 0) is a gap in its line, said in the legend. The legend lists
    only what some panel draws."""
    groups = _config_groups(runs, view) if not runs.empty else []
    shown = groups[:max_configs] if max_configs else groups
    nrows, ncols, w, h = _grid_shape(len(shown))
    fig = new_figure(w * ncols, h * nrows + 0.8)
    if not shown:
        empty_panel(fig.add_subplot(), "no runs yet")
        return fig
    xcol, curves = _curves(runs, metrics, series)
    axes = fig.subplots(nrows, ncols, squeeze=False, sharex=True, sharey=True)
    drawn_series, medians, marked, chance_drawn, zero = set(), False, False, None, False
    for ax, (title, g) in zip(axes.flat, shown, strict=False):
        drawn = False
        for split, metric, colour, _ in series:
            seeds = [curves[key] for rid in g["run_id"] if (key := (rid, split, metric)) in curves]
            for c in seeds:
                y = c["value"].to_numpy(float)
                if logy:
                    zero |= bool((y <= 0).any())
                    y = np.where(y > 0, y, np.nan)
                ax.plot(c[xcol], y, color=colour, lw=THIN, alpha=0.55)
            if len(seeds) >= 3:
                median = pd.concat(seeds).groupby(xcol)["value"].median()
                y = median.to_numpy(float)
                ax.plot(median.index, np.where(y > 0, y, np.nan) if logy else y, color=colour,
                        lw=THICK)
                medians = True
            if seeds:
                drawn_series.add((split, metric))
            drawn = drawn or bool(seeds)
        if mark and mark[0] in g.columns:
            first = pd.to_numeric(g[mark[0]], errors="coerce").dropna()
            if len(first):
                ax.plot(first, np.ones(len(first)), ls="none", marker="v", ms=5, color=MARK,
                        mec="black", mew=0.5, zorder=4)
                marked = True
        if not logy and (chance := view.chance(g)):
            ax.axhline(chance[0], ls=":", lw=0.8, color="0.5")
            chance_drawn = chance
        if not drawn:
            ax.text(0.5, 0.5, "no metrics yet", ha="center", transform=ax.transAxes,
                    color="0.4", gid=NO_DATA)
        ax.set_title(title, fontsize=8.5 if len(shown) <= 8 else 7.5)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    if logy:
        axes[0, 0].set_yscale("log")  # shared: every panel
    else:
        axes[0, 0].set_ylim(-0.03, 1.03)
        axes[0, 0].yaxis.set_major_formatter(PercentFormatter(1.0))
    for ax in axes.flat[len(shown):]:
        ax.set_visible(False)
    for ax in axes.flat[:len(shown)]:
        ax.tick_params(labelbottom=True)  # the last row may be short: every panel says x
    for ax in axes[-1]:
        ax.set_xlabel(xcol, fontsize=8)
    for ax in axes[:, 0]:
        ax.set_ylabel(ylabel, fontsize=8)

    handles = [Line2D([], [], color=c, lw=1.0, label=lab) for split, metric, c, lab in series
               if (split, metric) in drawn_series]
    first_colour = handles[0].get_color() if handles else "0.3"
    if handles:
        handles.append(Line2D([], [], color=first_colour, lw=THIN, label="thin: one seed"))
    if medians:
        handles.append(Line2D([], [], color=first_colour, lw=THICK,
                              label="thick: median over seeds (≥ 3 seeds)"))
    if zero:
        handles.append(Line2D([], [], color=first_colour, lw=THIN,
                              label="gap: value 0 (not on a log axis)"))
    if chance_drawn:
        handles.append(Line2D([], [], ls=":", lw=0.8, color="0.5", label=chance_drawn[1]))
    if marked:
        handles.append(Line2D([], [], ls="none", marker="v", color=MARK, mec="black", mew=0.5,
                              label=mark[1]))
    if handles:
        fig.legend(handles=handles, loc="outside upper center", fontsize=8, frameon=False,
                   ncols=legend_columns(fig, [h.get_label() for h in handles]))
    if len(groups) > len(shown):
        fig.supxlabel(f"showing {len(shown)} of {len(groups)} configurations", fontsize=8)
    return fig


def accuracy_curves(runs: pd.DataFrame, metrics: pd.DataFrame, *,
                    max_configs: int | None = None, view: RunsView | None = None) -> Figure:
    """The view's accuracy curves (study S: val and adv) vs epoch, one panel per configuration
    and one thin line per seed, each seed's marked epoch (study S: its first epoch with val and
    adv both 100%, SPEC S.3) at 100%."""
    view = view or view_of(runs)
    return _curve_grid(runs, metrics, list(view.curves), view=view, ylabel="accuracy",
                       logy=False, max_configs=max_configs, mark=view.mark)


def loss_curves(runs: pd.DataFrame, metrics: pd.DataFrame, *,
                max_configs: int | None = None, view: RunsView | None = None) -> Figure:
    """The view's loss curves (study S: train-consistent vs train-anti), log scale."""
    view = view or view_of(runs)
    return _curve_grid(runs, metrics, list(view.losses), view=view, ylabel="loss", logy=True,
                       max_configs=max_configs, mark=None)
