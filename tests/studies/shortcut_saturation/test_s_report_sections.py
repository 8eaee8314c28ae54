"""Study S's report sections (issue 10): its runs' tracked and post-hoc rows merged into one
configuration, its gradient figure from them, readings at one epoch per run drawn against r,
final fingerprints, and a lab of two tasks (S's and M's) getting a section each. The generic
reading: tests/report/test_report_sections.py."""

import numpy as np
import pandas as pd
from tests.report.test_report_sections import _grad_rows

from rulelab.report.html import write_report
from rulelab.report.stored_analyses import tidy_analysis
from rulelab.studies.shortcut_saturation.figures import gradient_dynamics

RUNS = pd.DataFrame({"run_id": ["a", "b"], "status": "done", "task": "mpsp", "layers": 1,
                     "heads": 1, "ratio": 0.5, "weight_decay": 0.1, "eps": 1e-8,
                     "seed": [0, 1], "generalized": False})


def tracked_and_post_hoc() -> pd.DataFrame:
    """As ``Lab.read_table`` concatenates them: tracked rows of an older rulelab (no config
    columns, no ``member``, no ``source``) and a post-hoc ``analyze`` at the last epoch."""
    tracked = pd.concat([_grad_rows(r, [0, 1, 2, 5, 10], -0.1) for r in ("a", "b")])
    post = pd.concat([_grad_rows(r, [10], -0.9, member=m, layers=1, heads=1, ratio=0.5,
                                 weight_decay=0.1, seed=m) for m, r in enumerate("ab")])
    return pd.concat([tracked, post], ignore_index=True)


def test_tracked_and_post_hoc_rows_merge_into_one_configuration():
    t = tidy_analysis(tracked_and_post_hoc(), RUNS)
    assert t["layers"].notna().all() and t["ratio"].notna().all()  # no "–L·–H r=–" group
    assert sorted(t["seed"].unique()) == [0, 1]
    assert t["eps"].eq(0.5).all()  # the analysis's ε, not the optimizer's eps of the config
    last = t[t["epoch"] == 10]  # both sources read epoch 10: only the post-hoc rows stay
    assert len(last) == 2 and set(last["source"]) == {"post-hoc"} and last["cos"].eq(-0.9).all()
    assert (t.loc[t["epoch"] < 10, "source"] == "tracked").sum() == 8


def test_new_tracked_rows_say_so_and_rows_of_other_runs_drop():
    table = _grad_rows("a", [0, 1], 0.0, source="tracked")
    table = pd.concat([table, _grad_rows("zzz", [0], 0.0, source="tracked")])
    t = tidy_analysis(table, RUNS)
    assert set(t["run_id"]) == {"a"} and set(t["source"]) == {"tracked"}
    assert t["layers"].eq(1).all()


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
