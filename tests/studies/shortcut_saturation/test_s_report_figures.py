"""Study S's report figures pass the figure check (issue 23); its page opens with what the lab
shows; each claim reads once on its scale map. The check itself:
tests/report/test_report_figures.py."""

import pandas as pd
import pytest
from tests.studies.shortcut_saturation.test_figures_s import (
    make_ablation,
    make_gradients,
    make_patching,
)
from tests.studies.shortcut_saturation.test_figures_s import make_runs as make_s_runs
from tests.studies.shortcut_saturation.test_s_report import make_lab

from rulelab.analysis.calibration import NullCheck
from rulelab.report.figure_check import figure_problems
from rulelab.report.html import write_report
from rulelab.report.results import results_html
from rulelab.studies.shortcut_saturation import STUDY as S
from rulelab.study import Calibration


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

    from tests.studies.shortcut_saturation.test_s_scale_map import headline, s_lab

    from rulelab.report.scale_map import open_scales, read_claims, write_scale_map

    s_lab(tmp_path, "medium", headline(0, 7, 6, 0))
    scales = open_scales(S, tmp_path)
    text = html.unescape(write_scale_map(tmp_path / "map.html", S, scales,
                                         read_claims(S, scales)).read_text())
    for claim in S.claims:
        assert text.count(claim.title) == 1, claim.name
    assert "<b>appears at the medium scale (shows at medium).</b>" in text
