"""What ``rulelab report`` reads and draws per study (issue 10): tracked and post-hoc analysis
rows kept apart with their config columns, a section per task, study M's figures and names,
log axes ticked at the data, and no-data messages marked on the page."""

import numpy as np
import pandas as pd

from rulelab.report.figures import data_ticks, legend_columns, new_figure
from rulelab.report.html import figure_html, write_report
from rulelab.report.stored_analyses import tidy_analysis
from rulelab.studies.coexistence.figures import double_descent_figure, ff_bars
from rulelab.studies.shortcut_saturation.figures import gradient_dynamics

RUNS = pd.DataFrame({"run_id": ["a", "b"], "status": "done", "task": "mpsp", "layers": 1,
                     "heads": 1, "ratio": 0.5, "weight_decay": 0.1, "eps": 1e-8,
                     "seed": [0, 1], "generalized": False})


def _grad_rows(run_id: str, epochs, cos: float, **extra) -> pd.DataFrame:
    return pd.DataFrame({"run_id": run_id, "epoch": epochs, "module": "all", "cos": cos,
                         "amplification": 1.0, "eps": 0.5, **extra})


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
    fig = gradient_dynamics(t, RUNS)
    assert fig is not None and len(fig.axes) == 3  # one column of cos / ratio / ε panels


def test_new_tracked_rows_say_so_and_rows_of_other_runs_drop():
    table = _grad_rows("a", [0, 1], 0.0, source="tracked")
    table = pd.concat([table, _grad_rows("zzz", [0], 0.0, source="tracked")])
    t = tidy_analysis(table, RUNS)
    assert set(t["run_id"]) == {"a"} and set(t["source"]) == {"tracked"}
    assert t["layers"].eq(1).all()


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


def test_study_m_figures_name_networks_and_tick_widths_at_the_data():
    rows = [dict(run_id=f"r{w}{s}", network=n, subset=sub, noise=0.5, width=w, acc=0.5)
            for w in (9, 33) for s in (0, 1) for n in ("original", "G", "G_no_mu", "G_dc", "R")
            for sub in ("train_clean", "train_noisy", "test")]
    fig = ff_bars(pd.DataFrame(rows))
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "G without μ" in labels and "G_no_mu" not in labels
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert "train\n(corrupted labels)" in ticks
    runs = pd.DataFrame({"run_id": ["x", "y"], "status": "done", "width": [9, 33],
                         "noise": 0.0, "final_test_acc": [0.1, 0.3]})
    ax = double_descent_figure(runs).axes[0]
    assert list(ax.get_xticks()) == [9, 33]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["9", "33"]


def test_data_ticks_and_legend_columns():
    fig = new_figure(3.0, 2.0)
    ax = fig.add_subplot()
    ax.set_xscale("log")
    data_ticks(ax.xaxis, [8, 12, np.nan, 48])
    assert list(ax.get_xticks()) == [8, 12, 48]
    assert legend_columns(fig, ["x" * 40] * 4) == 1  # one long label per row on 3 inches
    assert legend_columns(new_figure(12, 2), ["ab"] * 4) == 4


def test_figures_with_no_data_messages_are_marked_on_the_page():
    from rulelab.report.figures import empty_panel

    fig = new_figure(2, 2)
    empty_panel(fig.add_subplot(), "no metrics yet")
    assert 'data-no-data="no metrics yet"' in figure_html(fig, "empty")
    drawn = new_figure(2, 2)
    drawn.add_subplot().plot([0, 1])
    assert "data-no-data" not in figure_html(drawn, "drawn")


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
