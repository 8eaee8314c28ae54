"""Study S's headline figure: generalization rate vs spurious ratio r, per architecture, with
95% Wilson intervals, k/n per point and the paper's reference points (SPEC S.3)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

from rulelab.analysis.stats import rate_table, varying_columns
from rulelab.report.figures import empty_panel, new_figure
from rulelab.report.views import fmt
from rulelab.studies.shortcut_saturation.labels import ARCH, config_label
from rulelab.studies.shortcut_saturation.rates import ADV_ONLY


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
    fig = new_figure(6.8, 4.4)
    ax = fig.add_subplot()
    if runs.empty or "ratio" not in runs.columns:
        empty_panel(ax, "no runs with a spurious ratio yet")
        return fig
    others = [c for c in varying_columns(runs) if c not in (*ARCH, "ratio")]
    line_cols = [c for c in ARCH if c in runs.columns] + others
    table = rate_table(runs, [*line_cols, "ratio"])
    if ADV_ONLY in runs.columns:
        table["rate_adv"] = rate_table(runs, [*line_cols, "ratio"], flag=ADV_ONLY)["rate"]
    table = table[table["n"] > 0]
    adv_differs = "rate_adv" in table.columns and bool((table["rate_adv"] != table["rate"]).any())
    if table.empty:
        empty_panel(ax, "no finished runs yet")
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
            colour_of_layers.setdefault(f"{fmt(g['layers'].iloc[0])}L", colour)

    for key, points in (paper or {}).items():
        xs, ys = zip(*sorted(points.items()), strict=True)
        ax.plot(xs, ys, ls="none", marker="D", ms=9, mfc="none", mew=1.6, zorder=5,
                color=colour_of_layers.get(key, "black"), label=f"paper {key}")

    if "label_mod" in runs.columns:
        for k in sorted(runs["label_mod"].dropna().unique()):
            ax.axvline(1 / k, ls="--", lw=1, color="0.5",
                       label=f"chance b = 1/k = 1/{fmt(k)} (k labels)")

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
