"""Study M's report panels and curves draw every configuration held (issue 23) and pass the
figure check. The check itself: tests/report/test_report_figures.py."""

import numpy as np
import pandas as pd

from rulelab.report.figure_check import figure_problems
from rulelab.report.figures import accuracy_curves, loss_curves
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
