"""Study M's report panels draw every configuration held (issue 23) and pass the figure check.
The check itself: tests/report/test_report_figures.py."""

import pandas as pd

from rulelab.report.figure_check import figure_problems
from rulelab.studies.coexistence.panels import activation_swap, frequency_filtering, pruning


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
