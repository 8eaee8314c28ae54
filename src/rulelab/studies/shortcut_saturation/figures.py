"""Study-S mechanistic figures: gradient dynamics, ablation and patching heatmaps, fingerprints.

SPEC S.4: each function takes a table as ``Lab.read_table`` returns it (``run_id``, ``epoch``,
config columns — taken from ``runs`` where a table tracked in training lacks them) and returns a
Figure, or None when there is nothing to draw. Seeds are thin lines beside their median, or
averaged in heatmaps with n stated; a seed's generalization epoch is its
``first_epoch_generalized`` (val and adv accuracy both 100%, SPEC S.3).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib import colormaps
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter

from rulelab.report.figures import legend_columns, new_figure
from rulelab.studies.shortcut_saturation.analyses.identity import COS_PINNED, EPS_IDENTITY
from rulelab.studies.shortcut_saturation.analyses.outcome import UNKNOWN, outcome_of
from rulelab.studies.shortcut_saturation.analyses.saturation import (
    FIGURE_LABEL,
    LOSS_SATURATED,
    MARK,
    saturated_rows,
)
from rulelab.studies.shortcut_saturation.figure_tables import (
    at_epoch,
    config_groups,
    gen_epochs,
    has_columns,
    with_config,
    won,
)
from rulelab.studies.shortcut_saturation.final_readings import (
    GRADIENTS,
    final_readings,
    one_epoch_per_run,
)

FINGERPRINTS = {"qk_rho": "QK ρ (key value → CLS attention)",
                "first_mass": "attention mass on x₁", "ov_parity_rho": "OV parity ρ (direct)",
                "ov_probe_acc": "OV probe: v mod k decoded"}
CMAP = colormaps["RdBu"].with_extremes(bad="0.92")  # grey: component absent
PLAIN = FuncFormatter(lambda v, _: f"{v:g}")
GEN = dict(ls="none", marker="*", ms=9, mec="black", mew=0.5, zorder=5)
PINNED = dict(ls="none", marker="o", ms=6, mfc="none", mew=0.8, zorder=4)  # ε < EPS_IDENTITY
NOISE = dict(ls="none", marker="x", ms=6, mew=1.2, zorder=4)  # saturated loss: rounding noise
THIN, THICK = 0.7, 1.9  # line widths: one seed, the median over seeds


def _log_x(ax) -> None:
    ax.set_xscale("symlog", linthresh=1, linscale=0.4)  # log-spaced epochs, epoch 0 kept
    ax.set(xlim=(0, None), xlabel="epoch" if ax.get_subplotspec().is_last_row() else "")
    ax.xaxis.set_major_formatter(PLAIN)
    ax.xaxis.label.set_fontsize(8)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)


def _seed_lines(ax, g: pd.DataFrame, col: str, colour, gen: dict,
                median_of: pd.DataFrame | None = None) -> set[str]:
    """A thin line per run of ``g[col]`` vs epoch, their median (over ``median_of``'s rows
    where given), a star at generalization; returns what it drew of ``{"median", "star"}``
    (the legend promises only those)."""
    drew = set()
    curves = [c.sort_values("epoch") for _, c in g.groupby("run_id", sort=True)]
    for c in curves:  # a run read at one or two epochs (post hoc) still shows, as dots
        ax.plot(c["epoch"], c[col], color=colour, lw=THIN, alpha=0.5,
                marker="o" if len(c) < 3 else None, ms=3)
        if (e := gen.get(c["run_id"].iloc[0])) is not None:
            ax.plot([e], [np.interp(e, c["epoch"], c[col])], color=colour, **GEN)
            drew.add("star")
    if len(curves) >= 2:
        m = (g if median_of is None else median_of).groupby("epoch")[col].median()
        ax.plot(m.index, m.to_numpy(), color=colour, lw=THICK)
        drew.add("median")
    return drew


def _legend(fig: Figure, handles: list, drew: set[str], colour) -> None:
    """``handles`` and the keys of what :func:`_seed_lines` drew (in ``colour``, a colour
    drawn): a seed's line, the median, the generalization star."""
    handles.append(Line2D([], [], color=colour, lw=THIN, label="thin: one seed"))
    if "median" in drew:
        handles.append(Line2D([], [], color=colour, lw=THICK, label="thick: median over seeds"))
    if "star" in drew:
        handles.append(Line2D([], [], color=colour, **GEN, label="generalized (val and adv "
                              "100%)"))
    fig.legend(handles=handles, loc="outside upper center", fontsize=8, frameon=False,
               ncols=legend_columns(fig, [h.get_label() for h in handles]))


