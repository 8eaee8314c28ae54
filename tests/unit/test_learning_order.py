"""Learning order as an early lead (SPEC M.4.2) on synthetic curves, against the old
first-step-at-50% reading.

The old code read only first crossings: it called the paper's MNIST pattern "clean first" and
dropped runs whose noisy accuracy never reached 50% from n. Every test here that reads a lead
column (``lead_area``, ``first_lead``, ``n`` of the lead, …) fails on the old code, which had
no such column (KeyError) and no :mod:`rulelab.studies.coexistence.analysis.early_lead`.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from rulelab.analysis.stats import wilson
from rulelab.studies.coexistence.analysis.order import order_display, order_summary, order_table


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
    assert new.iloc[0]["noisy leads (k/n, 95% CI)"].startswith("2/2 = 100%")
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
    assert r["lead_area"] - r["init_lead"] == pytest.approx(0.01)


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
