"""Study M figures — double descent, learning order (curves and the early lead), FF bars,
activation swap, pruning curves —
and the coexistence report page that holds them (:func:`write_coexistence_report`).

Inputs are the tables of :mod:`.analyses.tables` (``dd_table``, ``ff_table``,
``swap_table``, ``neurons_table``) and the store's runs / long metrics frames. Curves and bars
carry seed spread (SPEC "Cross-cutting"): thin lines per seed or min–max error bars.
Built on ``Figure`` + Agg, never pyplot (see :mod:`rulelab.report.figures`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import PercentFormatter

from rulelab.report.figures import data_ticks, empty_panel, legend_columns, new_figure
from rulelab.studies.coexistence.names import NAMES

SPLIT_STYLE = {s: (c, NAMES[s]) for s, c in (("train_clean", "C0"), ("train_noisy", "C3"),
                                              ("test", "C2"))}
NET_COLOUR = {"original": "0.55", "G": "C2", "G_no_mu": "C9", "G_dc": "C8", "R": "C3"}
ORDER_STYLE = {"top": ("C2", "top first"), "bottom": ("C3", "bottom first"),
               "random": ("0.5", "random order")}


def _pct(ax, log_x: bool = False) -> None:
    ax.set_ylim(-0.03, 1.03)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.grid(alpha=0.3)
    ax.tick_params(labelsize=7)
    if log_x:
        ax.set_xscale("log", base=2)


def _spread(ax, g: pd.DataFrame, x: str, colour: str, label: str) -> None:
    """Mean line with a min–max band and one dot per seed (``g`` has ``x`` and ``acc``)."""
    stats = g.groupby(x)["acc"].agg(["mean", "min", "max"]).reset_index()
    ax.plot(stats[x], stats["mean"], marker="o", ms=4, color=colour, label=label)
    ax.fill_between(stats[x], stats["min"], stats["max"], color=colour, alpha=0.15, lw=0)
    ax.plot(g[x], g["acc"], ls="none", marker=".", ms=3, color=colour, alpha=0.6)


def double_descent_figure(runs: pd.DataFrame, ff: pd.DataFrame | None = None) -> Figure:
    """Final test accuracy vs width per noise level (SPEC M.4.1), and — with ``ff`` — the test
    accuracy of FF's G network vs width: what the raw network hides."""
    panels = 2 if ff is not None and not ff.empty else 1
    fig = new_figure(4.4 * panels, 3.4)
    axes = fig.subplots(1, panels, squeeze=False)[0]
    done = runs[runs["status"].astype(str) == "done"] if "status" in runs else runs
    if done.empty:
        empty_panel(axes[0], "no finished runs")
        return fig
    raw = done.assign(acc=pd.to_numeric(done["final_test_acc"], errors="coerce"))
    sources = [(axes[0], raw, "raw network: final test accuracy")]
    if panels == 2:
        g = ff[(ff["network"] == "G") & (ff["subset"] == "test")]
        sources.append((axes[1], g, "FF's G network: test accuracy"))
    for ax, frame, title in sources:
        for i, (noise, g) in enumerate(frame.groupby("noise")):
            _spread(ax, g, "width", f"C{i}", f"α={noise:g}")
        _pct(ax, log_x=True)
        data_ticks(ax.xaxis, frame["width"].unique())  # at the widths trained, not 2^k
        ax.set_xlabel("width M", fontsize=8)
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("accuracy (mean; band: min–max over seeds)", fontsize=8)
    return fig


def learning_order_figure(runs: pd.DataFrame, metrics: pd.DataFrame,
                          width: int | None = None, window: float | None = None) -> Figure:
    """Clean-train, noisy-train and test accuracy vs step (log x) per noise level, at one width
    (default the largest), one thin line per seed and the median (SPEC M.4.2); ``window``
    marks the end of the early-lead window T (dashed)."""
    done = runs[runs["status"].astype(str) == "done"] if "status" in runs else runs
    if "width" in done and width is None and not done.empty:
        width = int(done["width"].max())
    if "width" in done:
        done = done[done["width"] == width]
    noises = sorted(done["noise"].unique()) if not done.empty else []
    fig = new_figure(3.4 * max(1, len(noises)), 3.2)
    if not noises:
        empty_panel(fig.add_subplot(), "no finished runs")
        return fig
    rows = metrics[(metrics["metric"] == "acc") & metrics["split"].isin(list(SPLIT_STYLE))
                   & metrics["run_id"].isin(done["run_id"])]
    axes = fig.subplots(1, len(noises), squeeze=False)[0]
    for ax, noise in zip(axes, noises, strict=True):
        ids = done.loc[done["noise"] == noise, "run_id"]
        for split, (colour, _) in SPLIT_STYLE.items():
            part = rows[(rows["split"] == split) & rows["run_id"].isin(ids)]
            for _, c in part.groupby("run_id"):
                c = c.sort_values("epoch")
                ax.plot(c["epoch"] + 1, c["value"], color=colour, lw=0.6, alpha=0.5)
            if part["run_id"].nunique() > 1:
                med = part.groupby("epoch")["value"].median()
                ax.plot(med.index + 1, med.to_numpy(), color=colour, lw=1.8)
        _pct(ax)
        ax.set_xscale("log")
        if window:
            ax.axvline(window + 1, color="0.4", ls="--", lw=0.8)
        ax.set_title(f"α = {noise:g}" + (f", M = {width}" if width else ""), fontsize=9)
        ax.set_xlabel("step + 1", fontsize=8)
    axes[0].set_ylabel("accuracy", fontsize=8)
    handles = [Line2D([], [], color=c, label=lab) for c, lab in SPLIT_STYLE.values()]
    fig.legend(handles=handles, loc="outside upper center", fontsize=8, frameon=False,
               ncols=legend_columns(fig, [h.get_label() for h in handles]))
    return fig