def checkpoints(table: pd.DataFrame, k: int = 3) -> list[int]:
    """Up to ``k`` stored epochs spread over training in log space, ending at the last one."""
    epochs = np.array(sorted(e for e in table["epoch"].unique() if e > 0) if has_columns(
        table, "epoch") else [])
    want = np.geomspace(epochs[0], epochs[-1], k + 1)[1:] if len(epochs) > k else epochs
    return sorted({int(epochs[np.abs(np.log(epochs / w)).argmin()]) for w in want})


def gradient_dynamics(grad_table: pd.DataFrame, runs: pd.DataFrame | None = None, *,
                      module: str = "all") -> Figure | None:
    """cos(g+, g−) (top), ‖g−‖/‖g+‖ (middle, log y) and ε = ‖g‖/(r‖g+‖) (bottom, log y, when
    the table has it) vs epoch (log x) — SPEC S.4.1–2, issue 8.

    One column of panels per architecture, one colour per ratio r; dashed: the odds r/(1−r),
    at which amplification makes the two groups' gradient shares (1−r)‖g−‖ and r‖g+‖ equal.
    Readings with ε < ``EPS_IDENTITY`` are ringed (○), each run on its own ε: there
    ``g = r·g+ + (1−r)·g−`` alone forces amplification within ±ε of r/(1−r) and
    cos ≤ −√(1 − ε²) ≤ −0.9 (:mod:`.analyses.identity`), so they are *identity-dominated*. Readings
    with a saturated loss (issue 11, :mod:`.analyses.saturation`) are crossed (×) instead, on
    every row, and left out of the medians: their gradients are rounding noise.
    """
    t = with_config(grad_table, runs)
    if not has_columns(t, "run_id", "epoch", "cos", "amplification"):
        return None
    if "module" in t.columns and (t := t[t["module"] == module]).empty:
        return None
    t = t.reset_index(drop=True)  # tables concatenated as stored repeat index labels
    panels = config_groups(t, drop=("seed", "ratio"))
    colour = {r: f"C{i}" for i, r in enumerate(sorted(set(t.get("ratio", pd.Series()).dropna())))}
    gen = gen_epochs(runs)
    noise = saturated_rows(t)
    has_eps = "eps" in t.columns and t["eps"].notna().any()
    n_rows = 3 if has_eps else 2
    drew: set[str] = set()
    odds, pinned_any = False, False
    fig = new_figure(3.5 * len(panels) + 0.6, 2.5 * n_rows + 0.8)
    axes = fig.subplots(n_rows, len(panels), squeeze=False, sharex=True, sharey="row")
    for j, (title, g) in enumerate(panels):
        counts = []
        for r, gr in g.groupby("ratio") if colour else [(None, g)]:
            c = colour.get(r, "C0")
            sat = noise[gr.index]
            rows = ["cos", "amplification", "eps"][:n_rows]
            for i, col in enumerate(rows):
                drew |= _seed_lines(axes[i, j], gr, col, c, gen, median_of=gr[~sat])
                if sat.any():
                    axes[i, j].plot(gr.loc[sat, "epoch"], gr.loc[sat, col], **NOISE, color=c)
            if has_eps:
                pinned = gr[(gr["eps"] < EPS_IDENTITY) & ~sat]
                pinned_any |= not pinned.empty
                for i, col in enumerate(("cos", "amplification")):
                    axes[i, j].plot(pinned["epoch"], pinned[col], **PINNED, mec=c)
            if r is not None and 0 < r < 1:
                axes[1, j].axhline(r / (1 - r), ls="--", lw=1.1, color=c)
                odds = True
            counts.append(f"r={r:g}: {won(gr, gen)}" if r is not None else won(gr, gen))
        axes[0, j].set_title(f"{title}\ngeneralized {', '.join(counts)}", fontsize=8.5)
        axes[0, j].axhline(0, color="0.4", lw=0.8)
        for i in range(1, n_rows):
            axes[i, j].set_yscale("log")
            axes[i, j].yaxis.set_major_formatter(PLAIN)
        if has_eps:
            axes[2, j].axhline(EPS_IDENTITY, ls=":", lw=1.1, color="0.3")
        for ax in axes[:, j]:
            _log_x(ax)
    axes[0, 0].set_ylabel("cos(g+, g−)", fontsize=8)
    axes[1, 0].set_ylabel("‖g−‖ / ‖g+‖", fontsize=8)
    key = next(iter(colour.values()), "C0")  # keys drawn in a colour the panels use
    handles = [Line2D([], [], color=c, lw=1.0, label=f"r = {r:g}") for r, c in colour.items()]
    if odds:
        handles.append(Line2D([], [], color=key, ls="--", lw=1.1,
                              label="r/(1−r), in its r's colour"))
    if has_eps:
        axes[2, 0].set_ylabel("ε = ‖g‖ / (r‖g+‖)", fontsize=8)
    if pinned_any:
        handles.append(Line2D([], [], **PINNED, mec=key,
                              label=f"identity-dominated (ε < {EPS_IDENTITY:.3g})"))
    if noise.any():
        handles.append(Line2D([], [], **NOISE, color=key, label=FIGURE_LABEL))
    _legend(fig, handles, drew, key)
    return fig


