"""What ``rulelab report`` reads and draws (issue 10): tracked and post-hoc analysis rows kept
apart with their config columns (on the test-only toy study), log axes ticked at the data, and
no-data messages marked on the page. A study's figures and sections:
tests/studies/<study>/test_*_report_sections.py."""

import numpy as np
import pandas as pd
import pytest

from rulelab.report.figures import data_ticks, legend_columns, new_figure
from rulelab.report.html import figure_html
from rulelab.report.stored_analyses import tidy_analysis

RUNS = pd.DataFrame({"run_id": ["a", "b"], "status": "done", "task": "toy", "width": 8,
                     "noise": 0.2, "weight_decay": 0.1, "eps": 1e-8, "seed": [0, 1],
                     "generalized": False})


def _grad_rows(run_id: str, epochs, cos: float, **extra) -> pd.DataFrame:
    return pd.DataFrame({"run_id": run_id, "epoch": epochs, "module": "all", "cos": cos,
                         "amplification": 1.0, "eps": 0.5, **extra})


def tracked_and_post_hoc() -> pd.DataFrame:
    """As ``Lab.read_table`` concatenates them: tracked rows of an older rulelab (no config
    columns, no ``member``, no ``source``) and a post-hoc ``analyze`` at the last epoch."""
    tracked = pd.concat([_grad_rows(r, [0, 1, 2, 5, 10], -0.1) for r in ("a", "b")])
    post = pd.concat([_grad_rows(r, [10], -0.9, member=m, width=8, noise=0.2, weight_decay=0.1,
                                 seed=m) for m, r in enumerate("ab")])
    return pd.concat([tracked, post], ignore_index=True)


@pytest.mark.usefixtures("toy")
def test_tracked_and_post_hoc_rows_merge_into_one_configuration():
    t = tidy_analysis(tracked_and_post_hoc(), RUNS)
    assert t["width"].notna().all() and t["noise"].notna().all()  # no "w=– noise=–" group
    assert sorted(t["seed"].unique()) == [0, 1]
    assert t["eps"].eq(0.5).all()  # the analysis's ε, not the optimizer's eps of the config
    last = t[t["epoch"] == 10]  # both sources read epoch 10: only the post-hoc rows stay
    assert len(last) == 2 and set(last["source"]) == {"post-hoc"} and last["cos"].eq(-0.9).all()
    assert (t.loc[t["epoch"] < 10, "source"] == "tracked").sum() == 8


@pytest.mark.usefixtures("toy")
def test_new_tracked_rows_say_so_and_rows_of_other_runs_drop():
    table = _grad_rows("a", [0, 1], 0.0, source="tracked")
    table = pd.concat([table, _grad_rows("zzz", [0], 0.0, source="tracked")])
    t = tidy_analysis(table, RUNS)
    assert set(t["run_id"]) == {"a"} and set(t["source"]) == {"tracked"}
    assert t["width"].eq(8).all()


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
