"""Study S's headline claims read at every scale the user holds (``rulelab scale-map``, issue 11).

Each reader gets ``{scale: ScaleLab}`` and returns one figure plus one sentence per scale
(:mod:`rulelab.report.scale_map`). A run *generalizes* when val and adv accuracy are both 100%
at one evaluation (docs/methods.md § S.3, the corrected criterion); rates carry 95% Wilson
intervals, and a difference counts as shown only when the intervals of the two cells do not
overlap.

- **S1**, depth × imbalance: from r = 0.5 to r = 0.9 the 2-layer rate rises (paper 0% → 77%)
  and the 1-layer rate falls (33% → 0%). Read on the headline cells: sum mod 2, max shortcut,
  2 heads where the lab has both head counts, the smallest weight decay it holds.
- **S5**, distance from chance: a ratio below chance b = 1/k promotes generalization as one
  above it does, and r = b suppresses it. Read on the 2-layer model: the best rate below b and
  the best rate above b, each against the rate at b.
- **S6**, weight decay: more decay (0.1 → 0.4) finds generalizing basins but often cannot stay
  in them — *transient* generalization (reached 100%, later adv < 95%). Read as the share of
  transient seeds at the largest vs the smallest weight decay, 2 layers, pooled over the
  ratios held at both.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.ticker import PercentFormatter

from rulelab.analysis.stats import format_rate, rate_table
from rulelab.report.figures import empty_panel, new_figure
from rulelab.report.scale_map import (
    ABSENT,
    DIRECTION,
    NOT_READ,
    SHOWS,
    ClaimReading,
    ScaleReading,
)
from rulelab.studies.shortcut_saturation.claim_null import half_power, seeds_for_power
from rulelab.studies.shortcut_saturation.invariants import PAPER_N, invariants
from rulelab.studies.shortcut_saturation.paper import PAPER_S

MARKERS = "osD^v<>"
MIN_POWER = 0.5  # S1 reads "does not show" only where its seeds had this power to show it


def _cells(runs: pd.DataFrame, *, all_decays: bool = False) -> pd.DataFrame:
    """Runs of the headline task (k = 2, max shortcut) with 2 heads where both head counts
    are present and — unless ``all_decays`` — the smallest weight decay held."""
    out = runs
    for col, value in (("label_mod", 2), ("shortcut", "max")):
        if col in out.columns:
            out = out[out[col] == value]
    if "heads" in out.columns and (out["heads"] == 2).any():
        out = out[out["heads"] == 2]
    if not all_decays and "weight_decay" in out.columns and len(out):
        out = out[np.isclose(out["weight_decay"], out["weight_decay"].min())]
    return out


def _rates(runs: pd.DataFrame, by: list[str], flag: str = "generalized") -> pd.DataFrame:
    if runs.empty or flag not in runs.columns and not runs["status"].eq("done").any():
        return pd.DataFrame(columns=[*by, "n", "k", "rate", "ci_low", "ci_high"])
    table = rate_table(runs, by, flag)
    return table[table["n"] > 0]


def _at(table: pd.DataFrame, **where) -> pd.Series | None:
    hit = table
    for col, v in where.items():
        hit = hit[np.isclose(hit[col].astype(float), v)]
    return hit.iloc[0] if len(hit) else None


def _cell_text(row: pd.Series | None, started: int = 0) -> str:
    """A cell's rate, or why there is none: no run finished yet (``started`` of them are
    registered, e.g. a GPU slice cut by its time limit) or none registered at all."""
    if row is not None:
        return format_rate(int(row["k"]), int(row["n"]))
    return f"not finished ({started} started)" if started else "not run"


def _unfinished(runs: pd.DataFrame, layers: int, ratio: float) -> int:
    """Runs of the cell (layers, ratio) registered but not finished (pending or running)."""
    if runs.empty or "status" not in runs.columns:
        return 0
    cell = runs[(runs["layers"] == layers) & np.isclose(runs["ratio"].astype(float), ratio)]
    return int((~cell["status"].isin(["done", "failed"])).sum())


def _above(a: pd.Series, b: pd.Series) -> tuple[bool, bool]:
    """(a's rate above b's, a's interval entirely above b's)."""
    return bool(a["rate"] > b["rate"]), bool(a["ci_low"] > b["ci_high"])


def _rate_axes(fig, scales: dict, table_of, panels: list[tuple[str, int]], *, ylabel: str,
               paper: dict | None = None, chance: float | None = None):
    """One panel per (title, layers); per scale one line of rate vs r with Wilson bars."""
    axes = fig.subplots(1, len(panels), sharey=True, squeeze=False)[0]
    for ax, (title, layers) in zip(axes, panels, strict=True):
        drawn = False
        for i, (scale, lab) in enumerate(scales.items()):
            t = table_of(lab)
            t = t[t["layers"] == layers] if len(t) else t
            if t.empty:
                continue
            t = t.sort_values("ratio")
            x = t["ratio"].to_numpy(float) + 0.01 * (i - (len(scales) - 1) / 2)
            y = t["rate"].to_numpy(float)
            err = np.vstack([y - t["ci_low"].to_numpy(float), t["ci_high"].to_numpy(float) - y])
            ax.errorbar(x, y, yerr=err, marker=MARKERS[i % len(MARKERS)], capsize=3,
                        color=f"C{i}", label=scale)
            drawn = True
        points = (paper or {}).get(f"{layers}L")
        if points:
            xs, ys = zip(*sorted(points.items()), strict=True)
            ax.plot(xs, ys, ls="none", marker="*", ms=12, color="black", label="paper")
        if chance is not None:
            ax.axvline(chance, ls="--", lw=1, color="0.5", label="chance 1/k")
        if not drawn:  # keep the axes: the paper's points still read against them
            ax.text(0.5, 0.5, f"no {layers}L runs at any scale", ha="center", va="center",
                    transform=ax.transAxes, color="0.4")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("spurious ratio r")
        ax.set_xlim(-0.03, 1.03)
        ax.set_ylim(-0.03, 1.03)
        ax.yaxis.set_major_formatter(PercentFormatter(1.0))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="best")
    axes[0].set_ylabel(ylabel)
    return axes


def depth_imbalance(scales: dict) -> ClaimReading:
    """S1: the 2L rate rises from r = 0.5 to 0.9 while the 1L rate falls (paper 0% → 77%,
    33% → 0%), each beyond the 95% Wilson intervals. The figure's last panel draws the four
    headline rates against N along the ladder (issue 20): every scale that keeps the paper's
    invariants, toward the paper's N."""
    def table_of(lab):
        return _rates(_cells(lab.runs), ["layers", "ratio"])

    fig = new_figure(10, 7.6)
    top, bottom = fig.subfigures(2, 1, height_ratios=[1, 1])
    _rate_axes(top, scales, table_of, [("1 layer", 1), ("2 layers", 2)],
               ylabel="seeds generalizing\n(val and adv 100%)", paper=PAPER_S)
    top.suptitle("S1 depth × imbalance at every scale — 95% Wilson intervals", fontsize=11)
    _ladder_axes(bottom.add_subplot(), scales, table_of)
    return ClaimReading(fig, {s: _read_s1(table_of(lab), _cells(lab.runs))
                              for s, lab in scales.items()})