def _heatmap(ax, values: np.ndarray, norm, rows: list[str], cols: list[str], fmt) -> object:
    """An annotated heatmap; NaN cells (component absent) grey."""
    im = ax.imshow(np.ma.masked_invalid(values), cmap=CMAP, norm=norm, aspect="auto")
    ax.set_xticks(range(len(cols)), cols, fontsize=7, rotation=45, ha="right")
    ax.set_yticks(range(len(rows)), rows, fontsize=7)
    ax.tick_params(length=0)
    for (i, j), v in np.ndenumerate(values):
        if np.isfinite(v):
            ax.text(j, i, fmt(v), ha="center", va="center", fontsize=6.5,
                    color="white" if abs(norm(v) - 0.5) > 0.3 else "black")
    return im


def _ablation_rows(t: pd.DataFrame, e: int | None) -> tuple[str, pd.DataFrame, bool]:
    """(what the panel is read at, its rows, whether each row names its epoch): one epoch per
    panel — for ``e`` the stored epoch nearest it over all runs, only the runs that hold it;
    for None each run's last stored epoch, named on every row where the runs' differ."""
    if e is None:
        rows = at_epoch(t, None)
        stored = sorted({int(x) for x in rows["epoch"].unique()})
        return (f"epoch {stored[0]}" if len(stored) == 1 else "each run's last epoch",
                rows, len(stored) > 1)
    held = np.array(sorted(t["epoch"].unique()))
    nearest = int(held[np.abs(held - e).argmin()])  # ties: the earlier
    rows = t[t["epoch"] == nearest]
    runs_in = f"{rows['run_id'].nunique()} of {t['run_id'].nunique()} runs"
    at = f"epoch {nearest}" if nearest == e else f"epoch {nearest} (nearest to {e})"
    return f"{at}, {runs_in}", rows, False


