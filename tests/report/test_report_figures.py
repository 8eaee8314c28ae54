"""Figures a reviewer would accept (issue 23): the figure check itself — clipped text, curves
outside their axes, legend entries that draw nothing, overlapping tick labels — and every
figure of each study's report passing it; every configuration drawn; the report opening with
what the lab shows."""

import numpy as np
import pandas as pd
import pytest
from matplotlib.lines import Line2D
from tests.report.test_report import make_lab
from tests.studies.shortcut_saturation.test_figures_s import (
    make_ablation,
    make_gradients,
    make_patching,
)
from tests.studies.shortcut_saturation.test_figures_s import make_runs as make_s_runs

from rulelab.analysis.calibration import NullCheck
from rulelab.report.figure_check import figure_problems
from rulelab.report.figures import accuracy_curves, loss_curves, new_figure
from rulelab.report.html import write_report
from rulelab.report.results import readme_shows, results_html
from rulelab.studies.coexistence.panels import activation_swap, frequency_filtering, pruning
from rulelab.studies.shortcut_saturation import STUDY as S
from rulelab.study import Calibration


def test_a_colour_bar_label_longer_than_the_figure_is_clipped():
    """The old ablation colour bar: its label along a bar on a short figure reads
    "Δ accuracy (pp" — cut at the top."""
    fig = new_figure(5, 1.0)
    axes = fig.subplots(1, 2)
    im = axes[0].imshow(np.zeros((1, 3)))
    fig.colorbar(im, ax=axes, shrink=0.8, label="Δ accuracy (pp)")
    problems = figure_problems(fig)
    assert len(problems) == 1 and problems[0].startswith(
        "text 'Δ accuracy (pp)' is cut at the figure's top by"), problems
    fig.axes[-1].set_ylabel("")
    fig.axes[-1].set_title("Δ acc\n(pp)", fontsize=8)  # the fix: a title above the bar
    assert figure_problems(fig) == []


def test_text_off_the_edge_and_tick_labels_over_each_other():
    fig = new_figure(4, 3)
    ax = fig.add_subplot()
    ax.plot([0, 1], [0, 1])
    fig.text(0.9, 0.5, "a caption that runs off the right edge")
    ax.set_xticks([0, 0.02], ["leaky_relu", "reverse_relu"])
    problems = figure_problems(fig)
    assert any("runs off the right edge' is cut at the figure's right" in p for p in problems)
    assert "tick labels 'leaky_relu' and 'reverse_relu' overlap" in problems


def test_curves_outside_their_axes():
    fig = new_figure(4, 3)
    ax = fig.add_subplot()
    ax.plot(np.arange(10), np.linspace(0, 1, 10), label="acc")
    ax.set_xlim(0, 5)  # a zoom that cuts the curve at the right
    ax.axhline(2.0)  # a reference above the shown range
    ax.set_ylim(0, 1)
    problems = figure_problems(fig)
    assert problems == ["line 'acc' leaves its axes ('an axes'): 4 of 10 points outside",
                        "a line leaves its axes ('an axes'): 2 of 2 points outside"]


def test_legend_entries_must_match_what_is_drawn():
    fig = new_figure(5, 3)
    ax = fig.add_subplot()
    for seed in range(2):
        ax.plot([0, 1], [seed, seed + 1], color="C0", lw=0.7)  # thin seed lines, no median
    ax.bar([0, 1], [1, 2], color="C2", label="bars")
    handles = [Line2D([], [], color="C0", lw=1.0, label="val acc"),
               Line2D([], [], color="C0", lw=0.7, label="thin: one seed"),
               Line2D([], [], color="C0", lw=1.8, label="thick: median"),
               Line2D([], [], color="0.3", lw=0.7, label="thin: one seed; thick: median"),
               Line2D([], [], ls="none", marker="*", color="C0", label="generalized")]
    fig.legend(handles=handles, loc="outside upper center", ncols=3, fontsize=7)
    ax.legend(loc="lower right")
    assert figure_problems(fig) == [
        "legend entry 'thick: median' draws nothing in the figure",
        "legend entry 'thin: one seed; thick: median' draws nothing in the figure",
        "legend entry 'generalized' draws nothing in the figure"]


