"""Learning order as an early lead (SPEC M.4.2) on synthetic curves, against the old
first-step-at-50% reading.

The old code read only first crossings: it called the paper's MNIST pattern "clean first" and
dropped runs whose noisy accuracy never reached 50% from n. Every test here that reads a lead
column (``lead_area``, ``first_lead``, ``n`` of the lead, …) fails on the old code, which had
no such column (KeyError) and no :mod:`rulelab.studies.coexistence.analyses.early_lead`.
The lead is tested against the lead at init (issue 21, item 4): the frozen-network, lead-gain
and data-seed tests fail on the reading before it (``lead_area > 0``; every run a trial).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from rulelab.analysis.stats import wilson
from rulelab.studies.coexistence.analyses.lead_null import false_positive_rate, frozen_metrics
from rulelab.studies.coexistence.analyses.order import (
    lead_units,
    lead_verdict,
    order_display,
    order_summary,
    order_table,
)
from rulelab.studies.coexistence.analyses.subsets import (
    digits_sizes,
    modular_sizes,
    subset_sizes,
)


def _frame(curves: dict[str, dict[str, list[float]]], metric: str = "acc") -> pd.DataFrame:
    """``{run: {split: values per step 0, 1, …}}`` → the store's long metrics frame."""
    rows = [(run, step, split, metric, v) for run, by in curves.items()
            for split, values in by.items() for step, v in enumerate(values)]
    return pd.DataFrame(rows, columns=["run_id", "epoch", "split", "metric", "value"])


def _runs(ids, noise=0.05) -> pd.DataFrame:
    return pd.DataFrame({"run_id": ids, "status": "done", "task": "digits",
                         "noise": noise, "hidden": 256, "seed": range(len(ids))})


# The paper's MNIST run, α = 0.05 (research notes §7): after epoch 1 noisy 10.87% vs clean
# 2.86%; after epoch 2 noisy 6.47% vs clean 46.29%; then clean races ahead, noisy creeps up.
MNIST = {"train_clean": [0.10, 0.0286, 0.4629, 0.70, 0.85, 0.90, 0.93, 0.95, 0.96, 0.97],
         "train_noisy": [0.10, 0.1087, 0.0647, 0.08, 0.12, 0.20, 0.30, 0.45, 0.55, 0.65]}


def test_mnist_pattern_is_noisy_first_early_and_clean_first_by_the_old_reading():
    order = order_table(_runs(["mnist"]), _frame({"mnist": MNIST}), window=1).set_index("run_id")
    r = order.loc["mnist"]
    # Old reading: clean reaches 50% at step 3, noisy at step 8 → "clean first".
    assert (r["first_train_clean_50"], r["first_train_noisy_50"]) == (3, 8)
    assert not r["noisy_first_50"]
    # New reading over the paper's epoch 1: noisy leads.
    assert r["first_step"] == 1 and r["first_lead"] == pytest.approx(0.1087 - 0.0286)
    assert r["lead_area"] == pytest.approx((0 + 0.0801) / 2)  # trapezoid over [0, 1], / T = 1
    # Against the lead at init (0 here): scikit-learn's digits, 1,438 train images, 72 noisy.
    # At step 1 the pooled accuracy is q = (72·10.87% + 1366·2.86%)/1438 = 3.26%; at most
    # q + 10% of the examples changed, so the gain's SE is ≤ √(0.1326·1438/1437·(1/72 +
    # 1/1366)) = 4.40 points there and 0 at init: 2.20 over the window; 4.0 > 1.645 × 2.2.
    assert r["lead_gain"] == pytest.approx(0.04005)
    assert r["lead_se"] == pytest.approx(0.02202, abs=1e-5)
    assert r["noisy_leads"] is True or r["noisy_leads"] == 1
    assert r["lead_until"] == 1  # clean leads from epoch 2 on
    summary = order_summary(order.reset_index())
    assert (summary.loc[0, "k_noisy_leads"], summary.loc[0, "n"]) == (1, 1)
    assert (summary.loc[0, "k_50"], summary.loc[0, "n_50"]) == (0, 1)


def test_the_first_evaluation_lead_does_not_depend_on_the_window():
    order = order_table(_runs(["mnist"]), _frame({"mnist": MNIST}), window=9).iloc[0]
    assert order["first_lead"] == pytest.approx(0.0801)  # still noisy first at epoch 1
    assert order["lead_area"] < 0  # averaged over 9 steps clean leads: the window is stated