def ablation_heatmap(ablation_table: pd.DataFrame, epoch=None, *, runs=None,
                     method: str = "mean", where: str = "cls") -> Figure | None:
    """Δ adversarial and Δ val accuracy when one head or MLP is ablated (SPEC S.4.3).

    Rows are configurations, columns layer·component, cells the mean over seeds (percentage
    points; red = accuracy lost). A panel never pools epochs: ``epoch`` None is each run's last
    stored epoch (one row per configuration and epoch, the epoch on every row, where runs
    ended at different epochs); an epoch or a list of epochs gives one row of panels per
    epoch, each at the stored epoch nearest it and holding only the runs read there (its
    title says how many, each row its n).
    """
    t = with_config(ablation_table, runs)
    if not has_columns(t, "run_id", "epoch", "layer", "component", "d_adv_acc", "d_val_acc",
                "base_adv_acc") or (
            t := t[(t.get("method", method) == method) & (t.get("where", where) == where)]).empty:
        return None
    cells = sorted({(int(r.layer), str(r.component)) for r in t.itertuples()},
                   key=lambda c: (c[0], c[1] == "mlp", c[1]))
    blocks = []  # (title, row labels, {column: values in pp})
    for e in (list(epoch) or [None]) if isinstance(epoch, list | tuple) else [epoch]:
        at, rows, per_row = _ablation_rows(t, e)
        groups = [(f"{lab} epoch {int(ep)}" if per_row else lab, ge)
                  for lab, g in config_groups(rows) for ep, ge in g.groupby("epoch")]
        labels = [f"{lab} n={g['run_id'].nunique()}, base adv {g['base_adv_acc'].mean():.0%}"
                  for lab, g in groups]
        values = {col: 100 * np.array([[m.get(c, np.nan) for c in cells] for m in (
            g.groupby(["layer", "component"])[col].mean() for _, g in groups)])
            for col in ("d_adv_acc", "d_val_acc")}
        blocks.append((at, labels, values))
    lim = max(5.0, *(np.nanmax(np.abs(v)) for *_, vs in blocks for v in vs.values()))
    norm = TwoSlopeNorm(0.0, -lim, lim)
    heights = [len(labels) for _, labels, _ in blocks]
    fig = new_figure(len(cells) + 5.2, sum(0.36 * h + 0.5 for h in heights) + 1.6)
    axes = fig.subplots(len(blocks), 2, squeeze=False, gridspec_kw={"height_ratios": heights})
    for b, (at, labels, values) in enumerate(blocks):
        for ax, (col, name) in zip(axes[b], (("d_adv_acc", "adv"), ("d_val_acc", "val")),
                                   strict=True):
            im = _heatmap(ax, values[col], norm, labels, [f"L{la} {c}" for la, c in cells],
                          lambda v: f"{v:+.0f}" if round(v) else "0")
            ax.set_title(f"Δ {name} accuracy, {at}", fontsize=8.5)
            ax.tick_params(labelleft=col == "d_adv_acc", labelbottom=b == len(blocks) - 1)
    bar = fig.colorbar(im, ax=axes, shrink=0.9, format="%+.0f")
    bar.ax.set_title("Δ acc\n(pp)", fontsize=8)  # above the bar: fits however short it is
    fig.suptitle(f"{method}-ablation at {'all positions' if where == 'all' else 'CLS'}, "
                 "mean over seeds (pp)", fontsize=9.5)
    return fig