def early_lead_figure(order: pd.DataFrame) -> Figure:
    """Per run with α > 0, the early lead of noisy-train (vs the corrupted labels) over
    clean-train accuracy in points: the mean over the window and at the first evaluation, by
    noise level and width (SPEC M.4.2; :mod:`.analyses.early_lead`). Above 0: noisy
    ahead."""
    fig = new_figure(7.0, 3.2)
    noisy = order[(order["noise"] > 0) & order["lead_area"].notna()] if "lead_area" in order \
        else order.iloc[0:0]
    if noisy.empty:
        empty_panel(fig.add_subplot(), "no runs with α > 0")
        return fig
    axes = fig.subplots(1, 2, squeeze=False)[0]
    window = noisy["window"].dropna()
    T = f"{window.iloc[0]:g}" if len(window) else "T"
    noises = sorted(noisy["noise"].unique())
    widths = sorted(noisy["width"].unique()) if "width" in noisy else [None]
    for ax, col, title in ((axes[0], "lead_area", f"mean lead over the first {T} steps"),
                           (axes[1], "first_lead", "lead at the first evaluation")):
        for j, w in enumerate(widths):
            part = noisy if w is None else noisy[noisy["width"] == w]
            x = part["noise"].map({a: i for i, a in enumerate(noises)}).to_numpy(float)
            x = x + (j - (len(widths) - 1) / 2) * 0.6 / max(1, len(widths))
            ax.plot(x, 100 * pd.to_numeric(part[col]), ls="none", marker="o", ms=3,
                    color=f"C{j % 10}", label=f"M = {w}" if w is not None else None)
        ax.axhline(0, color="0.3", lw=0.8)
        ax.set_xticks(range(len(noises)), [f"α = {a:g}" for a in noises], fontsize=7)
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7)
    axes[0].set_ylabel("noisy − clean train accuracy (points)", fontsize=8)
    if widths != [None]:
        axes[1].legend(fontsize=6, loc="center left", bbox_to_anchor=(1.0, 0.5))
    return fig


def _bars(ax, table: pd.DataFrame, groups: list, bars: list, colours: dict, group_col: str,
          bar_col: str) -> None:
    """Grouped bars of the mean ``acc`` with min–max error bars over seeds."""
    width = 0.8 / max(1, len(bars))
    for j, bar in enumerate(bars):
        stats = [table[(table[group_col] == g) & (table[bar_col] == bar)]["acc"] for g in groups]
        mean = np.array([s.mean() if len(s) else np.nan for s in stats])
        lo = np.array([s.min() if len(s) else np.nan for s in stats])
        hi = np.array([s.max() if len(s) else np.nan for s in stats])
        x = np.arange(len(groups)) + (j - (len(bars) - 1) / 2) * width
        ax.bar(x, mean, width, color=colours.get(bar, f"C{j}"), label=NAMES.get(bar, str(bar)))
        ax.errorbar(x, mean, yerr=np.vstack([mean - lo, hi - mean]), fmt="none", ecolor="black",
                    elinewidth=0.8, capsize=2)
    ax.set_xticks(np.arange(len(groups)), [NAMES.get(g, str(g)).replace(" (", "\n(")
                                           .replace("_", "\n") for g in groups], fontsize=7)
    _pct(ax)