def test_a_run_whose_noisy_accuracy_never_reaches_half_stays_in_n():
    low = {"train_clean": [0.03, 0.04, 0.06, 0.08, 0.1, 0.12],
           "train_noisy": [0.03, 0.10, 0.15, 0.2, 0.25, 0.3]}  # never reaches 50%
    high = {"train_clean": [0.03, 0.02, 0.2, 0.6, 0.9, 1.0],
            "train_noisy": [0.03, 0.2, 0.6, 0.8, 0.9, 1.0]}
    order = order_table(_runs(["low", "high"]), _frame({"low": low, "high": high}), window=5)
    summary = order_summary(order).iloc[0]
    assert summary["n"] == 2 and summary["k_noisy_leads"] == 2  # both lead early, both count
    assert summary["n_50"] == 1 and summary["k_50"] == 1  # the old reading drops "low"
    lo, hi = wilson(2, 2)
    assert (summary["ci_low"], summary["ci_high"]) == pytest.approx((lo, hi))
    new, old = order_display(order_summary(order))
    assert new.iloc[0]["noisy gains a lead since init (k/n model seeds, 95% CI)"].startswith(
        "2/2 = 100%")
    assert new.iloc[0]["data seeds"] == 1
    assert old.iloc[0]["runs left out (noisy < 50%)"] == 1


def test_lead_area_is_the_trapezoid_mean_with_the_window_cut_by_interpolation():
    steps = [0, 1, 2, 4, 10]
    clean = [0.0, 0.0, 0.1, 0.5, 0.9]
    noisy = [0.0, 0.2, 0.3, 0.3, 0.9]  # lead 0, .2, .2, −.2, 0
    rows = [("r", s, split, "acc", v) for split, vals in (("train_clean", clean),
                                                          ("train_noisy", noisy))
            for s, v in zip(steps, vals, strict=True)]
    metrics = pd.DataFrame(rows, columns=["run_id", "epoch", "split", "metric", "value"])
    # T = 3: lead at 3 interpolates to 0; area = .1 + .2 + .1 = .4 over 3 steps.
    r = order_table(_runs(["r"]), metrics, window=3).iloc[0]
    assert r["lead_area"] == pytest.approx(0.4 / 3) and r["window_end"] == 3
    assert r["init_lead"] == 0
    # T = 100 > the run: read over [0, 10]; area = .1 + .2 + 0 + (−.2·6/2) = −.3.
    r = order_table(_runs(["r"]), metrics, window=100).iloc[0]
    assert r["lead_area"] == pytest.approx(-0.3 / 10) and r["window_end"] == 10
    assert r["noisy_leads"] is False or r["noisy_leads"] == 0
    assert r["lead_until"] == 2


def test_init_lead_is_the_untrained_offset():
    curves = {"train_clean": [0.10, 0.12, 0.20], "train_noisy": [0.05, 0.08, 0.17]}
    r = order_table(_runs(["r"]), _frame({"r": curves}), window=2).iloc[0]
    assert r["init_lead"] == pytest.approx(-0.05)
    # Mean lead −0.04 (clean "leads"), but in accuracy gained since init noisy is ahead.
    assert r["lead_area"] == pytest.approx(-0.04)
    assert r["lead_gain"] == pytest.approx(0.01)  # gained since init: within the noise
    assert not r["noisy_leads"]


def test_a_frozen_network_reads_no_lead():
    """Issue 21: lr 1e-7 read "noisy leads" in 11 of 16 runs, its chance offset at init counted
    as a lead. Sixteen frozen runs at the quick preset's α = 0.8 (154 clean, 615 noisy, chance
    1/31), the lead constant at its init value but for ±1-example jitter: the old reading calls
    those whose offset is positive, the test against init none."""
    metrics = frozen_metrics(16, 154, 615, chance=1 / 31, steps=100,
                             rng=np.random.default_rng(3))
    runs = pd.DataFrame({"run_id": metrics["run_id"].unique(), "status": "done",
                         "task": "modular", "p": 31, "train_frac": 0.8, "noise": 0.8,
                         "seed": range(16)})
    order = order_table(runs, metrics, window=100)
    old = int((order["lead_area"] > 0).sum())
    assert old == 9  # of 16, as the 11 of 16: about the half whose offset is > 0
    assert not order["noisy_leads"].astype(bool).any()
    assert order["lead_gain"].abs().max() < 0.01 < order["lead_se"].min()
    summary = order_summary(order).iloc[0]
    assert (summary["k_noisy_leads"], summary["n"]) == (0, 16)


def test_frozen_false_positive_rates():
    at_half = false_positive_rate(*modular_sizes(31, 0.8, 0.5), chance=1 / 31, runs=200)
    assert at_half["new"]["k"] == 0  # the test against init: none of 200
    assert 0.4 < at_half["old"]["rate"] < 0.6  # lead_area > 0: the sign of the offset


