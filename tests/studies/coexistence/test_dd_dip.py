"""The dip of a double-descent curve (SPEC M.4.1) on synthetic width tables.

The old findings compared only the widest width with the interpolation width (+5 points =
"reproduced") and never looked for the dip: a monotone curve passed. These tests fail on the
old code (no :mod:`rulelab.studies.coexistence.analyses.dd_dip`). The readings of the
max-statistic test (issue 21) — its statistic, p-value and "too few seeds to call" — fail on
the seed-range rule it replaced, which had no such columns; its false-positive rate is in
tests/studies/coexistence/test_dip_null.py.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from rulelab.studies.coexistence.analyses.dd_dip import dip_reading, interpolation_width
from rulelab.studies.coexistence.analyses.dip_test import p_value

WIDTHS = [17, 33, 65, 129, 257, 513, 1025]  # a table of k means takes the first k


def _table(mean, half=0.02, n=2, noisy=None, noise=0.8) -> pd.DataFrame:
    mean = list(mean)
    # two seeds at mean ± half: sample SD half·√2 (one seed: no SD)
    frame = pd.DataFrame({"noise": noise, "width": WIDTHS[: len(mean)], "mean": mean,
                          "std": half * np.sqrt(2) if n == 2 else np.nan,
                          "min": [m - half for m in mean], "max": [m + half for m in mean],
                          "n": n})
    if noisy is not None:
        frame["final_noisy_acc"] = noisy
    return frame


def test_a_dip_is_located_at_the_right_width_with_its_interpolation_threshold():
    dd = _table([0.30, 0.40, 0.10, 0.20, 0.60, 0.80], noisy=[0.4, 0.8, 1.0, 1.0, 1.0, 1.0])
    r = dip_reading(dd).iloc[0]
    assert r["called"] and r["dip_width"] == 65 and r["interp_width"] == 65
    assert r["dip_acc"] == 0.10 and r["peak_width"] == 513 and r["before_width"] == 33
    assert math.isclose(r["rise"], 0.70) and math.isclose(r["fall"], 0.30)
    # pooled seed SD 0.02·√2 over 6 df; the shallower side, 30 points, over its SE 0.02·√2
    assert r["seed_sd"] == pytest.approx(0.02 * math.sqrt(2)) and r["df"] == 6
    assert r["t_stat"] == pytest.approx(0.30 / (0.02 * math.sqrt(2)))
    assert r["p_value"] < 1e-4  # beyond every null draw: (1 + 0) / (1 + 20,000)
    assert r["reading"].startswith("dip at M = 65: test 10.0% [8.0%, 12.0%]")
    assert "rises to 80.0% [78.0%, 82.0%] at M = 513 (+70.0 points)" in r["reading"]
    assert "10.6 pooled SEs, p = 0.000 on a flat curve (seed SD 2.8 points, 6 df)" in r["reading"]
    assert "interpolation threshold M = 65" in r["reading"]


def test_a_monotone_curve_has_no_dip():
    rising = dip_reading(_table([0.1, 0.2, 0.3, 0.5, 0.7, 0.9])).iloc[0]
    assert not rising["called"] and math.isnan(rising["dip_width"])
    assert rising["reading"].startswith("no dip in the widths covered (M = 17…513): lowest "
                                        "at the smallest width")
    falling = dip_reading(_table([0.9, 0.7, 0.5, 0.3, 0.2, 0.1])).iloc[0]
    assert not falling["called"] and falling["reading"].startswith("no dip: test accuracy")


def test_a_dip_inside_the_seed_noise_is_not_called():
    dd = _table([0.30, 0.32, 0.28, 0.31, 0.33, 0.33], half=0.10)
    r = dip_reading(dd).iloc[0]
    assert not r["called"] and r["dip_width"] == 65  # located, not called
    assert r["t_stat"] == pytest.approx(0.04 / 0.1 / math.sqrt(2)) and r["p_value"] > 0.5
    assert r["reading"].startswith("no dip called: deepest interior low 28.0%")
    assert "p ≥ 0.025" in r["reading"]
    # 4 points against a seed SD of 14 points: no grid of ≤ 20 seeds has the power
    assert "more than 20 seeds per width would be needed to call a 4.0-point dip" in r["reading"]


def test_seed_ranges_apart_are_not_a_test():
    """Seven widths, two seeds each, seed SD ≈ 2.8 points everywhere: the seed ranges at the
    low width (M = 65) lie 1 point below those on both sides, which the old rule called a dip;
    the 6-point gap is 2.1 pooled SEs, and the deepest of 5 interior lows on a flat curve is
    deeper than that one time in ten (p ≈ 0.1)."""
    r = dip_reading(_table([0.50, 0.56, 0.50, 0.53, 0.54, 0.56, 0.53], half=0.02)).iloc[0]
    assert r["before_width"] == 33 and r["dip_width"] == 65 and r["peak_width"] == 513
    assert r["dip_max"] < r["peak_min"] and r["dip_max"] < 0.56 - 0.02  # apart: old rule called
    assert r["t_stat"] == pytest.approx(0.06 / (0.02 * math.sqrt(2)))
    assert 0.05 < r["p_value"] < 0.2 and not r["called"]
    assert "≈ 5 seeds per width would call a 6.0-point dip" in r["reading"]


def test_p_value_is_the_deepest_lows_null_probability():
    """Three widths: a dip needs the middle lowest, and T > c has the probability of a
    bivariate t (correlation ½, the pooled df) beyond (c, c): 4.76% at c = 1.5 with 3 df
    (scipy's multivariate_t); the simulated null gives it within its Monte Carlo error."""
    assert p_value(1.5, (2, 2, 2)) == pytest.approx(0.0476, abs=0.0045)
    assert p_value(0.0, (2, 2, 2)) == pytest.approx(1 / 3, abs=0.01)  # the middle is lowest


def test_one_seed_is_too_few_to_call_and_says_how_many_would_do():
    dd = _table([0.30, 0.40, 0.10, 0.20, 0.60, 0.80], half=0.0, n=1)
    dd["n_test"], dd["chance"] = 192, 1 / 31
    r = dip_reading(dd).iloc[0]
    assert not r["called"] and r["df"] == 0 and math.isnan(r["p_value"])
    assert r["reading"].startswith("too few seeds to call: deepest interior low 10.0%")
    # the 30-point fall into it against the binomial SE at 10% on 192 pairs, 2.2 points
    assert "≈ 2 seeds per width would call a 30.0-point dip at a seed SD of 2.2 points" in (
        r["reading"])


def test_curves_per_noise_level_and_interpolation_at_alpha_zero():
    a = _table([0.30, 0.40, 0.10, 0.20, 0.60, 0.80], noise=0.8)
    b = _table([0.1, 0.2, 0.3, 0.5, 0.7, 0.9], noise=0.0).assign(
        final_clean_acc=[0.5, 0.9, 1.0, 1.0, 1.0, 1.0])
    dips = dip_reading(pd.concat([a, b], ignore_index=True)).set_index("noise")
    assert bool(dips.loc[0.8, "called"]) and not bool(dips.loc[0.0, "called"])
    assert dips.loc[0.0, "interp_width"] == 65  # α = 0: the clean train set interpolates
    assert math.isnan(interpolation_width(a, 0.8))  # no train column: unknown


def test_a_dip_among_chance_level_accuracies_is_not_called():
    """The quick preset at α = 0.8 (P = 31, 192 test pairs): 3.1% → 1.8% → 2.6%, two seeds
    agreeing to the example. Seed ranges alone called it a dip; it is sampling noise at chance.
    The same shape far above chance on the same test set is still called."""
    at_chance = _table([0.031, 0.025, 0.020, 0.018, 0.022, 0.026], half=0.002)
    at_chance["n_test"], at_chance["chance"] = 192, 1 / 31
    r = dip_reading(at_chance).iloc[0]
    assert not r["called"]
    assert "within the test set's sampling noise" in r["reading"]
    assert "n_test = 192" in r["reading"] and r["reading"].startswith("no dip called")
    above = _table([0.60, 0.45, 0.30, 0.20, 0.55, 0.90], half=0.02)
    above["n_test"], above["chance"] = 192, 1 / 31
    assert dip_reading(above).iloc[0]["called"]