LADDER_LINES = ((2, 0.9, "C0", "-"), (2, 0.5, "C0", "--"), (1, 0.5, "C1", "-"),
                (1, 0.9, "C1", "--"))


def _ladder_axes(ax, scales: dict, table_of) -> None:
    """The four headline rates against the training-set size N, one point per scale that keeps
    every invariant (a fair, smaller copy of the paper) and holds one N, with the paper's
    headline at N = 16,384 (stars)."""
    points = []  # (N, scale, rate table)
    for scale, lab in scales.items():
        runs = _cells(lab.runs)
        if runs.empty or "n_train" not in runs.columns or runs["n_train"].nunique() != 1:
            continue
        if all(i.kept for i in invariants(runs, lab.metrics)):
            points.append((int(runs["n_train"].iloc[0]), scale, table_of(lab)))
    points.sort(key=lambda p: p[0])
    for layers, ratio, color, ls in LADDER_LINES:
        xs, ys, lo, hi = [], [], [], []
        for n, _, t in points:
            row = _at(t[t["layers"] == layers], ratio=ratio) if len(t) else None
            if row is not None:
                xs.append(n)
                ys.append(row["rate"])
                lo.append(row["rate"] - row["ci_low"])
                hi.append(row["ci_high"] - row["rate"])
        label = f"{layers}L r={ratio}"
        if xs:
            ax.errorbar(xs, ys, yerr=[lo, hi], color=color, ls=ls, marker="o", capsize=3,
                        label=label)
        paper = PAPER_S[f"{layers}L"][ratio]
        ax.plot([PAPER_N], [paper], ls="none", marker="*", ms=12, color=color,
                label=f"paper {label}: {paper:.0%}")
    if not points:
        ax.text(0.5, 0.55, "no scale here keeps the paper's invariants yet\n(the ladder: "
                "rulelab sweep shortcut-saturation/ladder-2k …)", ha="center", va="center",
                transform=ax.transAxes, color="0.4")
    ax.set_xscale("log", base=2)
    ax.set_xlim(1024, 32768)
    ax.set_xticks([2048, 4096, 8192, 16384], ["2,048", "4,096", "8,192", "16,384\n(paper)"])
    ax.minorticks_off()
    ax.set_ylim(-0.03, 1.03)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_xlabel("training examples N (width shrunk with N: 4–6 parameters per example)")
    ax.set_ylabel("seeds generalizing")
    ax.set_title("S1 along the ladder: scales that keep the paper's invariants — 95% Wilson "
                 "intervals", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2, loc="upper left")


