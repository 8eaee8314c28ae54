"""Study S's report sections (issue 10): its gradient figure from merged tracked and post-hoc
rows, readings at one epoch per run drawn against r, final fingerprints, and a lab of two tasks
(S's and M's) getting a section each. The generic reading: tests/report/test_report_sections.py."""

import numpy as np
import pandas as pd
from tests.report.test_report_sections import RUNS, _grad_rows, tracked_and_post_hoc

from rulelab.report.html import write_report
from rulelab.report.stored_analyses import tidy_analysis
from rulelab.studies.shortcut_saturation.figures import gradient_dynamics


def test_tracked_and_post_hoc_rows_draw_one_column_of_gradient_panels():
    fig = gradient_dynamics(tidy_analysis(tracked_and_post_hoc(), RUNS), RUNS)
    assert fig is not None and len(fig.axes) == 3  # one column of cos / ratio / ε panels


def test_a_lab_with_two_tasks_gets_a_section_per_task(tmp_path):
    m = pd.DataFrame({"run_id": ["m0", "m1"], "status": "done", "task": "modular", "p": 11,
                      "width": [9, 33], "noise": 0.0, "seed": 0, "generalized": False,
                      "final_test_acc": [0.2, 0.4]})
    runs = pd.concat([RUNS, m], ignore_index=True)
    metrics = pd.DataFrame({"run_id": ["a", "m0"], "epoch": 1, "split": ["val", "test"],
                            "metric": "acc", "value": 0.5})
    text = write_report(tmp_path / "r.html", title="two", runs=runs, metrics=metrics).read_text()
    assert "<h2>Task modular: 2 runs" in text and "<h2>Task mpsp: 2 runs" in text
    assert text.index("Task modular") < text.index("Test accuracy vs width") < text.index(
        "Task mpsp") < text.index("Generalization rate vs spurious ratio")


def test_readings_at_one_epoch_per_run_are_drawn_against_r():
    from rulelab.studies.shortcut_saturation.figures import analysis_figures

    runs = pd.concat([RUNS, RUNS.assign(run_id=["c", "d"], ratio=0.9)], ignore_index=True)
    runs["first_epoch_generalized"] = [np.nan, np.nan, 8.0, np.nan]  # run c generalized
    post = pd.concat([_grad_rows(r, [10], -0.9, member=0) for r in runs["run_id"]])
    (fig, caption), = analysis_figures({"gradients": tidy_analysis(post, runs)}, runs)
    assert "last stored epoch vs r" in caption
    assert len(fig.axes) == 3  # cos, amplification, ε for the one architecture
    cos_ax = fig.axes[0]
    assert [t.get_text() for t in cos_ax.get_xticklabels()] == ["r = 0.5", "r = 0.9"]
    stars = [ln for ln in cos_ax.lines if ln.get_marker() == "*" and len(ln.get_xdata())]
    assert len(stars) == 1 and stars[0].get_xdata()[0] > 0.5  # run c, at r = 0.9
    odds = [ln for ln in fig.axes[1].lines if ln.get_linestyle() == "--"]
    assert sorted(round(ln.get_ydata()[0], 6) for ln in odds) == [1.0, 9.0]  # r/(1−r)
    tracked = pd.concat([_grad_rows(r, [0, 5, 10], -0.5) for r in runs["run_id"]])
    (_, over_time), = analysis_figures({"gradients": tidy_analysis(tracked, runs)}, runs)
    assert "over training" in over_time


def test_final_fingerprints_with_heads_one_architecture_lacks():
    from rulelab.studies.shortcut_saturation.figures import analysis_figures

    runs = pd.concat([RUNS, RUNS.assign(run_id=["c", "d"], layers=2)], ignore_index=True)
    rows = [dict(run_id=r, epoch=100, member=0, layer=la, head=0, qk_rho=0.5, first_mass=0.2)
            for r, layers in zip(runs["run_id"], runs["layers"], strict=True)
            for la in range(layers)]  # the 1-layer runs have no layer-1 head
    (fig, caption), = analysis_figures({"fingerprints": tidy_analysis(pd.DataFrame(rows),
                                                                      runs)}, runs)
    assert "last stored epoch vs r" in caption and len(fig.axes) == 4  # 2 readings × 2 archs
    assert {"L0.H0", "L1.H0"} <= {t.get_text() for t in fig.legends[0].get_texts()}
