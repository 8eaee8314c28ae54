"""Issue-8 summaries of study-S readings: identity-dominated gradient readings (ε) and patching
medians split by the run's outcome — tables, printed summaries and figure panels."""

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from rulelab.studies.shortcut_saturation.analyses.identity import EPS_IDENTITY
from rulelab.studies.shortcut_saturation.analyses.outcome import outcome_of
from rulelab.studies.shortcut_saturation.analyses.tables import gradient_summary, patching_summary
from rulelab.studies.shortcut_saturation.commands import print_gradient_summary
from rulelab.studies.shortcut_saturation.figures import gradient_dynamics, patching_heatmap

EPS = [1.2, 0.6, 0.3, 0.2, 0.05]  # per epoch, × (1 + s/2) for seed s; ε* = √0.19 ≈ 0.436


def _gradients(with_eps=True) -> pd.DataFrame:
    rows = []
    for seed in range(3):
        for e, eps in zip([0, 10, 100, 1000, 3000], EPS, strict=True):
            rows.append(dict(run_id=f"s{seed}", epoch=e, module="all", layers=1, ratio=0.9,
                             seed=seed, cos=-0.5 - 0.1 * seed, amplification=9.0 + seed,
                             odds=9.0, eps=eps * (1 + 0.5 * seed), example_norm_plus=1.0,
                             example_norm_minus=8.0 + seed, norm_plus=0.5, norm_minus=4.0))
            rows.append(dict(rows[-1], module="embed", eps=5.0))
    frame = pd.DataFrame(rows)
    return frame if with_eps else frame.drop(columns=["eps"])


def test_gradient_summary_medians_and_identity_counts():
    t = gradient_summary(_gradients()).set_index("epoch")
    assert t.loc[0, "n"] == 3 and t.loc[0, "amplification"] == 10.0  # median of 9, 10, 11
    # seed s has ε·(1 + s/2): at epoch 100 (ε 0.3, 0.45, 0.6) one run below ε* ≈ 0.436, at
    # 1000 (0.2, 0.3, 0.4) all three (issue 21's tight bound; the old 0.25 cut counted one)
    assert t.loc[100, "identity_dominated"] == "1/3" and t.loc[1000, "identity_dominated"] == "3/3"
    assert t.loc[3000, "identity_dominated"] == "3/3" and t.loc[10, "identity_dominated"] == "0/3"
    assert not t.loc[100, "mostly_identity"] and t.loc[1000, "mostly_identity"]  # the † rows
    assert t.loc[1000, "eps"] == pytest.approx(0.3)
    assert gradient_summary(_gradients(), module="embed")["identity_dominated"].eq("0/3").all()
    old = gradient_summary(_gradients(with_eps=False))  # a table stored before issue 8
    assert old["identity_dominated"].eq("?").all() and "eps" not in old


def test_printed_gradient_summary_marks_identity_dominated_readings(capsys):
    print_gradient_summary(_gradients())
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if "│" in ln]
    marked = [ln for ln in lines if "†" in ln]
    # † where at least half the runs are flagged (each on its own ε): epochs 1000 and 3000
    assert len(lines) == 5 and len(marked) == 2
    assert "1000" in marked[0] and "3000" in marked[1] and all("3/3" in m for m in marked)
    assert "identity-dominated" in out and "0.56–1.44 × r/(1−r)" in out and "≤ −0.90" in out


def test_gradient_dynamics_draws_eps_and_rings_identity_dominated_points():
    frame = _gradients()
    fig = gradient_dynamics(frame)
    assert isinstance(fig, Figure) and len(fig.axes) == 3  # cos, amplification, ε
    cos_ax, amp_ax, eps_ax = fig.axes
    rings = [ln for ln in amp_ax.lines if ln.get_marker() == "o"]
    n_pinned = int((frame[frame.module == "all"]["eps"] < EPS_IDENTITY).sum())
    assert sum(len(ln.get_xdata()) for ln in rings) == n_pinned == 7  # 1 + 3 + 3 runs
    assert sum(len(ln.get_xdata()) for ln in cos_ax.lines if ln.get_marker() == "o") == n_pinned
    assert any(ln.get_ydata()[0] == EPS_IDENTITY for ln in eps_ax.lines
               if ln.get_linestyle() == ":")
    assert eps_ax.get_yscale() == "log"
    assert len(gradient_dynamics(_gradients(with_eps=False)).axes) == 2  # old tables


def _patching() -> tuple[pd.DataFrame, pd.DataFrame]:
    runs = pd.DataFrame(dict(run_id=["a", "b", "f", "c", "d"],
                             generalized=[True, True, True, False, None],
                             layers=1, heads=1, ratio=0.9, weight_decay=0.1, seed=range(5)))
    vals = {"a": 0.9, "b": 0.7, "f": 10.0, "c": 0.1, "d": np.nan}  # f: a tiny-gap outlier
    rows = [dict(run_id=r, epoch=100, layers=1, ratio=0.9, kind=kind, layer=0, pos=pos,
                 head=0 if kind.startswith("z") else -1, value=v)
            for r, v in vals.items()
            for kind, pos in (("z_all", -1), ("mlp_out_all", -1), ("z", 0), ("z", 1))]
    rows.append(dict(rows[0], run_id="e", value=100.0))  # a run the runs frame lacks
    return pd.DataFrame(rows), runs


def test_outcome_of_reads_the_generalized_column():
    frame, runs = _patching()
    got = outcome_of(runs, pd.Series(["a", "c", "d", "e"]))
    assert got.tolist() == ["generalized", "not generalized", "unknown", "unknown"]
    assert outcome_of(None, pd.Series(["a"])).tolist() == ["unknown"]
    assert outcome_of(runs.drop(columns="generalized"), pd.Series(["a"])).tolist() == ["unknown"]


def test_patching_summary_is_median_by_outcome():
    frame, runs = _patching()
    t = patching_summary(frame, runs).set_index(["outcome", "kind"])
    assert t.loc[("generalized", "z_all"), "median"] == pytest.approx(0.9)  # mean: 3.87
    assert t.loc[("generalized", "z_all"), "n"] == 3
    assert t.loc[("not generalized", "mlp_out_all"), "median"] == pytest.approx(0.1)
    unknown = t.loc[("unknown", "z_all")]
    assert unknown["n"] == 2 and unknown["n_nan"] == 1 and unknown["median"] == 100.0
    assert "z" not in t.index.get_level_values("kind")  # per-position cells: only on request


def test_patching_heatmap_panels_per_outcome_with_medians():
    frame, runs = _patching()
    fig = patching_heatmap(frame[frame.run_id != "e"], runs=runs)
    titles = [ax.get_title() for ax in fig.axes if ax.images]
    assert len(titles) == 3  # generalized, not generalized, unknown
    gen = next(ax for ax in fig.axes if ax.images and ", generalized" in ax.get_title())
    values = gen.images[0].get_array()  # rows: z L0.H0, mlp L0; columns CLS, x1, all
    assert values[1, 2] == pytest.approx(0.9)  # median of 0.9, 0.7, 10 (the mean: 3.87)
    assert "(n=3, epoch 100)" in gen.get_title()