def _read_s1(t: pd.DataFrame, runs: pd.DataFrame) -> ScaleReading:
    cells = {(L, r): _at(t, layers=L, ratio=r) if len(t) else None for L in (1, 2)
             for r in (0.5, 0.9)}
    text = "; ".join(
        f"{L}L: " + ", ".join(f"r={r} {_cell_text(cells[L, r], _unfinished(runs, L, r))}"
                              for r in (0.5, 0.9))
        for L in (2, 1))
    if any(v is None for v in cells.values()):
        return ScaleReading(NOT_READ, f"{text} — the four headline cells are not all run")
    up, up_ci = _above(cells[2, 0.9], cells[2, 0.5])
    down, down_ci = _above(cells[1, 0.5], cells[1, 0.9])
    if up_ci and down_ci:
        return ScaleReading(SHOWS, f"{text} — 2L rises and 1L falls, both beyond the intervals")
    if up and down:
        return ScaleReading(DIRECTION, f"{text} — 2L rises and 1L falls, but the intervals "
                            "overlap")
    trend = f"2L {'rises' if up else 'does not rise'}, 1L {'falls' if down else 'does not fall'}"
    # "does not show" is evidence only where the seeds could have shown it (issue 21): below
    # half the power for the 2L rise at the paper's effect, too few seeds to call
    n = int(min(int(cells[key]["n"]) for key in cells))
    power = half_power("2L", n)
    if power < MIN_POWER:
        return ScaleReading(NOT_READ, f"{text} — {trend}, but too few seeds to call: {n} a cell "
                            f"would show the paper's 2L rise with {power:.0%} power "
                            f"({seeds_for_power('2L')} seeds give 80%; the 1L fall needs "
                            f"{seeds_for_power('1L')})")
    return ScaleReading(ABSENT, f"{text} — {trend}")


def distance_from_chance(scales: dict) -> ClaimReading:
    """S5: for the 2-layer model the best rate below chance and the best above it both exceed
    the rate at chance, beyond the intervals."""
    def table_of(lab):
        return _rates(_cells(lab.runs), ["layers", "ratio"])

    fig = new_figure(10, 4.2)
    _rate_axes(fig, scales, table_of, [("1 layer", 1), ("2 layers", 2)],
               ylabel="seeds generalizing (val and adv 100%)", chance=0.5)
    fig.suptitle("S5 distance from chance at every scale — 95% Wilson intervals", fontsize=11)
    return ClaimReading(fig, {s: _read_s5(table_of(lab)) for s, lab in scales.items()})