def test_a_true_early_lead_is_called():
    """Noisy-train accuracy gains 10 points in the first 20 steps while clean stays at its
    chance offset, then both rise together: the lead gained is far beyond its SE bound."""
    steps = np.arange(101)
    clean = 0.04 + 0.004 * np.clip(steps - 20, 0, None)
    noisy = 0.03 + 0.005 * np.minimum(steps, 20) + 0.004 * np.clip(steps - 20, 0, None)
    metrics = _frame({"r": {"train_clean": list(clean), "train_noisy": list(noisy)}})
    runs = pd.DataFrame({"run_id": ["r"], "status": "done", "task": "modular", "p": [31],
                         "train_frac": [0.8], "noise": [0.5], "seed": [0]})
    r = order_table(runs, metrics, window=100).iloc[0]
    assert r["init_lead"] == pytest.approx(-0.01)  # clean ahead at init: an offset
    # lead − init lead: 0.5 points a step to 10 at step 20, then 10: mean (1·5 + 4·10)/5 = 9
    assert r["lead_gain"] == pytest.approx(0.09)
    assert r["noisy_leads"] and r["lead_gain"] > 1.645 * r["lead_se"]
    assert 0.03 < r["lead_se"] < 0.06


def test_subset_sizes_follow_the_data_builders():
    assert modular_sizes(31, 0.8, 0.5) == (384, 385)  # 769 train pairs of 961
    assert modular_sizes(31, 0.8, 0.8) == (154, 615)
    assert modular_sizes(7, 0.5, 0.5, drop_zero=True) == (9, 9)  # 36 pairs, 18 train
    assert digits_sizes(0.05) == (1366, 72)  # 1,797 − 359 test = 1,438
    assert digits_sizes(0.05, source="mnist") == (57_000, 3_000)
    runs = pd.DataFrame({"run_id": ["m", "d"], "task": ["modular", "digits"],
                         "p": [31, None], "train_frac": [0.8, None], "noise": [0.5, 0.2],
                         "n_train": [None, 1000]})
    sizes = subset_sizes(runs).set_index("run_id")
    assert tuple(sizes.loc["m"]) == (384, 385) and tuple(sizes.loc["d"]) == (800, 200)
    from rulelab.studies.coexistence.modular_task import make_modular

    data = make_modular(op="add", p=31, train_frac=0.8, noise=0.8)
    assert (len(data.y_train) - data.n_noisy, data.n_noisy) == (154, 615)


def test_runs_sharing_a_data_seed_are_one_trial():
    """Six α > 0 runs over widths and α that all lead, on one data seed (as every preset):
    one independent trial, too few to call. Four data seeds that each lead clear 50%."""
    one = pd.DataFrame({"noise": [0.5] * 3 + [0.8] * 3, "data_seed": 0})
    leads = pd.Series(True, one.index)
    assert lead_units(one, leads) == (1, 1)
    assert lead_verdict(one, leads).startswith("inconclusive (1/1 data seeds lead")
    four = pd.DataFrame({"noise": 0.5, "data_seed": [0, 0, 1, 1, 2, 2, 3, 3]})
    split = pd.Series([True, True, True, False, True, True, True, True])
    assert lead_units(four, split) == (3, 4)  # seed 1: half its runs, not most
    assert lead_verdict(four, split).startswith("inconclusive")
    assert lead_units(four, pd.Series(True, four.index)) == (4, 4)
    assert lead_verdict(four, pd.Series(True, four.index)) == "reproduced"  # Wilson [51%, 100%]


def test_loss_decrease_rates_per_subset():
    steps = np.arange(0, 201)
    loss = {"train_clean": 3.0 - 0.005 * steps, "train_noisy": 3.0 - 0.01 * steps}
    acc = {"train_clean": np.full(201, 0.1), "train_noisy": np.full(201, 0.1)}
    metrics = pd.concat([_frame({"r": {k: list(v) for k, v in loss.items()}}, "loss"),
                         _frame({"r": {k: list(v) for k, v in acc.items()}}, "acc")])
    r = order_table(_runs(["r"]), metrics, window=100).iloc[0]
    assert r["loss_rate_noisy"] == pytest.approx(0.01)
    assert r["loss_rate_clean"] == pytest.approx(0.005)
    assert r["loss_drop_noisy"] == pytest.approx(1.0 / 3.0)
    assert r["loss_drop_clean"] == pytest.approx(0.5 / 3.0)
    assert r["lead_area"] == 0 and not r["noisy_leads"]  # a tie is not a lead


def test_clean_runs_get_no_lead_and_are_not_counted():
    nan = math.nan
    curves = {"clean": {"train_clean": [0.1, 0.5, 1.0], "train_noisy": [nan, nan, nan]},
              "noisy": MNIST}
    runs = pd.concat([_runs(["clean"], noise=0.0), _runs(["noisy"], noise=0.05)])
    order = order_table(runs, _frame(curves), window=2).set_index("run_id")
    assert math.isnan(order.loc["clean", "lead_area"])
    summary = order_summary(order.reset_index())
    assert list(summary["noise"]) == [0.05] and summary.loc[0, "n"] == 1


def test_window_must_be_positive():
    with pytest.raises(ValueError, match="window"):
        order_table(_runs(["mnist"]), _frame({"mnist": MNIST}), window=0)
