"""One run's curves, for ``rulelab show RUN`` (issue 23 item 4): a terminal sparkline per
metric and split (:func:`curve_lines`) and a small figure (:func:`curves_figure`).

Accuracies are drawn on their own 0…1 scale (a flat line at 0.5 is chance, not a trend); any
other metric's splits share that metric's range, so the splits compare within a line group.
"""

from __future__ import annotations

import math

import pandas as pd

BARS = "▁▂▃▄▅▆▇█"
SPLITS = ("train", "val", "adv", "test")  # listed first, in this order
WIDTH = 48  # sparkline characters


def sparkline(values, low: float, high: float, width: int = WIDTH) -> str:
    """``values`` (in epoch order) as bars between ``low`` and ``high``; at most ``width``
    characters, each the last value of its share of the points (NaN: a space)."""
    values = list(values)
    if len(values) > width:
        values = [values[math.ceil((i + 1) * len(values) / width) - 1] for i in range(width)]
    span = high - low
    out = []
    for v in values:
        if v is None or not math.isfinite(v):
            out.append(" ")
        else:
            level = 0 if span <= 0 else round((min(max(v, low), high) - low) / span * 7)
            out.append(BARS[level])
    return "".join(out)


def curve_lines(metrics: pd.DataFrame) -> list[str]:
    """One line per (metric, split): name, sparkline, first → last value (max for an
    accuracy). Accuracies share the scale 0…1; another metric's splits share its range."""
    if metrics.empty:
        return ["  no metrics stored yet"]
    lines = []
    names = ordered(metrics["metric"].unique(), ("acc", "loss"))
    w_metric = max(map(len, names))
    w_split = max(map(len, metrics["split"].unique()))
    for metric in names:
        rows = metrics[metrics["metric"] == metric].sort_values("epoch", kind="stable")
        finite = rows["value"][rows["value"].map(math.isfinite)]
        low, high = (0.0, 1.0) if is_rate(metric, finite) else (
            (float(finite.min()), float(finite.max())) if len(finite) else (0.0, 1.0))
        for split in ordered(rows["split"].unique(), SPLITS):
            v = rows.loc[rows["split"] == split, "value"].tolist()
            end = f"{v[0]:.3g} → {v[-1]:.3g}"
            if is_rate(metric, finite):
                end += f" (max {max(v):.3g})"
            lines.append(f"  {metric:<{w_metric}} {split:<{w_split}} "
                         f"{sparkline(v, low, high)} {end}")
    return lines


def ordered(names, first) -> list[str]:
    """``names`` with those of ``first`` leading, in that order, then the rest sorted."""
    rank = {n: i for i, n in enumerate(first)}
    return sorted(names, key=lambda n: (rank.get(n, len(rank)), n))


def is_rate(metric: str, values: pd.Series) -> bool:
    return "acc" in metric and bool(((values >= 0) & (values <= 1)).all())


def curves_figure(metrics: pd.DataFrame, title: str):
    """A small figure: one panel per metric, one line per split (log y for a loss; 0…1 for
    an accuracy), one legend of the splits."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    names = ordered(metrics["metric"].unique(), ("acc", "loss"))
    splits = ordered(metrics["split"].unique(), SPLITS)
    colour = {s: f"C{i % 10}" for i, s in enumerate(splits)}  # one colour per split throughout
    fig = Figure(figsize=(3.2 * len(names) + 1.4, 2.8), layout="constrained")
    FigureCanvasAgg(fig)
    for ax, metric in zip(fig.subplots(1, len(names), squeeze=False)[0], names, strict=True):
        rows = metrics[metrics["metric"] == metric].sort_values("epoch", kind="stable")
        for split in ordered(rows["split"].unique(), SPLITS):
            curve = rows[rows["split"] == split]
            ax.plot(curve["epoch"], curve["value"], color=colour[split], lw=1.2)
        if is_rate(metric, rows["value"]):
            ax.set_ylim(-0.02, 1.02)
        elif "loss" in metric and (rows["value"] > 0).all():
            ax.set_yscale("log")
        ax.set(xlabel="epoch", ylabel=metric)
    handles = [Line2D([], [], color=colour[s], lw=1.2, label=s) for s in splits]
    fig.legend(handles=handles, loc="outside right center", fontsize=7, title="split",
               title_fontsize=7)
    fig.suptitle(title, fontsize=9)
    return fig