def _configs(frame: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """Every (width, noise) the table holds, widest and noisiest first (the paper's headline
    M = largest, α = 0.8 leads), each with its title."""
    if frame.empty:
        return []
    keys = [c for c in ("width", "noise") if c in frame]
    if not keys:
        return [("all runs", frame)]
    out = []
    for key, g in frame.groupby(keys, sort=True):
        key = key if isinstance(key, tuple) else (key,)
        parts = dict(zip(keys, key, strict=True))
        title = ", ".join([f"M = {int(parts['width'])}"] * ("width" in parts)
                          + [f"α = {parts['noise']:g}"] * ("noise" in parts))
        out.append((title, g, tuple(-v for v in key)))
    return [(t, g) for t, g, _ in sorted(out, key=lambda x: x[2])]


def _grid(fig: Figure, n: int, ncols: int):
    """``n`` small-multiple axes, ``ncols`` across, sharing both axes; the spare ones hidden."""
    nrows = max(1, -(-n // ncols))
    axes = fig.subplots(nrows, ncols, squeeze=False, sharex=True, sharey=True)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    for ax in axes.flat[:n]:
        ax.tick_params(labelbottom=True)
    return axes


def _legend_above(fig: Figure, ax, title: str | None = None) -> None:
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside upper center", fontsize=8, frameon=False,
               ncols=legend_columns(fig, labels), title=title, title_fontsize=8.5)


def ff_bars(ff: pd.DataFrame) -> Figure:
    """Original / G / G without μ / G with each neuron's DC term / R accuracy on clean-train,
    noisy-train (vs corrupted labels) and test, one panel per width × noise level held
    (SPEC M.4.3), the widest and noisiest first."""
    configs = _configs(ff)
    ncols = min(3, max(1, len(configs)))
    fig = new_figure(3.6 * ncols, 2.7 * max(1, -(-len(configs) // ncols)) + 0.6)
    if not configs:
        empty_panel(fig.add_subplot(), "no FF table")
        return fig
    axes = _grid(fig, len(configs), ncols)
    subsets = ["train_clean", "train_noisy", "test"]
    for ax, (title, g) in zip(axes.flat, configs, strict=False):
        _bars(ax, g, subsets, list(NET_COLOUR), NET_COLOUR, "subset", "network")
        ax.set_title(title, fontsize=9)
    for ax in axes[:, 0]:
        ax.set_ylabel("accuracy\n(bars: min–max over seeds)", fontsize=8)
    _legend_above(fig, axes.flat[0])
    return fig


def swap_bars(swap: pd.DataFrame) -> Figure:
    """Clean-train, noisy-train and test accuracy of the trained weights under each activation,
    one panel per width × noise level held (SPEC M.4.4), the widest and noisiest first."""
    configs = _configs(swap)
    ncols = min(3, max(1, len(configs)))
    fig = new_figure(3.8 * ncols, 2.7 * max(1, -(-len(configs) // ncols)) + 0.8)
    if not configs:
        empty_panel(fig.add_subplot(), "no swap table")
        return fig
    axes = _grid(fig, len(configs), ncols)
    colours = {"test": "C2", "train_noisy": "C3", "train_clean": "C0"}
    for ax, (title, g) in zip(axes.flat, configs, strict=False):
        acts = list(dict.fromkeys(g["activation_eval"]))
        _bars(ax, g, acts, ["train_clean", "train_noisy", "test"], colours, "activation_eval",
              "subset")
        ax.set_title(title, fontsize=9)
    for ax in axes[:, 0]:
        ax.set_ylabel("accuracy\n(bars: min–max over seeds)", fontsize=8)
    trained = ", ".join(sorted(swap["activation"].unique())) if "activation" in swap else "?"
    _legend_above(fig, axes.flat[0], f"weights trained with {trained}, scored with each "
                  "activation")
    return fig


def pruning_figure(neurons: pd.DataFrame) -> Figure:
    """Accuracy vs fraction of neurons kept, top-first / bottom-first / random, by IPR and by
    strength on test and noisy train (columns), one row per width × noise level held (SPEC
    M.4.5), the widest and noisiest first."""
    prune = neurons[neurons["kind"] == "prune"] if "kind" in neurons else neurons.iloc[0:0]
    configs = _configs(prune)
    scores, subsets = ["ipr", "strength"], ["test", "train_noisy"]
    cols = [(sc, su) for sc in scores for su in subsets]
    fig = new_figure(2.6 * len(cols) + 0.4, 2.0 * max(1, len(configs)) + 0.8)
    if not configs:
        empty_panel(fig.add_subplot(), "no pruning curves")
        return fig
    axes = fig.subplots(len(configs), len(cols), squeeze=False, sharex=True, sharey=True)
    for i, (title, g) in enumerate(configs):
        for j, (score, subset) in enumerate(cols):
            ax = axes[i, j]
            part = g[(g["score"] == score) & (g["subset"] == subset)]
            for order, (colour, label) in ORDER_STYLE.items():
                if not (o := part[part["order"] == order]).empty:
                    _spread(ax, o, "fraction", colour, label)
            _pct(ax)
            ax.set_title(f"{title}\n{score}: {SPLIT_STYLE[subset][1]}", fontsize=7.5)
        axes[i, 0].set_ylabel("accuracy", fontsize=8)
    for ax in axes[-1]:
        ax.set_xlabel("fraction of neurons kept", fontsize=8)
    _legend_above(fig, axes[0, 0])
    return fig
