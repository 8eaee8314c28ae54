"""Study M's report figures (issue 10): the networks named, widths ticked at the data."""

import pandas as pd

from rulelab.studies.coexistence.figures import double_descent_figure, ff_bars


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