def patching_heatmap(patching_table: pd.DataFrame, *, runs=None, epoch=None) -> Figure | None:
    """Share of the twin's logit difference restored by patching one activation from the
    aligned twin into the adversarial run (SPEC S.4.4; 1 = twin, 0 = unpatched).

    One panel per architecture × ratio × outcome (the run's ``generalized`` flag, when ``runs``
    has it: the claims are conditional on it) × epoch (each run's last stored one, or the one
    nearest ``epoch``; runs read at different epochs are never pooled), **median** over runs:
    rows are the residual stream before each layer, each head's output ``z`` and each MLP
    output; columns the position (CLS, x₁…) and all positions at once. NaN cells (grey): no
    run had a twin–original gap above ``REL_GAP``. Colours saturate outside [−1, 1].
    """
    t = with_config(patching_table, runs)
    order = {"resid_pre": 0, "z": 1, "z_all": 1, "mlp_out": 2, "mlp_out_all": 2}
    if not has_columns(t, "run_id", "epoch", "kind", "layer", "pos", "head", "value") or (
            t := at_epoch(t[t["kind"].isin(order)], epoch)).empty:
        return None
    n_pos = int(t["pos"].max()) + 1
    t = t.assign(row=t["kind"].map(order), col=t["pos"].where(t["pos"] >= 0, n_pos),
                 outcome=outcome_of(runs, t["run_id"]))
    names = ("resid L{}", "z L{}.H{}", "mlp L{}")
    cols = ["CLS", *(f"x{i}" for i in range(1, n_pos)), "all"]
    archs = config_groups(t, drop=("seed", "ratio"))
    ratios = sorted(t["ratio"].unique()) if "ratio" in t.columns else [None]
    panels = [(r, o, e) for r in ratios for o in sorted(t["outcome"].unique())
              for e in sorted(t["epoch"].unique())  # one epoch per panel, never pooled
              if not t[(t["outcome"] == o) & (t["epoch"] == e)
                       & ((t["ratio"] == r) if r is not None else True)].empty]
    n_rows = [len(a.groupby(["row", "layer", "head"])) for _, a in archs]
    fig = new_figure(len(panels) * (0.45 * len(cols) + 1.3) + 1.0, 0.3 * sum(n_rows)
                      + 0.9 * len(archs) + 0.6)
    axes = fig.subplots(len(archs), len(panels), squeeze=False,
                        gridspec_kw={"height_ratios": n_rows})
    norm = TwoSlopeNorm(0.0, -1.0, 1.0)
    for i, (label, arch) in enumerate(archs):
        for j, (r, outcome, epoch_) in enumerate(panels):
            g = arch[(arch["outcome"] == outcome) & (arch["epoch"] == epoch_)]
            g = g if r is None else g[g["ratio"] == r]
            if g.empty:
                axes[i, j].set_visible(False)
                continue
            m = g.groupby(["row", "layer", "head", "col"])["value"].median()
            rows = sorted({k[:3] for k in m.index})
            values = np.array([[m.get((*k, c), np.nan) for c in range(n_pos + 1)] for k in rows])
            im = _heatmap(axes[i, j], values, norm, [names[k].format(la, h) for k, la, h in rows],
                          cols, lambda v: f"{v:.2f}".replace("-0.00", "0.00") if abs(v) < 10
                          else f"{v:.0f}")
            axes[i, j].axvline(n_pos - 0.5, color="black", lw=1)
            for y in np.flatnonzero(np.diff([k[0] for k in rows])):  # resid | z | mlp
                axes[i, j].axhline(y + 0.5, color="black", lw=1)
            at = int(epoch_)
            shown = "" if outcome == UNKNOWN else f", {outcome}\n"
            axes[i, j].set_title(f"{label}{'' if r is None else f' r={r:g}'}{shown or ' '}"
                                 f"(n={g['run_id'].nunique()}, epoch {at})", fontsize=8.5)
    fig.colorbar(im, ax=axes, shrink=0.7, extend="both", label="restored (1 = twin)")
    fig.suptitle("Patching twin → adversarial: normalised logit difference, median over runs "
                 "by outcome", fontsize=9.5)
    return fig


def fingerprint_trajectories(fp_table: pd.DataFrame, runs: pd.DataFrame | None = None, *,
                             max_configs: int | None = None) -> Figure | None:
    """QK ρ, attention on x₁ and OV parity ρ of each head vs epoch (SPEC S.4.5).

    Rows are the three fingerprints, columns configurations; one colour per head, a thin line
    per seed and the median over seeds, a star at each seed's generalization epoch.
    """
    t = with_config(fp_table, runs)
    metrics = [c for c in FINGERPRINTS if c in t.columns]
    if not metrics or not has_columns(t, "run_id", "epoch", "layer", "head"):
        return None
    groups = config_groups(t)[:max_configs]
    heads = sorted({(int(r.layer), int(r.head)) for r in t.itertuples()})
    colour = {h: f"C{i % 10}" for i, h in enumerate(heads)}  # one colour per layer.head
    gen = gen_epochs(runs)
    fig = new_figure(3.2 * len(groups) + 0.6, 2.3 * len(metrics) + 0.8)
    axes = fig.subplots(len(metrics), len(groups), squeeze=False, sharex=True, sharey="row")
    drew: set[str] = set()
    for j, (title, g) in enumerate(groups):
        axes[0, j].set_title(f"{title}\ngeneralized {won(g, gen)}", fontsize=8.5)
        for i, metric in enumerate(metrics):
            axes[i, 0].set_ylabel(FINGERPRINTS[metric], fontsize=8)
            for (lay, h), gh in g.groupby(["layer", "head"]):
                drew |= _seed_lines(axes[i, j], gh, metric, colour[(lay, h)], gen)
            _log_x(axes[i, j])
            if metric in ("qk_rho", "ov_parity_rho"):
                axes[i, j].axhline(0, color="0.4", lw=0.8)
    _legend(fig, [Line2D([], [], color=c, lw=1.0, label=f"L{la}.H{h}")
                  for (la, h), c in colour.items()], drew, next(iter(colour.values())))
    return fig


