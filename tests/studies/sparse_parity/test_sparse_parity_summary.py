"""Sparse-parity summaries and tables on synthetic curves and runs (known answers)."""

import math

import numpy as np
import pandas as pd
import pytest

from rulelab.analysis.stats import wilson
from rulelab.studies.sparse_parity.steps_tables import (
    fit_slope,
    progress_curves,
    progress_steps,
    steps_table,
)
from rulelab.studies.sparse_parity.summary import (
    SparseParitySummary,
    first_crossing,
    mass_threshold,
)


def curve(steps, acc, mass, gap=None, band=0.01):
    """Metric dicts of a synthetic run, one per evaluation (a constant null band)."""
    gap = gap or [-0.05] * len(steps)
    return [(s, {("eval", "acc"): a, ("eval", "loss"): 1 - a, ("eval", "fourier_gap"): g,
                 ("weights", "support_mass"): m, ("weights", "null_band"): band})
            for s, a, m, g in zip(steps, acc, mass, gap, strict=True)]


def test_first_crossing():
    assert first_crossing([0, 10, 20, 30], [0.5, 0.7, 0.99, 1.0], 0.99) == 20
    assert first_crossing([0, 10], [0.5, float("nan")], 0.6) is None
    assert first_crossing([], [], 0.5) is None


def test_mass_threshold_is_a_ten_percent_rise_or_half_way_to_one():
    assert mass_threshold(0.1) == pytest.approx(0.11)
    assert mass_threshold(0.95) == pytest.approx(0.975)  # 1.1·0.95 > 1: half-way instead
    assert mass_threshold(0.2, factor=2.0) == pytest.approx(0.4)
    assert math.isnan(mass_threshold(float("nan")))


def test_summary_on_a_synthetic_curve_counts_optimizer_steps():
    steps = [0, 1, 2, 3, 4, 5, 6]
    acc = [0.5, 0.5, 0.51, 0.55, 0.7, 0.995, 1.0]
    mass = [0.10, 0.10, 0.105, 0.112, 0.3, 0.8, 0.9]
    gap = [-0.04, -0.05, -0.01, 0.02, 0.4, 0.9, 0.9]
    s = SparseParitySummary(steps_per_epoch=32)  # a fixed set: 32 steps per epoch
    for epoch, metrics in curve(steps, acc, mass, gap):
        s.update(epoch, metrics)
    assert s.learned and s.generalized
    assert s.steps_to_learn == 5 * 32
    assert s.visible_step == 4 * 32
    assert s.hidden_progress_step == 3 * 32  # 0.112 ≥ 1.1 · 0.10, while acc was 55%
    assert s.hidden_called and s.hidden_band == 0.01 and s.hidden_rise == pytest.approx(0.12)
    assert s.mass_rise_step == 3 * 32
    assert s.fourier_step == 3 * 32
    assert s.support_mass_init == 0.10 and s.max_eval_acc == 1.0 and s.final_epoch == 6
    assert SparseParitySummary.from_dict(s.as_dict()) == s
    # the same curve under a band above the support's rise: +10% alone is not a call
    high = SparseParitySummary(steps_per_epoch=32)
    for epoch, metrics in curve(steps, acc, mass, gap, band=0.15):
        high.update(epoch, metrics)
    assert not high.hidden_called and high.hidden_progress_step is None
    assert high.mass_rise_step == 3 * 32
    # no band (a transformer, too few off-support subsets): never called
    none = SparseParitySummary(steps_per_epoch=32)
    for epoch, metrics in curve(steps, acc, mass, gap, band=float("nan")):
        none.update(epoch, metrics)
    assert not none.hidden_called and none.hidden_progress_step is None


def test_summary_of_a_run_that_never_learns():
    s = SparseParitySummary()
    for epoch, metrics in curve([0, 100, 200], [0.5, 0.52, 0.98], [0.2, 0.2, 0.21]):
        s.update(epoch, metrics)
    assert not s.learned and s.steps_to_learn is None and s.hidden_progress_step is None
    assert s.visible_step == 200 and s.max_eval_acc == 0.98


