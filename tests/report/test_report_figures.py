"""Figures a reviewer would accept (issue 23): the figure check itself — clipped text, curves
outside their axes, legend entries that draw nothing, overlapping tick labels — and the README
paragraph a page quotes. Each study's figures passing it, every configuration drawn and the
page's lead: tests/studies/<study>/test_*_report_figures.py."""

import numpy as np
from matplotlib.lines import Line2D

from rulelab.report.figure_check import figure_problems
from rulelab.report.figures import new_figure
from rulelab.report.results import readme_shows


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


def test_the_readme_paragraph_is_quoted_for_its_preset(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# x\n\n## Quick reproduction (study S) — toy\n\ntext\n\n**What it "
                      "shows.** Phase 1 at `r = 0.9`,\nthen **nothing**.\n\nmore\n\n## Next\n")
    assert readme_shows("Quick reproduction (study S)", readme) == (
        "Phase 1 at `r = 0.9`, then **nothing**.")
    assert readme_shows("Medium", readme) is None