GRADIENT_CAPTION = ("Gradient conflict cos(g+, g−) and amplification ‖g−‖/‖g+‖ (all parameters) "
                    "{when}; dashed: r/(1−r). {ringed}identity-dominated readings (ε = "
                    f"‖g‖/(r‖g+‖) < {EPS_IDENTITY:.3g}, each run on its own ε), where "
                    "g = r·g+ + (1−r)·g− alone forces amplification within ±ε of r/(1−r) and "
                    f"cos ≤ −√(1 − ε²) ≤ {COS_PINNED:g}. Crossed (×, {MARK} in the printed "
                    "summary): readings with a saturated training loss (a group's mean loss "
                    f"< {LOSS_SATURATED:g} nats), where float32 leaves the gradients rounding "
                    "noise; they are left out of the medians")
FINGERPRINT_CAPTION = ("QK/OV fingerprints per head {when}; the OV probe is the held-out-value "
                       "accuracy of a linear probe of v mod k on what the head writes (chance ≈ "
                       "1/k), which unlike OV parity ρ does not need the direct path to the "
                       "logits")
FINAL = "at each run's last stored epoch vs r, one dot per seed and the median"


def _gradients(t: pd.DataFrame, runs) -> tuple[Figure | None, str]:
    if one_epoch_per_run(t):
        return (final_readings(t, runs, GRADIENTS, module="all"),
                GRADIENT_CAPTION.format(when=FINAL, ringed="Below the dotted line: "))
    return (gradient_dynamics(t, runs), GRADIENT_CAPTION.format(when="over training",
                                                                ringed="Ringed: "))


def _fingerprints(t: pd.DataFrame, runs) -> tuple[Figure | None, str]:
    if one_epoch_per_run(t):
        return (final_readings(t, runs, FINGERPRINTS, hue=("layer", "head")),
                FINGERPRINT_CAPTION.format(when=FINAL))
    return (fingerprint_trajectories(t, runs),
            FINGERPRINT_CAPTION.format(when="over training, one line per seed"))


def analysis_figures(analyses: dict[str, pd.DataFrame] | None,
                     runs: pd.DataFrame | None = None) -> list[tuple[Figure, str]]:
    """(figure, caption) for each analysis table that has rows: the report's S.4 section.
    Gradients and fingerprints read at one epoch per run (``rulelab analyze`` on the final
    weights) are drawn against r (:mod:`.final_readings`), over epochs otherwise."""
    a = {k: v for k, v in (analyses or {}).items() if v is not None and not v.empty}
    specs = [
        ("gradients", lambda t: _gradients(t, runs)),
        ("ablation", lambda t: (ablation_heatmap(t, checkpoints(t) or None, runs=runs),
         "Mean-ablation at CLS of each head and MLP at checkpoints over training: change in "
         "adversarial and val accuracy (percentage points), mean over seeds")),
        ("patching", lambda t: (patching_heatmap(t, runs=runs), "Cross-split activation "
         "patching from aligned twins into adversarial sequences (last stored epoch), median "
         "over runs, split by whether the run generalized")),
        ("fingerprints", lambda t: _fingerprints(t, runs)),
    ]
    made = [make(a[name]) for name, make in specs if name in a]
    return [(f, c) for f, c in made if f is not None]