def runs_frame(exponent=2.0, seeds=5, ns=(8, 16, 32), noise=0.1, never=()):
    rng = np.random.default_rng(0)
    rows = []
    for n in ns:
        for seed in range(seeds):
            steps = int(round(3.0 * n**exponent * np.exp(noise * rng.standard_normal())))
            learned = (n, seed) not in never
            rows.append({"run_id": f"r{n}-{seed}", "status": "done", "n_bits": n, "k": 3,
                         "seed": seed, "learned": learned, "epochs": 10**6,
                         "steps_to_learn": steps if learned else None,
                         "hidden_progress_step": steps // 2, "visible_step": 3 * steps // 4,
                         "fourier_step": 2 * steps // 3, "batch_size": 32, "samples": "fresh"})
    return pd.DataFrame(rows)


def test_fit_slope_recovers_a_known_exponent():
    fit = fit_slope(runs_frame(exponent=2.0))
    assert fit["slope"] == pytest.approx(2.0, abs=0.1)
    assert fit["slope_lo"] < 2.0 < fit["slope_hi"]
    assert fit["seed_lo"] < fit["seed_mean"] < fit["seed_hi"]
    assert len(fit["seed_slopes"]) == 5 and fit["censored"] == 0
    exact = fit_slope(runs_frame(exponent=3.0, noise=0.0))
    assert exact["slope"] == pytest.approx(3.0, abs=1e-3)


def test_fit_slope_leaves_out_and_counts_runs_that_did_not_learn():
    fit = fit_slope(runs_frame(never={(32, 0), (32, 1)}))
    assert fit["censored"] == 2 and fit["learned"] == 13
    only_one_n = fit_slope(runs_frame(ns=(8,)))
    assert math.isnan(only_one_n["slope"])


def test_steps_table_rates_medians_and_seeds():
    runs = runs_frame(never={(32, 0), (32, 1)})
    table = steps_table(runs).set_index("n_bits")
    row = table.loc[32]
    assert (row["runs"], row["learned"]) == (5, 3)
    assert (row["rate_lo"], row["rate_hi"]) == pytest.approx(wilson(3, 5))
    learned = runs[(runs.n_bits == 32) & runs.learned]["steps_to_learn"]
    assert row["median_steps"] == np.median(learned)
    assert row["min_steps"] == learned.min() and row["max_steps"] == learned.max()
    assert row["steps_per_seed"].split(", ")[:2] == ["—", "—"]
    assert list(table.index) == [8, 16, 32]


def test_progress_steps_reread_from_stored_curves():
    runs = pd.DataFrame([{"run_id": "a", "status": "done", "n_bits": 10, "k": 3, "seed": 0,
                          "samples": "fixed", "n_train": 64, "batch_size": 32}])
    rows = []
    for epoch, m in curve([0, 1, 2, 3, 4], [0.5, 0.5, 0.5, 0.8, 1.0],
                          [0.3, 0.32, 0.34, 0.5, 0.9], [-0.1, -0.1, 0.1, 0.5, 0.9]):
        rows += [("a", epoch, s, k, v) for (s, k), v in m.items()]
    metrics = pd.DataFrame(rows, columns=["run_id", "epoch", "split", "metric", "value"])
    curves = progress_curves(runs, metrics)
    assert curves["step"].tolist() == [0, 2, 4, 6, 8]  # 2 steps per epoch
    p = progress_steps(runs, metrics).iloc[0]
    assert p["hidden_progress_step"] == 4  # 0.34 ≥ 0.33, rise 13% > the 1% band
    assert p["hidden_called"] and p["hidden_band"] == 0.01 and p["mass_rise_step"] == 4
    assert p["fourier_step"] == 4 and p["visible_step"] == 6 and p["steps_to_learn"] == 8
    assert p["lead"] == 2
    doubled = progress_steps(runs, metrics, factor=2.0).iloc[0]
    assert doubled["mass_rise_step"] == 8  # 0.9 ≥ min(0.6, 0.65)
    assert not doubled["hidden_called"]  # … after visible progress: not hidden
    stored_before = metrics[metrics["metric"] != "null_band"]  # a lab without the band
    assert not progress_steps(runs, stored_before).iloc[0]["hidden_called"]
