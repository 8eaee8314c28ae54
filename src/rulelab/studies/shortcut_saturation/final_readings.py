"""Study S's mechanistic readings at one epoch per run, against the spurious ratio r (SPEC
S.4.1–2, S.4.5): what ``rulelab analyze gradients|fingerprints`` gives on the final weights,
and what the quick reproduction's report shows (issue 10). A trajectory over epochs
(:mod:`.figures`) needs tracked or snapshot epochs; a table with one epoch per run is drawn
here instead, as a strip per ratio: one dot per seed (a star where it generalized), the median
as a bar, the reference each reading is judged against. A gradient reading with a saturated
training loss (issue 11, :mod:`.analyses.saturation`) is a cross, left out of the median."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogFormatter

from rulelab.report.figures import legend_columns, new_figure
from rulelab.studies.shortcut_saturation.analyses.identity import EPS_IDENTITY
from rulelab.studies.shortcut_saturation.analyses.saturation import FIGURE_LABEL, saturated_rows
from rulelab.studies.shortcut_saturation.figure_tables import (
    at_epoch,
    config_groups,
    gen_epochs,
    has_columns,
    with_config,
    won,
)

GRADIENTS = {"cos": "cos(g+, g−)", "amplification": "‖g−‖ / ‖g+‖",
             "eps": "ε = ‖g‖ / (r‖g+‖)"}
LOG = {"amplification", "eps"}  # ratios: log scale
ZERO = {"cos", "qk_rho", "ov_parity_rho"}  # signed: a line at 0
PLAIN = FuncFormatter(lambda v, _: f"{v:g}")
NOISE = dict(ls="none", marker="x", ms=5, mew=1.2)  # a saturated-loss reading: rounding noise


def one_epoch_per_run(table: pd.DataFrame | None) -> bool:
    """Whether every run of ``table`` is read at a single epoch (nothing to draw over time)."""
    if table is None or not has_columns(table, "run_id", "epoch"):
        return False
    return bool((table.groupby("run_id")["epoch"].nunique() <= 1).all())


def _strip(ax, g: pd.DataFrame, col: str, x: float, colour, gen: dict, width: float) -> None:
    """One dot per run at ``x`` (jittered within ``width``), a star where it generalized, a
    cross where its loss is saturated (the stored ``saturated`` flag), and the median of the
    other runs as a short bar."""
    v = g.groupby("run_id")[col].median().dropna()
    if v.empty:  # e.g. a head the 1-layer runs do not have
        return
    noise = saturated_rows(g).groupby(g["run_id"]).any().reindex(v.index).to_numpy()
    jitter = np.linspace(-width / 3, width / 3, len(v)) if len(v) > 1 else np.zeros(1)
    won_ = np.array([r in gen for r in v.index], dtype=bool) & ~noise
    dot = ~won_ & ~noise
    ax.plot(x + jitter[dot], v.to_numpy()[dot], ls="none", marker="o", ms=3.5,
            color=colour, alpha=0.7)
    ax.plot(x + jitter[won_], v.to_numpy()[won_], ls="none", marker="*", ms=9, color=colour,
            mec="black", mew=0.5)
    if noise.any():
        ax.plot(x + jitter[noise], v.to_numpy()[noise], **NOISE, color=colour)
    if not noise.all():
        ax.plot([x - width / 2, x + width / 2], [v[~noise].median()] * 2, color=colour, lw=2.2)


def final_readings(table: pd.DataFrame, runs: pd.DataFrame | None, columns: dict[str, str], *,
                   hue: tuple[str, ...] = (), module: str | None = None) -> Figure | None:
    """Rows: ``columns`` (name → axis label); panels: architectures; x: the ratio r; one colour
    per value of the ``hue`` columns (e.g. a fingerprint's layer and head). Readings at each
    run's last stored epoch. Amplification gets the odds r/(1−r) (dashed), ε the
    identity-dominated threshold (dotted); readings with a saturated loss are crosses, not in
    the median bar."""
    t = with_config(table, runs)
    if module is not None and "module" in t.columns:
        t = t[t["module"] == module]
    columns = {c: lab for c, lab in columns.items() if c in t.columns and t[c].notna().any()}
    if not columns or not has_columns(t, "run_id", "epoch", "ratio"):
        return None
    t = at_epoch(t, None)
    ratios = sorted(t["ratio"].dropna().unique())
    hues = sorted({tuple(r) for r in t[list(hue)].itertuples(index=False)}) if hue else [()]
    colour = {h: f"C{i % 10}" for i, h in enumerate(hues)}
    gen = gen_epochs(runs)  # a panel per epoch where runs ended apart: never pooled
    panels = [(f"{title}, epoch {int(e)}", ge) for title, g in config_groups(t, drop=(
        "seed", "ratio")) for e, ge in g.groupby("epoch")]
    fig = new_figure(max(3.0, (0.9 + 0.5 * len(hues)) * len(ratios)) * len(panels) + 0.8,
                     2.2 * len(columns) + 1.0)
    axes = fig.subplots(len(columns), len(panels), squeeze=False, sharey="row")
    step = 0.8 / len(hues)
    for j, (title, g) in enumerate(panels):
        axes[0, j].set_title(f"{title}\ngeneralized {won(g, gen)}", fontsize=8.5)
        for i, col in enumerate(columns):
            ax = axes[i, j]
            for x, r in enumerate(ratios):
                for k, h in enumerate(hues):
                    part = g[g["ratio"] == r]
                    for name, value in zip(hue, h, strict=True):
                        part = part[part[name] == value]
                    _strip(ax, part, col, x + (k - (len(hues) - 1) / 2) * step, colour[h],
                           gen, step)
                if col == "amplification" and 0 < r < 1:
                    ax.plot([x - 0.45, x + 0.45], [r / (1 - r)] * 2, ls="--", lw=1.1, color="0.3")
            if col in LOG:
                ax.set_yscale("log")
                ax.yaxis.set_major_formatter(PLAIN)  # 1.05, not 1.05×10⁰
                ax.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False))  # narrow spans
            if col == "eps":
                ax.axhline(EPS_IDENTITY, ls=":", lw=1.1, color="0.3")
            if col in ZERO:
                ax.axhline(0, color="0.4", lw=0.8)
            ax.set_xticks(range(len(ratios)), [f"r = {r:g}" for r in ratios], fontsize=7)
            ax.tick_params(labelsize=7)
            ax.grid(alpha=0.3, axis="y")
            if j == 0:
                ax.set_ylabel(columns[col], fontsize=8)
    handles = [Line2D([], [], color=c, lw=2.2, label=".".join(f"{n[0].upper()}{v}" for n, v in
                                                             zip(hue, h, strict=True)))
               for h, c in colour.items() if h]
    key = next(iter(colour.values()))  # keys in a colour the panels draw (issue 23)
    handles += [Line2D([], [], ls="none", marker="o", ms=3.5, color=key, label="one seed"),
                Line2D([], [], color=key, lw=2.2, label="median")]
    if set(gen) & set(t["run_id"]):  # a star only where one is drawn
        handles.append(Line2D([], [], ls="none", marker="*", ms=9, color=key, mec="black",
                              mew=0.5, label="generalized (val and adv 100%)"))
    if "amplification" in columns:
        handles.append(Line2D([], [], ls="--", color="0.3", label="r/(1−r)"))
    if "eps" in columns:
        handles.append(Line2D([], [], ls=":", color="0.3",
                              label=f"identity-dominated below ε = {EPS_IDENTITY:.3g}"))
    if saturated_rows(t).any():
        handles.append(Line2D([], [], **NOISE, color="0.4", label=FIGURE_LABEL))
    fig.legend(handles=handles, loc="outside upper center", fontsize=8, frameon=False,
               ncols=legend_columns(fig, [h.get_label() for h in handles]))
    return fig