def _many_configs(seeds: int, widths=(9, 33, 129, 1025), noises=(0.0, 0.5, 0.8)
                  ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Study M's grid: widths × noise levels (α = 0.8 among them) × ``seeds``."""
    runs, metrics = [], []
    for w in widths:
        for a in noises:
            for s in range(seeds):
                rid = f"w{w}a{a}s{s}"
                runs.append(dict(run_id=rid, status="done", task="modular", p=11, width=w,
                                 noise=a, seed=s, generalized=a == 0))
                for split, base in (("test", 0.3), ("train_noisy", 0.1), ("train", 1.0)):
                    metric = "loss" if split == "train" else "acc"
                    value = np.r_[base, base * 0.5, 0.0] if metric == "loss" else \
                        np.linspace(base, 1, 3)
                    metrics.append(pd.DataFrame(dict(run_id=rid, epoch=[0, 10, 20], split=split,
                                                     metric=metric, value=value)))
    return pd.DataFrame(runs), pd.concat(metrics, ignore_index=True)


def _legend(fig) -> list[str]:
    return [t.get_text() for t in fig.legends[0].get_texts()]


def test_curves_draw_every_configuration_and_a_legend_of_what_is_drawn():
    runs, metrics = _many_configs(seeds=2)
    fig = accuracy_curves(runs, metrics)
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
    assert len(titles) == 12 and sum("α=0.8" in t for t in titles) == 4  # 12 of 12, α = 0.8
    assert not fig.texts  # no "showing 8 of 12 configurations"
    assert "thin: one seed" in _legend(fig) and not any("median" in x for x in _legend(fig))
    assert "train acc (clean labels)" not in _legend(fig)  # no curve of it: not promised
    assert figure_problems(fig) == []
    few = _many_configs(seeds=3, widths=(9,), noises=(0.0, 0.8))
    assert "thick: median over seeds (≥ 3 seeds)" in _legend(accuracy_curves(*few))
    losses = loss_curves(*few)  # a loss of 0 on a log axis: a gap, said so
    assert "gap: value 0 (not on a log axis)" in _legend(losses)
    assert losses.axes[0].get_shared_y_axes().joined(*losses.axes)  # one scale to compare
    assert figure_problems(losses) == []


def test_study_s_report_figures_pass_the_check():
    from rulelab.studies.shortcut_saturation.figures import analysis_figures
    from rulelab.studies.shortcut_saturation.rate_figure import rate_vs_ratio

    runs = make_s_runs()
    small = runs[(runs["seed"] < 2) & (runs["layers"] == 2)]
    analyses = {"gradients": make_gradients(small), "ablation": make_ablation(small, (100,)),
                "patching": make_patching(small)}  # fingerprints: the gradients' legend code
    figures = [f for f, _ in analysis_figures(analyses, small)]
    figures.append(rate_vs_ratio(make_lab(seeds=2)[0]))
    assert len(figures) == 4  # gradients, ablation, patching, the rates
    for fig in figures:
        assert figure_problems(fig) == [], fig.axes[0].get_title()


def _m_tables() -> dict[str, pd.DataFrame]:
    ff, swap, neurons = [], [], []
    for w in (33, 1025):
        for a in (0.5, 0.8):
            for s in (0, 1):
                base = dict(run_id=f"{w}{a}{s}", width=w, noise=a, seed=s, activation="relu")
                for sub in ("train_clean", "train_noisy", "test"):
                    ff += [dict(base, network=n, subset=sub, acc=0.5 + 0.1 * s)
                           for n in ("original", "G", "G_no_mu", "G_dc", "R")]
                    swap += [dict(base, activation_eval=e, subset=sub, acc=0.4)
                             for e in ("relu", "quadratic", "gelu", "leaky_relu",
                                       "reverse_relu", "abs")]
                neurons += [dict(base, kind="prune", score=sc, order=o, subset=sub, fraction=f,
                                 acc=f) for sc in ("ipr", "strength")
                            for o in ("top", "bottom", "random") for sub in ("test", "train_noisy")
                            for f in (0.25, 0.5, 1.0)]
    return {"ff": pd.DataFrame(ff), "swap": pd.DataFrame(swap), "neurons": pd.DataFrame(neurons)}


def test_study_m_draws_every_configuration_held():
    """Swap, pruning and FF were drawn only at α = 0.8 and the largest width: now a panel per
    (width, α), the widest and noisiest first."""
    t = _m_tables()
    prune = t["neurons"][t["neurons"]["width"] == 1025]  # 2 configurations × 4 panels
    for panel, n_axes in ((frequency_filtering(t["ff"]), 4), (activation_swap(t["swap"]), 4),
                          (pruning(prune), 8)):
        fig, caption = panel
        m = 1025 if n_axes == 8 else 33
        shown = [ax for ax in fig.axes if ax.get_visible()]
        assert len(shown) == n_axes, caption
        assert shown[0].get_title().startswith("M = 1025, α = 0.8"), caption
        assert any(ax.get_title().startswith(f"M = {m}, α = 0.5") for ax in shown), caption
    assert figure_problems(activation_swap(t["swap"])[0]) == []  # six activations per panel


class _Lab:
    """What a claim reads of a lab beside its runs: no analysis tables."""

    def __init__(self, root):
        self.root = root

    def read_table(self, name):
        return pd.DataFrame()


def test_the_page_opens_with_what_the_lab_shows(tmp_path):
    runs, metrics = make_lab(seeds=3)
    s1 = Calibration("S1 verdict", "the scale map's 'shows'", "x:y")
    checks = [(s1, NullCheck("flat rates", "this grid", 400, 2), 0.1),
              (Calibration("transient", "generalized, then adv below 95%", "x:y"),
               NullCheck("flat", "this grid", 200, 0, "a dip", 200, 92), 0.1)]
    lead = results_html(S, runs, metrics, lab=_Lab(tmp_path), scale="paper",
                        scale_lines=["scale: the paper setting"], calibrations=checks)
    assert lead.count("scale: the paper setting") == 1
    # S1 on the synthetic lab: 2L 0/3 → 2/3, 1L 1/3 → 0/3, each with its interval
    assert "2L: r=0.5 0% [0%, 56%] (0/3), r=0.9 67% [21%, 94%] (2/3)" in lead
    assert "0.5% [0.1%, 1.8%] of 400 nulls (≤ 5% ✓)" in lead  # the verdict's FPR
    assert lead.count("not calibrated") == 2  # S5, S6: no calibration given
    assert "46% at a dip" in lead  # another detector, with its power (92 of 200)
    one = runs[runs["run_id"] == "L2-r0.9-wd0.1-s0"]  # one panel: a quick page
    text = write_report(tmp_path / "r.html", title="Shortcut saturation — paper scale",
                        runs=one, metrics=metrics.iloc[0:0], lead=lead).read_text()
    assert text.index("<h2>What this lab shows</h2>") < text.index(
        "<h2>Generalization rate") < text.index("<h2>Figures</h2>")
    assert "<title>Shortcut saturation — paper scale</title>" in text
    # the rate table leaves its scale line to the lead: printed once on the page
    from rulelab.studies.shortcut_saturation.paper import describe_scale

    assert describe_scale(one) not in text


def test_the_readme_paragraph_is_quoted_for_its_preset(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# x\n\n## Quick reproduction (study S) — toy\n\ntext\n\n**What it "
                      "shows.** Phase 1 at `r = 0.9`,\nthen **nothing**.\n\nmore\n\n## Next\n")
    assert readme_shows("Quick reproduction (study S)", readme) == (
        "Phase 1 at `r = 0.9`, then **nothing**.")
    assert readme_shows("Medium", readme) is None


@pytest.mark.parametrize("n_blocks", [1, 3])
def test_the_new_ablation_heatmap_passes_the_check(n_blocks):
    from rulelab.studies.shortcut_saturation.figures import ablation_heatmap

    runs = make_s_runs()
    one = runs[runs["run_id"] == "L1-r0.5-s0"]  # one row: the shortest figure
    table = make_ablation(one, (10, 30, 100)[:n_blocks])
    fig = ablation_heatmap(table, [10, 30, 100][:n_blocks], runs=one)
    assert figure_problems(fig) == []


def test_each_claim_reads_once_on_the_scale_map(tmp_path):
    """Issue 23: the claim's text was in its heading, its sentence and its caption."""
    import html

    from tests.report.test_scale_map import headline, s_lab

    from rulelab.report.scale_map import open_scales, read_claims, write_scale_map

    s_lab(tmp_path, "medium", headline(0, 7, 6, 0))
    scales = open_scales(S, tmp_path)
    text = html.unescape(write_scale_map(tmp_path / "map.html", S, scales,
                                         read_claims(S, scales)).read_text())
    for claim in S.claims:
        assert text.count(claim.title) == 1, claim.name
    assert "<b>appears at the medium scale (shows at medium).</b>" in text