def _read_s5(t: pd.DataFrame) -> ScaleReading:
    t = t[t["layers"] == 2] if len(t) else t
    at = _at(t, ratio=0.5) if len(t) else None
    below, above = (t[t["ratio"] < 0.5 - 1e-9], t[t["ratio"] > 0.5 + 1e-9]) if len(t) else ((), ())
    if at is None or not len(below) or not len(above):
        return ScaleReading(NOT_READ, "2L needs r below, at and above chance (e.g. 0.1, 0.5, "
                            "0.9); this lab has r = " + (", ".join(
                                f"{r:g}" for r in sorted(t["ratio"])) if len(t) else "none"))
    lo, hi = (g.loc[g["rate"].idxmax()] for g in (below, above))
    text = (f"2L: best below chance r={lo['ratio']:g} {_cell_text(lo)}, at chance "
            f"{_cell_text(at)}, best above r={hi['ratio']:g} {_cell_text(hi)}")
    (b_up, b_ci), (a_up, a_ci) = _above(lo, at), _above(hi, at)
    if b_ci and a_ci:
        return ScaleReading(SHOWS, f"{text} — both sides beat chance beyond the intervals")
    if b_up and a_up:
        return ScaleReading(DIRECTION, f"{text} — both sides beat chance, within the intervals")
    return ScaleReading(ABSENT, f"{text} — chance is not the low point")


def weight_decay_transience(scales: dict) -> ClaimReading:
    """S6: the share of transient seeds is larger at the largest weight decay than at the
    smallest (2 layers, the ratios held at both pooled), beyond the intervals."""
    def table_of(lab):
        runs = _cells(lab.runs, all_decays=True)
        runs = runs[runs["layers"] == 2] if "layers" in runs.columns else runs.iloc[:0]
        if "weight_decay" not in runs.columns or "transient" not in runs.columns:
            return pd.DataFrame(columns=["weight_decay", "n", "k", "rate", "ci_low", "ci_high"])
        # pool only the ratios held at every weight decay, so both sides pool the same cells
        held = runs.groupby("ratio")["weight_decay"].nunique()
        runs = runs[runs["ratio"].isin(held[held == runs["weight_decay"].nunique()].index)]
        ever = _rates(runs, ["weight_decay"])
        trans = _rates(runs, ["weight_decay"], flag="transient")
        return trans.assign(k_ever=ever["k"].to_numpy())

    fig = new_figure(6.4, 4.2)
    ax = fig.add_subplot()
    drawn = False
    for i, (scale, lab) in enumerate(scales.items()):
        t = table_of(lab)
        if t.empty:
            continue
        y = t["rate"].to_numpy(float)
        err = np.vstack([y - t["ci_low"].to_numpy(float), t["ci_high"].to_numpy(float) - y])
        ax.errorbar(t["weight_decay"].to_numpy(float), y, yerr=err, capsize=3, color=f"C{i}",
                    marker=MARKERS[i % len(MARKERS)], label=f"{scale}: transient")
        ax.plot(t["weight_decay"], t["k_ever"] / t["n"], ls=":", color=f"C{i}",
                label=f"{scale}: ever generalized")
        drawn = True
    if not drawn:
        empty_panel(ax, "no 2L runs with transient counts at any scale")
    ax.set_xlabel("weight decay")
    ax.set_ylabel("share of 2L seeds (r held at every wd, pooled)")
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.grid(alpha=0.3)
    if drawn:
        ax.legend(fontsize=8)
    ax.set_title("S6 weight decay → transient generalization — 95% Wilson intervals",
                 fontsize=10)
    return ClaimReading(fig, {s: _read_s6(table_of(lab)) for s, lab in scales.items()})


def _read_s6(t: pd.DataFrame) -> ScaleReading:
    if t.empty or t["weight_decay"].nunique() < 2:
        held = ", ".join(f"{w:g}" for w in sorted(t["weight_decay"])) if len(t) else "none"
        return ScaleReading(NOT_READ, f"needs 2L runs at two weight decays; this lab has {held}")
    t = t.sort_values("weight_decay")
    lo, hi = t.iloc[0], t.iloc[-1]
    text = "; ".join(f"wd {r['weight_decay']:g}: transient {_cell_text(r)}, ever generalized "
                     f"{int(r['k_ever'])}/{int(r['n'])}" for r in (lo, hi))
    up, up_ci = _above(hi, lo)
    if up_ci:
        return ScaleReading(SHOWS, f"2L, {text} — more decay, more transient seeds, beyond the "
                            "intervals")
    if up:
        return ScaleReading(DIRECTION, f"2L, {text} — more transient seeds with more decay, "
                            "within the intervals")
    return ScaleReading(ABSENT, f"2L, {text} — no more transient seeds with more decay")
